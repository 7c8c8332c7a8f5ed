"""Pool runs under the faults of ``test_faults.py``: processes that die between writes, calls that arrive
twice or race each other, messages delivered twice, and a sweeper racing a heartbeat at the lease's expiry.

Given a pool job's run on the real adapters (moto, a fake clock), whatever the interleaving: no two claims
hold the run's lease at once, an attempt ends once (its job's completion, its retry or its dead letter
follow once), a lease lost is lost for every call (409), and a running run always has an attention time at
its lease's expiry, so the sweeper takes it back if its worker is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from tickwork import tables
from tickwork.app.pools import PoolService
from tickwork.domain.models import Run, RunMessage, RunStatus
from tickwork.domain.pools import CompleteRequest, FailRequest, HeartbeatRequest
from tickwork.errors import LeaseLost

from bench._faults import FaultInjector, FaultRule
from tests.integration.test_pools_engine import claim, fire, pool_job, pools_of
from tests.reliability.conftest import Engine

HEARTBEAT_TIMEOUT = 30  # the heartbeat_timeout_seconds of pool_job's target
RETRY = {"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"}


class Died(BaseException):
    """The process serving a call died here: nothing after it runs, and no handler catches it."""


# --- helpers ------------------------------------------------------------------------------------------------
def swept_with_the_test_clock(engine: Engine) -> PoolService:
    """The pool service on the test's clock, and the planner's sweep lapsing leases with it."""
    pools = pools_of(engine)
    engine.runtime.sweeper.lapse = pools.lapse
    return pools


def waiting_pool_run(engine: Engine, **fields: Any) -> tuple[PoolService, str]:
    """A pool job whose fire came: its run waits in the pool ``gpu``."""
    pools = swept_with_the_test_clock(engine)
    job_id = pool_job(engine, retry=fields.pop("retry", RETRY), **fields)
    fire(engine)
    [run] = engine.runs_of("acme", job_id)
    assert run.status is RunStatus.ENQUEUED
    return pools, job_id


def stored(engine: Engine, run_id: str) -> Run:
    return engine.runtime.runs.get("acme", run_id)


def attention_ids(engine: Engine, now: datetime) -> set[str]:
    """The run ids the sweeper would look at, at ``now``."""
    runs = engine.runtime.runs
    return {
        run_id
        for shard in range(engine.runtime.settings.attention_shards)
        for _, run_id in runs.due_for_attention(shard, now=now, limit=100)
    }


def assert_watched(engine: Engine, run_id: str) -> None:
    """A running pool run is found by the sweep at its lease's expiry, and not before."""
    run = stored(engine, run_id)
    if run.status is not RunStatus.RUNNING:
        return
    assert run.lease_expires_at is not None
    assert run_id in attention_ids(engine, run.lease_expires_at)
    assert run_id not in attention_ids(engine, run.lease_expires_at - timedelta(milliseconds=1))


def token_of(claimed: Any) -> str:
    token = claimed.run.lease_token
    assert token is not None
    return str(token)


def fail_body(token: str, code: str = "oom", *, retryable: bool = True) -> FailRequest:
    return FailRequest.model_validate(
        {"lease_token": token, "error": {"code": code, "message": code}, "retryable": retryable}
    )


def lapse_and_hand_back(engine: Engine) -> None:
    """Past the heartbeat timeout: the planner's sweep lapses the lease, and the retry's message hands the run
    to its pool again."""
    engine.clock.advance(seconds=HEARTBEAT_TIMEOUT + 1)
    engine.tick()
    engine.clock.advance(seconds=2)
    engine.drain()


def is_run_write(params: dict[str, Any]) -> bool:
    """A write of a run item (not of its checkpoint, a pointer or a job)."""
    sort_key = str(params.get("Item", {}).get(tables.RUNS_SK, {}).get("S", ""))
    return params.get("TableName") == tables.RUNS.default_name and not sort_key.startswith(
        tables.CHECKPOINT_PREFIX
    )


