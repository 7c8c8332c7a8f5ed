"""Fixtures for the execution-engine tests: moto tables and queues, a fake clock, a loopback receiver."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.app.service import JobDetails
from tickwork.app.worker import Worker
from tickwork.config import Settings
from tickwork.domain.models import JobSpec, Run, RunMessage
from tickwork.runtime import Runtime, build_runtime
from tickwork_local.harness import Pump, partial_batches, sqs_follows

from tests.conftest import seed_tenant
from tests.support.engine import FakeClock, Receiver, RecordingMetrics, make_requests_atomic, start_receiver

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@dataclass
class Engine:
    runtime: Runtime
    clock: FakeClock
    metrics: RecordingMetrics
    receiver: Receiver
    sqs: Any
    dynamodb: Any

    @property
    def queue_url(self) -> str:
        return self.runtime.queue_url

    def create(self, tenant: str = "acme", **spec: Any) -> JobDetails:
        body = {"name": f"job-{uuid.uuid4().hex[:12]}", **spec}
        return self.runtime.service.create_job(tenant, JobSpec.model_validate(body), self.clock())

    def http(self, path: str) -> dict[str, Any]:
        return {"type": "http", "url": self.receiver.url(path), "timeout_seconds": 5}

    def worker(self, worker_id: str | None = None) -> Worker:
        return self.runtime.worker(clock=self.clock, sleep=self.clock.sleep, worker_id=worker_id)

    def tick(self, shards: list[int] | None = None) -> Any:
        return self.runtime.planner_tick.tick(
            self.clock(), shards or list(range(self.runtime.settings.due_shards))
        )

    def pump(self, record_handler: Callable[[Any], Any] | None = None, worker: Worker | None = None) -> Pump:
        """The run queue's event source mapping (batches of ten, hidden 30 s) into ``record_handler``, by
        default the worker handler's with ``worker``."""
        handler = record_handler or self.record_handler(worker)
        return Pump(self.sqs, self.queue_url, partial_batches(handler), visibility_timeout=30)

    def record_handler(self, worker: Worker | None = None) -> Callable[[Any], str]:
        """The worker handler's record handler, with ``worker`` (a new one if none is given)."""
        from functions.worker.handler import handle_record

        chosen = worker or self.worker()
        return lambda record: handle_record(record, self.runtime, chosen)

    def drain(self, rounds: int = 20, worker: Worker | None = None) -> int:
        """Deliver every message visible now to the worker until the queue is quiet; returns how many."""
        return self.pump(worker=worker).drain(rounds)

    def run(self, tenant: str, run_id: str) -> Run:
        """A run as the API shows it (a fire sent and not yet recorded included)."""
        return self.runtime.service.get_run(tenant, run_id, self.clock())

    def runs_of(self, tenant: str, job_id: str) -> list[Run]:
        """The job's runs as the API lists them, newest first."""
        page = self.runtime.service.list_runs(tenant, job_id, limit=100, cursor=None, now=self.clock())
        return page.items

    def message_for(self, run: Run) -> RunMessage:
        return RunMessage(tenant_id=run.tenant_id, run_id=run.run_id)

    def dead_letters(self) -> list[dict[str, Any]]:
        url = self.sqs.get_queue_url(QueueName=tables.DEAD_RUN_QUEUE.default_name)["QueueUrl"]
        messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
        return [json.loads(m["Body"]) for m in messages.get("Messages", [])]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


@pytest.fixture
def engine(dynamodb: Any, receiver: Receiver) -> Iterator[Engine]:
    sqs = boto3.client("sqs", region_name="eu-west-1")
    urls = {
        queue.logical_name: sqs.create_queue(QueueName=queue.default_name)["QueueUrl"]
        for queue in tables.ALL_QUEUES
    }
    settings = Settings(
        run_queue_url=urls[tables.RUN_QUEUE.logical_name],
        dead_run_queue_url=urls[tables.DEAD_RUN_QUEUE.logical_name],
        allow_private_targets=True,
        due_shards=2,
        attention_shards=2,
        planner_horizon_seconds=60,
        planner_lookahead_seconds=10,
        # The engine moves in whole steps: a message comes at its fire, as the steps' tests expect (the
        # reads ahead of a fire are tested on a worker handed its message early).
        send_lead_ms=0,
    )
    make_requests_atomic(dynamodb)
    metrics = RecordingMetrics()
    current = build_runtime(settings, dynamodb=dynamodb, sqs=sqs, metrics=metrics)
    for tenant_id, token in (("acme", "tw_acme"), ("globex", "tw_globex")):
        seed_tenant(dynamodb, tenant_id, token)
    clock = FakeClock(START)
    # moto's SQS measures delays and visibility on the wall clock: make it read the fake one
    with sqs_follows(clock):
        yield Engine(current, clock, metrics, receiver, sqs, dynamodb)
