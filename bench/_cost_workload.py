"""The fixed workload behind ``bench.cost``: real planner, dispatcher, worker and sweeper code under moto.

Scenarios, each metered on its own:

- ``idle_tick``: planner ticks with nothing due (the fixed cost of a tick: due-index and sweeper queries);
- ``create``: one ``POST /v1/jobs`` through the API Gateway stand-in (authorizer and API handler);
- ``recurring``: 10 jobs firing every 60 s, five fires each, all answered 200 (steady state: one tick
  per minute plans each job's next fire);
- ``limited``: the same for a tenant whose ``max_in_flight`` (10) is below the worker's maximum concurrency
  (50, as deployed), so every lease and finish also moves the tenant's in-flight counter;
- ``once``: 10 one-time jobs, answered 200;
- ``retry``: one run answered 503 then 200 (one retry);
- ``dead``: one run answered 503 until its two attempts are spent (DEAD, dead-run queue).

Every scenario but ``idle_tick`` has the fixed cost of its ticks taken out, so its figures are per run.
The planner horizon is 1 s and ticks fall on the fire times: moto holds delayed messages in real time, so
the fake clock can only drive runs whose delay is 0. On AWS, with a 5-minute horizon and a tick a minute,
a job firing every minute also gets one cursor move per fire, as here.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._cost_meter import Meter, Tally

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
TENANT, TOKEN = "acme", "tw_cost-bench"
LIMITED, LIMITED_TOKEN = "small", "tw_cost-bench-small"
RECURRING_JOBS, RECURRING_FIRES, ONCE_JOBS, IDLE_TICKS = 10, 5, 10, 3
LIMITED_MAX_IN_FLIGHT = 10


@dataclass
class Scenario:
    runs: int
    tally: Tally
    invocations: int = 0
    """Lambda invocations of the worker (batches), or of the API and authorizer for ``create``."""
    ticks: int = 0
    handler_ms: list[float] = field(default_factory=list)
    """Wall time of each worker message (or API call), in process, moto included."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "ticks": self.ticks,
            "invocations": self.invocations,
            "handler_ms": round(statistics.median(self.handler_ms), 2) if self.handler_ms else 0.0,
            "requests": dict(sorted(self.tally.requests.items())),
            "wru": dict(sorted(self.tally.wru.items())),
            "index_wru": dict(sorted(self.tally.index_wru.items())),
            "rru": dict(sorted(self.tally.rru.items())),
        }


def _environment() -> None:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Tickwork")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    os.environ.setdefault("POWERTOOLS_DEV", "0")
    os.environ["AWS_DEFAULT_REGION"] = "eu-west-1"
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"  # noqa: S105 - moto's throwaway credentials
    os.environ.pop("AWS_PROFILE", None)


def run_workload() -> dict[str, Any]:
    """Run every scenario in one moto session; figures as plain data (see ``Scenario.as_dict``)."""
    _environment()
    from moto import mock_aws

    with mock_aws():
        return _Bench().run()