class Gate:
    """Holds chosen threads at their next DynamoDB write (before the request is built, so nothing is locked):
    a test lets each through in the order it wants, and so interleaves calls deterministically."""

    WRITES = ("PutItem", "UpdateItem")

    def __init__(self, client: Any):
        self.client = client
        self.reached: dict[str, threading.Event] = {}
        self.go: dict[str, threading.Event] = {}

    def hold(self, thread_name: str) -> None:
        self.reached[thread_name] = threading.Event()
        self.go[thread_name] = threading.Event()

    def _before(self, params: dict[str, Any], **_: Any) -> None:
        name = threading.current_thread().name
        if name in self.go and not self.go[name].is_set():
            self.reached[name].set()
            assert self.go[name].wait(timeout=10), f"{name} was never let through"

    def wait_until_held(self, thread_name: str) -> None:
        assert self.reached[thread_name].wait(timeout=10), f"{thread_name} never reached a write"

    def release(self, thread_name: str) -> None:
        self.go[thread_name].set()

    @contextmanager
    def installed(self) -> Iterator[Gate]:
        for operation in self.WRITES:
            self.client.meta.events.register_first(
                f"before-parameter-build.dynamodb.{operation}", self._before
            )
        try:
            yield self
        finally:
            for name in self.go:
                self.go[name].set()
            for operation in self.WRITES:
                self.client.meta.events.unregister(
                    f"before-parameter-build.dynamodb.{operation}", self._before
                )


class Call(threading.Thread):
    """One API call in a thread of its own (as a Lambda invocation of its own): its answer or its error."""

    def __init__(self, name: str, call: Callable[[], Any]):
        super().__init__(name=name, daemon=True)
        self.call = call
        self.answer: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.answer = self.call()
        except BaseException as error:
            self.error = error

    def result(self) -> Any:
        self.join(timeout=10)
        assert not self.is_alive(), f"{self.name} did not end"
        return self.answer


# --- (a) a claimer killed right after its claim ------------------------------------------------------------
def test_a_claim_whose_process_dies_after_its_write_is_lapsed_and_claimed_again_at_attempt_2(
    engine: Engine,
) -> None:
    # Given a run waiting in its pool, and the API process serving a claim dying just after the claim's
    # conditional write applied (the worker never hears of its lease)
    pools, job_id = waiting_pool_run(engine)
    faults = FaultInjector([FaultRule("dynamodb", frozenset({"PutItem"}), 1.0, ("crash_after",))], crash=Died)
    faults.install(engine.dynamodb)
    with pytest.raises(Died):
        claim(pools, worker="doomed")
    faults.uninstall(engine.dynamodb)
    assert faults.counts == {"crash_after": 1}
    [run] = engine.runs_of("acme", job_id)
    assert (run.status, run.attempt, run.lease_owner) == (RunStatus.RUNNING, 1, "doomed")
    assert_watched(engine, run.run_id)
    # Then no other worker can claim it while that lease lasts, nor once it has lapsed until the sweep ends it
    engine.clock.advance(seconds=HEARTBEAT_TIMEOUT - 1)
    assert claim(pools, worker="w2") == []
    engine.tick()
    assert stored(engine, run.run_id).status is RunStatus.RUNNING
    engine.clock.advance(seconds=1)
    assert claim(pools, worker="w2") == []
    # When the sweep comes after the heartbeat timeout
    engine.tick()
    lapsed = stored(engine, run.run_id)
    assert lapsed.status is RunStatus.RETRY_WAIT
    assert [a.error_code for a in lapsed.attempts] == ["heartbeat_timeout"]
    assert engine.metrics.counts.get("PoolLeasesLapsed") == 1
    # Then the retry hands it to the pool again, and one claim takes it, at attempt 2
    engine.clock.advance(seconds=2)
    engine.drain()
    [again] = claim(pools, worker="w2")
    assert claim(pools, worker="w3") == []
    assert (again.run.attempt, again.run.lease_owner) == (2, "w2")
    done = pools.complete("acme", run.run_id, CompleteRequest(lease_token=token_of(again)))
    assert done.status is RunStatus.SUCCEEDED
    assert [a.outcome for a in done.attempts] == ["retryable_error", "succeeded"]
    assert engine.runtime.jobs.get("acme", job_id).status.value == "COMPLETED"


