"""Pools on the in-memory stores: a pool job's fire waits in its pool, a claim takes it under a lease token,
heartbeats keep it, complete and fail end it, a lapsed lease retries it from its checkpoint, cancel stops
it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tickwork.app.pools import PoolService
from tickwork.domain.lifecycle import attention_at
from tickwork.domain.models import Job, Run, RunStatus
from tickwork.domain.pools import ClaimRequest, CompleteRequest, FailRequest, HeartbeatRequest
from tickwork.errors import InvalidState, LeaseLost, NotFound
from tickwork.testing.world import START, World


def pools_of(world: World) -> PoolService:
    return world.pools


def pool_job(world: World, *, tenant: str = "acme", **fields: Any) -> Job:
    target = {"type": "pool", "pool": "gpu", "heartbeat_timeout_seconds": 30, **fields.pop("target", {})}
    at = START + timedelta(seconds=5)
    return world.create(
        tenant=tenant,
        name=fields.pop("name", "train"),
        schedule={"type": "once", "at": at.isoformat()},
        target=target,
        payload={"epochs": 3},
        **fields,
    )


def handed(world: World, job: Job) -> Run:
    """The job's fire, delivered once its time came: waiting in its pool."""
    world.clock.advance(seconds=5)
    notes = world.deliver()
    assert notes == ["handed to its pool"], notes
    [run] = world.runs_of(job)
    return run


def claim(
    pools: PoolService, *, tenant: str = "acme", worker: str = "w1", runs: int = 1, wait: int = 0
) -> Any:
    return pools.claim(tenant, "gpu", ClaimRequest(worker_id=worker, max_runs=runs, wait_seconds=wait))


def test_a_pool_fire_waits_in_its_pool_and_calls_nothing() -> None:
    world = World()
    job = pool_job(world)
    run = handed(world, job)
    assert (run.status, run.pool, run.attempt) == (RunStatus.ENQUEUED, "gpu", 0)
    assert world.calls == []


def test_a_claim_gets_the_run_its_payload_and_a_lease() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    [claimed] = claim(pools)
    assert claimed.payload == {"epochs": 3}
    assert claimed.checkpoint is None
    run = claimed.run
    assert (run.status, run.attempt, run.lease_owner) == (RunStatus.RUNNING, 1, "w1")
    assert run.lease_expires_at == world.clock() + timedelta(seconds=30)
    assert run.lease_token is not None
    assert world.runs.get("acme", run.run_id).status is RunStatus.RUNNING
    # Claimed once: the next claim finds nothing
    assert claim(pools) == []


def test_racing_claimers_take_each_run_once() -> None:
    world = World()
    pools = pools_of(world)
    jobs = [pool_job(world, name=f"train-{n}") for n in range(6)]
    world.clock.advance(seconds=5)
    world.deliver()
    taken = [c.run.run_id for worker in ("a", "b", "c") for c in claim(pools, worker=worker, runs=4)]
    assert sorted(taken) == sorted(world.runs_of(job)[0].run_id for job in jobs)


def test_another_tenants_workers_cannot_claim_or_touch_the_run() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    assert claim(pools, tenant="globex") == []
    [claimed] = claim(pools)
    with pytest.raises(NotFound):
        pools.heartbeat(
            "globex", claimed.run.run_id, HeartbeatRequest(lease_token=claimed.run.lease_token or "")
        )


def test_heartbeats_keep_the_lease_and_what_they_carry() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    world.clock.advance(seconds=20)
    beat = pools.heartbeat(
        "acme", claimed.run.run_id, HeartbeatRequest(lease_token=token, progress=0.5, stage="epoch 2")
    )
    assert beat.lease_expires_at == world.clock() + timedelta(seconds=30)
    assert beat.cancel_requested is False
    stored = world.runs.get("acme", claimed.run.run_id)
    assert (stored.progress, stored.stage) == (0.5, "epoch 2")