class _Bench:
    def __init__(self) -> None:
        import boto3
        from tickwork import tables
        from tickwork.adapters.tenants import DynamoTenantStore
        from tickwork.config import Settings
        from tickwork.domain.tenants import Tenant
        from tickwork.runtime import build_runtime, runtime

        from tests.support.engine import FakeClock, RecordingMetrics, make_requests_atomic, start_receiver

        self.dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
        self.sqs = boto3.client("sqs", region_name="eu-west-1")
        for definition in tables.ALL_TABLES:
            self.dynamodb.create_table(**definition.create_table_kwargs())
        urls = {
            q.logical_name: self.sqs.create_queue(QueueName=q.default_name)["QueueUrl"]
            for q in tables.ALL_QUEUES
        }
        os.environ[tables.RUN_QUEUE.env_var] = urls[tables.RUN_QUEUE.logical_name]
        os.environ[tables.DEAD_RUN_QUEUE.env_var] = urls[tables.DEAD_RUN_QUEUE.logical_name]
        settings = Settings(
            run_queue_url=urls[tables.RUN_QUEUE.logical_name],
            dead_run_queue_url=urls[tables.DEAD_RUN_QUEUE.logical_name],
            allow_private_targets=True,
            planner_horizon_seconds=1,
        )
        make_requests_atomic(self.dynamodb)
        self.clock = FakeClock(START)
        self.runtime = build_runtime(
            settings, dynamodb=self.dynamodb, sqs=self.sqs, metrics=RecordingMetrics()
        )
        tenant = Tenant(tenant_id=TENANT, name="Acme", signing_secret="s", created_at=START)  # noqa: S106
        store = DynamoTenantStore(self.dynamodb, table=tables.TENANTS.default_name)
        store.put(tenant, token=TOKEN)
        limited = Tenant(
            tenant_id=LIMITED,
            name="Small",
            signing_secret="s",  # noqa: S106
            created_at=START,
            max_in_flight=LIMITED_MAX_IN_FLIGHT,
        )
        store.put(limited, token=LIMITED_TOKEN)
        self._receiver_iter = start_receiver()
        self.receiver = next(self._receiver_iter)
        self.meter = Meter(boto3.client("dynamodb", region_name="eu-west-1"))
        self.meter.attach(self.dynamodb)
        self.meter.attach(self.sqs)
        runtime.cache_clear()
        self.process_runtime = runtime()
        self.meter.attach(self.process_runtime.dynamodb)
        self.meter.attach(self.process_runtime.sqs)
        self.worker = self.runtime.worker(clock=self.clock, sleep=self.clock.sleep)

    # --- drivers ------------------------------------------------------------------------------------------
    def tick(self) -> None:
        self.runtime.planner_tick.tick(self.clock(), list(range(self.runtime.settings.due_shards)))

    def drain(self, scenario: Scenario) -> None:
        """What the event source mapping does: receive up to 10, invoke the worker once per batch, delete
        the messages it finished in one batch call. The last, empty receive is polling, not per-run cost."""
        from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

        from functions.worker.handler import handle_record
        from tests.support.engine import sqs_event

        url = self.runtime.queue_url

        def timed(record: Any) -> str:
            started = time.perf_counter()
            try:
                return handle_record(record, self.runtime, self.worker)
            finally:
                scenario.handler_ms.append((time.perf_counter() - started) * 1000)

        while True:
            response: Any = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            messages: list[dict[str, Any]] = response.get("Messages", [])
            if not messages:
                self.meter.tally.requests["sqs.ReceiveMessage"] -= 1
                return
            scenario.invocations += 1
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
            event = sqs_event(messages, "arn:aws:sqs:eu-west-1:123456789012:tickwork-runs")
            result = process_partial_response(event=event, record_handler=timed, processor=processor)
            failed = {failure["itemIdentifier"] for failure in result["batchItemFailures"]}
            done = [m for m in messages if m["MessageId"] not in failed]
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
                )

    def create(self, tenant: str = TENANT, **spec: Any) -> str:
        from tickwork.domain.models import JobSpec

        body = {"name": f"job-{uuid.uuid4().hex[:12]}", **spec}
        details = self.runtime.service.create_job(tenant, JobSpec.model_validate(body), self.clock())
        return details.job.job_id

    def http(self, path: str) -> dict[str, Any]:
        return {"type": "http", "url": self.receiver.url(path), "timeout_seconds": 5}

    def metered(self, body: Callable[[Scenario], None], runs: int) -> Scenario:
        before = self.meter.tally.snapshot()
        scenario = Scenario(runs=runs, tally=Tally())
        body(scenario)
        scenario.tally = self.meter.tally.minus(before)
        return scenario

    # --- scenarios ----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        try:
            idle = self.metered(self._idle, IDLE_TICKS)
            results = {"idle_tick": idle, "create": self.metered(self._create_over_api, 1)}
            for name, body, runs in (
                ("recurring", self._recurring, RECURRING_JOBS * RECURRING_FIRES),
                ("limited", self._limited, RECURRING_JOBS * RECURRING_FIRES),
                ("once", self._once, ONCE_JOBS),
                ("retry", self._retry, 1),
                ("dead", self._dead, 1),
            ):
                scenario = self.metered(body, runs)
                _take_out_ticks(scenario, idle)
                results[name] = scenario
            self._check(results)
            figures: dict[str, Any] = {name: scenario.as_dict() for name, scenario in results.items()}
            figures["item_bytes"] = dict(self.meter.tally.item_bytes)
            return figures
        finally:
            next(self._receiver_iter, None)

    def _idle(self, scenario: Scenario) -> None:
        for _ in range(IDLE_TICKS):
            self.clock.advance(seconds=1)
            started = time.perf_counter()
            self.tick()
            scenario.handler_ms.append((time.perf_counter() - started) * 1000)
        scenario.ticks = IDLE_TICKS

    def _create_over_api(self, scenario: Scenario) -> None:
        from functions.api import handler as api_handler
        from functions.authorizer import handler as authorizer_handler
        from tests.support.apigw import ApiGateway

        gateway = ApiGateway(api_handler.lambda_handler, authorizer_handler.lambda_handler)
        body = {
            "name": "nightly-report",
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Paris"},
            "target": {"type": "http", "url": "https://hooks.example.com/report"},
        }
        started = time.perf_counter()
        response = gateway.request("POST", "/v1/jobs", token=TOKEN, body=body)
        scenario.handler_ms.append((time.perf_counter() - started) * 1000)
        if response.status != 201:
            raise RuntimeError(f"create failed: {response.status} {response.body}")
        scenario.invocations = 2  # the authorizer and the API function

    def _limited(self, scenario: Scenario) -> None:
        self._recurring(scenario, LIMITED)

    def _recurring(self, scenario: Scenario, tenant: str = TENANT) -> None:
        first = self.clock() + timedelta(minutes=1)
        first = first.replace(second=0, microsecond=0)
        job_ids: list[str] = []
        with self._unmetered():
            for i in range(RECURRING_JOBS):
                job_ids.append(
                    self.create(
                        tenant,
                        schedule={"type": "rate", "every_seconds": 60, "start_at": first.isoformat()},
                        target=self.http(f"/recurring-{i}"),
                        payload={"report": "daily", "n": i},
                    )
                )
        for fire in range(RECURRING_FIRES):
            self.clock.now = first + timedelta(minutes=fire)
            self.tick()
            self.drain(scenario)
        scenario.ticks = RECURRING_FIRES
        with self._unmetered():
            for job_id in job_ids:
                self.runtime.service.cancel_job(tenant, job_id, self.clock())

    def _once(self, scenario: Scenario) -> None:
        at = self.clock().replace(second=0, microsecond=0) + timedelta(minutes=10)
        with self._unmetered():
            for i in range(ONCE_JOBS):
                self.create(schedule={"type": "once", "at": at.isoformat()}, target=self.http(f"/once-{i}"))
        self.clock.now = at
        self.tick()
        self.drain(scenario)
        scenario.ticks = 1

    def _retry(self, scenario: Scenario) -> None:
        self._failing(scenario, "/retry", [503, 200], max_attempts=3)

    def _dead(self, scenario: Scenario) -> None:
        self._failing(scenario, "/dead", [503], max_attempts=2)

    def _failing(self, scenario: Scenario, path: str, statuses: list[int], *, max_attempts: int) -> None:
        self.receiver.script[path] = list(statuses)
        at = self.clock().replace(second=0, microsecond=0) + timedelta(minutes=10)
        retry = {"max_attempts": max_attempts, "initial_delay_seconds": 1, "jitter": "none"}
        with self._unmetered():
            self.create(schedule={"type": "once", "at": at.isoformat()}, target=self.http(path), retry=retry)
        self.clock.now = at
        self.tick()
        self.drain(scenario)
        for _ in range(max_attempts):
            # the retry's 1 s SQS delay is real time under moto
            self.clock.advance(seconds=1)
            time.sleep(1.1)
            self.drain(scenario)
        scenario.ticks = 1

    @contextmanager
    def _unmetered(self) -> Iterator[None]:
        """Set-up calls (creating and cancelling the workload's jobs) are not part of what is measured."""
        before = self.meter.tally.snapshot()
        yield
        for name in ("requests", "wru", "rru", "index_wru"):
            mine, theirs = getattr(self.meter.tally, name), getattr(before, name)
            for key in list(mine):
                mine[key] = theirs.get(key, 0)

    def _check(self, results: dict[str, Scenario]) -> None:
        """The workload must have done what it says, or its figures mean nothing."""
        from tickwork.domain.models import RunStatus

        statuses: dict[str, int] = {}
        for item in self.dynamodb.scan(TableName=self.runtime.settings.runs_table)["Items"]:
            statuses[item["status"]["S"]] = statuses.get(item["status"]["S"], 0) + 1
        expected_ok = 2 * RECURRING_JOBS * RECURRING_FIRES + ONCE_JOBS + 1
        if statuses.get(RunStatus.SUCCEEDED.value) != expected_ok or statuses.get(RunStatus.DEAD.value) != 1:
            raise RuntimeError(f"the workload did not end as planned: {statuses}")


def _take_out_ticks(scenario: Scenario, idle: Scenario) -> None:
    """Remove the fixed cost of the scenario's ticks (as measured on idle ticks)."""
    for name in ("requests", "wru", "rru", "index_wru"):
        mine, fixed = getattr(scenario.tally, name), getattr(idle.tally, name)
        for key, value in fixed.items():
            mine[key] = mine.get(key, 0) - value * scenario.ticks / idle.ticks
            if abs(mine[key]) < 1e-9:
                del mine[key]