def test_a_claim_whose_process_dies_before_reading_the_checkpoint_is_retried_from_that_checkpoint(
    engine: Engine,
) -> None:
    # Given a run whose first attempt saved a checkpoint and lapsed
    pools, _ = waiting_pool_run(engine)
    [first] = claim(pools, worker="w1")
    run_id = first.run.run_id
    pools.heartbeat("acme", run_id, HeartbeatRequest(lease_token=token_of(first), checkpoint={"step": 4}))
    lapse_and_hand_back(engine)

    # When the process serving the next claim dies after its write, as it reads the checkpoint
    def die_reading_the_checkpoint(params: dict[str, Any], **_: Any) -> None:
        if str(params["Key"][tables.RUNS_SK]["S"]).startswith(tables.CHECKPOINT_PREFIX):
            raise Died

    event = "before-parameter-build.dynamodb.GetItem"
    engine.dynamodb.meta.events.register_first(event, die_reading_the_checkpoint)
    with pytest.raises(Died):
        claim(pools, worker="doomed")
    engine.dynamodb.meta.events.unregister(event, die_reading_the_checkpoint)
    held = stored(engine, run_id)
    assert (held.status, held.attempt, held.lease_owner) == (RunStatus.RUNNING, 2, "doomed")
    assert_watched(engine, run_id)
    assert claim(pools, worker="w2") == []
    # Then that attempt lapses too, and the third claims it with the first attempt's checkpoint
    lapse_and_hand_back(engine)
    [third] = claim(pools, worker="w2")
    assert (third.run.attempt, third.checkpoint) == (3, {"step": 4})
    assert [a.error_code for a in third.run.attempts[:-1]] == ["heartbeat_timeout", "heartbeat_timeout"]


# --- (b) an attempt ended twice ----------------------------------------------------------------------------
def test_a_complete_sent_again_is_refused_and_the_run_and_its_job_end_once(engine: Engine) -> None:
    # Given a claimed run, completed
    pools, job_id = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token = token_of(claimed)
    done = pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token, output={"n": 1}))
    assert done.status is RunStatus.SUCCEEDED
    after_first = stored(engine, done.run_id)
    # When the same complete comes again (a client resending it), and then a fail with the same token
    with pytest.raises(LeaseLost):
        pools.complete("acme", done.run_id, CompleteRequest(lease_token=token, output={"n": 2}))
    with pytest.raises(LeaseLost):
        pools.fail("acme", done.run_id, fail_body(token))
    # Then the run is as the first complete left it, and its end was counted once
    assert stored(engine, done.run_id) == after_first
    assert engine.metrics.counts.get("RunsSucceeded") == 1
    assert engine.runtime.jobs.get("acme", job_id).status.value == "COMPLETED"


def test_a_complete_whose_answer_was_lost_is_refused_when_sent_again_and_the_run_stays_succeeded(
    engine: Engine,
) -> None:
    # Given a claimed run whose complete was written, but whose answer timed out on the way back
    pools, _ = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token = token_of(claimed)
    faults = FaultInjector([FaultRule("dynamodb", frozenset({"PutItem"}), 1.0, ("timeout",))])
    faults.install(engine.dynamodb)
    with pytest.raises(Exception, match="Read timeout"):
        pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token, output={"n": 1}))
    faults.uninstall(engine.dynamodb)
    assert faults.counts == {"timeout": 1}
    # When the worker sends it again
    with pytest.raises(LeaseLost):
        pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token, output={"n": 1}))
    # Then the run ended once, SUCCEEDED with the first call's output
    run = stored(engine, claimed.run.run_id)
    assert (run.status, run.output, len(run.attempts)) == (RunStatus.SUCCEEDED, {"n": 1}, 1)


