"""Every AWS call each function makes, recorded while it works under moto, is allowed by that function's
role in the synthesized template: least privilege that still works.

The flows go through the real handlers and code paths: the API and the authorizer through the gateway
stand-in, the planner tick (with its sweeper), and the worker with successes, a retry and a dead run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.client
import pytest
from tickwork import tables
from tickwork.runtime import runtime

from tests.infra.conftest import Synthesized, default_stack  # noqa: F401 - fixture
from tests.integration.conftest import START, Engine, engine, receiver  # noqa: F401 - fixtures
from tests.support.apigw import ApiGateway
from tests.support.engine import WorkerDied

# Calls the event source mapping makes for the worker, not the worker's code.
MAPPING_CALLS = frozenset({"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch"})
TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
SQS_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
TABLE_NAMES = {definition.default_name: definition.logical_name for definition in tables.ALL_TABLES}
QUEUE_NAMES = {queue.default_name: queue.logical_name for queue in tables.ALL_QUEUES}

Call = tuple[str, str]  # (IAM action, table or queue logical name)


class CallRecorder:
    """Records which IAM action on which table or queue each AWS call needs, by the function making it."""

    def __init__(self) -> None:
        self.role: str | None = None
        self.calls: dict[str, set[Call]] = {}

    @contextlib.contextmanager
    def acting_as(self, role: str) -> Iterator[None]:
        previous, self.role = self.role, role
        try:
            yield
        finally:
            self.role = previous

    def wrap(self, role: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        def acting(*args: Any, **kwargs: Any) -> Any:
            with self.acting_as(role):
                return handler(*args, **kwargs)

        return acting

    def record(self, service: str, operation: str, params: dict[str, Any]) -> None:
        if self.role is None:
            return
        for call in needed_permissions(service, operation, params):
            self.calls.setdefault(self.role, set()).add(call)


def needed_permissions(service: str, operation: str, params: dict[str, Any]) -> list[Call]:
    if service == "sqs":
        if operation in MAPPING_CALLS:
            return []
        queue = params["QueueUrl"].rsplit("/", 1)[-1]
        return [(f"sqs:{SQS_ACTIONS.get(operation, operation)}", QUEUE_NAMES[queue])]
    if operation == "TransactWriteItems":
        return [
            (f"dynamodb:{TRANSACT_ACTIONS[kind]}", TABLE_NAMES[request["TableName"]])
            for item in params["TransactItems"]
            for kind, request in item.items()
        ]
    if operation == "TransactGetItems":
        return [
            ("dynamodb:GetItem", TABLE_NAMES[item["Get"]["TableName"]]) for item in params["TransactItems"]
        ]
    if operation in {"BatchWriteItem", "BatchGetItem"}:
        return [(f"dynamodb:{operation}", TABLE_NAMES[name]) for name in params["RequestItems"]]
    return [(f"dynamodb:{operation}", TABLE_NAMES[params["TableName"]])]


def granted(synthesized: Synthesized, attribute: str) -> set[Call]:
    """(action, table or queue) pairs the function's role allows, read from the template."""
    stack = synthesized.stack
    resources = {synthesized.logical_id(table): name for name, table in stack.storage.tables.items()}
    resources |= {
        synthesized.logical_id(stack.storage.run_queue): tables.RUN_QUEUE.logical_name,
        synthesized.logical_id(stack.storage.run_dlq): tables.RUN_QUEUE_DLQ.logical_name,
        synthesized.logical_id(stack.storage.dead_run_queue): tables.DEAD_RUN_QUEUE.logical_name,
    }
    role = synthesized.logical_id(getattr(stack, attribute).role)
    allowed: set[Call] = set()
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            named = [
                name for logical_id, name in resources.items() if logical_id in str(statement["Resource"])
            ]
            allowed |= {(action, name) for action in actions for name in named}
    return allowed


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> CallRecorder:
    recording = CallRecorder()
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private, untyped

    def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
        recording.record(client.meta.service_model.service_name, operation, params)
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", spy)
    return recording


