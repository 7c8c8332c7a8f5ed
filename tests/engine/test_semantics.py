"""The contract's policies, end to end on the in-memory engine: pause and resume, misfires after an outage,
coalescing, paced backfill, completion, cancel, schedule changes, and what the API shows of fires in flight.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from tickwork.app.planner import Planner, PlannerTick
from tickwork.app.ports import Dispatch
from tickwork.domain.models import Job, JobPatch, JobStatus, Run, RunStatus, parse_run_id, scheduled_run_id
from tickwork.domain.timeutil import from_epoch_ms
from tickwork.errors import InvalidState, QuotaExceeded
from tickwork.targets import TargetResult
from tickwork.testing.world import OK, START, UNAVAILABLE, World


def seconds_of(world: World, job: Job) -> list[float]:
    return [(c.scheduled_for - START).total_seconds() for c in world.calls_of(job)]


def every_second(world: World, policy: str = "fire_once", **extra: Any) -> Job:
    return world.create(
        name=f"every-{policy}", schedule={"type": "rate", "every_seconds": 1}, misfire_policy=policy, **extra
    )


# --- pause and resume -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("policy", "caught_up"), [("skip", 0), ("fire_once", 1), ("backfill", 9)])
def test_fires_that_fell_in_a_pause_follow_the_misfire_policy_on_resume(policy: str, caught_up: int) -> None:
    world = World()
    job = every_second(world, policy, misfire_grace_seconds=0)
    world.run_for(3)  # fires at 1 and 2 run
    world.service.pause_job("acme", job.job_id, reason="maintenance", actor="acme:default", now=world.clock())
    world.run_for(8)
    world.clock.advance(seconds=0.5)  # 9 fires (3..11) fell in the pause; their messages were dropped
    ran_before = len(world.calls_of(job))
    assert ran_before == 2
    world.service.resume_job("acme", job.job_id, world.clock())  # at 11.5 s
    world.run_for(3, step=0.05)
    during_pause = [s for s in seconds_of(world, job) if 3 <= s <= 11]
    assert len(during_pause) == caught_up
    assert during_pause == sorted(during_pause)  # in order
    if policy == "backfill":
        # paced: at most ten a second, never all at once
        starts = [c.at for c in world.calls_of(job) if 3 <= (c.scheduled_for - START).total_seconds() <= 11]
        assert all(b - a >= timedelta(milliseconds=100) for a, b in itertools.pairwise(starts))
    missed = [r for r in world.runs_of(job) if r.status is RunStatus.MISSED]
    assert len(missed) == 9 - caught_up


def pause_then_resume_after_nine_fires(world: World, job: Job) -> None:
    """Fires 1 and 2 run; fires 3..11 fall in a pause; the job is resumed at 11.5 s."""
    world.run_for(3)
    world.service.pause_job("acme", job.job_id, reason="maintenance", actor="acme:default", now=world.clock())
    world.run_for(8)
    world.clock.advance(seconds=0.5)
    world.deliver()  # fire 11's message arrived in the pause too
    world.service.resume_job("acme", job.job_id, world.clock())


def test_a_fire_once_catch_up_runs_even_when_its_message_arrives_after_the_next_fire() -> None:
    world = World()
    job = every_second(world, "fire_once", misfire_grace_seconds=0)
    pause_then_resume_after_nine_fires(world, job)
    # The workers are busy: the catch-up's message is handled at 12.5 s, after fire 12 is due
    world.clock.advance(seconds=1)
    world.run_for(2, step=0.05)
    assert [s for s in seconds_of(world, job) if 3 <= s <= 12] == [11.0, 12.0]
    caught_up = [
        r
        for r in world.runs_of(job)
        if r.run_id == scheduled_run_id(job.job_id, START + timedelta(seconds=11))
    ]
    assert [r.status for r in caught_up] == [RunStatus.SUCCEEDED]


def test_the_first_fire_after_a_resume_waits_for_the_backfill_of_the_pause() -> None:
    world = World()
    job = every_second(world, "backfill", misfire_grace_seconds=0)
    pause_then_resume_after_nine_fires(world, job)
    # Fire 12 is handled while the chain through 3..11 is at its first step
    world.clock.advance(seconds=0.5)
    world.deliver()
    world.run_for(3, step=0.05)
    calls = seconds_of(world, job)
    assert [s for s in calls if 3 <= s <= 12] == [float(s) for s in range(3, 13)]
    assert calls == sorted(calls)


def test_the_first_fire_after_a_backfill_waits_for_its_last_fire_to_end_rather_than_being_skipped() -> None:
    world = World()
    job = world.create(  # overlap `skip`, the default
        name="every-2s",
        schedule={"type": "rate", "every_seconds": 2},
        misfire_policy="backfill",
        misfire_grace_seconds=0,
    )
    other = world.worker("w2")
    last_of_chain = scheduled_run_id(job.job_id, START + timedelta(seconds=10))

    def slow_on_the_chains_last() -> TargetResult:
        if world.calls[-1].run_id == last_of_chain:
            # The chain's last fire runs until after fire 12 is due, which reaches another worker meanwhile
            world.clock.advance(seconds=1)
            world.deliver(other)
        return OK

    world.script[job.name] = [slow_on_the_chains_last]
    world.run_for(3)  # fire 2 runs
    world.service.pause_job("acme", job.job_id, reason=None, actor="a", now=world.clock())
    world.run_for(8, step=0.5)  # fires 4..10 fall in the pause
    world.service.resume_job("acme", job.job_id, world.clock())  # at 11 s: a chain through 4..10
    world.run_for(8, step=0.05)
    fire_12 = scheduled_run_id(job.job_id, START + timedelta(seconds=12))
    (run,) = [r for r in world.runs_of(job) if r.run_id == fire_12]
    assert run.status is RunStatus.SUCCEEDED
    calls = seconds_of(world, job)
    assert calls == sorted(calls) and {4.0, 10.0, 12.0} <= set(calls)
    assert world.most_in_flight[job.name] == 1


@pytest.mark.parametrize(
    ("policy", "runs", "status"), [("fire_once", 1, RunStatus.SUCCEEDED), ("skip", 0, RunStatus.MISSED)]
)
def test_a_one_time_job_paused_across_its_time_follows_the_policy_on_resume_then_completes(
    policy: str, runs: int, status: RunStatus
) -> None:
    world = World()
    job = world.create(
        name="once-paused",
        schedule={"type": "once", "at": (START + timedelta(seconds=5)).isoformat()},
        misfire_policy=policy,
        misfire_grace_seconds=1,
    )
    world.service.pause_job("acme", job.job_id, reason=None, actor="a", now=world.clock())
    world.run_for(10)
    assert world.calls_of(job) == [] and world.runs_of(job) == []
    world.service.resume_job("acme", job.job_id, world.clock())
    world.run_for(2)
    assert len(world.calls_of(job)) == runs
    assert world.statuses(job) == [status]
    assert world.job(job).status is JobStatus.COMPLETED


def test_a_one_time_job_due_just_after_its_resume_is_not_lost() -> None:
    world = World()
    at = START + timedelta(seconds=5, milliseconds=200)
    job = world.create(name="soon", schedule={"type": "once", "at": at.isoformat()})
    world.clock.advance(seconds=4)
    world.service.pause_job("acme", job.job_id, reason=None, actor="a", now=world.clock())
    world.clock.advance(seconds=1)  # its message arrives 0.2 s early, while paused
    world.deliver()
    world.service.resume_job("acme", job.job_id, world.clock())
    world.run_for(2, step=0.1)
    assert [c.scheduled_for for c in world.calls_of(job)] == [at]
    assert world.job(job).status is JobStatus.COMPLETED


# --- outages and coalescing -------------------------------------------------------------------------------
@pytest.mark.parametrize(("policy", "overdue_runs"), [("skip", 1), ("fire_once", 1), ("backfill", 30)])
def test_after_a_worker_outage_overdue_fires_coalesce(policy: str, overdue_runs: int) -> None:
    world = World()
    job = every_second(world, policy)
    for _ in range(30):  # 30 s without workers: the planner keeps sending
        world.tick()
        world.clock.advance(seconds=1)
    world.run_for(5, step=0.05)
    calls = seconds_of(world, job)
    overdue = [s for s in calls if s <= 30]
    assert len(overdue) == overdue_runs
    assert calls == sorted(calls) or policy != "backfill"
    assert len(calls) == len(set(calls))  # no fire twice
    # never a burst: at most ten starts in any second
    starts = sorted(c.at for c in world.calls_of(job))
    assert all(starts[i + 10] - starts[i] >= timedelta(seconds=1) for i in range(len(starts) - 10))


def test_after_a_planner_and_worker_outage_only_the_latest_fire_runs_and_the_rest_are_recorded() -> None:
    world = World(horizon=timedelta(seconds=5), lookahead=timedelta(seconds=2))
    job = every_second(world, "fire_once")  # the API sent fires 1..5 ahead
    world.clock.advance(seconds=40.5)  # nothing ticked or ran for 40 s
    world.run_for(2)
    calls = seconds_of(world, job)
    assert [s for s in calls if s <= 40] == [40.0]  # only the latest overdue fire
    missed = {
        (r.scheduled_for - START).total_seconds(): r.reason
        for r in world.runs_of(job)
        if r.status is RunStatus.MISSED
    }
    assert sorted(missed) == [float(s) for s in range(1, 40)]
    # sent fires were coalesced by the worker, the rest by the planner
    assert {missed[s] for s in (1.0, 5.0)} == {"superseded"} and missed[39.0] == "misfire"


# --- completion -------------------------------------------------------------------------------------------
def test_a_cron_job_with_an_end_completes_after_its_last_fire_not_before() -> None:
    world = World()
    end = START + timedelta(seconds=4)
    job = world.create(
        name="ending", schedule={"type": "cron", "expression": "* * * * * *", "end_at": end.isoformat()}
    )
    world.run_for(3)
    assert world.job(job).status is JobStatus.ACTIVE
    world.run_for(3)
    assert seconds_of(world, job) == [1, 2, 3, 4] or seconds_of(world, job)[-1] == 4
    assert world.job(job).status is JobStatus.COMPLETED


@pytest.mark.parametrize("ending", ["MISSED", "SKIPPED"])
def test_a_job_whose_last_fire_ends_unrun_completes_and_frees_its_quota_slot(ending: str) -> None:
    world = World()
    job = world.create(
        name="last",
        schedule={"type": "once", "at": (START + timedelta(seconds=2)).isoformat()},
        misfire_policy="skip",
    )
    if ending == "MISSED":
        world.clock.advance(seconds=70)  # its message arrives past its grace
        world.deliver()
    else:
        # a manual run holds the lane when the scheduled fire arrives
        def trigger_and_fire() -> TargetResult:
            world.clock.advance(seconds=2)
            world.deliver(world.worker("w2"))
            return OK

        world.script["last"] = [trigger_and_fire]
        run = world.service.trigger_job("acme", job.job_id, idempotency_key="m", now=world.clock())
        world.deliver()
        assert world.runs.get("acme", run.run_id).status is RunStatus.SUCCEEDED
    scheduled = [r for r in world.runs_of(job) if r.trigger == "schedule"]
    assert [r.status.value for r in scheduled] == [ending]
    assert world.job(job).status is JobStatus.COMPLETED
    assert world.jobs.counts["acme"] == 0


def test_a_completed_one_time_job_given_a_new_time_runs_again_and_completes_again() -> None:
    world = World()
    job = world.create(
        name="repoint", schedule={"type": "once", "at": (START + timedelta(seconds=2)).isoformat()}
    )
    world.run_for(3)
    assert world.job(job).status is JobStatus.COMPLETED
    assert world.jobs.counts["acme"] == 0
    # When it is given a new time
    again = START + timedelta(seconds=6)
    details = world.service.update_job(
        "acme", job.job_id, JobPatch(schedule={"type": "once", "at": again.isoformat()}), world.clock()
    )
    # Then it is ACTIVE again, takes a quota slot again, fires at its new time, and completes again
    assert details.job.status is JobStatus.ACTIVE and details.next_fire_at == again
    assert world.jobs.counts["acme"] == 1
    world.run_for(5)
    assert [
        (r.scheduled_for, r.status) for r in sorted(world.runs_of(job), key=lambda r: r.scheduled_for)
    ] == [
        (START + timedelta(seconds=2), RunStatus.SUCCEEDED),
        (again, RunStatus.SUCCEEDED),
    ]
    assert world.job(job).status is JobStatus.COMPLETED
    assert world.jobs.counts["acme"] == 0


def test_a_completed_job_updated_without_a_new_fire_is_refused_and_unchanged() -> None:
    world = World()
    job = world.create(
        name="done", schedule={"type": "once", "at": (START + timedelta(seconds=1)).isoformat()}
    )
    world.run_for(2)
    before = world.job(job)
    with pytest.raises(InvalidState, match="schedule that fires again"):
        world.service.update_job("acme", job.job_id, JobPatch(description="renamed"), world.clock())
    assert world.job(job) == before and world.jobs.counts["acme"] == 0


def test_reopening_a_completed_job_counts_against_the_tenants_job_limit() -> None:
    world = World()
    job = world.create(
        name="done", schedule={"type": "once", "at": (START + timedelta(seconds=1)).isoformat()}
    )
    world.run_for(2)
    tenant = world.tenants.get("acme")
    world.tenants.tenants["acme"] = tenant.model_copy(update={"max_jobs": 1})
    world.create(name="holder", schedule={"type": "once", "at": (START + timedelta(hours=1)).isoformat()})
    patch = JobPatch(schedule={"type": "once", "at": (START + timedelta(minutes=5)).isoformat()})
    with pytest.raises(QuotaExceeded):
        world.service.update_job("acme", job.job_id, patch, world.clock())
    assert world.job(job).status is JobStatus.COMPLETED and world.jobs.counts["acme"] == 1


# --- cancel and schedule changes --------------------------------------------------------------------------
def test_cancel_ends_sent_fires_and_waiting_retries_as_cancelled() -> None:
    world = World()
    job = every_second(world, retry={"initial_delay_seconds": 3, "jitter": "none"})
    world.script[job.name] = [UNAVAILABLE]
    world.run_for(2)  # fire 1 fails and waits to retry
    world.service.cancel_job("acme", job.job_id, world.clock())
    before = len(world.calls_of(job))
    world.run_for(8)
    assert len(world.calls_of(job)) == before
    statuses = {r.run_id: r.status for r in world.runs_of(job)}
    assert statuses[scheduled_run_id(job.job_id, START + timedelta(seconds=1))] is RunStatus.CANCELLED
    assert RunStatus.RETRY_WAIT not in statuses.values()


def test_fires_sent_from_an_old_schedule_are_cancelled_when_it_changes() -> None:
    world = World(horizon=timedelta(seconds=30))
    job = world.create(name="change", schedule={"type": "rate", "every_seconds": 3})
    world.service.update_job(
        "acme",
        job.job_id,
        JobPatch(schedule={"type": "rate", "every_seconds": 5, "start_at": START.isoformat()}),
        world.clock(),
    )
    world.run_for(20)
    ran = seconds_of(world, job)
    assert all(s % 5 == 0 for s in ran) and ran
    cancelled = [r for r in world.runs_of(job) if r.reason == "schedule_changed"]
    assert cancelled and all(r.status is RunStatus.CANCELLED for r in cancelled)


# --- what the API shows -----------------------------------------------------------------------------------
def test_fires_sent_but_not_reached_show_as_enqueued_and_a_running_one_as_running() -> None:
    world = World()
    job = world.create(name="show", schedule={"type": "rate", "every_seconds": 10})
    first = scheduled_run_id(job.job_id, START + timedelta(seconds=10))
    assert world.service.get_run("acme", first, world.clock()).status is RunStatus.ENQUEUED
    seen: list[RunStatus] = []
    listings: list[list[Run]] = []

    def look() -> TargetResult:
        seen.append(world.service.get_run("acme", first, world.clock()).status)
        listings.append(
            world.service.list_runs("acme", job.job_id, limit=10, cursor=None, now=world.clock()).items
        )
        return OK

    world.script["show"] = [look]
    world.run_for(11)
    assert seen == [RunStatus.RUNNING]
    listed = {run.run_id: run.status for run in listings[0]}
    assert listed[first] is RunStatus.RUNNING
    assert RunStatus.ENQUEUED in listed.values()
    assert world.service.get_run("acme", first, world.clock()).status is RunStatus.SUCCEEDED


def test_a_retry_too_far_for_sqs_is_sent_by_the_sweeper_on_time() -> None:
    world = World()
    job = world.create(
        name="far",
        schedule={"type": "once", "at": START.isoformat()},
        retry={"initial_delay_seconds": 3600, "max_delay_seconds": 3600, "jitter": "none", "max_attempts": 2},
    )
    world.script["far"] = [UNAVAILABLE, UNAVAILABLE]
    world.deliver()
    assert world.queue.pending() == []  # not sent: an hour is past SQS's 15 minutes
    world.clock.advance(minutes=58, seconds=30)
    world.tick()  # the sweep sends it, delayed to its time
    world.clock.advance(seconds=90)
    world.deliver()
    (run,) = world.runs_of(job)
    assert run.attempt == 2
    assert world.calls_of(job)[1].at == START + timedelta(hours=1)


def test_a_paused_jobs_fires_in_its_pause_are_not_listed_as_waiting() -> None:
    """Sent before the pause, they are dropped by the worker and planned again on resume: not runs yet."""
    world = World()
    job = world.create(name="paused-list", schedule={"type": "rate", "every_seconds": 10})
    world.run_for(11)
    world.service.pause_job("acme", job.job_id, reason="quiet", actor="acme:default", now=world.clock())
    listed = world.service.list_runs("acme", job.job_id, limit=10, cursor=None, now=world.clock()).items
    assert [run.status for run in listed] == [RunStatus.SUCCEEDED]
    world.run_for(30)
    listed = world.service.list_runs("acme", job.job_id, limit=10, cursor=None, now=world.clock()).items
    assert [run.status for run in listed] == [RunStatus.SUCCEEDED]


def test_the_history_shows_recorded_fires_as_recorded_when_manual_runs_are_newer() -> None:
    world = World()
    job = world.create(name="manual-newest", schedule={"type": "rate", "every_seconds": 10})
    world.run_for(21)  # fires at 10 s and 20 s ran
    for key in ("a", "b", "c"):
        world.service.trigger_job("acme", job.job_id, idempotency_key=key, now=world.clock())
    world.run_for(2)
    listed = world.service.list_runs("acme", job.job_id, limit=20, cursor=None, now=world.clock()).items
    scheduled = sorted((run.scheduled_for - START, run.status) for run in listed if run.trigger == "schedule")
    # The two fires that ran, then the ones sent ahead; none before the job was created
    assert scheduled[:2] == [
        (timedelta(seconds=10), RunStatus.SUCCEEDED),
        (timedelta(seconds=20), RunStatus.SUCCEEDED),
    ]
    assert {status for _, status in scheduled[2:]} == {RunStatus.ENQUEUED}
    assert all(offset > timedelta(seconds=20) for offset, _ in scheduled[2:])
    assert [run.status for run in listed if run.trigger == "manual"] == [RunStatus.SUCCEEDED] * 3


# --- a lost run queue -------------------------------------------------------------------------------------
def test_fires_whose_messages_were_lost_with_the_queue_are_planned_again_under_the_policy() -> None:
    world = World()
    recurring = every_second(world, "fire_once", misfire_grace_seconds=0)
    once = world.create(
        name="once", schedule={"type": "once", "at": (START + timedelta(seconds=6)).isoformat()}
    )
    world.run_for(3)  # fires 1 and 2 ran; everything up to the horizon was sent
    world.queue.messages.clear()  # the queue is gone (a local stack stopped and started from its tables)
    world.clock.advance(seconds=5.5)  # 8.5 s: fires 3..8 and the one-time job's time passed meanwhile
    for job in (recurring, once):
        world.service.replan_unrecorded("acme", job.job_id, world.clock())
    world.run_for(3, step=0.05)
    # The recurring job caught up once (the latest), then went on; the one-time job ran and completed
    assert [s for s in seconds_of(world, recurring) if s <= 11] == [1.0, 2.0, 8.0, 9.0, 10.0, 11.0]
    assert [r.reason for r in world.runs_of(recurring) if r.status is RunStatus.MISSED] == ["misfire"] * 5
    assert len(world.calls_of(once)) == 1
    assert world.job(once).status is JobStatus.COMPLETED
    # Planning again (a second restart) runs no fire twice: recorded fires absorb their second message
    world.service.replan_unrecorded("acme", recurring.job_id, world.clock())
    world.run_for(2, step=0.05)
    fires = seconds_of(world, recurring)
    assert len(fires) == len(set(fires)) and fires[-1] >= 13


# --- planning ---------------------------------------------------------------------------------------------
def planner_of(world: World, **timing: Any) -> Planner:
    """A planner on the world's stores, with its own timer and sleep."""
    return Planner(
        jobs=world.jobs,
        runs=world.runs,
        lanes=world.lanes,
        queue=world.queue,
        metrics=world.metrics,
        horizon=world.horizon,
        lookahead=world.lookahead,
        **timing,
    )


