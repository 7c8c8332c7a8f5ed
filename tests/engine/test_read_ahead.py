"""A planned fire read ahead: its reads and decision when its message arrives, then at the fire one request
and the call. A message a second early (the local stack's lead) claims the lane on arrival, and at the fire
reads the lane to check nothing moved it; one 100 ms early (AWS's lead) claims the lane at the fire, the
claim being the check. A pause, a cancel of the job or of the run, or a schedule change made in between
moves the lane, so the fire is decided again at its time: it is not called.

Each test hands the worker the fire's message ahead of the fire, as the planner's lead brings it, and makes
its change 200 ms before the fire, inside the worker's wait.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from tickwork.app.worker import Worker
from tickwork.domain.lanes import Lane
from tickwork.domain.models import Job, JobPatch, JobStatus, RunMessage, RunStatus, scheduled_run_id
from tickwork.testing.world import START, World

FIRE = START + timedelta(minutes=10)
BEFORE = timedelta(milliseconds=200)
AHEAD = timedelta(seconds=1)  # claimed on arrival
JUST_BEFORE = timedelta(milliseconds=240)  # claimed at the fire (the change comes after the arrival)
LEADS = pytest.mark.parametrize("lead", [AHEAD, JUST_BEFORE], ids=["claimed-ahead", "claimed-at-fire"])


def one_time(world: World, **extra: Any) -> Job:
    return world.create(name="at-ten", schedule={"type": "once", "at": FIRE.isoformat()}, **extra)


def planned_message(world: World, job: Job) -> RunMessage:
    """The fire's message as the planner sent it (taken off the queue, to be handed over early)."""
    world.clock.advance(seconds=(FIRE - timedelta(seconds=5) - world.clock()).total_seconds())
    world.tick()
    run_id = scheduled_run_id(job.job_id, FIRE)
    [queued] = [q for q in world.queue.messages if q.message.run_id == run_id]
    world.queue.delete(queued)
    return queued.message


def worker_changing(world: World, change: Callable[[], object] | None) -> tuple[Worker, list[datetime]]:
    """A worker whose wait before the fire makes ``change`` 200 ms before it (None: no change). Returns the
    worker and the times its waits began, with the writes to the job's lane seen when the wait began."""
    waits: list[datetime] = []

    def sleep(seconds: float) -> None:
        waits.append(world.clock())
        end = world.clock() + timedelta(seconds=seconds)
        if change is not None and end - BEFORE > world.clock():
            world.clock.advance(seconds=(end - BEFORE - world.clock()).total_seconds())
            change()
        world.clock.advance(seconds=max(0.0, (end - world.clock()).total_seconds()))

    return world.worker("ahead", sleep=sleep), waits


def job_reads(world: World) -> list[datetime]:
    """When the world's job store is read for a job with its lane, from now on."""
    reads: list[datetime] = []
    read = world.jobs.get_with_lane

    def recorded(tenant_id: str, job_id: str) -> tuple[Job, Lane]:
        reads.append(world.clock())
        return read(tenant_id, job_id)

    world.jobs.get_with_lane = recorded  # type: ignore[method-assign]
    return reads


def arrive_early(world: World, job: Job, change: Callable[[], object] | None, lead: timedelta = AHEAD) -> str:
    worker, waits = worker_changing(world, change)
    message = planned_message(world, job)
    assert message.ahead  # the planner marks a fire of a job with a lane
    world.clock.advance(seconds=(FIRE - lead - world.clock()).total_seconds())
    lane_writes = world.lanes.writes
    reads = job_reads(world)
    note = worker.handle(message)
    assert waits and waits[0] < FIRE  # it waited for the fire...
    assert reads[0] == FIRE - lead  # ...having read the fire ahead, when its message came
    assert world.lanes.writes > lane_writes or change is None
    return note


@LEADS
def test_a_fire_read_ahead_is_called_at_its_time_after_one_claim(lead: timedelta) -> None:
    world = World()
    job = one_time(world)

    lanes_before = world.lanes.writes
    note = arrive_early(world, job, None, lead)

    assert note == "attempt 1: success"
    [call] = world.calls_of(job)
    assert call.at == FIRE  # not before, and nothing but one request between the wait and the call
    assert world.lanes.writes - lanes_before == 1  # the claim
    [run] = world.runs_of(job)
    assert run.status is RunStatus.SUCCEEDED
    assert (run.attempts[0].started_at, run.started_at, run.lag_ms) == (FIRE, FIRE, 0)
    assert world.metrics.counts.get("ReadAheadDecidedAgain") is None
    assert world.metrics.counts.get("RunsClaimedAhead") == (1 if lead == AHEAD else None)


@LEADS
def test_the_claim_is_taken_on_arrival_only_with_time_to_spare(lead: timedelta) -> None:
    world = World()
    job = one_time(world)
    seen: list[int] = []
    arrive_early(world, job, lambda: seen.append(world.lanes.writes), lead)
    # 200 ms before the fire (the change here writes nothing): the claim is written with a second to spare,
    # not yet with 240 ms
    assert seen == [1 if lead == AHEAD else 0]


