"""The engine against DynamoDB and SQS (moto): planner, run queue, lanes, worker leases, retries, dead
letters, sweeper, and the API's view of runs in flight.

Time is a fake clock (moto's SQS follows it); the webhook target is a real HTTP server on loopback. The
policies themselves are covered on in-memory fakes (``tests/engine``); here the adapters' conditional writes
carry them.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from tickwork.domain.models import RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.timeutil import to_rfc3339
from tickwork.targets import TargetResult

from tests.conftest import TOKENS, seed_tenant
from tests.integration.conftest import START, Engine
from tests.support.engine import WorkerDied

NO_JITTER = {"jitter": "none"}


def test_one_time_job_runs_at_its_time_and_never_early(engine: Engine) -> None:
    # Given a one-time job due in ten minutes (past the API's horizon: the planner sends it)
    fire_at = START + timedelta(minutes=10)
    job = engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/once")).job
    # When the planner ticks half a second before its time and the worker gets the message at once
    engine.clock.advance(minutes=9, seconds=59.5)
    engine.tick()
    engine.drain()
    # Then the worker waited out the remainder, and the run started at its time, with its lag recorded
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert engine.clock.sleeps == [0.5]
    assert run.started_at is not None and run.started_at >= run.scheduled_for == fire_at
    assert run.lag_ms == 0
    assert len(engine.receiver.for_path("/once")) == 1
    assert engine.runtime.jobs.get("acme", job.job_id).status.value == "COMPLETED"


def test_a_one_time_job_whose_run_ends_before_the_planner_moves_its_cursor_completes(engine: Engine) -> None:
    # Given a one-time job the planner sends, whose run ends before the planner writes the job's cursor
    fire_at = START + timedelta(minutes=10)
    job = engine.create(
        schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/quick")
    ).job
    jobs = engine.runtime.jobs
    advance_cursor = jobs.advance_cursor

    def run_first(planned: Any, next_fire_at: Any, last_fire_at: Any) -> bool:
        engine.clock.advance(seconds=1)
        assert engine.drain() == 1
        return bool(advance_cursor(planned, next_fire_at, last_fire_at))

    jobs.advance_cursor = run_first  # type: ignore[method-assign,assignment]
    engine.clock.advance(minutes=9, seconds=59.5)
    engine.tick()
    # Then the job completed all the same, and gave its place in the tenant's job count back
    assert [run.status for run in engine.runs_of("acme", job.job_id)] == [RunStatus.SUCCEEDED]
    assert jobs.get("acme", job.job_id).status.value == "COMPLETED"


def test_six_field_cron_fires_every_two_seconds(engine: Engine) -> None:
    job = engine.create(
        schedule={"type": "cron", "expression": "*/2 * * * * *"}, target=engine.http("/cron")
    ).job
    for _ in range(6):
        engine.clock.advance(seconds=1)
        engine.tick()
        engine.drain()
    done = [run for run in engine.runs_of("acme", job.job_id) if run.status is RunStatus.SUCCEEDED]
    assert sorted(run.scheduled_for for run in done) == [START + timedelta(seconds=2 * i) for i in range(4)]
    assert all(run.started_at is not None and run.started_at >= run.scheduled_for for run in done)


def test_two_failures_then_success_give_three_attempts_with_one_key(engine: Engine) -> None:
    # Given a target that answers 503 twice, then 200, and a policy with delays past SQS's 15 minutes
    engine.receiver.script["/flaky"] = [503, 503, 200]
    retry = {"max_attempts": 5, "initial_delay_seconds": 1000, "multiplier": 2.0, **NO_JITTER}
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/flaky"), retry=retry
    ).job
    engine.drain()
    run_id = engine.runs_of("acme", job.job_id)[0].run_id
    # Then after each failure the run waits exactly the policy's delay, and the sweeper sends its retry
    for delay in (1000, 2000):
        waiting = engine.run("acme", run_id)
        assert waiting.status is RunStatus.RETRY_WAIT
        assert waiting.retry_at == waiting.attempts[-1].finished_at + timedelta(seconds=delay)  # type: ignore[operator]
        engine.clock.advance(seconds=delay - 100)
        engine.tick()  # the sweep sends it, two minutes ahead, delayed to its time
        engine.clock.advance(seconds=100)
        engine.drain()
    # When it finally succeeds, there were three attempts on one run, all with the run id as their key
    run = engine.run("acme", run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert [attempt.outcome for attempt in run.attempts] == [
        "retryable_error",
        "retryable_error",
        "succeeded",
    ]
    requests = engine.receiver.for_path("/flaky")
    assert [request.headers["Idempotency-Key"] for request in requests] == [run_id] * 3
    assert [request.headers["X-Tickwork-Attempt"] for request in requests] == ["1", "2", "3"]


def test_a_404_fails_after_one_attempt(engine: Engine) -> None:
    engine.receiver.script["/gone"] = [404]
    job = engine.create(schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/gone")).job
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert (run.status, run.attempt, run.attempts[0].outcome) == (RunStatus.FAILED, 1, "permanent_error")


def test_an_always_503_target_ends_dead_with_one_dead_letter(engine: Engine) -> None:
    engine.receiver.script["/down"] = [503]
    retry = {"max_attempts": 3, "initial_delay_seconds": 0, **NO_JITTER}
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/down"), retry=retry
    ).job
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert (run.status, run.attempt) == (RunStatus.DEAD, 3)
    assert len(engine.receiver.for_path("/down")) == 3
    (letter,) = engine.dead_letters()
    assert (letter["run_id"], letter["reason"], letter["last_error"]["status_code"]) == (
        run.run_id,
        "max_attempts",
        503,
    )


def test_the_same_message_five_times_two_at_once_gives_one_attempt(engine: Engine) -> None:
    job = engine.create(schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/dup")).job
    (run,) = engine.runs_of("acme", job.job_id)
    message = engine.message_for(run)
    workers = [engine.worker(f"w{i}") for i in range(5)]
    barrier = threading.Barrier(2)

    def concurrent(index: int) -> None:
        barrier.wait()
        workers[index].handle(message)

    threads = [threading.Thread(target=concurrent, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers[2:]:
        worker.handle(message)
    engine.clock.advance(seconds=60)
    engine.drain()  # the original message, and the copies sent back for after the lease
    final = engine.run("acme", run.run_id)
    assert (final.status, final.attempt) == (RunStatus.SUCCEEDED, 1)
    assert len(engine.receiver.for_path("/dup")) == 1


def test_two_planners_at_once_give_one_run_per_fire(engine: Engine) -> None:
    fire_at = START + timedelta(minutes=10)
    jobs = [
        engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/race")).job
        for _ in range(5)
    ]
    engine.clock.advance(minutes=10)
    barrier = threading.Barrier(2)

    def planner() -> None:
        barrier.wait()
        engine.tick()

    threads = [threading.Thread(target=planner) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.drain()
    assert [len(engine.runs_of("acme", job.job_id)) for job in jobs] == [1] * 5
    assert len(engine.receiver.for_path("/race")) == 5


@pytest.mark.parametrize(
    ("delivery", "status", "calls"), [("at_least_once", "SUCCEEDED", 1), ("at_most_once", "ABANDONED", 0)]
)
def test_a_worker_that_dies_leaves_its_message_to_take_the_run_over(
    engine: Engine, delivery: str, status: str, calls: int
) -> None:
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/crash"), delivery=delivery
    ).job

    def die(job: Any, run: Any, tenant: Any) -> TargetResult:
        raise WorkerDied

    # Given a worker that took the lease and died before the target saw anything
    with pytest.raises(WorkerDied):
        engine.drain(worker=engine.runtime.worker(clock=engine.clock, sleep=engine.clock.sleep, execute=die))
    # When the message comes back (visibility 30 s, lease 35 s), then again after the lease
    for _ in range(4):
        engine.clock.advance(seconds=30)
        engine.drain()
    # Then the run was taken over (or abandoned), the lost attempt recorded
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status.value == status
    assert run.attempts[0].error_code == "lease_expired"
    assert len(engine.receiver.for_path("/crash")) == calls


def test_a_failed_send_leaves_the_cursor_for_the_next_tick(engine: Engine) -> None:
    calls = {"failed": 0}

    def fail_send(**kwargs: Any) -> None:
        calls["failed"] += 1
        raise ConnectionResetError("injected: send lost")

    job = engine.create(
        schedule={"type": "once", "at": (START + timedelta(minutes=5)).isoformat()},
        target=engine.http("/lost"),
    ).job
    engine.clock.advance(minutes=4, seconds=55)
    engine.sqs.meta.events.register_first("before-call.sqs.SendMessageBatch", fail_send)
    engine.tick()
    engine.sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", fail_send)
    assert calls["failed"] == 1
    assert engine.runtime.jobs.get("acme", job.job_id).next_fire_at == START + timedelta(minutes=5)
    engine.clock.advance(seconds=5)
    engine.tick()
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert len(engine.receiver.for_path("/lost")) == 1


def test_a_manual_run_whose_send_failed_is_sent_by_the_sweeper(engine: Engine) -> None:
    job = engine.create(
        schedule={"type": "cron", "expression": "0 0 1 1 *"}, target=engine.http("/manual")
    ).job

    def fail_send(**kwargs: Any) -> None:
        raise ConnectionResetError("injected: send lost")

    engine.sqs.meta.events.register_first("before-call.sqs.SendMessageBatch", fail_send)
    run = engine.runtime.service.trigger_job("acme", job.job_id, idempotency_key="k", now=engine.clock())
    engine.sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", fail_send)
    assert engine.run("acme", run.run_id).status is RunStatus.PLANNED
    engine.clock.advance(seconds=31)
    assert engine.tick().swept == 1
    engine.drain()
    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert engine.tick().swept == 0  # nothing left to repair


def test_paused_across_ten_fires_then_resumed(engine: Engine) -> None:
    outcomes = {}
    for policy in ("fire_once", "backfill", "skip"):
        job = engine.create(
            schedule={
                "type": "rate",
                "every_seconds": 60,
                "start_at": (START + timedelta(minutes=20)).isoformat(),
            },
            target=engine.http(f"/misfire-{policy}"),
            misfire_policy=policy,
            misfire_grace_seconds=0,
        ).job
        engine.runtime.service.pause_job(
            "acme", job.job_id, reason="maintenance", actor="test", now=engine.clock()
        )
        outcomes[policy] = job.job_id
    # Ten fires (20..29 min) pass while paused; resume just after the tenth
    engine.clock.advance(minutes=29, seconds=30)
    for job_id in outcomes.values():
        engine.runtime.service.resume_job("acme", job_id, engine.clock())
    for _ in range(10):
        engine.drain()
        engine.clock.advance(seconds=1)
    for policy, job_id in outcomes.items():
        runs = [
            run for run in engine.runs_of("acme", job_id) if run.scheduled_for < START + timedelta(minutes=30)
        ]
        statuses = sorted(run.status.value for run in runs)
        expected = {"fire_once": ["MISSED"] * 9 + ["SUCCEEDED"], "backfill": ["SUCCEEDED"] * 10}
        assert statuses == expected.get(policy, ["MISSED"] * 10), policy


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_overlap_holds_under_racing_workers_and_duplicate_deliveries(engine: Engine, policy: str) -> None:
    # Given a job firing every second whose calls last until released, and every message delivered twice
    job = engine.create(
        schedule={"type": "rate", "every_seconds": 1}, target=engine.http("/slow"), overlap_policy=policy
    ).job
    in_flight, peak, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def slow(job: Any, run: Any, tenant: Any) -> TargetResult:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            release.wait(10)
            return engine.runtime.execute(job, run, tenant)
        finally:
            with lock:
                in_flight -= 1

    # When each second's fire reaches two workers at once while the earlier fires' calls are still going
    threads: list[threading.Thread] = []
    for second in range(1, 5):
        engine.clock.advance(seconds=1)
        engine.tick()
        started: list[threading.Thread] = []

        def to_two_workers(
            record: Any, second: int = second, started: list[threading.Thread] = started
        ) -> str:
            body = RunMessage.model_validate_json(record.body)
            for copy in range(2):
                worker = engine.runtime.worker(
                    clock=engine.clock, sleep=engine.clock.sleep, execute=slow, worker_id=f"w{second}-{copy}"
                )
                thread = threading.Thread(target=worker.handle, args=(body,))
                thread.start()
                started.append(thread)
            return "handed to two workers"

        engine.pump(to_two_workers).once()  # the batch is deleted once every record is handed out
        time.sleep(0.3)  # every racer has claimed (and is in its call) or given up
        threads.extend(started)
    release.set()
    for thread in threads:
        thread.join()
    # Then no fire ran twice, and no two ran at once unless the policy allows it
    calls = engine.receiver.for_path("/slow")
    run_ids = [request.headers["Idempotency-Key"] for request in calls]
    assert calls and len(run_ids) == len(set(run_ids))
    statuses = {run.status for run in engine.runs_of("acme", job.job_id)}
    if policy == "allow":
        assert peak >= 2  # the race is real: fires do run side by side when the policy allows it
    else:
        assert peak == 1
    if policy == "skip":
        assert RunStatus.SKIPPED in statuses


def test_tenant_in_flight_limit_is_never_exceeded(engine: Engine, dynamodb: Any) -> None:
    seed_tenant(dynamodb, "tiny", "tw_tiny", max_in_flight=2)
    in_flight, peak, lock = 0, 0, threading.Lock()
    gate = threading.Event()

    def slow(job: Any, run: Any, tenant: Any) -> TargetResult:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        gate.wait(0.2)
        try:
            return engine.runtime.execute(job, run, tenant)
        finally:
            with lock:
                in_flight -= 1

    jobs = [
        engine.create(
            "tiny",
            schedule={"type": "once", "at": START.isoformat()},
            target=engine.http("/limit"),
            overlap_policy="allow",
        ).job
        for _ in range(10)
    ]
    for _ in range(20):
        threads: list[threading.Thread] = []

        def to_a_worker_each(record: Any, threads: list[threading.Thread] = threads) -> str:
            worker = engine.runtime.worker(clock=engine.clock, sleep=engine.clock.sleep, execute=slow)
            body = RunMessage.model_validate_json(record.body)
            threads.append(threading.Thread(target=worker.handle, args=(body,)))
            return "handed to a worker"

        if not engine.pump(to_a_worker_each).once():  # the batch is deleted before its workers start
            engine.clock.advance(seconds=2)
            continue
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert peak <= 2
    assert all(engine.runs_of("tiny", job.job_id)[0].status is RunStatus.SUCCEEDED for job in jobs)


def test_webhook_carries_the_envelope_and_a_verifiable_signature(engine: Engine) -> None:
    from tickwork.targets import verify_signature

    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/signed"), payload={"n": 1}
    ).job
    engine.drain()
    (request,) = engine.receiver.for_path("/signed")
    (run,) = engine.runs_of("acme", job.job_id)
    assert request.json() == {
        "job_id": job.job_id,
        "run_id": run.run_id,
        "scheduled_for": to_rfc3339(run.scheduled_for),
        "attempt": 1,
        "payload": {"n": 1},
    }
    secret = engine.runtime.tenants.get("acme").signing_secret
    signature = request.headers["X-Tickwork-Signature"]
    timestamp = int(signature.split(",")[0].removeprefix("t="))
    assert verify_signature(secret, signature, request.body, now_epoch=timestamp)
    assert not verify_signature(secret, signature, request.body + b" ", now_epoch=timestamp)
    assert request.headers["X-Tickwork-Fencing-Token"] == str(run.fencing_token)


def test_runs_in_flight_show_in_the_api_before_they_are_stored(engine: Engine) -> None:
    job = engine.create(schedule={"type": "rate", "every_seconds": 10}, target=engine.http("/shown")).job
    first = scheduled_run_id(job.job_id, START + timedelta(seconds=10))
    assert engine.run("acme", first).status is RunStatus.ENQUEUED
    listed = {run.run_id: run.status for run in engine.runs_of("acme", job.job_id)}
    assert listed[first] is RunStatus.ENQUEUED and len(listed) == 6  # the fires sent within the minute
    engine.clock.advance(seconds=10)
    engine.drain()
    assert engine.run("acme", first).status is RunStatus.SUCCEEDED
    with pytest.raises(Exception, match="not found"):
        engine.run("acme", scheduled_run_id(job.job_id, START + timedelta(hours=2)))


def test_lowering_the_due_shard_count_strands_no_job(engine: Engine) -> None:
    from tickwork import tables
    from tickwork.runtime import build_runtime

    # Given jobs written while there were two due shards (due in five minutes, and in a day), and a planner
    # that ran with two
    soon, later = START + timedelta(minutes=5), START + timedelta(days=1)
    jobs = {
        fire_at: [
            engine.create(
                schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/shard")
            ).job
            for _ in range(8)
        ]
        for fire_at in (soon, later)
    }
    stray = [job for job in jobs[soon] + jobs[later] if tables.stable_shard(job.job_id, 2) == 1]
    assert stray, "some jobs are in shard 1"
    engine.tick()
    # When the count is lowered to one
    lowered = build_runtime(
        engine.runtime.settings.model_copy(update={"due_shards": 1}),
        dynamodb=engine.dynamodb,
        sqs=engine.sqs,
        metrics=engine.metrics,
    )

    def tick() -> Any:
        return lowered.planner_tick.tick(engine.clock(), [0])

    engine.clock.advance(minutes=4, seconds=55)
    report = tick()
    # Then the planner plans the stray shard's due jobs and moves the others home
    assert report.stray_shards == [1]
    assert report.due_jobs == 8
    engine.clock.advance(seconds=5)
    assert tick().stray_shards == [1]  # now empty: forgotten
    assert tick().stray_shards == []
    for job in jobs[later]:
        item = engine.dynamodb.get_item(
            TableName=tables.JOBS.default_name,
            Key={
                tables.JOBS_PK: {"S": tables.job_key("acme", job.job_id)},
                tables.JOBS_SK: {"S": tables.JOB_SK},
            },
        )["Item"]
        assert item[tables.DUE_SHARD]["N"] == "0"
    engine.drain()
    engine.clock.advance(days=1)
    assert tick().due_jobs == 8
    engine.drain()
    # And every job fired once, at its time
    for fire_at, created in jobs.items():
        for job in created:
            (run,) = engine.runs_of("acme", job.job_id)
            assert run.status is RunStatus.SUCCEEDED
            assert run.scheduled_for == fire_at
    assert len(engine.receiver.for_path("/shard")) == 16


def _job_count(engine: Engine, tenant: str) -> int:
    from tickwork import tables

    item = engine.dynamodb.get_item(
        TableName=tables.TENANTS.default_name,
        Key={tables.TENANTS_PK: {"S": tables.tenant_key(tenant)}},
        ConsistentRead=True,
    )["Item"]
    return int(item.get("job_count", {"N": "0"})["N"])


def test_a_completed_one_time_job_repointed_runs_again_with_its_quota_slot_taken_and_given_back(
    engine: Engine,
) -> None:
    from tickwork.domain.models import JobPatch, JobStatus

    # Given a one-time job that ran and completed (its quota slot given back)
    first = START + timedelta(minutes=10)
    job = engine.create(schedule={"type": "once", "at": first.isoformat()}, target=engine.http("/again")).job
    engine.clock.advance(minutes=10)
    engine.tick()
    engine.drain()
    jobs = engine.runtime.jobs
    assert jobs.get("acme", job.job_id).status is JobStatus.COMPLETED
    assert _job_count(engine, "acme") == 0
    # When it is given a new time (and a new name)
    again = first + timedelta(minutes=10)
    patch = JobPatch(name="again-later", schedule={"type": "once", "at": again.isoformat()})
    details = engine.runtime.service.update_job("acme", job.job_id, patch, engine.clock())
    # Then it is ACTIVE, counted, found by the planner, run at its new time, and completed again
    assert details.job.status is JobStatus.ACTIVE and details.next_fire_at == again
    assert _job_count(engine, "acme") == 1
    engine.clock.advance(minutes=10)
    engine.tick()
    engine.drain()
    runs = sorted(engine.runs_of("acme", job.job_id), key=lambda run: run.scheduled_for)
    assert [(run.scheduled_for, run.status) for run in runs] == [
        (first, RunStatus.SUCCEEDED),
        (again, RunStatus.SUCCEEDED),
    ]
    assert len(engine.receiver.for_path("/again")) == 2
    assert jobs.get("acme", job.job_id).status is JobStatus.COMPLETED
    assert _job_count(engine, "acme") == 0


def test_reopening_a_completed_job_past_the_tenants_limit_is_refused_and_changes_nothing(
    engine: Engine,
) -> None:
    from tickwork.domain.models import JobPatch, JobStatus
    from tickwork.errors import QuotaExceeded

    target = engine.http("/limit")
    job = engine.create(
        schedule={"type": "once", "at": (START + timedelta(minutes=10)).isoformat()}, target=target
    ).job
    engine.clock.advance(minutes=10)
    engine.tick()
    engine.drain()
    seed_tenant(engine.dynamodb, "acme", TOKENS["acme"], max_jobs=1)
    engine.create(
        name="holder", schedule={"type": "once", "at": (START + timedelta(days=1)).isoformat()}, target=target
    )
    before = engine.runtime.jobs.get("acme", job.job_id)
    patch = JobPatch(schedule={"type": "once", "at": (START + timedelta(hours=1)).isoformat()})
    with pytest.raises(QuotaExceeded):
        engine.runtime.service.update_job("acme", job.job_id, patch, engine.clock())
    after = engine.runtime.jobs.get("acme", job.job_id)
    assert after == before and after.status is JobStatus.COMPLETED
    assert _job_count(engine, "acme") == 1
