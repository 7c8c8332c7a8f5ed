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
from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunStatus, manual_run_id, scheduled_run_id
from tickwork.observability import logger

from tests.conftest import scan_all
from tests.integration.conftest import Engine


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
    pump = engine.pump()
    messages = pump.receive()
    assert [message["Body"] for message in messages] == [body]
    return dict(pump.deliver(messages))


MALFORMED_BODY = "malformed run message dropped"
MALFORMED_RUN_ID = "message with a malformed run id dropped"
UNKNOWN_JOB = "message for an unknown job dropped"


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
    """An acme job far ahead (nothing planned), and a manual run of it stored but not sent (as a trigger
    whose send failed leaves it, for the sweeper)."""
    job = engine.create(
        "acme",
        schedule={"type": "once", "at": (engine.clock() + timedelta(days=30)).isoformat()},
        target=engine.http("/acme"),
        payload={"secret-of": "acme"},
    ).job
    run = Run(
        run_id=manual_run_id(job.job_id, "deploy-1"),
        job_id=job.job_id,
        tenant_id="acme",
        scheduled_for=engine.clock(),
        status=RunStatus.PLANNED,
        trigger="manual",
        created_at=engine.clock(),
    )
    assert engine.runtime.runs.put(run, Expect.new()).ok
    return run


SQS_MAX_BODY = 256 * 1024
MALFORMED = [
    pytest.param("not json {", MALFORMED_BODY, id="not-json"),
    pytest.param("", MALFORMED_BODY, id="empty"),
    pytest.param("null", MALFORMED_BODY, id="json-null"),
    pytest.param('["acme", "run-1"]', MALFORMED_BODY, id="json-array"),
    pytest.param('"acme/run-1"', MALFORMED_BODY, id="json-string"),
    pytest.param('{"run_id": "x:1"}', MALFORMED_BODY, id="no-tenant"),
    pytest.param('{"tenant_id": "acme"}', MALFORMED_BODY, id="no-run-id"),
    pytest.param('{"tenant_id": 7, "run_id": ["x"]}', MALFORMED_BODY, id="wrong-types"),
    pytest.param(
        '{"tenant_id": "acme", "run_id": "x:1", "job": "drop-tables"}',
        MALFORMED_BODY,
        id="unknown-field",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "x" * 257}),
        MALFORMED_BODY,
        id="run-id-257",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "x:1", "pad": "x" * (SQS_MAX_BODY - 100)}),
        MALFORMED_BODY,
        id="oversized-256-kib",
    ),
    pytest.param("x" * SQS_MAX_BODY, MALFORMED_BODY, id="256-kib-of-junk"),
    pytest.param(
        "\u202e\U0001f4a3\u0000\ufffd\u05e9\u0301 {",
        MALFORMED_BODY,
        id="unicode-junk-not-json",
    ),
    pytest.param(
        json.dumps({"tenant_id": "\U0001f4a3\u202e", "run_id": "e\u0301:\u05e9"}, ensure_ascii=False),
        MALFORMED_RUN_ID,
        id="unicode-ids",
    ),
    pytest.param(
        json.dumps({"tenant_id": "acme", "run_id": "01NOSUCHJOB000000000000000:1795337000000"}),
        UNKNOWN_JOB,
        id="unknown-run",
    ),
    pytest.param(
        json.dumps({"tenant_id": "nobody", "run_id": "01NOSUCHJOB000000000000000:1"}),
        UNKNOWN_JOB,
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


def test_a_message_for_an_unknown_job_ahead_of_its_time_comes_back_once_and_is_dropped(
    engine: Engine, worker_log: io.StringIO
) -> None:
    """The worker reads nothing for a fire that is not due: it sends the message back for its time (one
    send, no read), then drops it as unknown."""
    acme_job_with_a_run(engine)
    before = snapshot(engine)
    fire_at = engine.clock() + timedelta(minutes=20)
    body = json.dumps(
        {"tenant_id": "acme", "run_id": scheduled_run_id("01NOSUCHJOB000000000000000", fire_at)}
    )

    first = send_and_deliver(engine, body)
    assert first["batchItemFailures"] == []
    assert queue_depth(engine) == 1
    assert engine.metrics.counts.get("MessagesDropped") is None
    engine.clock.advance(minutes=15)
    assert engine.drain() == 1
    engine.clock.advance(minutes=5)
    assert engine.drain() == 1

    assert queue_depth(engine) == 0
    assert engine.metrics.counts.get("MessagesDropped") == 1
    assert [line["message"] for line in log_lines(worker_log) if line["level"] == "WARNING"] == [UNKNOWN_JOB]
    assert snapshot(engine) == before


def test_a_message_naming_another_tenant_for_a_real_run_is_dropped_and_the_run_untouched(
    engine: Engine, worker_log: io.StringIO
) -> None:
    run = acme_job_with_a_run(engine)
    before = snapshot(engine)

    response = send_and_deliver(engine, json.dumps({"tenant_id": "globex", "run_id": run.run_id}))

    assert_dropped_cleanly(engine, response, worker_log, before, UNKNOWN_JOB)
    assert engine.run("acme", run.run_id) == run


def test_a_run_whose_job_item_is_gone_is_dropped(engine: Engine, worker_log: io.StringIO) -> None:
    run = acme_job_with_a_run(engine)
    engine.dynamodb.delete_item(
        TableName=tables.JOBS.default_name,
        Key={
            tables.JOBS_PK: {"S": tables.job_key("acme", run.job_id)},
            tables.JOBS_SK: {"S": tables.JOB_SK},
        },
    )
    before = snapshot(engine)

    response = send_and_deliver(engine, json.dumps({"tenant_id": "acme", "run_id": run.run_id}))

    assert_dropped_cleanly(engine, response, worker_log, before, UNKNOWN_JOB)


def test_a_run_of_a_cancelled_job_is_closed_cancelled_not_run_and_deleted(engine: Engine) -> None:
    """Cancelling keeps the job for history, so its run is found: the worker closes it CANCELLED (or finds
    it already CANCELLED by the cancel) instead of dropping the message as unknown."""
    run = acme_job_with_a_run(engine)
    engine.runtime.service.cancel_job("acme", run.job_id, engine.clock())
    # A fire sent after the cancel, by a planner that read the job just before it: nothing stored yet.
    late_fire = engine.clock() - timedelta(seconds=1)
    late = run.model_copy(
        update={"run_id": scheduled_run_id(run.job_id, late_fire), "scheduled_for": late_fire}
    )
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