def test_a_fire_claimed_ahead_shows_as_enqueued_until_its_time() -> None:
    world = World()
    job = one_time(world)
    run_id = scheduled_run_id(job.job_id, FIRE)
    shown: list[RunStatus] = []

    arrive_early(
        world, job, lambda: shown.append(world.service.get_run("acme", run_id, world.clock()).status)
    )

    assert shown == [RunStatus.ENQUEUED]  # claimed, not started: it can still be cancelled
    assert world.service.get_run("acme", run_id, world.clock()).status is RunStatus.SUCCEEDED


@LEADS
def test_a_pause_200_ms_before_the_fire_stops_a_fire_read_ahead(lead: timedelta) -> None:
    world = World()
    job = one_time(world)

    arrive_early(
        world,
        job,
        lambda: world.service.pause_job(
            "acme", job.job_id, reason="hold", actor="acme:ops", now=world.clock()
        ),
    )

    assert world.calls_of(job) == []
    assert world.metrics.counts.get("ReadAheadDecidedAgain") == 1
    assert world.jobs.get("acme", job.job_id).status is JobStatus.PAUSED


@LEADS
def test_a_cancel_of_the_job_200_ms_before_the_fire_stops_it(lead: timedelta) -> None:
    world = World()
    job = one_time(world)

    arrive_early(world, job, lambda: world.service.cancel_job("acme", job.job_id, world.clock()), lead)

    assert world.calls_of(job) == []
    [run] = world.runs_of(job)
    assert (run.status, run.reason) == (RunStatus.CANCELLED, "job_cancelled")


@LEADS
def test_a_cancel_of_the_run_200_ms_before_the_fire_stops_it(lead: timedelta) -> None:
    world = World()
    job = one_time(world)
    run_id = scheduled_run_id(job.job_id, FIRE)

    arrive_early(world, job, lambda: world.service.cancel_unrecorded("acme", run_id, world.clock()), lead)

    assert world.calls_of(job) == []
    [run] = world.runs_of(job)
    assert (run.run_id, run.status) == (run_id, RunStatus.CANCELLED)


@LEADS
def test_a_schedule_change_200_ms_before_the_fire_stops_the_old_fire(lead: timedelta) -> None:
    world = World()
    job = one_time(world)
    later = FIRE + timedelta(hours=1)

    arrive_early(
        world,
        job,
        lambda: world.service.update_job(
            "acme",
            job.job_id,
            JobPatch.model_validate({"schedule": {"type": "once", "at": later.isoformat()}}),
            world.clock(),
        ),
        lead,
    )

    assert world.calls_of(job) == []  # the fire at ten is not the job's any more
    assert world.jobs.get("acme", job.job_id).next_fire_at == later


@pytest.mark.parametrize("overlap", ["allow", None])
def test_only_jobs_with_a_lane_are_read_ahead(overlap: str | None) -> None:
    world = World()
    job = one_time(world, **({"overlap_policy": overlap} if overlap else {}))
    worker, _ = worker_changing(world, None)
    message = planned_message(world, job)
    world.clock.advance(seconds=(FIRE - AHEAD - world.clock()).total_seconds())
    reads = job_reads(world)

    worker.handle(message)

    [call] = world.calls_of(job)
    assert call.at == FIRE
    # the planner marks the fire of a job with a lane; one whose runs overlap freely is read at its fire
    assert message.ahead is (True if overlap is None else None)
    assert reads[0] == (FIRE - AHEAD if overlap is None else FIRE)


def test_a_fire_does_not_claim_ahead_of_an_earlier_fire_of_its_job() -> None:
    # Given a job every second whose runs may not overlap, and fire 2's message two seconds early
    world = World()
    job = world.create(name="every-second", schedule={"type": "rate", "every_seconds": 1})
    first, second = FIRE - timedelta(seconds=1), FIRE
    world.clock.advance(seconds=(second - timedelta(seconds=2) - world.clock()).total_seconds())

    def sleep(seconds: float) -> None:
        # while fire 2 waits, fire 1 comes at its time and runs
        end = world.clock() + timedelta(seconds=seconds)
        world.clock.advance(seconds=(first - world.clock()).total_seconds())
        world.worker("other").handle(
            RunMessage(tenant_id="acme", run_id=scheduled_run_id(job.job_id, first), ahead=True)
        )
        world.clock.advance(seconds=(end - world.clock()).total_seconds())

    # When fire 2 is read ahead
    world.worker("ahead", sleep=sleep).handle(
        RunMessage(tenant_id="acme", run_id=scheduled_run_id(job.job_id, second), ahead=True)
    )

    # Then it did not take the lane ahead of fire 1: both ran, in order, none skipped
    assert [call.scheduled_for for call in world.calls_of(job)] == [first, second]
    assert world.metrics.counts.get("RunsClaimedAhead") is None
    assert {run.status for run in world.runs_of(job)} == {RunStatus.SUCCEEDED}
