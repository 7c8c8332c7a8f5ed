"""The worker's batch processor: jobs side by side, one job's records in order, failures per record."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from tickwork.batches import JobOrderedBatchProcessor, job_of
from tickwork.domain.models import scheduled_run_id
from tickwork.domain.timeutil import from_epoch_ms
from tickwork.observability import logger


def sqs_record(job: str, fire_ms: int, message_id: str, tenant: str = "acme") -> dict[str, Any]:
    run_id = scheduled_run_id(job, from_epoch_ms(fire_ms))
    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": json.dumps({"tenant_id": tenant, "run_id": run_id}),
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:tickwork-runs",
        "awsRegion": "us-east-1",
    }


JOBS = [f"01JOB{index:021d}" for index in range(5)]
FIRE = 1_790_000_000_000


def test_records_of_different_jobs_are_handled_at_the_same_time() -> None:
    # Given a batch of five jobs' fires, each of whose handlers waits for all five to be running
    records = [sqs_record(job, FIRE, f"m{index}") for index, job in enumerate(JOBS)]
    together = threading.Barrier(len(records), timeout=5)

    def handle(record: SQSRecord) -> str:
        together.wait()
        return record.message_id

    # When the batch is processed
    processor = JobOrderedBatchProcessor(parallelism=10)
    response = process_partial_response(
        event={"Records": records}, record_handler=handle, processor=processor
    )
    # Then every record met the others (one after another, the first would wait alone and break the barrier)
    assert response == {"batchItemFailures": []}
    handled = {message["messageId"] for message in processor.success_messages}  # type: ignore[index]
    assert handled == {f"m{i}" for i in range(5)}


def test_one_jobs_records_run_one_at_a_time_in_the_order_of_their_fires() -> None:
    # Given a batch interleaving three fires each of two jobs
    records = [sqs_record(JOBS[index % 2], FIRE + 1000 * (index // 2), f"m{index}") for index in range(6)]
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    order: dict[str, list[str]] = {}

    def handle(record: SQSRecord) -> str:
        job = job_of(record.raw_event)
        with lock:
            running[job] = running.get(job, 0) + 1
            most[job] = max(most.get(job, 0), running[job])
            order.setdefault(job, []).append(record.message_id)
        time.sleep(0.02)
        with lock:
            running[job] -= 1
        return "ok"

    # When it is processed with room for every record at once
    response = process_partial_response(
        event={"Records": records}, record_handler=handle, processor=JobOrderedBatchProcessor(parallelism=10)
    )
    # Then each job had one record running at a time, in the order of their fires (here the batch order)
    assert response == {"batchItemFailures": []}
    assert set(most.values()) == {1}
    assert order == {f"acme/{JOBS[0]}": ["m0", "m2", "m4"], f"acme/{JOBS[1]}": ["m1", "m3", "m5"]}


def test_a_failing_record_is_reported_alone() -> None:
    records = [sqs_record(job, FIRE, f"m{index}") for index, job in enumerate(JOBS)]

    def handle(record: SQSRecord) -> str:
        if record.message_id == "m3":
            raise RuntimeError("the target's outcome could not be recorded")
        return "ok"

    response = process_partial_response(
        event={"Records": records}, record_handler=handle, processor=JobOrderedBatchProcessor(parallelism=4)
    )
    assert response == {"batchItemFailures": [{"itemIdentifier": "m3"}]}


@pytest.mark.parametrize("body", ["not json", "{}", '{"tenant_id": "acme", "run_id": "no such id"}', "[]"])
def test_a_record_that_names_no_job_is_a_group_of_its_own(body: str) -> None:
    item = {**sqs_record(JOBS[0], FIRE, "odd"), "body": body}
    assert job_of(item) == "message:odd"
    assert job_of(sqs_record(JOBS[0], FIRE, "m0")) == f"acme/{JOBS[0]}"
    assert job_of(sqs_record(JOBS[0], FIRE, "m0", tenant="umbrella")) == f"umbrella/{JOBS[0]}"


def test_threads_log_with_the_invocations_keys() -> None:
    # Given keys appended on the invoking thread (as inject_lambda_context appends the request id)
    records = [sqs_record(job, FIRE, f"m{index}") for index, job in enumerate(JOBS[:3])]
    stream = io.StringIO()
    handler = logger.registered_handler
    previous = handler.stream  # type: ignore[attr-defined]
    handler.setStream(stream)  # type: ignore[attr-defined]
    logger.append_keys(function_request_id="req-123")
    try:

        def handle(record: SQSRecord) -> str:
            logger.warning("handled", extra={"message_id": record.message_id})
            return "ok"

        process_partial_response(
            event={"Records": records},
            record_handler=handle,
            processor=JobOrderedBatchProcessor(parallelism=3),
        )
    finally:
        logger.remove_keys(["function_request_id"])
        handler.setStream(previous)  # type: ignore[attr-defined]
    # Then every thread's line carries them
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if '"handled"' in line]
    assert len(lines) == 3
    assert {line["function_request_id"] for line in lines} == {"req-123"}


def test_parallelism_one_handles_the_batch_in_order_on_the_calling_thread() -> None:
    records = [sqs_record(job, FIRE, f"m{index}") for index, job in enumerate(JOBS)]
    seen: list[tuple[str, int]] = []

    def handle(record: SQSRecord) -> str:
        seen.append((record.message_id, threading.get_ident()))
        return "ok"

    process_partial_response(
        event={"Records": records}, record_handler=handle, processor=JobOrderedBatchProcessor(parallelism=1)
    )
    assert seen == [(f"m{index}", threading.get_ident()) for index in range(5)]


@pytest.mark.parametrize("parallelism", [1, 10])
def test_a_jobs_fires_are_handled_in_the_order_of_their_times_whatever_the_delivery(parallelism: int) -> None:
    # Given a batch in which a job's later fire comes first (both sent at once: a fire read ahead of its time
    # waits for it, and must not hold back the fire due before it), beside another job's fire
    records = [
        sqs_record(JOBS[0], FIRE + 1000, "later"),
        sqs_record(JOBS[1], FIRE, "other"),
        sqs_record(JOBS[0], FIRE, "earlier"),
    ]
    order: list[str] = []

    def handle(record: SQSRecord) -> str:
        order.append(record.message_id)
        return "ok"

    process_partial_response(
        event={"Records": records},
        record_handler=handle,
        processor=JobOrderedBatchProcessor(parallelism=parallelism),
    )

    mine = [message_id for message_id in order if message_id != "other"]
    assert mine == ["earlier", "later"]
    assert sorted(order) == ["earlier", "later", "other"]


def test_a_jobs_fires_still_to_come_wait_for_their_times_side_by_side() -> None:
    # Given two fires of one job still to come (read ahead, each waits for its time)
    records = [sqs_record(JOBS[0], FIRE + 2000, "second"), sqs_record(JOBS[0], FIRE + 1000, "first")]
    together = threading.Barrier(len(records), timeout=5)

    def handle(record: SQSRecord) -> str:
        together.wait()  # each waits for its time: the first must not wait behind the second
        return record.message_id

    processor = JobOrderedBatchProcessor(parallelism=10, clock=lambda: FIRE / 1000 - 10)
    response = process_partial_response(
        event={"Records": records}, record_handler=handle, processor=processor
    )

    # Then both were waiting at once (one after the other, the barrier would break)
    assert response == {"batchItemFailures": []}
