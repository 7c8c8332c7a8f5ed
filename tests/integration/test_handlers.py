"""The planner and worker Lambda handlers, configured from the environment as in AWS, with sample events."""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.adapters.jobs import job_to_item
from tickwork.domain.models import Job, JobSpec, RunMessage, RunStatus, scheduled_run_id
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


def job_due_now(name: str, url: str) -> Job:
    """A one-time job due a moment ago, as the API would store it."""
    now = datetime.now(UTC).replace(microsecond=0)
    spec = JobSpec.model_validate(
        {
            "name": name,
            "schedule": {"type": "once", "at": now.isoformat()},
            "target": {"type": "http", "url": url},
        }
    )
    return Job(
        **spec.model_dump(),
        job_id=f"01HANDLER{uuid.uuid4().hex[:17].upper()}",
        tenant_id="acme",
        created_at=now,
        updated_at=now,
        next_fire_at=now,
    )


def test_planner_and_worker_handlers_run_a_due_job(deployed: Any, receiver: Receiver) -> None:
    from functions.planner.handler import lambda_handler as planner
    from functions.worker.handler import lambda_handler as worker

    # Given a job that was due a moment ago, stored without planning (as if the API had not sent it)
    current = runtime()
    job = job_due_now("handlers", receiver.url("/h"))
    current.jobs.create(job, max_jobs=10)
    # When the planner ticks with the scheduled event, and the worker gets the run-queue event
    report = planner(load_event("planner_tick.json"), LambdaContext(function_name="tickwork-planner"))
    assert report["shards"] == list(range(current.settings.due_shards))
    assert report["planned_runs"] == 1
    event = load_event("sqs_run_message.json")
    messages = deployed.receive_message(QueueUrl=current.queue_url, MaxNumberOfMessages=10)["Messages"]
    event["Records"][0]["body"] = messages[0]["Body"]
    event["Records"][0]["receiptHandle"] = messages[0]["ReceiptHandle"]
    response = worker(event, LambdaContext(function_name="tickwork-worker"))
    # Then the run succeeded and nothing is reported failed
    run_id = scheduled_run_id(job.job_id, job.next_fire_at)  # type: ignore[arg-type]
    assert response == {"batchItemFailures": []}
    assert json.loads(messages[0]["Body"])["run_id"] == run_id
    assert current.runs.get("acme", run_id).status is RunStatus.SUCCEEDED
    assert len(receiver.for_path("/h")) == 1
    assert current.jobs.get("acme", job.job_id).status.value == "COMPLETED"


def test_an_early_message_goes_back_delayed_and_is_no_failure(deployed: Any, receiver: Receiver) -> None:
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
    run_id = scheduled_run_id(details.job.job_id, datetime(2099, 1, 1, tzinfo=UTC))
    current.sqs.send_message(
        QueueUrl=current.queue_url, MessageBody=json.dumps({"tenant_id": "acme", "run_id": run_id})
    )
    message = current.sqs.receive_message(QueueUrl=current.queue_url)["Messages"][0]
    event = load_event("sqs_run_message.json")
    event["Records"][0].update(
        body=message["Body"], receiptHandle=message["ReceiptHandle"], messageId=message["MessageId"]
    )
    response = worker(event, LambdaContext(function_name="tickwork-worker"))
    # Waiting never counts as a failed receive: the message was sent again, held back 15 minutes
    assert response == {"batchItemFailures": []}
    attributes = current.sqs.get_queue_attributes(QueueUrl=current.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert receiver.for_path("/l") == []


def test_worker_invocations_on_threads_each_report_their_own_batch(deployed: Any, receiver: Receiver) -> None:
    """The handler keeps nothing of a batch between invocations: two at once (the local stack's pollers, or
    tests) each answer for their own records."""
    from functions.worker.handler import lambda_handler as worker

    current = runtime()
    # Given a job whose stored item cannot be read (so each of its messages fails), and malformed messages
    # (each dropped, none a failure), in batches invoked side by side
    broken = job_due_now("broken", receiver.url("/never"))
    item = job_to_item(broken, due_shards=current.settings.due_shards)
    item["spec"] = {"S": "{}"}
    current.dynamodb.put_item(TableName=current.settings.jobs_table, Item=item)
    assert broken.next_fire_at is not None
    failing = json.dumps(
        {"tenant_id": "acme", "run_id": scheduled_run_id(broken.job_id, broken.next_fire_at)}
    )
    template = load_event("sqs_run_message.json")["Records"][0]

    def batch(kind: str, index: int) -> dict[str, Any]:
        return {
            "Records": [
                {
                    **template,
                    "messageId": f"{kind}-{index}-{n}",
                    "receiptHandle": f"handle-{kind}-{index}-{n}",
                    "body": failing if kind == "failing" else "not a run message",
                }
                for n in range(4)
            ]
        }

    invocations = [(kind, index) for index in range(4) for kind in ("failing", "malformed")]
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
        expected = {f"{kind}-{index}-{n}" for n in range(4)} if kind == "failing" else set()
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
    assert "jobs registered 1" in before
    assert "queue depth 1" in before
    assert "lag p50 -, p99 - |" in before  # no run yet: no figure, rather than "None ms"
    message = current.sqs.receive_message(QueueUrl=current.queue_url)["Messages"][0]
    current.worker().handle(RunMessage.model_validate_json(message["Body"]))
    after = stack.status_line()
    assert "started 1, succeeded 1, failed 0" in after
    assert "lag p50 None" not in after
    assert re.search(r"lag p50 \d+ ms, p99 \d+ ms", after), after


def test_a_batchs_jobs_call_their_targets_side_by_side(deployed: Any, receiver: Receiver) -> None:
    """A batch of ten jobs' fires is billed for the slowest target call, not for the ten in a row."""
    from functions.planner.handler import lambda_handler as planner
    from functions.worker.handler import lambda_handler as worker

    # Given ten jobs due now whose target answers after 0.3 s, their fires planned and in the queue
    current = runtime()
    receiver.delays["/slow"] = 0.3
    jobs = [job_due_now(f"slow-{index}", receiver.url("/slow")) for index in range(10)]
    for job in jobs:
        current.jobs.create(job, max_jobs=100)
    assert (
        planner(load_event("planner_tick.json"), LambdaContext(function_name="tickwork-planner"))[
            "planned_runs"
        ]
        == 10
    )
    messages: list[dict[str, Any]] = []
    while len(messages) < 10:
        messages += deployed.receive_message(QueueUrl=current.queue_url, MaxNumberOfMessages=10)["Messages"]
    template = load_event("sqs_run_message.json")["Records"][0]
    event = {
        "Records": [
            {**template, "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]}
            for m in messages
        ]
    }
    # When the worker handles them as one batch
    response = worker(event, LambdaContext(function_name="tickwork-worker"))
    # Then every run succeeded, and the target had all ten calls in progress at once
    assert response == {"batchItemFailures": []}
    for job in jobs:
        assert job.next_fire_at is not None
        run = current.runs.get("acme", scheduled_run_id(job.job_id, job.next_fire_at))
        assert run.status is RunStatus.SUCCEEDED
    assert len(receiver.for_path("/slow")) == 10
    assert receiver.most_at_once["/slow"] == 10