def ended_at_once(engine: Engine, calls: Mapping[str, Callable[[], Any]], first: str) -> tuple[Call, Call]:
    """Both calls read the run before either writes; ``first`` writes first, then the other."""
    second = next(name for name in calls if name != first)
    gate = Gate(engine.dynamodb)
    threads = {name: Call(name, call) for name, call in calls.items()}
    with gate.installed():
        for name, thread in threads.items():
            gate.hold(name)
            thread.start()
            gate.wait_until_held(name)
        gate.release(first)
        threads[first].result()
        gate.release(second)
        threads[second].result()
    return threads[first], threads[second]


@pytest.mark.parametrize("first", ["complete", "fail"])
def test_a_complete_racing_a_fail_ends_the_attempt_once_and_the_other_gets_lease_lost(
    engine: Engine, first: str
) -> None:
    # Given a claimed run (retries left), and its worker's complete and a fail of the same attempt read at
    # once (a retried request racing the original, or two threads of the worker)
    pools, job_id = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token, run_id = token_of(claimed), claimed.run.run_id
    calls = {
        "complete": lambda: pools.complete("acme", run_id, CompleteRequest(lease_token=token)),
        "fail": lambda: pools.fail("acme", run_id, fail_body(token)),
    }
    # When one writes first
    winner, loser = ended_at_once(engine, calls, first)
    # Then it ended the attempt, and the other was refused as a lost lease and changed nothing
    assert winner.error is None
    assert isinstance(loser.error, LeaseLost)
    run = stored(engine, run_id)
    assert run == winner.answer
    assert len(run.attempts) == 1
    assert engine.metrics.counts.get("RunsRetried", 0) == (1 if first == "fail" else 0)
    assert engine.metrics.counts.get("RunsSucceeded", 0) == (1 if first == "complete" else 0)
    if first == "complete":
        assert run.status is RunStatus.SUCCEEDED
        assert engine.runtime.jobs.get("acme", job_id).status.value == "COMPLETED"
        return
    # The failed attempt is retried once: one message, one hand-over, one claim at attempt 2
    assert run.status is RunStatus.RETRY_WAIT
    engine.clock.advance(seconds=2)
    assert engine.drain() == 1
    [again] = claim(pools, worker="w2")
    assert again.run.attempt == 2
    assert claim(pools, worker="w3") == []


def test_two_fails_of_the_last_attempt_at_once_send_one_dead_letter(engine: Engine) -> None:
    # Given a run with one attempt allowed, claimed, and two fails of it read at once
    pools, _ = waiting_pool_run(engine, retry={"max_attempts": 1})
    [claimed] = claim(pools)
    token, run_id = token_of(claimed), claimed.run.run_id
    calls = {name: (lambda: pools.fail("acme", run_id, fail_body(token))) for name in ("fail-a", "fail-b")}
    winner, loser = ended_at_once(engine, calls, "fail-a")
    # Then one ended it DEAD, the other got lease_lost, and one dead letter went out
    assert winner.error is None and winner.answer.status is RunStatus.DEAD
    assert isinstance(loser.error, LeaseLost)
    [letter] = engine.dead_letters()
    assert letter["run_id"] == run_id
    assert engine.metrics.counts.get("RunsDead") == 1


def test_two_completes_at_once_end_the_run_once(engine: Engine) -> None:
    pools, job_id = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token, run_id = token_of(claimed), claimed.run.run_id
    calls = {
        name: (
            lambda name=name: pools.complete("acme", run_id, CompleteRequest(lease_token=token, output=name))
        )
        for name in ("complete-a", "complete-b")
    }
    winner, loser = ended_at_once(engine, calls, "complete-b")
    assert winner.error is None
    assert isinstance(loser.error, LeaseLost)
    run = stored(engine, run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, "complete-b")
    assert engine.metrics.counts.get("RunsSucceeded") == 1
    assert engine.runtime.jobs.get("acme", job_id).status.value == "COMPLETED"