def test_a_stale_or_foreign_token_is_refused_and_changes_nothing() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    [claimed] = claim(pools)
    before = world.runs.get("acme", claimed.run.run_id)
    for token in ("1.abcdefghijklmnopqrstuv", "nonsense", ""):
        with pytest.raises(LeaseLost):
            pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest.model_construct(lease_token=token))
        with pytest.raises(LeaseLost):
            pools.complete("acme", claimed.run.run_id, CompleteRequest.model_construct(lease_token=token))
    assert world.runs.get("acme", claimed.run.run_id) == before


def test_complete_ends_the_run_succeeded_with_its_output_and_completes_the_job() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    [claimed] = claim(pools)
    done = pools.complete(
        "acme",
        claimed.run.run_id,
        CompleteRequest(lease_token=claimed.run.lease_token or "", output={"acc": 0.9}),
    )
    assert (done.status, done.output) == (RunStatus.SUCCEEDED, {"acc": 0.9})
    assert world.job(job).status.value == "COMPLETED"
    # A late complete with the same token is refused: the run ended
    with pytest.raises(LeaseLost):
        pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=claimed.run.lease_token or ""))


def test_a_failure_is_retried_by_the_policy_and_the_next_claim_resumes_from_the_checkpoint() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    handed(world, job)
    [first] = claim(pools)
    token = first.run.lease_token or ""
    pools.heartbeat("acme", first.run.run_id, HeartbeatRequest(lease_token=token, checkpoint={"epoch": 2}))
    failed = pools.fail(
        "acme", first.run.run_id, FailRequest.model_validate({"lease_token": token, "error": {"code": "oom"}})
    )
    assert failed.status is RunStatus.RETRY_WAIT
    # The retry's message comes back to a worker, which hands the run to its pool again
    world.clock.advance(seconds=2)
    assert world.deliver() == ["handed to its pool"]
    [second] = claim(pools, worker="w2")
    assert (second.run.attempt, second.checkpoint) == (2, {"epoch": 2})
    # The first worker's token no longer works
    with pytest.raises(LeaseLost):
        pools.heartbeat("acme", first.run.run_id, HeartbeatRequest(lease_token=token))


def test_a_permanent_failure_ends_the_run_failed() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    handed(world, job)
    [claimed] = claim(pools)
    body = {"lease_token": claimed.run.lease_token, "error": {"code": "bad_input"}, "retryable": False}
    assert pools.fail("acme", claimed.run.run_id, FailRequest.model_validate(body)).status is RunStatus.FAILED


def test_a_lapsed_lease_is_retried_and_the_late_worker_gets_lease_lost() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    handed(world, job)
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token, checkpoint={"step": 5}))
    world.clock.advance(seconds=29)
    assert pools.lapse(world.runs.get("acme", claimed.run.run_id)) is None  # not yet
    world.clock.advance(seconds=1)
    lapsed = pools.lapse(world.runs.get("acme", claimed.run.run_id))
    assert lapsed is not None and lapsed.status is RunStatus.RETRY_WAIT
    assert lapsed.attempts[-1].error_code == "heartbeat_timeout"
    with pytest.raises(LeaseLost):
        pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    world.clock.advance(seconds=2)
    world.deliver()
    [again] = claim(pools, worker="w2")
    assert (again.run.attempt, again.checkpoint) == (2, {"step": 5})


def test_heartbeats_never_carry_an_attempt_past_its_timeout() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, target={"timeout_seconds": 60}, retry={"max_attempts": 1})
    handed(world, job)
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    for _ in range(5):
        world.clock.advance(seconds=10)
        beat = pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token))
    assert beat.lease_expires_at == claimed.run.lease_deadline
    world.clock.advance(seconds=10)
    ended = pools.lapse(world.runs.get("acme", claimed.run.run_id))
    assert ended is not None and ended.status is RunStatus.DEAD
    assert ended.attempts[-1].error_code == "timeout"


