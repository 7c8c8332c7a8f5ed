"""The execution engine under moto: planner, run queue, worker leases, retries, dead letters, sweeper.

Time is a fake clock; the webhook target is a real HTTP server on loopback.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from tickwork.domain.models import RunStatus
from tickwork.domain.timeutil import to_rfc3339

from tests.integration.conftest import START, Engine

NO_JITTER = {"jitter": "none"}


def test_one_time_job_runs_at_its_time_and_never_early(engine: Engine) -> None:
    # Given a one-time job due in ten minutes
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


def test_six_field_cron_fires_every_two_seconds(engine: Engine) -> None:
    job = engine.create(
        schedule={"type": "cron", "expression": "*/2 * * * * *"}, target=engine.http("/cron")
    ).job
    for _ in range(3):
        engine.clock.advance(seconds=2)
        engine.tick()
        engine.drain()
    done = [run for run in engine.runs_of("acme", job.job_id) if run.status is RunStatus.SUCCEEDED]
    assert [run.scheduled_for for run in sorted(done, key=lambda run: run.scheduled_for)] == [
        START + timedelta(seconds=2 * i) for i in range(4)
    ]
    assert all(run.started_at is not None and run.started_at >= run.scheduled_for for run in done)
    assert all(run.lag_ms is not None for run in done)


def test_two_failures_then_success_give_three_attempts_with_one_key(engine: Engine) -> None:
    # Given a target that answers 503 twice, then 200, and a policy with long, unjittered delays
    engine.receiver.script["/flaky"] = [503, 503, 200]
    retry = {"max_attempts": 5, "initial_delay_seconds": 1000, "multiplier": 2.0, **NO_JITTER}
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/flaky"), retry=retry
    ).job
    engine.tick()
    engine.drain()
    run_id = engine.runs_of("acme", job.job_id)[0].run_id
    # Then after the first failure the run waits exactly the policy's delay, for the sweeper
    waiting = engine.run("acme", run_id)
    assert waiting.status is RunStatus.RETRY_WAIT
    assert waiting.attempts[0].finished_at is not None
    assert waiting.retry_at == waiting.attempts[0].finished_at + timedelta(seconds=1000)
    engine.clock.advance(seconds=1000)
    engine.tick()
    engine.drain()
    waiting = engine.run("acme", run_id)
    assert waiting.attempts[1].finished_at is not None
    assert waiting.retry_at == waiting.attempts[1].finished_at + timedelta(seconds=2000)
    engine.clock.advance(seconds=2000)
    engine.tick()
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
    engine.tick()
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.FAILED
    assert run.attempt == 1
    assert run.attempts[0].outcome == "permanent_error"


def test_an_always_503_target_ends_dead_with_one_dead_letter(engine: Engine) -> None:
    engine.receiver.script["/down"] = [503]
    retry = {"max_attempts": 3, "initial_delay_seconds": 0, **NO_JITTER}
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/down"), retry=retry
    ).job
    engine.tick()
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.DEAD
    assert run.attempt == 3
    assert len(engine.receiver.for_path("/down")) == 3
    (letter,) = engine.dead_letters()
    assert letter["run_id"] == run.run_id
    assert letter["reason"] == "max_attempts"
    assert letter["last_error"]["status_code"] == 503


def test_the_same_message_five_times_two_at_once_gives_one_attempt(engine: Engine) -> None:
    job = engine.create(schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/dup")).job
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    message = engine.message_for(run)
    # Two workers at once, then three more deliveries
    workers = [engine.executor(f"w{i}") for i in range(5)]
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
    engine.drain()  # and the original message too
    final = engine.run("acme", run.run_id)
    assert final.status is RunStatus.SUCCEEDED
    assert final.attempt == 1
    assert len(engine.receiver.for_path("/dup")) == 1
    assert (
        engine.metrics.counts.get("DuplicateDeliveriesAbsorbed", 0)
        + engine.metrics.counts.get("LeaseConflicts", 0)
        >= 5
    )


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
    assert [len(engine.runs_of("acme", job.job_id)) for job in jobs] == [1] * 5
    engine.drain()
    assert len(engine.receiver.for_path("/race")) == 5


def test_a_worker_that_dies_after_the_lease_is_recovered_by_the_sweeper(engine: Engine) -> None:
    job = engine.create(schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/crash")).job
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    # Given a worker that took the lease and died before calling the target
    tenant = engine.runtime.tenants.get("acme")
    engine.runtime.leases.take(
        run,
        owner="dead-worker",
        now=engine.clock(),
        lease_for=timedelta(seconds=35),
        max_in_flight=tenant.max_in_flight,
    )
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    # When the lease expires and the sweeper runs
    engine.clock.advance(seconds=36)
    report = engine.tick()
    engine.drain()
    # Then a second attempt succeeds
    final = engine.run("acme", run.run_id)
    assert report.sweep.requeued == [run.run_id]
    assert final.status is RunStatus.SUCCEEDED
    assert [attempt.outcome for attempt in final.attempts] == ["abandoned", "succeeded"]
    assert len(engine.receiver.for_path("/crash")) == 1
    assert engine.runtime.tenants.get("acme") is not None


def test_at_most_once_crash_is_abandoned_with_no_second_attempt(engine: Engine) -> None:
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()},
        target=engine.http("/amo"),
        delivery="at_most_once",
    ).job
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    engine.runtime.leases.take(
        run, owner="dead-worker", now=engine.clock(), lease_for=timedelta(seconds=35), max_in_flight=100
    )
    engine.clock.advance(seconds=36)
    engine.drain()  # the original message finds an expired at-most-once lease: left to the sweeper
    report = engine.tick()
    engine.drain()
    final = engine.run("acme", run.run_id)
    assert report.sweep.abandoned == [run.run_id]
    assert final.status is RunStatus.ABANDONED
    assert final.attempt == 1
    assert engine.receiver.for_path("/amo") == []


def test_lost_send_is_repaired_by_the_sweeper(engine: Engine) -> None:
    # Given the send to SQS fails right after the run was put
    calls = {"failed": 0}

    def fail_send(**kwargs: Any) -> None:
        calls["failed"] += 1
        raise ConnectionResetError("injected: send lost")

    job = engine.create(
        schedule={"type": "once", "at": (START + timedelta(seconds=10)).isoformat()},
        target=engine.http("/lost"),
    )
    engine.clock.advance(seconds=10)
    engine.sqs.meta.events.register_first("before-call.sqs.SendMessageBatch", fail_send)
    engine.tick()
    engine.sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", fail_send)
    assert calls["failed"] == 1
    (run,) = engine.runs_of("acme", job.job.job_id)
    assert run.status is RunStatus.PLANNED
    # When the sweeper runs after the send grace
    engine.clock.advance(seconds=31)
    engine.tick()
    engine.drain()
    # Then the run was sent and ran once
    (run,) = engine.runs_of("acme", job.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert len(engine.receiver.for_path("/lost")) == 1


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
    engine.drain()
    for policy, job_id in outcomes.items():
        runs = [run for run in engine.runs_of("acme", job_id) if run.scheduled_for < engine.clock()]
        statuses = sorted(run.status.value for run in runs)
        if policy == "fire_once":
            assert statuses == ["MISSED"] * 9 + ["SUCCEEDED"], policy
        elif policy == "backfill":
            assert statuses == ["SUCCEEDED"] * 10, policy
        else:
            assert statuses == ["MISSED"] * 10, policy


def test_overlap_skip_queue_and_allow(engine: Engine) -> None:
    for policy in ("skip", "queue", "allow"):
        job = engine.create(
            schedule={
                "type": "rate",
                "every_seconds": 60,
                "start_at": (engine.clock() + timedelta(minutes=1)).isoformat(),
            },
            target=engine.http(f"/overlap-{policy}"),
            overlap_policy=policy,
        ).job
        engine.clock.advance(minutes=1)
        engine.tick()
        (first,) = engine.runs_of("acme", job.job_id)
        # Given the first fire is RUNNING (a worker holds its lease) when the second comes due
        engine.runtime.leases.take(
            first, owner="busy", now=engine.clock(), lease_for=timedelta(minutes=5), max_in_flight=100
        )
        engine.clock.advance(minutes=1)
        engine.tick()
        second = max(engine.runs_of("acme", job.job_id), key=lambda run: run.scheduled_for)
        # When the worker gets the second fire
        outcome = engine.executor().handle(engine.message_for(second))
        second_now = engine.run("acme", second.run_id)
        # Then skip records it SKIPPED, queue holds it back, allow runs it alongside
        if policy == "skip":
            assert second_now.status is RunStatus.SKIPPED
            assert second_now.reason == "overlap"
        elif policy == "queue":
            assert not outcome.done
            assert second_now.status is RunStatus.ENQUEUED
            # and once the first run ends, the held fire runs
            running = engine.run("acme", first.run_id)
            finished = running.attempts[-1].model_copy(
                update={"finished_at": engine.clock(), "outcome": "succeeded"}
            )
            assert engine.runtime.leases.finish(
                running, status=RunStatus.SUCCEEDED, attempt=finished, now=engine.clock()
            )
            assert engine.executor().handle(engine.message_for(second)).done
            assert engine.run("acme", second.run_id).status is RunStatus.SUCCEEDED
        else:
            assert second_now.status is RunStatus.SUCCEEDED
        engine.runtime.service.cancel_job("acme", job.job_id, engine.clock())


def test_tenant_in_flight_limit_is_never_exceeded(engine: Engine, dynamodb: Any) -> None:
    from tests.conftest import seed_tenant

    seed_tenant(dynamodb, "tiny", "tw_tiny", max_in_flight=2)
    in_flight, peak = 0, 0
    lock = threading.Lock()
    gate = threading.Event()
    original = engine.runtime.execute

    def slow_execute(job: Any, run: Any, tenant: Any) -> Any:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        gate.wait(0.2)
        try:
            return original(job, run, tenant)
        finally:
            with lock:
                in_flight -= 1

    jobs = [
        engine.create(
            "tiny", schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/limit")
        ).job
        for _ in range(10)
    ]
    runs = [engine.runs_of("tiny", job.job_id)[0] for job in jobs]
    executor = engine.executor()
    executor.execute = slow_execute
    pending = list(runs)
    for _ in range(20):
        if not pending:
            break
        results: dict[str, bool] = {}

        def work(run: Any, results: dict[str, bool] = results) -> None:
            results[run.run_id] = executor.handle(engine.message_for(run)).done

        threads = [threading.Thread(target=work, args=(run,)) for run in pending]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pending = [run for run in pending if not results[run.run_id]]
    assert peak <= 2
    assert all(engine.run("tiny", run.run_id).status is RunStatus.SUCCEEDED for run in runs)


def test_webhook_carries_the_envelope_and_a_verifiable_signature(engine: Engine) -> None:
    from tickwork.targets import verify_signature

    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http("/signed"), payload={"n": 1}
    ).job
    engine.tick()
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
    assert request.headers["X-Tickwork-Fencing-Token"] == "1"


def test_deployed_mode_refuses_private_webhook_targets_and_records_why(engine: Engine) -> None:
    from tickwork.runtime import build_runtime

    # Given jobs stored with private targets (possible only through names that resolve privately)
    urls = [
        "http://169.254.169.254/latest",
        "http://10.0.0.1/hook",
        f"http://localhost:{engine.receiver.server.server_address[1]}/private",
    ]
    jobs = [
        engine.create(
            schedule={"type": "once", "at": START.isoformat()}, target={"type": "http", "url": url}
        ).job
        for url in urls
    ]
    # When a worker in deployed mode (private targets refused) runs them
    deployed = build_runtime(
        engine.runtime.settings.model_copy(update={"allow_private_targets": False}),
        dynamodb=engine.dynamodb,
        sqs=engine.sqs,
        metrics=engine.metrics,
    )
    executor = deployed.executor(clock=engine.clock, sleep=engine.clock.sleep)
    for job in jobs:
        (run,) = engine.runs_of("acme", job.job_id)
        executor.handle(engine.message_for(run))
    # Then each run FAILED on its first attempt with the reason, and nothing reached the receiver
    for job in jobs:
        (run,) = engine.runs_of("acme", job.job_id)
        assert run.status is RunStatus.FAILED
        assert run.attempt == 1
        assert run.attempts[0].error_code == "target_not_allowed"
    assert engine.receiver.for_path("/private") == []
