"""More of the engine: manual runs, cancel, lost leases, malformed messages, shards, the per-tick cap."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from tickwork.domain.models import Run, RunStatus

from tests.integration.conftest import START, Engine
from tests.support.apigw import load_event
from tests.support.engine import deliver


def once_now(engine: Engine, path: str, **spec: Any) -> Any:
    return engine.create(
        schedule={"type": "once", "at": START.isoformat()}, target=engine.http(path), **spec
    ).job


def test_trigger_enqueues_a_manual_run_at_once(engine: Engine) -> None:
    job = engine.create(
        schedule={"type": "cron", "expression": "0 0 1 1 *"}, target=engine.http("/manual")
    ).job
    run = engine.runtime.service.trigger_job("acme", job.job_id, idempotency_key="k", now=engine.clock())
    assert run.status is RunStatus.ENQUEUED
    engine.drain()
    final = engine.run("acme", run.run_id)
    assert final.status is RunStatus.SUCCEEDED
    assert final.trigger == "manual"
    (request,) = engine.receiver.for_path("/manual")
    assert request.headers["Idempotency-Key"] == run.run_id


def test_retry_of_a_dead_run_is_a_new_attempt_with_the_same_key(engine: Engine) -> None:
    engine.receiver.script["/later"] = [503, 200]
    job = once_now(engine, "/later", retry={"max_attempts": 1})
    engine.tick()
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.DEAD
    again = engine.runtime.service.retry_run("acme", run.run_id, engine.clock())
    assert again.status is RunStatus.ENQUEUED
    engine.drain()
    final = engine.run("acme", run.run_id)
    assert final.status is RunStatus.SUCCEEDED
    assert final.attempt == 2
    assert final.manual_retries == 1
    assert [r.headers["Idempotency-Key"] for r in engine.receiver.for_path("/later")] == [run.run_id] * 2


def test_cancel_before_the_worker_runs_it(engine: Engine) -> None:
    job = once_now(engine, "/cancelled")
    engine.tick()
    engine.runtime.service.cancel_job("acme", job.job_id, engine.clock())
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.CANCELLED
    assert engine.receiver.for_path("/cancelled") == []


def test_a_paused_job_drops_its_planned_runs_as_missed(engine: Engine) -> None:
    job = once_now(engine, "/paused")
    engine.tick()
    engine.runtime.service.pause_job("acme", job.job_id, reason="hold", actor="test", now=engine.clock())
    engine.drain()
    (run,) = engine.runs_of("acme", job.job_id)
    assert (run.status, run.reason) == (RunStatus.MISSED, "job_paused")
    assert engine.receiver.for_path("/paused") == []


def test_a_worker_that_lost_its_lease_does_not_record_over_the_newer_attempt(engine: Engine) -> None:
    job = once_now(engine, "/slow")
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    first = engine.executor("first")
    original = first.execute
    second_result: dict[str, Any] = {}

    def stalls_until_taken_over(job_: Any, leased: Run, tenant: Any) -> Any:
        # While the first worker is in its call, its lease runs out and another worker takes over.
        engine.clock.advance(minutes=5)
        engine.tick()  # the sweeper requeues the expired lease
        second_result["outcome"] = engine.executor("second").handle(engine.message_for(leased))
        return original(job_, leased, tenant)

    first.execute = stalls_until_taken_over
    first.handle(engine.message_for(run))
    final = engine.run("acme", run.run_id)
    assert final.status is RunStatus.SUCCEEDED
    assert final.attempt == 2
    assert final.attempts[-1].worker_id == "second"
    assert final.attempts[0].outcome == "abandoned"
    assert engine.metrics.counts["LeaseConflicts"] >= 1


def test_the_heartbeat_extends_a_held_lease_only(engine: Engine) -> None:
    job = once_now(engine, "/beat")
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    leased = engine.runtime.leases.take(
        run, owner="w", now=engine.clock(), lease_for=timedelta(seconds=40), max_in_flight=10
    )
    assert engine.runtime.leases.extend(leased, engine.clock() + timedelta(minutes=2))
    assert engine.run("acme", run.run_id).lease_expires_at == engine.clock() + timedelta(minutes=2)
    stale = leased.model_copy(update={"fencing_token": leased.fencing_token - 1})
    assert not engine.runtime.leases.extend(stale, engine.clock() + timedelta(minutes=9))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json", "not JSON"),
        ('{"tenant_id": "acme"}', "no run id"),
        ('{"tenant_id": "acme", "run_id": "nope:1"}', "unknown run"),
        ('{"tenant_id": "globex", "run_id": "RUN"}', "another tenant's run"),
    ],
)
def test_malformed_messages_are_dropped_not_retried(engine: Engine, body: str, why: str) -> None:
    from functions.worker.handler import handle_record

    job = once_now(engine, "/victim")
    (run,) = engine.runs_of("acme", job.job_id)
    event = load_event("sqs_run_message.json")
    event["Records"][0]["body"] = body.replace("RUN", run.run_id) if "RUN" in body else body
    engine.sqs.send_message(QueueUrl=engine.queue_url, MessageBody=event["Records"][0]["body"])
    messages = engine.sqs.receive_message(QueueUrl=engine.queue_url, MaxNumberOfMessages=10)["Messages"]
    mine = [m for m in messages if m["Body"] == event["Records"][0]["body"]]
    response = deliver(
        engine.sqs, engine.queue_url, mine, lambda record: handle_record(record, engine.runtime)
    )
    assert response["batchItemFailures"] == [], why
    assert engine.run("acme", run.run_id).attempt == 0
    assert engine.metrics.counts["MessagesDropped"] >= 1
    assert engine.receiver.for_path("/victim") == []


def test_planners_on_disjoint_shards_plan_every_job_once(engine: Engine) -> None:
    from functions.planner.handler import shards_of

    jobs = [
        engine.create(
            schedule={"type": "once", "at": (START + timedelta(minutes=10)).isoformat()},
            target=engine.http("/s"),
        ).job
        for _ in range(8)
    ]
    engine.clock.advance(minutes=10)
    shard_count = engine.runtime.settings.due_shards
    assert shards_of(json.loads(json.dumps({"shards": [0]})), shard_count) == [0]
    assert shards_of(load_event("planner_tick.json"), shard_count) == list(range(shard_count))
    engine.tick([0])
    engine.tick([1])
    assert [len(engine.runs_of("acme", job.job_id)) for job in jobs] == [1] * 8


def test_the_per_tick_cap_spreads_a_backlog_over_ticks(engine: Engine) -> None:
    jobs = [
        engine.create(
            schedule={"type": "once", "at": (START + timedelta(minutes=10)).isoformat()},
            target=engine.http("/cap"),
        ).job
        for _ in range(10)
    ]
    engine.clock.advance(minutes=10)
    engine.runtime.planner_tick.max_jobs_per_tick = 4
    first = engine.tick()
    assert (first.planned_runs, first.capped) == (4, True)
    engine.tick()
    engine.tick()
    assert sum(len(engine.runs_of("acme", job.job_id)) for job in jobs) == 10


def test_stats_report_lag_and_statuses_after_runs(engine: Engine) -> None:
    for i in range(3):
        once_now(engine, f"/stats-{i}")
    engine.tick()
    engine.drain()
    stats = engine.runtime.service.stats("acme", engine.clock() + timedelta(seconds=1))
    assert stats.runs["SUCCEEDED"] == 3
    assert stats.lag_ms["p50"] is not None
    assert stats.jobs["COMPLETED"] == 3


def test_an_early_message_goes_back_to_the_queue_with_a_delay(engine: Engine) -> None:
    from functions.worker.handler import handle_record

    job = engine.create(
        schedule={"type": "once", "at": (START + timedelta(minutes=2)).isoformat()},
        target=engine.http("/early"),
    ).job
    engine.clock.advance(minutes=2)
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    engine.clock.now = START + timedelta(minutes=1)  # a worker whose clock runs a minute behind
    messages = engine.sqs.receive_message(QueueUrl=engine.queue_url, MaxNumberOfMessages=10)["Messages"]
    executor = engine.executor()
    response = deliver(
        engine.sqs, engine.queue_url, messages, lambda record: handle_record(record, engine.runtime, executor)
    )
    assert [failure["itemIdentifier"] for failure in response["batchItemFailures"]] == [
        messages[0]["MessageId"]
    ]
    assert engine.run("acme", run.run_id).attempt == 0
    assert engine.receiver.for_path("/early") == []


def test_sweeping_twice_changes_nothing_the_second_time(engine: Engine) -> None:
    job = once_now(engine, "/sweep-twice")
    (run,) = engine.runs_of("acme", job.job_id)
    engine.runtime.leases.take(
        run, owner="dead", now=engine.clock(), lease_for=timedelta(seconds=35), max_in_flight=10
    )
    engine.clock.advance(seconds=40)
    first = engine.runtime.sweeper.sweep(engine.clock())
    before = engine.run("acme", run.run_id)
    second = engine.runtime.sweeper.sweep(engine.clock())
    assert first.requeued == [run.run_id]
    assert (second.resent, second.requeued, second.abandoned) == ([], [], [])
    assert engine.run("acme", run.run_id) == before


def test_the_lease_is_taken_even_when_the_dispatcher_marks_the_run_meanwhile(engine: Engine) -> None:
    from tickwork.adapters.queue import START_GRACE
    from tickwork.planning import new_run

    job = engine.create(
        schedule={"type": "once", "at": (START + timedelta(days=1)).isoformat()}, target=engine.http("/r")
    ).job
    planned = new_run(job, START, engine.clock(), RunStatus.PLANNED)
    engine.runtime.runs.put_if_absent(planned)
    # Given a worker read the run while PLANNED, and the dispatcher then marked it ENQUEUED
    read_by_worker = engine.run("acme", planned.run_id)
    assert engine.runtime.leases.mark_enqueued(read_by_worker, engine.clock(), START_GRACE)
    # When the worker takes the lease, it gets it (the fencing token, not the status, makes it exclusive)
    leased = engine.runtime.leases.take(
        read_by_worker, owner="w", now=engine.clock(), lease_for=timedelta(seconds=40), max_in_flight=10
    )
    assert engine.run("acme", planned.run_id).status is RunStatus.RUNNING
    assert leased.fencing_token == 1
    # And a second worker that read the same version loses
    from tickwork.adapters.runs import LeaseConflict

    with pytest.raises(LeaseConflict):
        engine.runtime.leases.take(
            read_by_worker, owner="w2", now=engine.clock(), lease_for=timedelta(seconds=40), max_in_flight=10
        )
