"""The worker on in-memory fakes: leases, duplicates, overlap, retries, lost attempts and dead letters."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from tickwork.domain.models import Job, JobStatus, RunStatus, manual_run_id, scheduled_run_id
from tickwork.targets import TargetResult
from tickwork.testing.world import GONE, OK, START, UNAVAILABLE, World


class WorkerDied(BaseException):
    """A worker process killed mid-run: nothing it would have done afterwards happens."""


def once_at(world: World, seconds: float, **spec: Any) -> Job:
    return world.create(
        schedule={"type": "once", "at": (START + timedelta(seconds=seconds)).isoformat()}, **spec
    )


def test_a_fire_runs_at_its_time_with_one_lease_write_and_one_record_write() -> None:
    world = World()
    world.clock.advance(seconds=0.3)
    job = world.create(
        name="once", schedule={"type": "once", "at": (START + timedelta(seconds=5)).isoformat()}
    )
    # The API planned it at once: one message, delayed 4 s (whole seconds, rounded down); nothing stored
    assert world.runs_of(job) == [] and len(world.queue.pending()) == 1
    world.clock.advance(seconds=4)
    world.deliver()  # visible at 4.3 s: the worker waits out 0.7 s
    (run,) = world.runs_of(job)
    (call,) = world.calls_of(job)
    assert call.at == START + timedelta(seconds=5)  # never early
    assert (run.status, run.attempt, run.lag_ms, len(run.attempts)) == (RunStatus.SUCCEEDED, 1, 0, 1)
    assert run.fencing_token == call.token == world.lanes.get("acme", job.job_id).version
    assert (world.lanes.writes, world.runs.writes) == (1, 1)
    assert world.job(job).status.value == "COMPLETED"


def test_a_message_delivered_again_after_the_run_ended_calls_nothing() -> None:
    world = World()
    job = once_at(world, 0)
    message = world.queue.pending()[0].message
    world.deliver()
    note = world.default_worker.handle(message)
    assert note.startswith("duplicate") and len(world.calls_of(job)) == 1


def test_a_duplicate_arriving_while_the_attempt_runs_is_absorbed() -> None:
    world = World()
    job = once_at(world, 0, name="dup")
    message = world.queue.pending()[0].message
    notes: list[str] = []

    def second_delivery() -> TargetResult:
        notes.append(world.worker("w2").handle(message))
        return OK

    world.script["dup"] = [second_delivery]
    world.deliver()
    assert notes == ["duplicate: its attempt is running; back after its lease"]
    assert len(world.calls_of(job)) == 1
    assert world.statuses(job) == [RunStatus.SUCCEEDED]


def test_a_fire_due_while_the_last_one_runs_is_skipped_under_skip() -> None:
    world = World()
    job = world.create(name="slow", schedule={"type": "rate", "every_seconds": 1}, overlap_policy="skip")
    seen: list[str] = []

    def long_call() -> TargetResult:
        # While fire 1 runs, fire 2 comes due and reaches another worker
        world.clock.advance(seconds=1)
        seen.extend(world.deliver(world.worker("w2")))
        return OK

    world.script["slow"] = [long_call, OK]
    world.clock.advance(seconds=1)
    world.deliver()
    assert world.most_in_flight["slow"] == 1
    assert seen == ["skipped: overlap"]
    assert world.statuses(job) == [RunStatus.SUCCEEDED, RunStatus.SKIPPED]


def test_a_fire_due_while_the_last_one_runs_waits_for_it_under_queue() -> None:
    world = World()
    job = world.create(name="q5", schedule={"type": "rate", "every_seconds": 5}, overlap_policy="queue")
    seen: list[str] = []

    def long_call() -> TargetResult:
        # Fire 1 (at 5 s) runs 6 s: fire 2 (at 10 s) comes due meanwhile
        world.clock.advance(seconds=5)
        seen.extend(world.deliver(world.worker("w2")))
        world.clock.advance(seconds=1)
        return OK

    world.script["q5"] = [long_call, OK]
    world.clock.advance(seconds=5)
    world.deliver()
    assert seen == ["held back: sent again"]
    # Fire 1's end (at 11 s) sent the held fire again at once: it runs then, not when its message is back
    world.deliver()
    assert [c.scheduled_for for c in world.calls_of(job)] == [START + timedelta(seconds=s) for s in (5, 10)]
    assert world.calls_of(job)[1].at == START + timedelta(seconds=11)
    assert world.most_in_flight["q5"] == 1
    world.clock.advance(seconds=1)  # 12 s: the held message comes back, a duplicate
    assert world.deliver() == ["duplicate: the run is SUCCEEDED"]


def test_a_queue_job_slower_than_its_period_runs_back_to_back_and_coalesces_its_backlog() -> None:
    world = World()
    job = world.create(name="slow", schedule={"type": "rate", "every_seconds": 1}, overlap_policy="queue")
    other = world.worker("w2")

    def slow_call() -> TargetResult:
        for _ in range(14):  # 1.4 s, while another worker takes the fires that come due
            world.clock.advance(seconds=0.1)
            world.deliver(other)
        return OK

    world.script["slow"] = [slow_call]
    world.run_for(9, step=0.1)
    calls = world.calls_of(job)
    # Each run starts as the one before ends: no fire waits out a hold while the lane is free
    assert all(b.at - a.at <= timedelta(seconds=1.5) for a, b in itertools.pairwise(calls))
    assert len(calls) >= 6
    fires = [c.scheduled_for for c in calls]
    assert fires == sorted(set(fires))
    assert world.most_in_flight["slow"] == 1
    # A fire overtaken by the backlog is missed (only the latest overdue one can be on time), never run late
    missed = [r for r in world.runs_of(job) if r.status is RunStatus.MISSED]
    assert missed and {r.reason for r in missed} == {"superseded"}


def test_queued_fires_of_a_backfill_job_run_one_at_a_time_in_order() -> None:
    world = World()
    job = world.create(
        name="qb",
        schedule={"type": "rate", "every_seconds": 1},
        overlap_policy="queue",
        misfire_policy="backfill",
    )

    def long_call() -> TargetResult:
        for _ in range(3):  # fires 2, 3 and 4 come due (and are held) while fire 1 runs
            world.clock.advance(seconds=1)
            world.deliver(world.worker("w2"))
        return OK

    world.script["qb"] = [long_call, OK]
    world.run_for(12, step=0.5)
    fires = [(c.scheduled_for - START).total_seconds() for c in world.calls_of(job)]
    assert fires[:6] == [1, 2, 3, 4, 5, 6]
    assert world.most_in_flight["qb"] == 1


def test_a_manual_trigger_while_a_skip_job_runs_is_skipped() -> None:
    world = World()
    job = once_at(world, 0, name="busy")
    triggered = []

    def long_call() -> TargetResult:
        run = world.service.trigger_job("acme", job.job_id, idempotency_key="k", now=world.clock())
        triggered.append(run.run_id)
        world.deliver(world.worker("w2"))
        return OK

    world.script["busy"] = [long_call]
    world.deliver()
    assert world.runs.get("acme", triggered[0]).status is RunStatus.SKIPPED
    assert world.most_in_flight["busy"] == 1


def test_overlap_allow_runs_side_by_side_up_to_max_concurrent_runs() -> None:
    world = World()
    job = world.create(
        name="wide",
        schedule={"type": "rate", "every_seconds": 1},
        overlap_policy="allow",
        max_concurrent_runs=2,
    )
    notes: list[str] = []

    def nested(depth: int) -> TargetResult:
        if depth < 3:
            world.clock.advance(seconds=1)
            world.script["wide"] = [lambda: nested(depth + 1)]
            notes.extend(world.deliver(world.worker(f"w{depth + 1}")))
        return OK

    world.script["wide"] = [lambda: nested(1)]
    world.clock.advance(seconds=1)
    world.deliver()
    assert world.most_in_flight["wide"] == 2
    assert "skipped: overlap" in notes
    assert world.statuses(job).count(RunStatus.SUCCEEDED) == 2


def test_a_retryable_error_retries_with_backoff_under_the_same_run_id() -> None:
    world = World()
    job = once_at(
        world, 0, name="flaky", retry={"max_attempts": 3, "initial_delay_seconds": 5, "jitter": "none"}
    )
    world.script["flaky"] = [UNAVAILABLE, OK]
    world.deliver()
    (run,) = world.runs_of(job)
    assert (run.status, run.retry_at) == (RunStatus.RETRY_WAIT, START + timedelta(seconds=5))
    world.clock.advance(seconds=5)
    world.deliver()
    (run,) = world.runs_of(job)
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert [a.outcome for a in run.attempts] == ["retryable_error", "succeeded"]
    assert {c.run_id for c in world.calls_of(job)} == {run.run_id}
    assert world.job(job).status.value == "COMPLETED"


def test_retries_spent_end_dead_with_one_dead_letter() -> None:
    world = World()
    job = once_at(
        world, 0, name="down", retry={"max_attempts": 2, "initial_delay_seconds": 1, "jitter": "none"}
    )
    world.script["down"] = [UNAVAILABLE]
    world.deliver()
    world.clock.advance(seconds=1)
    world.deliver()
    (run,) = world.runs_of(job)
    assert (run.status, run.reason, run.dead_letter_owed) == (RunStatus.DEAD, "max_attempts", False)
    assert [letter["run_id"] for letter in world.letters.letters] == [run.run_id]


def test_a_permanent_error_fails_at_once() -> None:
    world = World()
    job = once_at(world, 0, name="gone")
    world.script["gone"] = [GONE]
    world.deliver()
    assert [(r.status, r.reason) for r in world.runs_of(job)] == [(RunStatus.FAILED, "http_404")]


@pytest.mark.parametrize(
    ("delivery", "expected"), [("at_least_once", RunStatus.SUCCEEDED), ("at_most_once", RunStatus.ABANDONED)]
)
def test_a_worker_that_dies_mid_call_leaves_the_run_to_the_message_coming_back(
    delivery: str, expected: RunStatus
) -> None:
    world = World()
    job = once_at(world, 0, name="crashy", delivery=delivery)

    def die() -> TargetResult:
        raise WorkerDied

    world.script["crashy"] = [die, OK]
    with pytest.raises(WorkerDied):
        world.deliver()
    # The message comes back after its visibility timeout (30 s), before the lease passes (60 s): it is sent
    # again for after the lease, when it finds the attempt lost and takes the run over
    world.clock.advance(seconds=30)
    assert world.deliver(world.worker("w2")) == ["duplicate: its attempt is running; back after its lease"]
    world.run_for(40)
    (run,) = world.runs_of(job)
    assert run.status is expected
    assert run.attempts[0].outcome == "abandoned" and run.attempts[0].error_code == "lease_expired"
    assert len(world.calls_of(job)) == (2 if delivery == "at_least_once" else 1)


@pytest.mark.parametrize("overlap", ["allow", "skip"])
def test_a_fire_whose_worker_died_is_taken_over_even_once_later_fires_are_due(overlap: str) -> None:
    world = World()
    job = world.create(name="dies", schedule={"type": "rate", "every_seconds": 10}, overlap_policy=overlap)

    first = scheduled_run_id(job.job_id, START + timedelta(seconds=10))

    def die_twice_on_the_first_fire() -> TargetResult:
        call = world.calls[-1]
        if call.run_id == first and call.attempt <= 2:
            raise WorkerDied
        return OK

    world.script["dies"] = [die_twice_on_the_first_fire]
    world.clock.advance(seconds=10)
    with pytest.raises(WorkerDied):
        world.deliver()
    # Its message comes back when later fires are due: the run is not a new fire to coalesce, it is an
    # attempt lost, taken over once its lease has passed, and again after the second death
    for _ in range(200):
        try:
            world.run_for(1)
        except WorkerDied:
            continue
    (run,) = [r for r in world.runs_of(job) if r.run_id == first]
    assert run.status is RunStatus.SUCCEEDED
    assert [a.outcome for a in run.attempts] == ["abandoned", "abandoned", "succeeded"]
    # Each attempt is recorded from its own start, one after the other
    assert all(
        before.finished_at is not None and before.finished_at <= after.started_at
        for before, after in itertools.pairwise(run.attempts)
    )
    assert world.metrics.counts.get("RunsMissed", 0) == len(
        [r for r in world.runs_of(job) if r.status is RunStatus.MISSED]
    )


def test_a_one_time_job_whose_completion_failed_completes_when_its_message_comes_back() -> None:
    world = World()
    job = once_at(world, 0, name="completes")
    complete = world.jobs.complete
    failures = iter([RuntimeError("throttled")])

    def fails_once(tenant_id: str, job_id: str, **through: Any) -> bool:
        for error in failures:
            raise error
        return complete(tenant_id, job_id, **through)

    world.jobs.complete = fails_once  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        world.deliver()  # the run is recorded, then the completion fails: the message stays
    assert world.statuses(job) == [RunStatus.SUCCEEDED] and world.job(job).status is JobStatus.ACTIVE
    world.clock.advance(seconds=31)  # its message comes back after the visibility timeout
    assert world.deliver() == ["duplicate: the run is SUCCEEDED"]
    assert world.job(job).status is JobStatus.COMPLETED
    assert len(world.calls_of(job)) == 1


def test_a_one_time_job_whose_run_ends_before_the_planner_moves_its_cursor_completes() -> None:
    world = World()
    job = once_at(world, 100, name="quick")  # past the horizon: the planner sends it, not the API
    advance_cursor = world.jobs.advance_cursor

    def run_first(planned: Job, next_fire_at: Any, last_fire_at: Any) -> bool:
        # The fire's message is out and runs before the planner writes the job's cursor
        world.clock.advance(seconds=10)
        assert world.deliver() == ["attempt 1: success"]
        return advance_cursor(planned, next_fire_at, last_fire_at)

    world.jobs.advance_cursor = run_first  # type: ignore[method-assign,assignment]
    world.clock.advance(seconds=92)
    world.tick()
    assert world.statuses(job) == [RunStatus.SUCCEEDED]
    assert world.job(job).status is JobStatus.COMPLETED


def test_an_early_message_goes_back_for_its_time() -> None:
    world = World()
    job = once_at(world, 30, name="later")
    early = world.message(scheduled_run_id(job.job_id, START + timedelta(seconds=30)))
    assert world.default_worker.handle(early) == "early: sent again for its time"
    assert world.calls == []


def test_a_held_back_run_is_sent_again_never_failed() -> None:
    world = World()
    job = world.create(name="q", schedule={"type": "rate", "every_seconds": 1}, overlap_policy="queue")
    holds: list[str] = []

    def long_call() -> TargetResult:
        for _ in range(3):
            world.clock.advance(seconds=1)
            holds.extend(world.deliver(world.worker("w2")))
        return OK

    world.script["q"] = [long_call, OK]
    world.clock.advance(seconds=1)
    world.deliver()
    # Each hold re-sent the message; coalescing then missed the older ones as the newer came due
    assert "held back: sent again" in holds
    world.run_for(5)
    assert world.most_in_flight["q"] == 1
    assert RunStatus.MISSED in world.statuses(job)


def test_a_manual_run_is_stored_then_run_once_per_key() -> None:
    world = World()
    job = world.create(name="m", schedule={"type": "cron", "expression": "0 0 1 1 *"})
    first = world.service.trigger_job("acme", job.job_id, idempotency_key="k1", now=world.clock())
    again = world.service.trigger_job("acme", job.job_id, idempotency_key="k1", now=world.clock())
    assert first.run_id == again.run_id == manual_run_id(job.job_id, "k1")
    world.deliver()
    assert world.runs.get("acme", first.run_id).status is RunStatus.SUCCEEDED
    assert len(world.calls_of(job)) == 1
