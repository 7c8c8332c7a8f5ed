"""The planner and worker Lambda handlers, configured from the environment as in AWS, with sample events."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.domain.models import JobSpec, RunMessage, RunStatus
from tickwork.runtime import runtime

from tests.conftest import seed_tenant
from tests.support.apigw import LambdaContext, load_event
from tests.support.engine import Receiver


@pytest.fixture
def deployed(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    sqs = boto3.client("sqs", region_name="eu-west-1")
    for queue in tables.ALL_QUEUES:
        url = sqs.create_queue(QueueName=queue.default_name)["QueueUrl"]
        monkeypatch.setenv(queue.env_var, url)
    monkeypatch.setenv("TICKWORK_ALLOW_PRIVATE_TARGETS", "true")  # the receiver is on loopback
    seed_tenant(dynamodb, "acme", "tw_acme")
    runtime.cache_clear()
    yield sqs
    runtime.cache_clear()


def test_planner_and_worker_handlers_run_a_due_job(deployed: Any, receiver: Receiver) -> None:
    from functions.planner.handler import lambda_handler as planner
    from functions.worker.handler import lambda_handler as worker

    # Given a job that was due a moment ago, created without planning (as if the API were down)
    spec = JobSpec.model_validate(
        {
            "name": "handlers",
            "schedule": {"type": "once", "at": datetime.now(UTC).isoformat()},
            "target": {"type": "http", "url": receiver.url("/h")},
        }
    )
    current = runtime()
    details = current.service.create_job("acme", spec, datetime.now(UTC))
    (run,) = current.runs.list_for_job("acme", details.job.job_id, limit=10, cursor=None).items
    # When the planner ticks with the scheduled event, and the worker gets the run-queue event
    report = planner(load_event("planner_tick.json"), LambdaContext(function_name="tickwork-planner"))
    assert report["shards"] == list(range(current.settings.due_shards))
    event = load_event("sqs_run_message.json")
    messages = deployed.receive_message(QueueUrl=current.queue.queue_url, MaxNumberOfMessages=10)["Messages"]
    event["Records"][0]["body"] = messages[0]["Body"]
    event["Records"][0]["receiptHandle"] = messages[0]["ReceiptHandle"]
    response = worker(event, LambdaContext(function_name="tickwork-worker"))
    # Then the run succeeded and nothing is reported failed
    assert response == {"batchItemFailures": []}
    assert json.loads(messages[0]["Body"]) == {"tenant_id": "acme", "run_id": run.run_id}
    assert current.runs.get("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert len(receiver.for_path("/h")) == 1


def test_worker_handler_reports_a_held_back_message_as_failed(deployed: Any, receiver: Receiver) -> None:
    from functions.worker.handler import lambda_handler as worker

    current = runtime()
    spec = JobSpec.model_validate(
        {
            "name": "later",
            "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
            "target": {"type": "http", "url": receiver.url("/l")},
        }
    )
    details = current.service.create_job("acme", spec, datetime.now(UTC))
    from tickwork.planning import new_run

    run = new_run(details.job, details.job.schedule.at, datetime.now(UTC), RunStatus.PLANNED)  # type: ignore[union-attr]
    current.runs.put_if_absent(run)
    current.sqs.send_message(
        QueueUrl=current.queue.queue_url, MessageBody=json.dumps({"tenant_id": "acme", "run_id": run.run_id})
    )
    message = current.sqs.receive_message(QueueUrl=current.queue.queue_url)["Messages"][0]
    event = load_event("sqs_run_message.json")
    event["Records"][0].update(
        body=message["Body"], receiptHandle=message["ReceiptHandle"], messageId=message["MessageId"]
    )
    response = worker(event, LambdaContext(function_name="tickwork-worker"))
    assert response == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    assert receiver.for_path("/l") == []


def test_worker_invocations_on_threads_each_report_their_own_batch(deployed: Any, receiver: Receiver) -> None:
    """The handler keeps nothing of a batch between invocations: two at once (the local stack's pollers, or
    tests) each answer for their own records."""
    from tickwork.planning import new_run

    from functions.worker.handler import lambda_handler as worker

    current = runtime()
    spec = JobSpec.model_validate(
        {
            "name": "much-later",
            "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
            "target": {"type": "http", "url": receiver.url("/never")},
        }
    )
    details = current.service.create_job("acme", spec, datetime.now(UTC))
    run = new_run(details.job, details.job.schedule.at, datetime.now(UTC), RunStatus.PLANNED)  # type: ignore[union-attr]
    current.runs.put_if_absent(run)
    # Given batches that must all come back later (every record a failure) and batches of malformed
    # messages (every record dropped, none a failure), invoked side by side
    template = load_event("sqs_run_message.json")["Records"][0]
    later = json.dumps({"tenant_id": "acme", "run_id": run.run_id})

    def batch(kind: str, index: int) -> dict[str, Any]:
        return {
            "Records": [
                {
                    **template,
                    "messageId": f"{kind}-{index}-{n}",
                    "receiptHandle": f"handle-{kind}-{index}-{n}",
                    "body": later if kind == "later" else "not a run message",
                }
                for n in range(4)
            ]
        }

    invocations = [(kind, index) for index in range(4) for kind in ("later", "malformed")]
    answers: dict[tuple[str, int], Any] = {}
    barrier = threading.Barrier(len(invocations))

    def invoke(kind: str, index: int) -> None:
        barrier.wait()
        answers[(kind, index)] = worker(batch(kind, index), LambdaContext(function_name="tickwork-worker"))

    threads = [threading.Thread(target=invoke, args=invocation) for invocation in invocations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Then each invocation reports exactly its own failures
    for kind, index in invocations:
        failed = {failure["itemIdentifier"] for failure in answers[(kind, index)]["batchItemFailures"]}
        expected = {f"{kind}-{index}-{n}" for n in range(4)} if kind == "later" else set()
        assert failed == expected, (kind, index)
    assert receiver.for_path("/never") == []


def test_the_local_status_line_reports_jobs_runs_lag_and_depth(deployed: Any, receiver: Receiver) -> None:
    from tickwork_local.stack import LocalStack

    stack = LocalStack(
        host="127.0.0.1", port=0, quiet=False, data_dir=None, log_file=None, tick_seconds=1, workers=1
    )
    current = runtime()
    current.metrics = stack.metrics
    spec = JobSpec.model_validate(
        {
            "name": "status",
            "schedule": {"type": "once", "at": datetime.now(UTC).isoformat()},
            "target": {"type": "http", "url": receiver.url("/status")},
        }
    )
    current.service.create_job("acme", spec, datetime.now(UTC))
    before = stack.status_line()
    assert "jobs active 1" in before
    assert "queue depth 1" in before
    message = current.sqs.receive_message(QueueUrl=current.queue.queue_url)["Messages"][0]
    current.executor().handle(RunMessage.model_validate_json(message["Body"]))
    after = stack.status_line()
    assert "started 1, succeeded 1, failed 0" in after
    assert "lag p50 None" not in after