def test_cancel_reaches_a_running_run_through_its_heartbeat_and_it_ends_cancelled() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, retry={"max_attempts": 5})
    handed(world, job)
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    assert pools.cancel("acme", claimed.run.run_id).cancel_requested is True
    assert pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token)).cancel_requested
    body = {"lease_token": token, "error": {"code": "cancelled"}}
    assert (
        pools.fail("acme", claimed.run.run_id, FailRequest.model_validate(body)).status is RunStatus.CANCELLED
    )


def test_a_waiting_run_is_cancelled_at_once_and_an_ended_one_cannot_be() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    run = handed(world, job)
    assert pools.cancel("acme", run.run_id).status is RunStatus.CANCELLED
    assert claim(pools) == []
    with pytest.raises(InvalidState):
        pools.cancel("acme", run.run_id)


def test_a_pool_run_holds_its_jobs_lane_however_long_it_waits_and_runs() -> None:
    world = World()
    pools = pools_of(world)
    rate = {"type": "rate", "every_seconds": 10, "start_at": (START + timedelta(seconds=5)).isoformat()}
    target = {"type": "pool", "pool": "gpu", "timeout_seconds": 60}
    job = world.create(name="every-10", schedule=rate, target=target)
    # Two minutes: well past the lease of the worker that handed the first fire over (60 s + its margin)
    world.run_for(120)
    statuses = world.statuses(job)
    assert statuses[0] is RunStatus.ENQUEUED
    assert set(statuses[1:]) == {RunStatus.SKIPPED}, statuses
    [claimed] = claim(pools)
    world.run_for(50)  # running, heartbeating: still holding the lane
    token = claimed.run.lease_token or ""
    pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token))
    assert world.statuses(job)[-1] is RunStatus.SKIPPED
    pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    world.run_for(10)  # the lane is free again: the next fire waits in the pool
    assert world.statuses(job)[-1] is RunStatus.ENQUEUED


def test_a_duplicate_message_of_a_run_in_its_pool_hands_nothing_over() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    run = handed(world, job)
    assert (
        world.default_worker.handle(world.message(run.run_id))
        == "in its pool: enqueued for the pool's workers"
    )
    [claimed] = claim(pools)
    assert (
        world.default_worker.handle(world.message(run.run_id))
        == "in its pool: running for the pool's workers"
    )
    assert world.runs.get("acme", run.run_id) == world.runs.get("acme", claimed.run.run_id)
    assert claimed.run.attempt == 1


def test_a_long_poll_waits_for_a_run_that_comes() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world)
    world.clock.advance(seconds=4)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        world.clock.sleep(seconds)
        if len(slept) == 2:  # the fire comes while the claim waits
            world.deliver()

    pools.sleep = sleep
    [claimed] = claim(pools, wait=20)
    assert claimed.run.job_id == job.job_id
    assert sum(slept) < 20


def test_the_sweeper_ends_a_lapsed_lease_at_its_next_tick_and_the_run_is_claimed_again() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    handed(world, job)
    [claimed] = claim(pools)
    world.run_for(29)  # within the heartbeat timeout: the sweeper leaves it
    assert world.runs.get("acme", claimed.run.run_id).status is RunStatus.RUNNING
    world.run_for(4)  # past it: ended as a retryable failure, its retry sent and handed to the pool again
    stored = world.runs.get("acme", claimed.run.run_id)
    assert stored.status is RunStatus.ENQUEUED and stored.attempt == 1
    assert stored.attempts[-1].error_code == "heartbeat_timeout"
    assert world.metrics.counts.get("PoolLeasesLapsed") == 1
    [again] = claim(pools, worker="w2")
    assert again.run.attempt == 2


def test_a_one_hour_run_heartbeating_every_20_s_costs_at_most_200_writes() -> None:
    world = World()
    pools = pools_of(world)
    job = pool_job(world, target={"timeout_seconds": 7200})
    handed(world, job)
    writes_before = world.runs.writes
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    for beat in range(180):
        world.clock.advance(seconds=20)
        pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token, progress=beat / 180))
    pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    # The claim, 180 heartbeats and the complete: one write each, nothing else
    assert world.runs.writes - writes_before == 182