def test_a_long_planning_pass_counts_each_sends_delays_from_when_it_goes_out() -> None:
    world = World()
    at = START + timedelta(minutes=5)
    jobs = [
        world.create(name=f"once-{n}", schedule={"type": "once", "at": at.isoformat()}) for n in range(250)
    ]
    elapsed = itertools.count(0, 2)  # the pass takes 2 s between two looks at the timer
    planner = planner_of(world, timer=lambda: float(next(elapsed)))
    sends: list[tuple[int, datetime]] = []
    send = world.queue.send

    def recorded(dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        sends.append((len(dispatches), now))
        return send(dispatches, now)

    world.queue.send = recorded  # type: ignore[method-assign]
    now = at - timedelta(seconds=5)
    results = planner.plan_many(jobs, now)
    assert sum(len(result.sent) for result in results) == 250
    # Sent in chunks, each dated by when it went out, so its delays are not counted from the pass's start
    assert [(count, (when - now).total_seconds()) for count, when in sends] == [(100, 2), (100, 4), (50, 6)]


def test_a_tick_times_its_sends_so_messages_arrive_just_before_their_fires() -> None:
    world = World(horizon=timedelta(seconds=120))
    first = START + timedelta(seconds=125)
    # Fires on whole seconds, and fires 0.437 s into their second; none is sent at create (past the horizon)
    cron = {"type": "cron", "expression": "*/2 * * * * *", "start_at": first.isoformat()}
    rate = {"type": "rate", "every_seconds": 7, "start_at": (first + timedelta(seconds=0.437)).isoformat()}
    jobs = [world.create(name="cron", schedule=cron), world.create(name="rate", schedule=rate)]
    assert world.queue.pending() == []
    world.clock.advance(seconds=40.3)  # a tick that starts 0.3 s into its second
    planner = planner_of(world, timer=lambda: world.clock().timestamp(), sleep=world.clock.sleep)
    now = world.clock()
    planner.plan_many([world.job(job) for job in jobs], now, within=world.horizon, align=True)
    leads = []
    for queued in world.queue.pending():
        key = parse_run_id(queued.message.run_id)
        assert key is not None and key.fire_ms is not None
        leads.append((from_epoch_ms(key.fire_ms) - queued.visible_at).total_seconds())
    assert len(leads) >= 20
    # Every message is visible before its fire (never late), and at most the lead (plus a batch's sends) early
    assert all(0 <= lead <= 0.1 for lead in leads), sorted(leads)
    assert world.clock() - now < timedelta(seconds=1.1)  # the sweep took at most a second


def test_a_tick_counts_the_time_it_took_to_read_its_due_jobs_when_it_times_its_sends() -> None:
    """The tick reads ``now``, then its due shards and jobs (round trips that take time), then plans: a send
    timed from when planning began instead of from ``now`` would go out that much late, its message seen
    after its fire."""
    world = World(horizon=timedelta(seconds=120), lookahead=timedelta(seconds=60))
    first = START + timedelta(seconds=125)
    cron = {"type": "cron", "expression": "*/2 * * * * *", "start_at": first.isoformat()}
    world.create(name="cron", schedule=cron)
    world.clock.advance(seconds=80.3)  # a tick that starts 0.3 s into its second, the job due within 60 s
    planner = planner_of(world, timer=lambda: world.clock().timestamp(), sleep=world.clock.sleep)
    due_jobs = world.jobs.due_jobs

    def slow_due_jobs(*args: Any, **kwargs: Any) -> Any:
        world.clock.advance(seconds=0.2)  # the due shard's query, as long as a slow one on AWS
        return due_jobs(*args, **kwargs)

    world.jobs.due_jobs = slow_due_jobs  # type: ignore[method-assign]
    ticker = PlannerTick(jobs=world.jobs, planner=planner, sweeper=world.sweeper, metrics=world.metrics)
    ticker.tick(world.clock(), [0, 1], align_sends=True)
    leads = []
    for queued in world.queue.pending():
        key = parse_run_id(queued.message.run_id)
        assert key is not None and key.fire_ms is not None
        leads.append((from_epoch_ms(key.fire_ms) - queued.visible_at).total_seconds())
    assert len(leads) >= 20
    # Seen before its fire, by the lead: not 0.2 s later than planned (0.15 s after the fire)
    assert all(0 <= lead <= 0.1 for lead in leads), sorted(leads)


def test_a_moments_batches_go_out_together_not_one_after_another() -> None:
    world = World(horizon=timedelta(seconds=120))
    at = START + timedelta(seconds=125)
    jobs = [
        world.create(name=f"same-{n}", schedule={"type": "once", "at": at.isoformat()}) for n in range(30)
    ]
    world.clock.advance(seconds=40.3)
    planner = planner_of(world, timer=lambda: world.clock().timestamp(), sleep=world.clock.sleep)
    # Thirty fires of the same moment are three batches: each send waits until all three are in flight
    together = threading.Barrier(3, timeout=5)
    send = world.queue.send

    def in_flight_together(dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        together.wait()
        return send(dispatches, now)

    world.queue.send = in_flight_together  # type: ignore[method-assign]
    results = planner.plan_many(
        [world.job(job) for job in jobs], world.clock(), within=world.horizon, align=True
    )
    assert sum(len(result.sent) for result in results) == 30
    assert len(world.queue.pending()) == 30


def test_a_large_moment_is_spread_over_its_seconds_so_no_message_arrives_long_before_its_fire() -> None:
    world = World(horizon=timedelta(seconds=120))
    first = START + timedelta(seconds=125)
    # A hundred 1-second jobs whose fires all fall on whole seconds: about 3,600 messages of one moment
    rate = {"type": "rate", "every_seconds": 1, "start_at": first.isoformat()}
    jobs = [world.create(name=f"every-second-{n}", schedule=rate) for n in range(100)]
    world.clock.advance(seconds=40.3)
    planner = planner_of(world, timer=lambda: world.clock().timestamp(), sleep=world.clock.sleep)
    now = world.clock()
    results = planner.plan_many([world.job(job) for job in jobs], now, within=world.horizon, align=True)
    sent = sum(len(result.sent) for result in results)
    assert sent >= 3000
    leads = []
    for queued in world.queue.pending():
        key = parse_run_id(queued.message.run_id)
        assert key is not None and key.fire_ms is not None
        leads.append((from_epoch_ms(key.fire_ms) - queued.visible_at).total_seconds())
    assert len(leads) == sent
    # Never late, and early by the lead plus at most two rounds: sent together at one instant, the moment's
    # 23 rounds would have started 0.44 s early
    assert all(0 <= lead <= 0.091 for lead in leads), (min(leads), max(leads))
    # Spread over a few of the moment's seconds, within the sweep's limit
    assert timedelta(seconds=3) < world.clock() - now < timedelta(seconds=31)


def test_a_lone_frequent_jobs_messages_each_arrive_just_the_lead_before_their_fire() -> None:
    """Each of a lone job's messages is an invocation of its own: starting a round early would make every
    one of them wait 20 ms more, so its batches go one round a second instead."""
    world = World(horizon=timedelta(seconds=300))
    first = START + timedelta(seconds=305)
    rate = {"type": "rate", "every_seconds": 1, "start_at": first.isoformat()}
    job = world.create(name="every-second", schedule=rate)
    world.clock.advance(seconds=200.3)
    planner = planner_of(world, timer=lambda: world.clock().timestamp(), sleep=world.clock.sleep)
    now = world.clock()
    [result] = planner.plan_many([world.job(job)], now, within=world.horizon, align=True)
    assert len(result.sent) >= 190  # 20 batches: two rounds of sixteen at once
    leads = []
    for queued in world.queue.pending():
        key = parse_run_id(queued.message.run_id)
        assert key is not None and key.fire_ms is not None
        leads.append((from_epoch_ms(key.fire_ms) - queued.visible_at).total_seconds())
    assert all(0 <= lead <= 0.0505 for lead in leads), (min(leads), max(leads))
    assert timedelta(seconds=1) < world.clock() - now < timedelta(seconds=3)
