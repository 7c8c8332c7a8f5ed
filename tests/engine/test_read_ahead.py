"""A planned fire read ahead: its reads and decision when its message arrives, and at the fire only the claim
of its lane (the fence) and the call. A pause, a cancel of the job or of the run, or a schedule change made
between the two moves the lane, so the claim fails and the fire is decided again: it is not called.

Each test hands the worker the fire's message a second before the fire, as the planner's lead brings it, and
makes its change 200 ms before the fire, inside the worker's wait.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from tickwork.app.worker import Worker
from tickwork.domain.models import Job, JobPatch, JobStatus, RunMessage, RunStatus, scheduled_run_id
from tickwork.testing.world import START, World

FIRE = START + timedelta(minutes=10)
LEAD = timedelta(seconds=1)
BEFORE = timedelta(milliseconds=200)


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


def arrive_early(world: World, job: Job, change: Callable[[], object] | None) -> str:
    worker, waits = worker_changing(world, change)
    message = planned_message(world, job)
    assert message.ahead  # the planner marks a fire of a job with a lane
    world.clock.advance(seconds=(FIRE - LEAD - world.clock()).total_seconds())
    lane_writes = world.lanes.writes
    note = worker.handle(message)
    assert waits and waits[0] < FIRE  # it waited for the fire...
    assert world.metrics.counts.get("RunsReadAhead") == 1  # ...having read the fire ahead
    assert world.lanes.writes > lane_writes or change is None
    return note


def test_a_fire_read_ahead_is_called_at_its_time_after_one_claim() -> None:
    world = World()
    job = one_time(world)

    lanes_before = world.lanes.writes
    note = arrive_early(world, job, None)

    assert note == "attempt 1: success"
    [call] = world.calls_of(job)
    assert call.at == FIRE  # not before, and nothing but the claim between the wait and the call
    assert world.lanes.writes - lanes_before == 1  # the claim, at the fire
    [run] = world.runs_of(job)
    assert run.status is RunStatus.SUCCEEDED
    assert run.attempts[0].started_at == FIRE
    assert world.metrics.counts.get("ReadAheadDecidedAgain") is None


def test_the_lane_is_claimed_at_the_fire_not_when_the_message_arrives() -> None:
    world = World()
    job = one_time(world)
    seen: list[int] = []
    arrive_early(world, job, lambda: seen.append(world.lanes.writes))
    # the change here writes nothing; 200 ms before the fire, no claim had been written yet
    assert seen == [0]


def test_a_pause_200_ms_before_the_fire_stops_a_fire_read_ahead() -> None:
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


def test_a_cancel_of_the_job_200_ms_before_the_fire_stops_it() -> None:
    world = World()
    job = one_time(world)

    arrive_early(world, job, lambda: world.service.cancel_job("acme", job.job_id, world.clock()))

    assert world.calls_of(job) == []
    [run] = world.runs_of(job)
    assert (run.status, run.reason) == (RunStatus.CANCELLED, "job_cancelled")


def test_a_cancel_of_the_run_200_ms_before_the_fire_stops_it() -> None:
    world = World()
    job = one_time(world)
    run_id = scheduled_run_id(job.job_id, FIRE)

    arrive_early(world, job, lambda: world.service.cancel_unrecorded("acme", run_id, world.clock()))

    assert world.calls_of(job) == []
    [run] = world.runs_of(job)
    assert (run.run_id, run.status) == (run_id, RunStatus.CANCELLED)


def test_a_schedule_change_200_ms_before_the_fire_stops_the_old_fire() -> None:
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
    )

    assert world.calls_of(job) == []  # the fire at ten is not the job's any more
    assert world.jobs.get("acme", job.job_id).next_fire_at == later


@pytest.mark.parametrize("overlap", ["allow", None])
def test_only_jobs_with_a_lane_are_read_ahead(overlap: str | None) -> None:
    world = World()
    job = one_time(world, **({"overlap_policy": overlap} if overlap else {}))
    worker, _ = worker_changing(world, None)
    message = planned_message(world, job)
    world.clock.advance(seconds=(FIRE - LEAD - world.clock()).total_seconds())

    worker.handle(message)

    [call] = world.calls_of(job)
    assert call.at == FIRE
    # the planner marks the fire of a job with a lane; one whose runs overlap freely is read at its fire
    assert message.ahead is (True if overlap is None else None)
    assert world.metrics.counts.get("RunsReadAhead") == (1 if overlap is None else None)