def exercise_every_function(engine: Engine, recorder: CallRecorder, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler

    # The handlers' own runtime, configured like the deployed functions, over the same moto tables and queues.
    monkeypatch.setenv(tables.RUN_QUEUE.env_var, engine.runtime.settings.run_queue_url or "")
    monkeypatch.setenv(tables.DEAD_RUN_QUEUE.env_var, engine.runtime.settings.dead_run_queue_url or "")
    monkeypatch.setenv("TICKWORK_ALLOW_PRIVATE_TARGETS", "true")
    runtime.cache_clear()
    gateway = ApiGateway(
        recorder.wrap("api_function", api_handler.lambda_handler),
        recorder.wrap("authorizer_function", authorizer_handler.lambda_handler),
    )

    def call(method: str, path: str, body: Any = None, **headers: str) -> Any:
        response = gateway.request(method, path, token="tw_acme", body=body, headers=headers)
        assert response.status < 300, (method, path, response.body)
        return response.body

    hook = engine.http("/ok")
    # The API's handler reads the wall clock, not the engine's fake one.
    soon = {"type": "once", "at": (datetime.now(UTC) + timedelta(days=1)).isoformat()}
    job = call(
        "POST", "/v1/jobs", {"name": "api", "schedule": soon, "target": hook}, **{"Idempotency-Key": "k1"}
    )
    call("GET", f"/v1/jobs/{job['job_id']}")
    call("GET", "/v1/jobs")
    call("PATCH", f"/v1/jobs/{job['job_id']}", {"version": job["version"], "payload": {"a": 1}})
    call("POST", f"/v1/jobs/{job['job_id']}/pause", {"reason": "checking"})
    call("POST", f"/v1/jobs/{job['job_id']}/resume")
    run = call("POST", f"/v1/jobs/{job['job_id']}/trigger", **{"Idempotency-Key": "t1"})
    call("GET", f"/v1/jobs/{job['job_id']}/runs")
    call("GET", f"/v1/runs/{run['run_id']}")
    call("GET", "/v1/stats")
    call("POST", "/v1/schedule-preview", {"schedule": {"type": "rate", "every_seconds": 60}, "count": 2})

    # Work for the planner, the sweeper and the worker: fires due now, a retry, a dead run, an expired lease.
    engine.receiver.script["/down"] = [503]
    now = {"type": "once", "at": START.isoformat()}
    with recorder.acting_as("api_function"):
        engine.create(
            schedule=now, target=engine.http("/flaky"), retry={"max_attempts": 3, "initial_delay_seconds": 0}
        )
        down = engine.create(
            schedule=now, target=engine.http("/down"), retry={"max_attempts": 2, "initial_delay_seconds": 0}
        ).job
        crashed = engine.create(schedule=now, target=engine.http("/crash")).job
    engine.receiver.script["/flaky"] = [500, 200]
    with recorder.acting_as("planner_function"):
        engine.tick()

    # A worker that took the job's lane and died: the message comes back, and after the lease the run is
    # taken over.
    def die(job: Any, run: Any, tenant: Any) -> Any:
        if run.job_id == crashed.job_id:
            raise WorkerDied
        return engine.runtime.execute(job, run, tenant)

    (lost,) = engine.runs_of("acme", crashed.job_id)
    dying = engine.runtime.worker(clock=engine.clock, sleep=engine.clock.sleep, execute=die)
    with recorder.acting_as("worker_function"), contextlib.suppress(WorkerDied):
        engine.drain(worker=dying)
    for _ in range(3):
        engine.clock.advance(seconds=30)
        with recorder.acting_as("planner_function"):
            engine.tick()
        with recorder.acting_as("worker_function"):
            engine.drain()
    with recorder.acting_as("worker_function"):
        engine.drain()
    assert engine.run("acme", lost.run_id).status.value == "SUCCEEDED"

    # A re-run of a dead run, and a cancel, through the API.
    (dead,) = engine.runs_of("acme", down.job_id)
    assert dead.status.value == "DEAD"
    call("POST", f"/v1/runs/{dead.run_id}/retry")
    call("DELETE", f"/v1/jobs/{job['job_id']}")


def test_each_role_allows_every_call_its_function_makes(
    engine: Engine,  # noqa: F811
    recorder: CallRecorder,
    monkeypatch: pytest.MonkeyPatch,
    default_stack: Synthesized,  # noqa: F811
) -> None:
    exercise_every_function(engine, recorder, monkeypatch)
    assert set(recorder.calls) == {
        "api_function",
        "authorizer_function",
        "planner_function",
        "worker_function",
    }
    for role, calls in recorder.calls.items():
        missing = calls - granted(default_stack, role)
        assert not missing, f"{role} makes calls its role does not allow: {sorted(missing)}"
    # The recording is not trivially small: the worker reads, claims lanes, writes runs, re-sends and
    # dead-letters.
    worker = recorder.calls["worker_function"]
    assert ("sqs:SendMessage", tables.DEAD_RUN_QUEUE.logical_name) in worker
    assert ("sqs:SendMessage", tables.RUN_QUEUE.logical_name) in worker
    assert ("dynamodb:UpdateItem", tables.JOBS.logical_name) in worker
    assert ("dynamodb:PutItem", tables.RUNS.logical_name) in worker
    assert ("dynamodb:Query", tables.RUNS.logical_name) in recorder.calls["planner_function"]
