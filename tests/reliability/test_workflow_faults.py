"""Workflow runs under faults (moto, the real worker and sweeper, a loopback receiver, a fake clock): messages
delivered twice (to two workers at once, or after the first delivery's end), workers killed between writes,
sweepers racing each other and the workers, and cancels racing the tasks.

Whatever the interleaving, once the queue is quiet: each task's target was called once per attempt of its run
(the receiver counts the calls by Idempotency-Key and attempt), each task's run was created once and ended
once, the fan-in recorded each task's end once, the workflow run ended once with the status its tasks give
it, and no task's run is left PLANNED, ENQUEUED, RUNNING or waiting for a retry: nothing hangs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from tickwork import tables
from tickwork.app.worker import Worker
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import Job, Run, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.workflow import child_run_id, parse_child_run_id
from tickwork.targets import TargetResult

from tests.reliability.conftest import Engine
from tests.support.engine import WorkerDied

VISIBILITY = 30  # the pump's visibility timeout: a message not deleted comes back after it


# --- what was written ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunWrite:
    """A run item's write that applied: its status, and whether it created the item."""

    run_id: str
    status: RunStatus
    created: bool
    expected: frozenset[str] | None  # the statuses its condition expected (None: any, or absent)


@dataclass
class Ledger:
    """Every write to the runs table that applied, as DynamoDB applied it (its answer was 200): the run
    items' writes, and the ends the fan-in recorded (by task id)."""

    runs: list[RunWrite] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") != tables.RUNS.default_name:
            return
        if model.name == "PutItem":
            item = params["Item"]
            if "run_id" not in item or "status" not in item:
                return
            condition = str(params.get("ConditionExpression", ""))
            values = params.get("ExpressionAttributeValues", {})
            statuses = frozenset(
                value["S"]
                for value in values.values()
                if "S" in value and value["S"] in RunStatus.__members__
            )
            context["ledger"] = RunWrite(
                run_id=item["run_id"]["S"],
                status=RunStatus(item["status"]["S"]),
                created="attribute_exists(" not in condition,
                expected=statuses or None,
            )
        elif model.name == "UpdateItem" and params["Key"][tables.RUNS_SK]["S"] == tables.TASK_ENDS_SK:
            name = params["ExpressionAttributeNames"]["#end"]
            context["ledger"] = name[len(tables.TASK_END_PREFIX) :]

    def _after(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        written = context.pop("ledger", None)
        if written is None or http_response.status_code != 200:
            return
        with self.lock:
            if isinstance(written, RunWrite):
                self.runs.append(written)
            else:
                self.ends.append(written)

    @contextmanager
    def installed(self, client: Any) -> Iterator[Ledger]:
        for operation in ("PutItem", "UpdateItem"):
            client.meta.events.register_first(f"before-parameter-build.dynamodb.{operation}", self._before)
            client.meta.events.register_last(f"after-call.dynamodb.{operation}", self._after)
        try:
            yield self
        finally:
            for operation in ("PutItem", "UpdateItem"):
                client.meta.events.unregister(f"before-parameter-build.dynamodb.{operation}", self._before)
                client.meta.events.unregister(f"after-call.dynamodb.{operation}", self._after)

    def created(self) -> Counter[str]:
        return Counter(write.run_id for write in self.runs if write.created)

    def ended(self) -> Counter[str]:
        """How often each run moved into an end (a write that keeps an ended run's status is not counted)."""
        return Counter(
            write.run_id
            for write in self.runs
            if write.status in TERMINAL
            and (write.expected is None or write.status.value not in write.expected)
        )


@pytest.fixture
def ledger(engine: Engine) -> Iterator[Ledger]:
    with Ledger().installed(engine.dynamodb) as recording:
        yield recording


# --- the workflows ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Flow:
    job_id: str
    run_id: str
    tasks: tuple[str, ...]

    def task_run_id(self, task_id: str) -> str:
        return child_run_id(self.run_id, task_id)


def flow(engine: Engine, name: str, graph: dict[str, list[str]], **fields: Any) -> Flow:
    """A one-time workflow job due now, its tasks ``graph`` (task id: its parents), each task's target the
    receiver's path ``/<name>/<task id>``. Its fire is sent: the first drain starts it."""
    tasks = [
        {"id": task_id, "target": engine.http(f"/{name}/{task_id}"), "depends_on": parents, "retry": RETRY}
        for task_id, parents in graph.items()
    ]
    at = engine.clock()
    workflow = {"type": "workflow", "tasks": tasks, **fields}
    job_id = engine.create(schedule={"type": "once", "at": at.isoformat()}, target=workflow).job.job_id
    return Flow(job_id, scheduled_run_id(job_id, at), tuple(graph))


RETRY = {"max_attempts": 2, "initial_delay_seconds": 1, "jitter": "none"}


def diamond(engine: Engine, name: str, **fields: Any) -> Flow:
    graph = {"extract": [], "left": ["extract"], "right": ["extract"], "load": ["left", "right"]}
    return flow(engine, name, graph, **fields)


def fan_in(engine: Engine, name: str, width: int = 50, **fields: Any) -> Flow:
    parts = [f"part-{index}" for index in range(width)]
    graph = {"extract": [], **{part: ["extract"] for part in parts}, "load": parts}
    return flow(engine, name, graph, **fields)


def stored(engine: Engine, run_id: str) -> Run:
    return engine.runtime.runs.get("acme", run_id)


def task_runs(engine: Engine, workflow: Flow) -> dict[str, Run]:
    runs = engine.runtime.runs.tasks_of("acme", stored(engine, workflow.run_id))
    found = {}
    for run in runs:
        child = parse_child_run_id(run.run_id)
        assert child is not None
        found[child.task_id] = run
    return found


# --- delivering ---------------------------------------------------------------------------------------------
def message(run_id: str) -> RunMessage:
    return RunMessage(tenant_id="acme", run_id=run_id)


def settle(engine: Engine, workflow: Flow, rounds: int = 30) -> None:
    """Deliver, let leases and visibility timeouts pass and the sweeper look, until the workflow run has ended
    and the queue is quiet."""
    for _ in range(rounds):
        delivered = engine.drain()
        if not delivered and stored(engine, workflow.run_id).status in TERMINAL:
            # one more pass past every grace: whatever was left would show now
            engine.clock.advance(seconds=VISIBILITY + 61)
            engine.tick()
            if not engine.drain():
                return
        engine.clock.advance(seconds=VISIBILITY + 1)
        engine.tick()
    raise AssertionError(f"the workflow run did not settle: {stored(engine, workflow.run_id).status}")


def until_killed(engine: Engine, worker: Worker | None = None, rounds: int = 10) -> WorkerDied:
    """Deliver (to ``worker``), a second later again, until a worker's process dies: its batch is left for
    SQS to deliver again after its visibility timeout."""
    for _ in range(rounds):
        try:
            engine.drain(worker=worker)
        except WorkerDied as died:
            return died
        engine.clock.advance(seconds=1)
    raise AssertionError("no worker was killed")


def at_once(*calls: Callable[[], Any]) -> list[BaseException | None]:
    """Each call in a thread of its own, released together; what each raised (None: nothing)."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException | None] = [None] * len(calls)

    def one(index: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as error:
            errors[index] = error

    threads = [threading.Thread(target=one, args=pair, daemon=True) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    return errors


def racing_drain(engine: Engine, copies: int = 2, rounds: int = 40) -> None:
    """The run queue delivered to ``copies`` workers at once: each message of a receive (up to ten) handed to
    each of them, every handling of the receive in a thread of its own, released together; then deleted."""
    pump = engine.pump()
    for _ in range(rounds):
        received = pump.receive()
        if not received:
            return
        calls = [
            (
                lambda body=record["Body"], copy=copy: engine.worker(f"w{copy}").handle(
                    RunMessage.model_validate_json(body)
                )
            )
            for record in received
            for copy in range(copies)
        ]
        errors = at_once(*calls)
        assert errors == [None] * len(calls), errors
        pump.delete(received)
    raise AssertionError("the queue did not go quiet")


# --- what must hold at the end ------------------------------------------------------------------------------
def calls_by_attempt(engine: Engine, name: str) -> Counter[tuple[str, int]]:
    return Counter(
        (request.headers["Idempotency-Key"], request.json()["attempt"])
        for request in engine.receiver.requests
        if request.path.startswith(f"/{name}/")
    )


def assert_once_and_settled(
    engine: Engine,
    ledger: Ledger,
    workflow: Flow,
    name: str,
    status: RunStatus,
    tasks: dict[str, RunStatus] | None = None,
) -> dict[str, Run]:
    """Every task's target called once per attempt; each task's run created once and ended once; its end
    recorded once in the fan-in; the workflow run ended once, with ``status``; nothing left waiting."""
    runs = task_runs(engine, workflow)
    assert set(runs) == set(workflow.tasks)
    hanging = {task_id: run.status for task_id, run in runs.items() if run.status not in TERMINAL}
    assert hanging == {}, hanging
    if tasks is not None:
        assert {task_id: run.status for task_id, run in runs.items()} == tasks
    calls = calls_by_attempt(engine, name)
    assert set(calls.values()) <= {1}, {key: count for key, count in calls.items() if count > 1}
    expected_calls = {(run.run_id, attempt.attempt) for run in runs.values() for attempt in run.attempts}
    assert set(calls) == expected_calls
    task_ids = {workflow.task_run_id(task_id) for task_id in workflow.tasks}
    assert {run_id: n for run_id, n in ledger.created().items() if run_id in task_ids} == dict.fromkeys(
        task_ids, 1
    )
    ended = ledger.ended()
    assert {run_id: ended[run_id] for run_id in task_ids} == dict.fromkeys(task_ids, 1)
    assert Counter(ledger.ends) == dict.fromkeys(workflow.tasks, 1)
    workflow_run = stored(engine, workflow.run_id)
    assert workflow_run.status is status
    assert ended[workflow.run_id] == 1
    assert engine.dead_letters() == [] or status is not RunStatus.SUCCEEDED
    return runs


ALL_SUCCEEDED = RunStatus.SUCCEEDED


# --- (a) the workflow run's own message delivered twice -----------------------------------------------------
def test_the_workflow_runs_message_to_two_workers_at_once_starts_its_roots_once(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a diamond whose fire reaches two workers at once
    workflow = diamond(engine, "twice-at-once")
    errors = at_once(*(lambda w=w: engine.worker(w).handle(message(workflow.run_id)) for w in ("a", "b")))
    assert errors == [None, None]
    # When everything after it is delivered
    settle(engine, workflow)
    # Then the root started once, and the run ended once
    assert ledger.created()[workflow.task_run_id("extract")] == 1
    assert_once_and_settled(engine, ledger, workflow, "twice-at-once", ALL_SUCCEEDED)


def test_the_workflow_runs_message_again_after_it_started_and_after_it_ended_starts_nothing_again(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a diamond started by its fire's first delivery
    workflow = diamond(engine, "twice-after")
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    assert engine.worker("a").handle(message(workflow.run_id)) == "workflow started"
    # When its message comes again while its root waits, and again once it has ended
    engine.worker("b").handle(message(workflow.run_id))
    settle(engine, workflow)
    engine.worker("c").handle(message(workflow.run_id))
    settle(engine, workflow)
    # Then the root started once and the run ended once
    assert_once_and_settled(engine, ledger, workflow, "twice-after", ALL_SUCCEEDED)


# --- (b) each task's message delivered twice ----------------------------------------------------------------
def settle_racing(engine: Engine, workflow: Flow, rounds: int = 30) -> None:
    """As :func:`settle`, every delivery to two workers at once."""
    for _ in range(rounds):
        racing_drain(engine)
        if stored(engine, workflow.run_id).status in TERMINAL:
            engine.clock.advance(seconds=VISIBILITY + 61)
            engine.tick()
            if not engine.pump().receive():
                return
        engine.clock.advance(seconds=VISIBILITY + 1)
        engine.tick()
    raise AssertionError(f"the workflow run did not settle: {stored(engine, workflow.run_id).status}")


def send_every_message_again(engine: Engine, workflow: Flow) -> None:
    for run_id in (workflow.run_id, *map(workflow.task_run_id, workflow.tasks)):
        engine.runtime.queue.send_later(message(run_id), 0)


def test_every_message_to_two_workers_at_once_runs_each_task_once(engine: Engine, ledger: Ledger) -> None:
    # Given a diamond, every message of it delivered to two workers at once
    workflow = diamond(engine, "racing")
    settle_racing(engine, workflow)
    # Then each task ran once, and the run ended once
    assert_once_and_settled(engine, ledger, workflow, "racing", ALL_SUCCEEDED)
    # And every message delivered again once it has all ended (twice at once) changes nothing
    send_every_message_again(engine, workflow)
    settle_racing(engine, workflow)
    assert_once_and_settled(engine, ledger, workflow, "racing", ALL_SUCCEEDED)


def test_a_fifty_wide_fan_in_under_racing_duplicate_deliveries_runs_each_task_once(
    engine: Engine, ledger: Ledger
) -> None:
    # Given extract -> 50 parts -> load, every message delivered to two workers at once, ten at a time
    workflow = fan_in(engine, "wide")
    settle_racing(engine, workflow)
    # Then each part ran once, the fan-in counted each end once, and load ran once, after every part
    runs = assert_once_and_settled(engine, ledger, workflow, "wide", ALL_SUCCEEDED)
    [load] = engine.receiver.for_path("/wide/load")
    assert all(call.at <= load.at for call in engine.receiver.requests if call.path.startswith("/wide/part-"))
    assert runs["load"].attempt == 1
    # And all of it delivered again, twice at once, changes nothing
    send_every_message_again(engine, workflow)
    settle_racing(engine, workflow)
    assert_once_and_settled(engine, ledger, workflow, "wide", ALL_SUCCEEDED)


def test_a_failed_task_under_racing_duplicate_deliveries_ends_the_run_failed_once(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a diamond under `continue` whose right task's target answers 404, every message twice at once
    engine.receiver.script["/racing-failed/right"] = [404]
    workflow = diamond(engine, "racing-failed", failure_mode="continue")
    settle_racing(engine, workflow)
    send_every_message_again(engine, workflow)
    settle_racing(engine, workflow)
    # Then right failed once, load was skipped once (never called), and the run FAILED once
    assert_once_and_settled(
        engine,
        ledger,
        workflow,
        "racing-failed",
        RunStatus.FAILED,
        {
            "extract": RunStatus.SUCCEEDED,
            "left": RunStatus.SUCCEEDED,
            "right": RunStatus.FAILED,
            "load": RunStatus.SKIPPED,
        },
    )


# --- (c) a worker killed after the call ---------------------------------------------------------------------
def killed_after_calling(engine: Engine, task_id: str) -> Worker:
    """A worker whose process dies once it has called ``task_id``'s target (its first attempt), before it
    records anything."""

    def execute(job: Job, run: Run, tenant: Any) -> TargetResult:
        result: TargetResult = engine.runtime.execute(job, run, tenant)
        if run.run_id.endswith(f"/{task_id}") and run.attempt == 1:
            raise WorkerDied(f"killed after calling {task_id}")
        return result

    return engine.runtime.worker(
        clock=engine.clock, sleep=engine.clock.sleep, execute=execute, worker_id="doomed"
    )


@pytest.mark.parametrize("task_id", ["extract", "left", "load"])
def test_a_worker_killed_after_a_tasks_call_has_its_attempt_taken_over_and_the_task_ends_once(
    engine: Engine, ledger: Ledger, task_id: str
) -> None:
    # Given a diamond, and the worker that calls task_id's target dying before it records the call
    name = f"killed-{task_id}"
    workflow = diamond(engine, name)
    until_killed(engine, killed_after_calling(engine, task_id))
    lost = stored(engine, workflow.task_run_id(task_id))
    assert (lost.status, lost.lease_owner) == (RunStatus.RUNNING, "doomed")
    # When its message comes back, after the lease, and the rest is delivered
    settle(engine, workflow)
    # Then the lost attempt was taken over: the task called again at attempt 2, ended once, its children
    # started once, the run ended once
    runs = assert_once_and_settled(engine, ledger, workflow, name, ALL_SUCCEEDED)
    assert [attempt.outcome for attempt in runs[task_id].attempts] == ["abandoned", "succeeded"]