# --- (c) a sweeper racing a heartbeat at the lease's expiry ------------------------------------------------
def heartbeat_read_before_the_expiry(
    engine: Engine, pools: PoolService, gate: Gate, run_id: str, token: str, checkpoint: Any
) -> Call:
    """A heartbeat that read the run a second before its lease's expiry, held at its first write; the clock
    then reaches the expiry."""
    run = stored(engine, run_id)
    assert run.lease_expires_at is not None
    engine.clock.advance(seconds=(run.lease_expires_at - engine.clock()).total_seconds() - 1)
    beat = Call(
        "heartbeat",
        lambda: pools.heartbeat(
            "acme", run_id, HeartbeatRequest(lease_token=token, progress=0.9, checkpoint=checkpoint)
        ),
    )
    gate.hold("heartbeat")
    beat.start()
    gate.wait_until_held("heartbeat")
    engine.clock.advance(seconds=1)
    assert engine.clock() == run.lease_expires_at
    return beat


def claimed_with_a_checkpoint(engine: Engine) -> tuple[PoolService, str, str]:
    pools, _ = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token, run_id = token_of(claimed), claimed.run.run_id
    engine.clock.advance(seconds=10)
    pools.heartbeat("acme", run_id, HeartbeatRequest(lease_token=token, checkpoint={"step": 1}))
    return pools, run_id, token


def test_a_heartbeat_that_writes_before_the_sweeper_keeps_the_lease_and_the_sweep_does_nothing(
    engine: Engine,
) -> None:
    pools, run_id, token = claimed_with_a_checkpoint(engine)
    gate = Gate(engine.dynamodb)
    with gate.installed():
        beat = heartbeat_read_before_the_expiry(engine, pools, gate, run_id, token, {"step": 2})
        expired = stored(engine, run_id).lease_expires_at

        # When the sweep reads the run as lapsed, and the heartbeat writes just before the sweep does
        def heartbeat_first(params: dict[str, Any], **_: Any) -> None:
            if threading.current_thread() is threading.main_thread() and is_run_write(params):
                gate.release("heartbeat")
                beat.result()

        event = "before-parameter-build.dynamodb.PutItem"
        engine.dynamodb.meta.events.register_first(event, heartbeat_first)
        report = engine.tick()
        engine.dynamodb.meta.events.unregister(event, heartbeat_first)
    # Then the heartbeat won: its lease is extended, and the sweep's write was refused
    answer = beat.result()
    assert beat.error is None
    assert answer.lease_expires_at == engine.clock() - timedelta(seconds=1) + timedelta(
        seconds=HEARTBEAT_TIMEOUT
    )
    run = stored(engine, run_id)
    assert report.swept == 0
    run = stored(engine, run_id)
    assert (run.status, run.attempt, run.progress) == (RunStatus.RUNNING, 1, 0.9)
    assert run.lease_expires_at == answer.lease_expires_at
    assert "PoolLeasesLapsed" not in engine.metrics.counts
    assert expired is not None and run_id not in attention_ids(engine, expired)
    assert_watched(engine, run_id)
    # And the attempt goes on: it completes with the checkpoint it saved kept
    pools.complete("acme", run_id, CompleteRequest(lease_token=token))
    assert stored(engine, run_id).status is RunStatus.SUCCEEDED
    assert engine.runtime.runs.checkpoint_of(run) == {"step": 2}


