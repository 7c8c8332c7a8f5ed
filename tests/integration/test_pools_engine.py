"""Pools through the real adapters under moto: the planner sends a pool job's fire, the worker handler hands
it to its pool, the pool service claims, heartbeats, completes and fails it, and the sweeper ends a lapsed
lease; retries come back through the run queue and the dead letter goes to its queue."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tickwork import tables
from tickwork.app.pools import PoolService
from tickwork.domain.models import RunStatus
from tickwork.domain.pools import ClaimRequest, CompleteRequest, FailRequest, HeartbeatRequest
from tickwork.domain.timeutil import to_epoch_ms

from tests.integration.conftest import START, Engine


def pools_of(engine: Engine) -> PoolService:
    worker = engine.worker("pool-api")
    return PoolService(
        jobs=engine.runtime.jobs,
        runs=engine.runtime.runs,
        lifecycle=worker.lifecycle,
        attempts=worker.attempts,
        after_end=worker.after_end,
        metrics=engine.metrics,
        clock=engine.clock,
        sleep=engine.clock.sleep,
    )


def pool_job(engine: Engine, **fields: Any) -> str:
    at = START + timedelta(seconds=5)
    details = engine.create(
        schedule={"type": "once", "at": at.isoformat()},
        target={"type": "pool", "pool": "gpu", "heartbeat_timeout_seconds": 30},
        payload={"shard": 7},
        **fields,
    )
    return details.job.job_id


def fire(engine: Engine) -> None:
    engine.clock.advance(seconds=5)
    engine.drain()


def claim(pools: PoolService, worker: str = "w1") -> Any:
    return pools.claim("acme", "gpu", ClaimRequest(worker_id=worker, max_runs=10, wait_seconds=0))


def test_a_pool_run_is_handed_over_claimed_and_completed(engine: Engine) -> None:
    pools = pools_of(engine)
    job_id = pool_job(engine)
    fire(engine)
    [run] = engine.runs_of("acme", job_id)
    assert (run.status, run.pool) == (RunStatus.ENQUEUED, "gpu")
    assert engine.receiver.requests == []  # nothing was called
    [claimed] = claim(pools)
    assert claimed.payload == {"shard": 7}
    token = claimed.run.lease_token
    assert token is not None
    beat = pools.heartbeat(
        "acme", run.run_id, HeartbeatRequest(lease_token=token, progress=0.5, checkpoint=[1])
    )
    assert beat.cancel_requested is False
    done = pools.complete("acme", run.run_id, CompleteRequest(lease_token=token, output={"rows": 10}))
    assert (done.status, done.output, done.progress) == (RunStatus.SUCCEEDED, {"rows": 10}, 0.5)
    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert engine.runtime.jobs.get("acme", job_id).status.value == "COMPLETED"


def test_a_lapsed_lease_is_swept_retried_through_the_queue_and_resumes_from_its_checkpoint(
    engine: Engine,
) -> None:
    pools = pools_of(engine)
    engine.runtime.sweeper.lapse = pools.lapse  # on the test's clock
    pool_job(engine, retry={"max_attempts": 2, "initial_delay_seconds": 1, "jitter": "none"})
    fire(engine)
    [first] = claim(pools)
    token = first.run.lease_token or ""
    pools.heartbeat("acme", first.run.run_id, HeartbeatRequest(lease_token=token, checkpoint={"done": 3}))
    engine.clock.advance(seconds=31)
    engine.tick()  # the planner's sweep finds the lapsed lease
    assert engine.run("acme", first.run.run_id).status is RunStatus.RETRY_WAIT
    engine.clock.advance(seconds=2)
    engine.drain()  # the retry's message: handed to the pool again
    [second] = claim(pools, worker="w2")
    assert (second.run.attempt, second.checkpoint) == (2, {"done": 3})
    # The second attempt fails for good: its retries are spent, the run is DEAD and its dead letter sent
    body = {"lease_token": second.run.lease_token, "error": {"code": "oom", "message": "out of memory"}}
    dead = pools.fail("acme", second.run.run_id, FailRequest.model_validate(body))
    assert dead.status is RunStatus.DEAD
    [letter] = engine.dead_letters()
    assert letter["run_id"] == second.run.run_id
    assert [a.error_code for a in engine.run("acme", second.run.run_id).attempts] == [
        "heartbeat_timeout",
        "oom",
    ]


def test_a_run_waiting_past_the_threshold_is_found_through_the_attention_index_and_counted_once(
    engine: Engine,
) -> None:
    threshold = engine.runtime.settings.pool_wait_alarm
    job_id = pool_job(engine)
    fire(engine)
    [listed] = engine.runs_of("acme", job_id)
    waiting = engine.runtime.runs.get("acme", listed.run_id)
    handed_at = engine.clock()
    # Stored with its next look, as the attention index's sort key
    assert (waiting.pool_waiting_since, waiting.pool_wait_alarm_at) == (handed_at, handed_at + threshold)
    item = engine.runtime.runs.run_to_item(waiting)
    assert int(item[tables.ATTENTION_AT]["N"]) == to_epoch_ms(handed_at + threshold)
    engine.clock.advance(seconds=threshold.total_seconds() - 1)
    engine.tick()
    assert "PoolRunsWaitingLong" not in engine.metrics.counts
    engine.clock.advance(seconds=1)
    engine.tick()
    engine.clock.advance(seconds=60)
    engine.tick()  # the next minute's sweep: not counted again
    assert engine.metrics.counts["PoolRunsWaitingLong"] == 1
    assert engine.metrics.timings["PoolRunOldestWaitMs"] == [threshold.total_seconds() * 1000]
    stored = engine.runtime.runs.get("acme", listed.run_id)
    assert stored.status is RunStatus.ENQUEUED
    assert stored.pool_wait_alarm_at == handed_at + 2 * threshold  # counted at handed_at + threshold
