"""Malformed run-queue messages are dropped, never retried forever, and touch no other tenant's data.

Each message goes onto the moto run queue and through one worker invocation (Powertools' BatchProcessor, as
the event source mapping calls it). A dropped message is reported as a success, so the mapping deletes it:
the queue ends empty. The worker logs a line and counts ``MessagesDropped``, and every table is the same,
item for item, before and after.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from tickwork import tables
from tickwork.domain.models import Run, RunStatus, scheduled_run_id
from tickwork.observability import logger

from functions.worker.handler import handle_record
from tests.conftest import scan_all
from tests.integration.conftest import Engine
from tests.support.engine import deliver, receive


@pytest.fixture
def worker_log() -> Iterator[io.StringIO]:
    """tickwork's structured log lines, as the worker writes them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    underlying = logging.getLogger(logger.name)
    underlying.addHandler(handler)
    try:
        yield stream
    finally:
        underlying.removeHandler(handler)


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every item of every table, in a stable order."""
    return {
        definition.logical_name: sorted(
            scan_all(engine.dynamodb, definition.default_name),
            key=lambda item: json.dumps(item, sort_keys=True),
        )
        for definition in tables.ALL_TABLES
    }


def queue_depth(engine: Engine) -> int:
    attributes = engine.sqs.get_queue_attributes(QueueUrl=engine.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    return sum(
        int(attributes[name])
        for name in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )


def send_and_deliver(engine: Engine, body: str) -> dict[str, Any]:
    """Put one message on the run queue and hand it to one worker invocation; returns the batch response."""
    assert queue_depth(engine) == 0
    engine.sqs.send_message(QueueUrl=engine.queue_url, MessageBody=body, MessageGroupId="tenant")
    messages = receive(engine.sqs, engine.queue_url)
    assert [message["Body"] for message in messages] == [body]
    executor = engine.executor()
    return deliver(
        engine.sqs, engine.queue_url, messages, lambda record: handle_record(record, engine.runtime, executor)
    )


UNKNOWN_RUN_OR_JOB = "message for an unknown run or job dropped"


def assert_dropped_cleanly(
    engine: Engine,
    response: dict[str, Any],
    worker_log: io.StringIO,
    before: dict[str, list[dict[str, Any]]],
    log_message: str,
) -> None:
    """Reported as a success (so the mapping deletes it), counted, logged once; nothing changed or called."""
    assert response["batchItemFailures"] == []
    assert queue_depth(engine) == 0
    assert engine.metrics.counts.get("MessagesDropped") == 1
    assert [line["message"] for line in log_lines(worker_log) if line["level"] == "WARNING"] == [log_message]
    assert snapshot(engine) == before
    assert engine.receiver.requests == []


def acme_job_with_a_run(engine: Engine) -> Run:
    """An acme job far ahead (nothing planned), and one run of it stored but not sent."""
    job = engine.create(
        "acme",
        schedule={"type": "once", "at": (engine.clock() + timedelta(days=30)).isoformat()},
        target=engine.http("/acme"),
        payload={"secret-of": "acme"},
    ).job
    fire_at = engine.clock() + timedelta(days=30)
    run = Run(
        run_id=scheduled_run_id(job.job_id, fire_at),
        job_id=job.job_id,
        tenant_id="acme",
        scheduled_for=fire_at,
        status=RunStatus.PLANNED,
        created_at=engine.clock(),
    )
    assert engine.runtime.runs.put_if_absent(run) is None
    return run


SQS_MAX_BODY = 256 * 1024
MALFORMED = [
    pytest.param("not json {", "malformed run message dropped", id="not-json"),
    pytest.param("", "malformed run message dropped", id="empty"),
    pytest.param("null", "malformed run message dropped", id="json-null"),
    pytest.param('["acme", "run-1"]', "malformed run message dropped", id="json-array"),
    pytest.param('"acme/run-1"', "malformed run message dropped", id="json-string"),
    pytest.param('{"run_id": "x:1"}', "malformed run message dropped", id="no-tenant"),
    pytest.param('{"tenant_id": "acme"}', "malformed run message dropped", id="no-run-id"),
    pytest.param('{"tenant_id": 7, "run_id": ["x"]}', "malformed run message dropped", id="wrong-types"),
    pytest.param(
        '{"tenant_id": "acme", "run_id": "x:1", "job": "drop-tables"}',
        "malformed run message dropped",
        id="unknown-field",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "x" * 257}),
        "malformed run message dropped",
        id="run-id-257",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "x:1", "pad": "x" * (SQS_MAX_BODY - 100)}),
        "malformed run message dropped",
        id="oversized-256-kib",
    ),
    pytest.param("x" * SQS_MAX_BODY, "malformed run message dropped", id="256-kib-of-junk"),
    pytest.param(
        "\u202e\U0001f4a3\u0000\ufffd\u05e9\u0301 {",
        "malformed run message dropped",
        id="unicode-junk-not-json",
    ),
    pytest.param(
        json.dumps({"tenant_id": "\U0001f4a3\u202e", "run_id": "e\u0301:\u05e9"}, ensure_ascii=False),
        UNKNOWN_RUN_OR_JOB,
        id="unicode-ids",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "01NOSUCHJOB000000000000000:1795338903000"}),
        UNKNOWN_RUN_OR_JOB,
        id="unknown-run",
    ),
    pytest.param(
        json.dumps({"tenant_id": "nobody", "run_id": "01NOSUCHJOB000000000000000:1"}),
        UNKNOWN_RUN_OR_JOB,
        id="unknown-tenant",
    ),
]


@pytest.mark.parametrize(("body", "log_message"), MALFORMED)
def test_a_malformed_message_is_dropped_logged_counted_and_deleted(
    engine: Engine, worker_log: io.StringIO, body: str, log_message: str
) -> None:
    acme_job_with_a_run(engine)
    before = snapshot(engine)

    response = send_and_deliver(engine, body)

    assert_dropped_cleanly(engine, response, worker_log, before, log_message)


def test_a_message_naming_another_tenant_for_a_real_run_is_dropped_and_the_run_untouched(
    engine: Engine, worker_log: io.StringIO
) -> None:
    run = acme_job_with_a_run(engine)
    before = snapshot(engine)

    response = send_and_deliver(engine, json.dumps({"tenant_id": "globex", "run_id": run.run_id}))

    assert_dropped_cleanly(engine, response, worker_log, before, UNKNOWN_RUN_OR_JOB)
    assert engine.run("acme", run.run_id) == run


def test_a_run_whose_job_item_is_gone_is_dropped(engine: Engine, worker_log: io.StringIO) -> None:
    run = acme_job_with_a_run(engine)
    engine.dynamodb.delete_item(
        TableName=tables.JOBS.default_name,
        Key={tables.JOBS_PK: {"S": "acme"}, tables.JOBS_SK: {"S": f"{tables.JOB_SK_PREFIX}{run.job_id}"}},
    )
    before = snapshot(engine)

    response = send_and_deliver(engine, json.dumps({"tenant_id": "acme", "run_id": run.run_id}))

    assert_dropped_cleanly(engine, response, worker_log, before, UNKNOWN_RUN_OR_JOB)


def test_a_run_of_a_cancelled_job_is_closed_cancelled_not_run_and_deleted(engine: Engine) -> None:
    """Cancelling keeps the job for history, so its run is found: the worker closes it CANCELLED (or finds
    it already CANCELLED by the cancel) instead of dropping the message as unknown."""
    run = acme_job_with_a_run(engine)
    engine.runtime.service.cancel_job("acme", run.job_id, engine.clock())
    # A run stored after the cancel (a planner that read the job just before it) is still PLANNED.
    late_fire = run.scheduled_for + timedelta(minutes=1)
    late = run.model_copy(
        update={"run_id": scheduled_run_id(run.job_id, late_fire), "scheduled_for": late_fire}
    )
    assert engine.runtime.runs.put_if_absent(late) is None
    globex_before = {
        name: [item for item in items if "acme" not in json.dumps(item)]
        for name, items in snapshot(engine).items()
    }

    for message_of in (run, late):
        response = send_and_deliver(engine, json.dumps({"tenant_id": "acme", "run_id": message_of.run_id}))
        assert response["batchItemFailures"] == []
        assert queue_depth(engine) == 0

    assert engine.run("acme", run.run_id).status is RunStatus.CANCELLED
    assert engine.run("acme", late.run_id).status is RunStatus.CANCELLED
    assert engine.run("acme", late.run_id).reason == "job_cancelled"
    assert engine.receiver.requests == []
    assert engine.metrics.counts.get("RunsStarted") is None
    globex_after = {
        name: [item for item in items if "acme" not in json.dumps(item)]
        for name, items in snapshot(engine).items()
    }
    assert globex_after == globex_before


def test_a_batch_mixing_junk_and_a_real_run_runs_the_real_one_and_drops_the_rest(
    engine: Engine, worker_log: io.StringIO
) -> None:
    job = engine.create(
        "globex", schedule={"type": "rate", "every_seconds": 3600}, target=engine.http("/globex")
    ).job
    run = engine.runtime.service.trigger_job("globex", job.job_id, idempotency_key="k", now=engine.clock())
    for body in ("not json", json.dumps({"tenant_id": "acme", "run_id": run.run_id}), "\U0001f4a3"):
        engine.sqs.send_message(QueueUrl=engine.queue_url, MessageBody=body, MessageGroupId="tenant")

    delivered = engine.drain()

    assert delivered == 4
    assert queue_depth(engine) == 0
    assert engine.metrics.counts.get("MessagesDropped") == 3
    assert engine.run("globex", run.run_id).status is RunStatus.SUCCEEDED
    assert [request.path for request in engine.receiver.requests] == ["/globex"]
