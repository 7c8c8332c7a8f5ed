"""Webhooks that answer 202, on the in-memory stores: every call carries the lease token its attempt would be
continued with; a 202 leaves the attempt RUNNING under that token, and the pool routes (heartbeat, complete,
fail, cancel) and the sweeper's lapse end it exactly as they end a pool run's."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from tickwork.domain.models import Job, JobStatus, Run, RunStatus
from tickwork.domain.pools import CompleteRequest, FailRequest, HeartbeatRequest, fencing_token_of
from tickwork.errors import LeaseLost
from tickwork.targets.result import accepted
from tickwork.testing.world import GONE, OK, START, UNAVAILABLE, Call, World

ACCEPTED = accepted(202)
TOKEN = re.compile(r"^[1-9][0-9]*\.[A-Za-z0-9_-]{22}$")


def hook(world: World, *, name: str = "export", **fields: Any) -> Job:
    """A one-time webhook job due five seconds from now."""
    return world.create(
        name=name,
        schedule={"type": "once", "at": (START + timedelta(seconds=5)).isoformat()},
        payload={"table": "orders"},
        **fields,
    )


def accepted_call(world: World, job: Job) -> tuple[Run, str]:
    """The job's fire, delivered at its time to a webhook that answers 202: the run and the call's token."""
    world.script[job.name] = [ACCEPTED]
    world.clock.advance(seconds=5)
    assert world.deliver() == ["attempt 1: continued by its target"]
    [call] = world.calls_of(job)
    assert call.lease_token is not None
    [run] = world.runs_of(job)
    return run, call.lease_token


def beat(world: World, run: Run, token: str, **fields: Any) -> Any:
    return world.pools.heartbeat("acme", run.run_id, HeartbeatRequest(lease_token=token, **fields))


def fail(world: World, run: Run, token: str, *, retryable: bool) -> Run:
    body = {"lease_token": token, "error": {"code": "export_failed", "message": "disk full"}}
    return world.pools.fail("acme", run.run_id, FailRequest.model_validate({**body, "retryable": retryable}))


def test_every_webhook_call_carries_its_attempts_own_unguessable_lease_token() -> None:
    world = World()
    job = hook(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    world.script[job.name] = [UNAVAILABLE, UNAVAILABLE, OK]
    world.run_for(12)
    calls: list[Call] = world.calls_of(job)
    assert [call.attempt for call in calls] == [1, 2, 3]
    tokens = [call.lease_token or "" for call in calls]
    assert all(TOKEN.match(token) for token in tokens), tokens
    # Each names its attempt's fencing token, and no two are alike
    assert [fencing_token_of(token) for token in tokens] == [call.token for call in calls]
    assert len(set(tokens)) == 3
    # Answered 200 in the end: plain success, and no token was ever stored
    [run] = world.runs_of(job)
    assert run.status is RunStatus.SUCCEEDED
    assert run.lease_token is None


def test_a_202_keeps_the_attempt_running_and_heartbeats_then_complete_end_it_succeeded() -> None:
    world = World()
    job = hook(world)
    run, token = accepted_call(world, job)
    answered = world.clock()
    assert (run.status, run.attempt) == (RunStatus.RUNNING, 1)
    assert run.lease_token == token
    assert run.lease_expires_at == answered + timedelta(seconds=60)
    assert run.lease_deadline == run.attempts[0].started_at + timedelta(seconds=3600)
    world.clock.advance(seconds=45)
    kept = beat(world, run, token, progress=0.4, stage="rows 1-400", checkpoint={"after": 400})
    assert kept.lease_expires_at == world.clock() + timedelta(seconds=60)
    assert kept.cancel_requested is False
    stored = world.runs.get("acme", run.run_id)
    assert (stored.status, stored.progress, stored.stage) == (RunStatus.RUNNING, 0.4, "rows 1-400")
    assert world.runs.checkpoint_of(stored) == {"after": 400}
    world.clock.advance(seconds=45)  # past the first lease: the heartbeat carried it on
    world.tick()
    assert world.runs.get("acme", run.run_id).status is RunStatus.RUNNING
    done = world.pools.complete("acme", run.run_id, CompleteRequest(lease_token=token, output={"rows": 1000}))
    assert (done.status, done.output, done.attempt) == (RunStatus.SUCCEEDED, {"rows": 1000}, 1)
    assert done.attempts[0].outcome == "succeeded"
    assert world.job(job).status is JobStatus.COMPLETED  # the one-time job's last fire ended
    with pytest.raises(LeaseLost):
        beat(world, run, token)
    assert len(world.calls_of(job)) == 1


def test_a_202_without_heartbeats_lapses_and_the_retry_gets_a_new_token_the_old_one_refused() -> None:
    world = World()
    job = hook(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    run, first = accepted_call(world, job)
    world.script[job.name] = [ACCEPTED]
    world.run_for(59)  # within the heartbeat timeout: the sweeper leaves it
    assert world.runs.get("acme", run.run_id).status is RunStatus.RUNNING
    assert len(world.calls_of(job)) == 1
    world.run_for(5)  # lapsed: a retryable failure, retried as attempt 2 with a token of its own
    stored = world.runs.get("acme", run.run_id)
    assert stored.attempts[0].error_code == "heartbeat_timeout"
    assert stored.attempts[0].outcome == "retryable_error"
    assert (stored.status, stored.attempt) == (RunStatus.RUNNING, 2)
    second = world.calls_of(job)[-1]
    assert second.attempt == 2
    assert second.lease_token is not None and second.lease_token != first
    assert (fencing_token_of(second.lease_token) or 0) > (fencing_token_of(first) or 0)
    assert world.metrics.counts["PoolLeasesLapsed"] == 1
    # The first attempt's holder can change nothing
    with pytest.raises(LeaseLost):
        beat(world, run, first, progress=0.9)
    with pytest.raises(LeaseLost):
        world.pools.complete("acme", run.run_id, CompleteRequest(lease_token=first))
    assert world.runs.get("acme", run.run_id).progress is None
    done = world.pools.complete("acme", run.run_id, CompleteRequest(lease_token=second.lease_token))
    assert (done.status, done.attempt) == (RunStatus.SUCCEEDED, 2)


def test_a_retryable_fail_after_a_202_follows_the_retry_policy() -> None:
    world = World()
    job = hook(world, retry={"max_attempts": 2, "initial_delay_seconds": 1, "jitter": "none"})
    run, token = accepted_call(world, job)
    waiting = fail(world, run, token, retryable=True)
    assert waiting.status is RunStatus.RETRY_WAIT
    assert waiting.attempts[0].error_code == "export_failed"
    world.script[job.name] = [GONE]
    world.run_for(3)  # the retry calls the webhook again, which fails for good
    assert [call.attempt for call in world.calls_of(job)] == [1, 2]
    assert world.runs.get("acme", run.run_id).status is RunStatus.FAILED


def test_a_permanent_fail_after_a_202_ends_the_run_failed_without_a_retry() -> None:
    world = World()
    job = hook(world, retry={"max_attempts": 5, "initial_delay_seconds": 1})
    run, token = accepted_call(world, job)
    failed = fail(world, run, token, retryable=False)
    assert (failed.status, failed.reason) == (RunStatus.FAILED, "export_failed")
    world.run_for(30)
    assert len(world.calls_of(job)) == 1


def test_a_cancel_is_heard_at_the_next_heartbeat_and_the_run_ends_cancelled() -> None:
    world = World()
    job = hook(world, retry={"max_attempts": 5, "initial_delay_seconds": 1})
    run, token = accepted_call(world, job)
    assert world.pools.cancel("acme", run.run_id).cancel_requested is True
    assert world.runs.get("acme", run.run_id).status is RunStatus.RUNNING
    assert beat(world, run, token).cancel_requested is True
    ended = fail(world, run, token, retryable=True)
    assert (ended.status, ended.reason) == (RunStatus.CANCELLED, "run_cancelled")
    world.run_for(30)
    assert len(world.calls_of(job)) == 1


@pytest.mark.parametrize("overlap", ["skip", "allow"])
def test_a_continued_run_holds_its_jobs_lane_until_it_ends(overlap: str) -> None:
    world = World()
    job = world.create(
        name="sync",
        schedule={"type": "rate", "every_seconds": 30},
        overlap_policy=overlap,
    )
    world.script[job.name] = [ACCEPTED]
    world.run_for(31)
    [call] = world.calls_of(job)
    token = call.lease_token or ""
    run = world.runs.get("acme", call.run_id)
    assert run.status is RunStatus.RUNNING
    for _ in range(3):  # heartbeats every 20 s across the next fires
        world.run_for(20)
        beat(world, run, token)
    fired = world.statuses(job)
    if overlap == "skip":
        assert fired[0] is RunStatus.RUNNING
        assert set(fired[1:]) == {RunStatus.SKIPPED}
    else:
        assert len(world.calls_of(job)) > 1  # overlap allowed: the next fires are called meanwhile
    world.pools.complete("acme", run.run_id, CompleteRequest(lease_token=token))
    world.script[job.name] = [OK]
    calls = len(world.calls_of(job))
    world.run_for(31)
    assert len(world.calls_of(job)) > calls  # the lane is free again
    assert world.runs.get("acme", run.run_id).status is RunStatus.SUCCEEDED


def test_a_call_made_before_the_202_is_recorded_waits_a_bounded_time_for_it() -> None:
    world = World()
    job = hook(world)
    refused: list[Exception] = []

    def calls_back_at_once() -> Any:
        # The webhook heartbeats before it has answered: the 202 is not recorded yet, and never will be
        # while this call waits (the same thread), so after a bounded wait the token is refused.
        token = world.calls_of(job)[-1].lease_token or ""
        waited_from = world.clock()
        try:
            world.pools.heartbeat("acme", world.calls_of(job)[-1].run_id, HeartbeatRequest(lease_token=token))
        except Exception as error:
            refused.append(error)
        assert world.clock() - waited_from == timedelta(seconds=2)
        return ACCEPTED

    world.script[job.name] = [calls_back_at_once]
    world.clock.advance(seconds=5)
    world.deliver()
    assert [type(error).__name__ for error in refused] == ["NotFound"]
    run = world.runs_of(job)[0]
    assert run.status is RunStatus.RUNNING
    assert beat(world, run, run.lease_token or "").cancel_requested is False


def test_a_duplicate_message_of_a_continued_run_leaves_it_to_its_lease() -> None:
    world = World()
    job = hook(world)
    run, token = accepted_call(world, job)
    world.clock.advance(seconds=61)  # its lease has passed, and the sweeper has not looked yet
    note = world.default_worker.handle(world.message(run.run_id))
    assert note == "continued by its target: running under its lease token"
    assert len(world.calls_of(job)) == 1
    assert world.runs.get("acme", run.run_id).lease_token == token
    world.tick()  # the sweeper's lapse ends the attempt, as for a pool run
    assert world.runs.get("acme", run.run_id).attempts[0].error_code == "heartbeat_timeout"