def test_a_run_waiting_past_the_threshold_is_counted_once_per_threshold() -> None:
    world = World(pool_wait_alarm=timedelta(minutes=10))
    job = pool_job(world)
    run = handed(world, job)
    handed_at = world.clock()
    assert run.pool_wait_alarm_at == handed_at + timedelta(minutes=10)
    # The planner ticks (and sweeps) every minute: within the threshold nothing is counted
    for _ in range(9):
        world.clock.advance(seconds=60)
        world.tick()
    assert "PoolRunsWaitingLong" not in world.metrics.counts
    world.clock.advance(seconds=60)  # 10 minutes waited
    world.tick()
    assert world.metrics.counts["PoolRunsWaitingLong"] == 1
    assert world.metrics.timings["PoolRunOldestWaitMs"] == [600_000]
    # Looked at again one threshold later, not at every sweep; the run still waits, untouched
    stored = world.runs.get("acme", run.run_id)
    assert stored.pool_wait_alarm_at == world.clock() + timedelta(minutes=10)
    assert (stored.status, stored.attempt) == (RunStatus.ENQUEUED, 0)
    for _ in range(9):
        world.clock.advance(seconds=60)
        world.tick()
    assert world.metrics.counts["PoolRunsWaitingLong"] == 1
    world.clock.advance(seconds=60)
    world.tick()
    assert world.metrics.counts["PoolRunsWaitingLong"] == 2
    assert world.metrics.timings["PoolRunOldestWaitMs"] == [600_000, 1_200_000]
    # It can still be claimed, and then it is no longer waiting: its attention time is its lease's expiry
    [claimed] = claim(pools_of(world))
    assert claimed.run.pool_wait_alarm_at is None and claimed.run.pool_waiting_since is None
    assert attention_at(claimed.run) == claimed.run.lease_expires_at


def test_a_run_claimed_before_the_threshold_is_never_counted() -> None:
    world = World(pool_wait_alarm=timedelta(minutes=10))
    pools = pools_of(world)
    job = pool_job(world, target={"timeout_seconds": 7200})
    handed(world, job)
    world.clock.advance(seconds=599)
    world.tick()
    [claimed] = claim(pools)
    token = claimed.run.lease_token or ""
    # It runs (heartbeating) well past the threshold, then completes: no sweep counts it as waiting
    for _ in range(60):
        world.clock.advance(seconds=20)
        pools.heartbeat("acme", claimed.run.run_id, HeartbeatRequest(lease_token=token))
        world.tick()
    pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    world.clock.advance(seconds=3600)
    world.tick()
    assert "PoolRunsWaitingLong" not in world.metrics.counts
    assert "PoolRunOldestWaitMs" not in world.metrics.timings


def test_a_retry_waits_from_its_own_hand_over() -> None:
    world = World(pool_wait_alarm=timedelta(minutes=10))
    pools = pools_of(world)
    job = pool_job(world, retry={"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"})
    handed(world, job)
    world.clock.advance(seconds=540)  # waited 9 minutes, then claimed: not counted
    [claimed] = claim(pools)
    world.run_for(40)  # no heartbeat: the lease lapses, and the retry is handed to the pool again
    again = world.runs.get("acme", claimed.run.run_id)
    assert (again.status, again.attempt) == (RunStatus.ENQUEUED, 1)
    assert again.pool_waiting_since is not None and again.pool_waiting_since > claimed.run.started_at
    world.clock.advance(seconds=9 * 60)
    world.tick()
    assert "PoolRunsWaitingLong" not in world.metrics.counts  # 9 minutes since the retry's hand-over
    world.clock.advance(seconds=60)
    world.tick()
    assert world.metrics.counts["PoolRunsWaitingLong"] == 1