def test_a_sweeper_that_writes_before_the_heartbeat_lapses_the_attempt_and_the_heartbeat_changes_nothing(
    engine: Engine,
) -> None:
    pools, run_id, token = claimed_with_a_checkpoint(engine)
    gate = Gate(engine.dynamodb)
    with gate.installed():
        beat = heartbeat_read_before_the_expiry(engine, pools, gate, run_id, token, {"step": 2})
        # When the sweep lapses the attempt while the heartbeat is on its way, and then the heartbeat writes
        report = engine.tick()
        gate.release("heartbeat")
        beat.result()
    # Then the sweeper won: the attempt failed as a heartbeat timeout, and the heartbeat got lease_lost
    assert report.swept == 1
    assert isinstance(beat.error, LeaseLost)
    lapsed = stored(engine, run_id)
    assert lapsed.status is RunStatus.RETRY_WAIT
    assert [a.error_code for a in lapsed.attempts] == ["heartbeat_timeout"]
    assert lapsed.progress != 0.9
    # And the next attempt resumes from the last checkpoint the lease holder saved, not the refused one
    engine.clock.advance(seconds=2)
    engine.drain()
    [again] = claim(pools, worker="w2")
    assert (again.run.attempt, again.checkpoint) == (2, {"step": 1})
    with pytest.raises(LeaseLost):
        pools.complete("acme", run_id, CompleteRequest(lease_token=token))


@pytest.mark.parametrize("first", ["heartbeat", "cancel"])
def test_a_cancel_racing_a_heartbeat_is_kept_and_so_is_the_lease(engine: Engine, first: str) -> None:
    # Given a claimed run, and a heartbeat and a cancel of it that read the run before either writes
    pools, _ = waiting_pool_run(engine)
    [claimed] = claim(pools)
    token, run_id = token_of(claimed), claimed.run.run_id
    engine.clock.advance(seconds=10)
    calls = {
        "heartbeat": lambda: pools.heartbeat("acme", run_id, HeartbeatRequest(lease_token=token)),
        "cancel": lambda: pools.cancel("acme", run_id),
    }
    # When one writes first
    ended_at_once(engine, calls, first)
    # Then the run keeps both: the cancel request, and the lease as the heartbeat renewed it
    run = stored(engine, run_id)
    assert run.status is RunStatus.RUNNING
    assert run.cancel_requested is True
    assert run.lease_expires_at == engine.clock() + timedelta(seconds=HEARTBEAT_TIMEOUT)
    assert_watched(engine, run_id)
    # And the worker hears the cancel at its next heartbeat, and its fail ends the run CANCELLED
    assert pools.heartbeat("acme", run_id, HeartbeatRequest(lease_token=token)).cancel_requested
    assert pools.fail("acme", run_id, fail_body(token, "cancelled")).status is RunStatus.CANCELLED


# --- a pool fire's message delivered twice, at once --------------------------------------------------------
def test_a_pool_fires_message_delivered_to_two_workers_at_once_is_handed_over_once(engine: Engine) -> None:
    # Given a pool job's fire, its message received by two workers at once (the same message, twice)
    pools = swept_with_the_test_clock(engine)
    job_id = pool_job(engine, retry=RETRY)
    engine.clock.advance(seconds=5)
    [received] = engine.pump().receive()
    message = RunMessage.model_validate_json(received["Body"])
    deliveries = [Call(name, partial(engine.worker(name).handle, message)) for name in ("w-a", "w-b")]
    for delivery in deliveries:
        delivery.start()
    notes = [delivery.result() for delivery in deliveries]
    assert all(delivery.error is None for delivery in deliveries), [d.error for d in deliveries]
    # Then the run waits in its pool once: one claim takes it at attempt 1, and no other finds anything
    [run] = engine.runs_of("acme", job_id)
    assert (run.status, run.attempt) == (RunStatus.ENQUEUED, 0), notes
    assert notes.count("handed to its pool") == 1, notes
    [claimed] = claim(pools, worker="w1")
    assert claim(pools, worker="w2") == []
    assert claimed.run.attempt == 1
    # And a third delivery of it, while it runs, changes nothing
    engine.worker("worker-late").handle(message)
    assert stored(engine, run.run_id) == stored(engine, claimed.run.run_id)
    assert stored(engine, run.run_id).lease_token == claimed.run.lease_token
    done = pools.complete("acme", run.run_id, CompleteRequest(lease_token=token_of(claimed)))
    assert done.status is RunStatus.SUCCEEDED and len(done.attempts) == 1
