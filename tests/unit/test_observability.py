"""Log keys appended while handling one event stay on that event's log lines, whatever runs beside it."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from tickwork import observability
from tickwork.observability import PerThreadKeysFormatter

from tests.support.apigw import LambdaContext

THREADS = 8
LINES = 40


def logger_into(buffer: io.StringIO, service: str) -> Logger:
    return Logger(
        service=service,
        logger_formatter=PerThreadKeysFormatter(service=service),
        logger_handler=logging.StreamHandler(buffer),
        level="INFO",
    )


def records(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_tickworks_logger_keeps_appended_keys_per_thread() -> None:
    assert isinstance(observability.logger.registered_formatter, PerThreadKeysFormatter)


def test_keys_appended_on_threads_at_once_stay_on_their_own_lines() -> None:
    # Given threads that each append a tenant and a job, then log while the others do the same
    buffer = io.StringIO()
    logger = logger_into(buffer, "keys-per-thread")
    barrier = threading.Barrier(THREADS)

    def handle(index: int) -> None:
        logger.append_keys(tenant_id=f"tenant-{index}", job_id=f"job-{index}")
        barrier.wait()
        for _ in range(LINES):
            logger.info("working", extra={"worker": index})
        logger.remove_keys(["tenant_id", "job_id"])
        logger.info("done", extra={"worker": index})

    threads = [threading.Thread(target=handle, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then every line carries its own thread's keys, the shared service, and nothing after removal
    lines = records(buffer)
    assert len(lines) == THREADS * (LINES + 1)
    for line in lines:
        assert line["service"] == "keys-per-thread"
        if line["message"] == "working":
            assert (line["tenant_id"], line["job_id"]) == (
                f"tenant-{line['worker']}",
                f"job-{line['worker']}",
            )
        else:
            assert "tenant_id" not in line and "job_id" not in line


def test_the_lambda_context_and_correlation_id_stay_with_their_invocation() -> None:
    # Given a handler decorated as the API's is, invoked on threads at once
    buffer = io.StringIO()
    logger = logger_into(buffer, "invocations")
    barrier = threading.Barrier(THREADS)

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
    def handler(event: dict[str, Any], context: Any) -> None:
        barrier.wait()
        for _ in range(LINES):
            logger.info("handling", extra={"request": event["requestContext"]["requestId"]})

    threads = [
        threading.Thread(
            target=handler,
            args=(
                {"requestContext": {"requestId": f"request-{index}"}},
                LambdaContext(aws_request_id=f"id-{index}"),
            ),
        )
        for index in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then each line names its own request, in the correlation id and the Lambda request id
    lines = records(buffer)
    assert len(lines) == THREADS * LINES
    for line in lines:
        assert line["correlation_id"] == line["request"]
        assert line["function_request_id"] == line["request"].replace("request-", "id-")


def test_every_log_key_is_documented_in_operations() -> None:
    # The "Logs" section of docs/operations.md names every key a line may carry
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    section = text.split("\n## Logs\n", 1)[1].split("\n## ", 1)[0]
    undocumented = sorted(
        key for key in observability.LOG_KEYS | observability.POWERTOOLS_LOG_KEYS if f"`{key}`" not in section
    )
    assert not undocumented


def _tracer_in_a_fresh_process(**environment: str) -> dict[str, Any]:
    script = (
        "import json, sys; from tickwork.observability import tracer; "
        "print(json.dumps({'disabled': tracer.disabled, 'provider': type(tracer.provider).__module__, "
        "'xray_loaded': 'aws_xray_sdk.core' in sys.modules}))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("POWERTOOLS_TRACE_DISABLED", "LAMBDA_TASK_ROOT")}
    done = subprocess.run(
        [sys.executable, "-c", script], env={**env, **environment}, capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_with_tracing_off_the_xray_sdk_is_never_imported() -> None:
    for environment in ({}, {"POWERTOOLS_TRACE_DISABLED": "1", "LAMBDA_TASK_ROOT": "/var/task"}):
        found = _tracer_in_a_fresh_process(**environment)
        assert found["disabled"] and not found["xray_loaded"], environment


def test_in_lambda_with_tracing_on_the_tracer_records_to_xray() -> None:
    found = _tracer_in_a_fresh_process(LAMBDA_TASK_ROOT="/var/task", AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR")
    assert not found["disabled"] and found["xray_loaded"]
    assert found["provider"].startswith("aws_xray_sdk")


def test_an_invocations_counts_are_one_value_each_and_keep_their_sum() -> None:
    sink = observability.PowertoolsMetricSink()
    observability.metrics.clear_metrics()
    try:
        for _ in range(10):
            sink.count("RunsStarted")
            sink.milliseconds("TriggerLagMs", 3)
        sink.count("RunsSucceeded", 7)
        sink.count("RunsSucceeded", 3)
        blob: dict[str, Any] = dict(observability.metrics.serialize_metric_set())
    finally:
        observability.metrics.clear_metrics()
    assert blob["RunsStarted"] == [10.0]
    assert blob["RunsSucceeded"] == [10.0]
    # A distribution keeps every value: its percentiles need them
    assert blob["TriggerLagMs"] == [3.0] * 10
