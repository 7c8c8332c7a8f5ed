"""``schedule.exclude`` and ``jitter_seconds`` end to end on the in-memory engine: the planner records
excluded fires as SKIPPED and sends the rest, a worker holding a fire excluded since it was sent records it
the same way, and jittered fires start at their offset, never before it and never at the next fire.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.fires import jitter_of
from tickwork.domain.models import JobPatch, JobStatus, RunStatus
from tickwork.errors import InvalidSchedule
from tickwork.testing.fakes import FakeClock
from tickwork.testing.world import START, World

# 23:59 on Wednesday 25 November 2026 in New York: Thanksgiving (a US-NY holiday) starts a minute later.
EVE_OF_THANKSGIVING = datetime(2026, 11, 26, 4, 59, tzinfo=UTC)


def test_fires_on_a_holiday_are_recorded_skipped_with_the_holiday_and_never_called() -> None:
    world = World(clock=FakeClock(EVE_OF_THANKSGIVING))
    job = world.create(
        name="every-20s-ny",
        schedule={
            "type": "cron",
            "expression": "*/20 * * * * *",
            "timezone": "America/New_York",
            "exclude": {"holidays": "US-NY"},
        },
    )
    world.run_for(120, step=0.5)
    midnight = datetime(2026, 11, 26, 5, tzinfo=UTC)  # 00:00 in New York
    called = [call.scheduled_for for call in world.calls_of(job)]
    assert called == [EVE_OF_THANKSGIVING + timedelta(seconds=s) for s in (0, 20, 40)]
    skipped = [run for run in world.runs_of(job) if run.scheduled_for >= midnight]
    assert [run.scheduled_for for run in skipped][:3] == [
        midnight + timedelta(seconds=s) for s in (0, 20, 40)
    ]
    assert {run.status for run in skipped} == {RunStatus.SKIPPED}
    assert {run.reason for run in skipped} == {"excluded: holiday Thanksgiving Day (US-NY)"}
    assert world.metrics.counts.get("RunsExcluded", 0) >= 3


def test_a_window_skips_its_minute_and_the_job_runs_on_after_it() -> None:
    world = World()
    job = world.create(
        name="every-10s",
        schedule={"type": "cron", "expression": "*/10 * * * * *", "exclude": {"windows": ["1 * * * *"]}},
    )
    world.run_for(150, step=0.5)  # 09:00:00 to 09:02:30
    runs = {run.scheduled_for: run for run in world.runs_of(job)}
    in_window = [START + timedelta(minutes=1, seconds=s) for s in range(0, 60, 10)]
    assert [runs[fire].status for fire in in_window] == [RunStatus.SKIPPED] * 6
    called = {call.scheduled_for for call in world.calls_of(job)}
    assert not called & set(in_window)
    assert {START + timedelta(seconds=s) for s in (0, 50, 120, 140)} <= called


def test_a_fire_sent_before_an_exclusion_was_added_is_recorded_skipped_by_the_worker() -> None:
    world = World()
    job = world.create(
        name="every-5s", schedule={"type": "rate", "every_seconds": 5, "start_at": START.isoformat()}
    )
    world.tick()  # fires for the next minute are sent
    patch = JobPatch.model_validate(
        {"schedule": {"exclude": {"dates": ["2026-11-22"]}}}
    )  # the whole (UTC) day
    world.service.update_job("acme", job.job_id, patch, world.clock())
    world.run_for(30, step=0.5)
    assert world.calls_of(job) == []
    sent_before = [run for run in world.runs_of(job) if run.scheduled_for < START + timedelta(seconds=30)]
    assert sent_before and {run.status for run in sent_before} == {RunStatus.SKIPPED}
    assert {run.reason for run in sent_before} == {"excluded: date 2026-11-22"}


def test_a_job_whose_last_fire_is_excluded_completes() -> None:
    world = World()
    ending = world.create(
        name="last-excluded",
        schedule={
            "type": "rate",
            "every_seconds": 10,
            "start_at": START.isoformat(),
            "end_at": (START + timedelta(minutes=1)).isoformat(),
            "exclude": {"windows": ["1 9 * * *"]},  # 09:01: the last fire
        },
    )
    world.run_for(90, step=0.5)
    statuses = {run.scheduled_for: run.status for run in world.runs_of(ending)}
    assert statuses[START + timedelta(minutes=1)] is RunStatus.SKIPPED
    assert len(world.calls_of(ending)) == 6  # 09:00:00 to 09:00:50
    assert world.job(ending).status is JobStatus.COMPLETED


def test_a_schedule_whose_every_fire_is_excluded_is_refused_at_create_naming_the_exclusion() -> None:
    world = World()
    with pytest.raises(InvalidSchedule) as refused:
        world.create(
            name="never",
            schedule={"type": "cron", "expression": "0 9 25 12 *", "exclude": {"windows": ["* * 25 12 *"]}},
        )
    assert refused.value.field == "schedule.exclude"
    assert "excludes every fire" in str(refused.value)


def test_jittered_fires_start_at_their_offset_never_before_and_before_the_next_fire() -> None:
    world = World()
    job = world.create(
        name="jittered",
        schedule={"type": "rate", "every_seconds": 20, "start_at": START.isoformat()},
        jitter_seconds=15,
    )
    world.run_for(200, step=0.25)
    calls = world.calls_of(job)
    assert len(calls) >= 9
    offsets = []
    for call in calls:
        offset = jitter_of(job, call.scheduled_for)
        assert offset <= timedelta(seconds=15)
        assert call.scheduled_for + offset <= call.at < call.scheduled_for + timedelta(seconds=20)
        assert call.at - (call.scheduled_for + offset) < timedelta(
            seconds=1
        )  # on time from its jittered time
        offsets.append(offset)
    assert len(set(offsets)) == len(offsets)  # spread
    runs = {run.run_id: run for run in world.runs_of(job)}
    for call in calls:
        run = runs[call.run_id]
        assert run.jitter_ms == jitter_of(job, call.scheduled_for) // timedelta(milliseconds=1)
        assert run.lag_ms is not None and run.lag_ms < 1000  # lag counts from the jittered time


def test_a_jittered_fire_is_late_only_after_its_grace_from_its_jittered_time() -> None:
    world = World()
    fire = START + timedelta(seconds=10)
    for _ in range(20):
        # A job's offset is fixed by its (random) id: one jittered well past its grace from the nominal time
        # (29 ids in 30 are), the others cancelled before they fire.
        job = world.create(
            name="jittered-skip",
            schedule={"type": "rate", "every_seconds": 600, "start_at": fire.isoformat()},
            jitter_seconds=300,
            misfire_policy="skip",
            misfire_grace_seconds=5,
        )
        offset = jitter_of(job, fire)
        if offset > timedelta(seconds=10):
            break
        world.service.cancel_job(job.tenant_id, job.job_id, world.clock())
    assert offset > timedelta(seconds=10)  # the premise
    world.tick()
    world.clock.advance(seconds=10 + offset.total_seconds() + 2)  # 2 s after its jittered time
    world.deliver()
    (run,) = [run for run in world.runs_of(job) if run.scheduled_for == fire]
    assert run.status is RunStatus.SUCCEEDED
    assert len(world.calls_of(job)) == 1


def test_a_manual_trigger_is_not_jittered() -> None:
    world = World()
    job = world.create(
        name="jittered-manual", schedule={"type": "rate", "every_seconds": 3600}, jitter_seconds=1800
    )
    run = world.service.trigger_job("acme", job.job_id, idempotency_key="k", now=world.clock())
    world.deliver()
    (call,) = world.calls_of(job)
    assert call.run_id == run.run_id and call.at == START
