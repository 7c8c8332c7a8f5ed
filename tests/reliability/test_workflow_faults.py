"""Workflow runs under faults (moto, the real worker and sweeper, a loopback receiver, a fake clock): messages
delivered twice (to two workers at once, or after the first delivery's end), workers killed between writes,
repeats racing each other and a sweeper over what was left unsent, and cancels racing the tasks.

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
from datetime import datetime
from typing import Any

import pytest
from tickwork import tables
from tickwork.app.worker import Worker
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import Job, Run, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.workflow import child_run_id, parse_child_run_id
from tickwork.errors import TaskMessagesUnsent
from tickwork.targets import TargetResult

from bench._faults import SQS_SENDS, FaultInjector, FaultRule
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
    at: datetime

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
    return Flow(job_id, scheduled_run_id(job_id, at), tuple(graph), at)


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


def ended(engine: Engine, workflow: Flow) -> bool:
    """The workflow run is stored, and has ended."""
    found = engine.runtime.runs.find_many("acme", workflow.job_id, [workflow.run_id])
    return workflow.run_id in found and found[workflow.run_id].status in TERMINAL


def task_runs(engine: Engine, workflow: Flow) -> dict[str, Run]:
    key = Run(
        run_id=workflow.run_id,
        job_id=workflow.job_id,
        tenant_id="acme",
        scheduled_for=workflow.at,
        status=RunStatus.RUNNING,
        created_at=workflow.at,
    )
    runs = engine.runtime.runs.tasks_of("acme", key)
    found = {}
    for run in runs:
        child = parse_child_run_id(run.run_id)
        assert child is not None
        found[child.task_id] = run
    return found


def task_statuses(engine: Engine, workflow: Flow) -> dict[str, str]:
    found = engine.runtime.runs.find_many("acme", workflow.job_id, [workflow.run_id])
    statuses = {task_id: run.status.value for task_id, run in task_runs(engine, workflow).items()}
    run = found.get(workflow.run_id)
    return {"(the run)": run.status.value if run else "not stored", **statuses}


# --- delivering ---------------------------------------------------------------------------------------------
def message(run_id: str) -> RunMessage:
    return RunMessage(tenant_id="acme", run_id=run_id)


def settle(engine: Engine, workflow: Flow, rounds: int = 30) -> None:
    """Deliver, let leases and visibility timeouts pass and the sweeper look, until the workflow run has ended
    and the queue is quiet."""
    for _ in range(rounds):
        delivered = engine.drain()
        if not delivered and ended(engine, workflow):
            # one more pass past every grace: whatever was left would show now
            engine.clock.advance(seconds=VISIBILITY + 61)
            engine.tick()
            if not engine.drain():
                return
        engine.clock.advance(seconds=VISIBILITY + 1)
        engine.tick()
    raise AssertionError(f"the workflow run did not settle: {task_statuses(engine, workflow)}")


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
        if ended(engine, workflow):
            engine.clock.advance(seconds=VISIBILITY + 61)
            engine.tick()
            if not engine.pump().receive():
                return
        engine.clock.advance(seconds=VISIBILITY + 1)
        engine.tick()
    raise AssertionError(f"the workflow run did not settle: {task_statuses(engine, workflow)}")


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


# --- (d) a worker killed between the fan-in and the children ------------------------------------------------
@contextmanager
def dying(
    client: Any, operation: str, matches: Callable[[dict[str, Any]], bool], *, after: bool
) -> Iterator[list[str]]:
    """The process making the first call of ``operation`` that ``matches`` dies just before it, or just
    after the service applied it (``after``); the list names the calls it died at."""
    service = client.meta.service_model.service_id.hyphenize()
    died: list[str] = []

    def before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if died or not matches(params):
            return
        died.append(operation)
        if not after:
            raise WorkerDied(f"killed before {operation}")
        context["die_after"] = True

    def after_call(context: dict[str, Any], **_: Any) -> None:
        if context.pop("die_after", False):
            raise WorkerDied(f"killed after {operation}")

    client.meta.events.register_first(f"before-parameter-build.{service}.{operation}", before)
    # After every other handler of the call (the lock making moto's requests atomic is let go first)
    client.meta.events.register_last(f"after-call.{service}", after_call)
    try:
        yield died
    finally:
        client.meta.events.unregister(f"before-parameter-build.{service}.{operation}", before)
        client.meta.events.unregister(f"after-call.{service}", after_call)


def recording_end_of(task_id: str) -> Callable[[dict[str, Any]], bool]:
    def matches(params: dict[str, Any]) -> bool:
        names = params.get("ExpressionAttributeNames", {})
        return bool(names.get("#end") == tables.TASK_END_PREFIX + task_id)

    return matches


def creating(run_id: str) -> Callable[[dict[str, Any]], bool]:
    def matches(params: dict[str, Any]) -> bool:
        return bool(params.get("Item", {}).get("run_id", {}).get("S") == run_id)

    return matches


def creating_as(run_id: str, status: RunStatus) -> Callable[[dict[str, Any]], bool]:
    def matches(params: dict[str, Any]) -> bool:
        item = params.get("Item", {})
        return bool(
            item.get("run_id", {}).get("S") == run_id and item.get("status", {}).get("S") == status.value
        )

    return matches


def sending(run_id: str) -> Callable[[dict[str, Any]], bool]:
    def matches(params: dict[str, Any]) -> bool:
        return any(f'"{run_id}"' in entry["MessageBody"] for entry in params.get("Entries", []))

    return matches


def test_a_worker_killed_after_recording_a_tasks_end_before_deciding_its_children(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a diamond whose extract's worker dies once the fan-in has recorded extract's end
    workflow = diamond(engine, "after-fan-in")
    with dying(engine.dynamodb, "UpdateItem", recording_end_of("extract"), after=True) as died:
        until_killed(engine)
    assert died == ["UpdateItem"]
    assert engine.runtime.task_ends.read(stored(engine, workflow.run_id)) == {"extract": "succeeded"}
    assert set(task_runs(engine, workflow)) == {"extract"}  # no child stored, none sent
    # When extract's message comes back (its end found stored: a duplicate finishing what was left)
    settle(engine, workflow)
    # Then its children started once each, and the run ended once
    assert_once_and_settled(engine, ledger, workflow, "after-fan-in", ALL_SUCCEEDED)


@pytest.mark.parametrize("fault", ["before sending them", "after sending them, as one of them is claimed"])
def test_a_worker_killed_between_recording_a_tasks_end_and_its_children_starting(
    engine: Engine, ledger: Ledger, fault: str
) -> None:
    # Given a diamond whose extract's worker dies as it sends its children's messages (none sent, none stored:
    # a task's run is first written by its claim), or whose worker dies as it claims right (both sent)
    name = "unsent" if fault == "before sending them" else "claim-killed"
    workflow = diamond(engine, name)
    left, right = workflow.task_run_id("left"), workflow.task_run_id("right")
    if fault == "before sending them":
        killing = dying(engine.sqs, "SendMessageBatch", sending(left), after=False)
    else:
        killing = dying(engine.dynamodb, "PutItem", creating(right), after=False)
    with killing as died:
        until_killed(engine)
    assert died
    # When the dead worker's message comes back (extract's, a repeat that sends what has no run; or right's)
    settle(engine, workflow)
    # Then each child started once (sent maybe twice), and the run ended once
    assert_once_and_settled(engine, ledger, workflow, name, ALL_SUCCEEDED)


def test_a_fifty_wide_fan_ins_last_end_recorded_by_a_worker_killed_before_starting_the_child(
    engine: Engine, ledger: Ledger
) -> None:
    # Given extract -> 50 parts -> load, and the worker recording the end that completes load's parents
    # dying right after that write, before load is stored
    workflow = fan_in(engine, "wide-killed")
    recorded = {"count": 0}

    def completing_the_fan_in(params: dict[str, Any]) -> bool:
        if not str(params.get("ExpressionAttributeNames", {}).get("#end", "")).startswith(
            tables.TASK_END_PREFIX + "part-"
        ):
            return False
        recorded["count"] += 1
        return recorded["count"] == 50

    with dying(engine.dynamodb, "UpdateItem", completing_the_fan_in, after=True) as died:
        until_killed(engine, rounds=40)
    assert died
    assert len(engine.runtime.task_ends.read(stored(engine, workflow.run_id))) == 51
    assert "load" not in task_runs(engine, workflow)
    # When the rest is delivered (the dead worker's batch again after its visibility timeout)
    settle(engine, workflow)
    # Then load started once, after all 50, and the run ended once
    assert_once_and_settled(engine, ledger, workflow, "wide-killed", ALL_SUCCEEDED)


# --- (e) a worker killed around the workflow run's start ----------------------------------------------------
@pytest.mark.parametrize("fault", ["before its RUNNING write", "after it, before the roots are sent"])
def test_a_worker_killed_around_the_workflow_runs_start(engine: Engine, ledger: Ledger, fault: str) -> None:
    # Given a diamond whose fire's worker dies before writing the run RUNNING (nothing stored), or after it,
    # before sending the root; its message hidden for the run queue's visibility timeout (minutes)
    name = "before-running" if fault.startswith("before") else "before-sending"
    workflow = diamond(engine, name)
    long_hidden = engine.pump()
    long_hidden.visibility_timeout = 900
    if fault.startswith("before"):
        killing = dying(engine.dynamodb, "PutItem", creating(workflow.run_id), after=False)
    else:
        killing = dying(engine.sqs, "SendMessageBatch", sending(workflow.task_run_id("extract")), after=False)
    with killing as died, pytest.raises(WorkerDied):
        long_hidden.once()
    assert died
    # no task's run is stored before its claim: nothing for the sweeper, nothing started
    assert task_runs(engine, workflow) == {}
    # When the run's message comes back (started then, or found RUNNING: its unsent root sent)
    settle(engine, workflow, rounds=60)
    # Then the root ran once, its children once, and the workflow run ended once, SUCCEEDED
    assert_once_and_settled(engine, ledger, workflow, name, ALL_SUCCEEDED)


def test_a_triggered_workflow_run_whose_worker_died_before_running_ends_with_its_tasks(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a one-task workflow job triggered by hand (its run stored PLANNED), and the worker its message
    # reaches dying before writing the run RUNNING
    tasks = [{"id": "only", "target": engine.http("/triggered/only")}]
    schedule = {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"}
    job_id = engine.create(schedule=schedule, target={"type": "workflow", "tasks": tasks}).job.job_id
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    run = engine.runtime.service.trigger_job("acme", job_id, idempotency_key=None, now=engine.clock())
    workflow = Flow(job_id, run.run_id, ("only",), run.scheduled_for)
    long_hidden = engine.pump()
    long_hidden.visibility_timeout = 900
    with (
        dying(engine.dynamodb, "PutItem", creating_as(run.run_id, RunStatus.RUNNING), after=False) as died,
        pytest.raises(WorkerDied),
    ):
        long_hidden.once()
    assert died
    assert stored(engine, run.run_id).status is RunStatus.ENQUEUED
    # When the sweeper sends the waiting run again (its grace is shorter than the hidden message's), and
    # both messages are delivered
    settle(engine, workflow, rounds=60)
    # Then the task ran once and the workflow run ended with it
    assert_once_and_settled(engine, ledger, workflow, "triggered", ALL_SUCCEEDED)


# --- (f) racing repeats of what was left unsent -------------------------------------------------------------
def test_unsent_children_sent_again_by_racing_repeats_and_a_sweeper_start_each_once(
    engine: Engine, ledger: Ledger
) -> None:
    # Given a 50-wide fan-in whose extract ended while every send failed: its end recorded, none of its 50
    # children sent (and none stored: a task's run is first written by its claim)
    workflow = fan_in(engine, "resent")
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    assert engine.worker().handle(message(workflow.run_id)) == "workflow started"
    faults = FaultInjector([FaultRule("sqs", SQS_SENDS, 1.0, ("throttle",))])
    faults.install(engine.sqs)
    try:
        with pytest.raises(TaskMessagesUnsent):
            engine.worker().handle(message(workflow.task_run_id("extract")))
    finally:
        faults.uninstall(engine.sqs)
    assert engine.runtime.task_ends.read(stored(engine, workflow.run_id)) == {"extract": "succeeded"}
    assert set(task_runs(engine, workflow)) == {"extract"}
    # When extract's message comes back to two workers while the workflow run's comes back to two others
    # and a sweeper sweeps, all at once
    engine.clock.advance(seconds=31)
    now = engine.clock()
    errors = at_once(
        *(
            lambda copy=copy: engine.worker(f"w-extract-{copy}").handle(
                message(workflow.task_run_id("extract"))
            )
            for copy in range(2)
        ),
        *(
            lambda copy=copy: engine.worker(f"w-run-{copy}").handle(message(workflow.run_id))
            for copy in range(2)
        ),
        lambda: engine.runtime.sweeper.sweep(now),
    )
    assert errors == [None] * len(errors)
    # Then the parts were sent up to four times, and started once each, as was load
    settle(engine, workflow)
    assert_once_and_settled(engine, ledger, workflow, "resent", ALL_SUCCEEDED)


# --- (g) cancels racing the tasks ---------------------------------------------------------------------------
def outcome_of_tasks(runs: dict[str, Run]) -> RunStatus:
    """The status a workflow run ends with, from its tasks' ends."""
    statuses = {run.status for run in runs.values()}
    if statuses & {RunStatus.FAILED, RunStatus.DEAD, RunStatus.ABANDONED}:
        return RunStatus.FAILED
    return RunStatus.CANCELLED if RunStatus.CANCELLED in statuses else RunStatus.SUCCEEDED


def started_by_hand(engine: Engine, workflow: Flow) -> None:
    """The workflow run started by a worker; the messages it sent (its roots') are delivered by the test."""
    assert engine.worker().handle(message(workflow.run_id)) == "workflow started"


@pytest.mark.parametrize("racing", ["the children's starts", "their parent's end"])
def test_fail_fasts_cancel_racing_the_childrens_starts_starts_none_twice_and_ends_the_run_failed(
    engine: Engine, ledger: Ledger, racing: str
) -> None:
    # Given a -> c0..c19 and a root `broken` whose target answers 404, under fail_fast
    name = "ff-starts" if racing == "the children's starts" else "ff-parent"
    engine.receiver.script[f"/{name}/broken"] = [404]
    children = [f"c{index}" for index in range(20)]
    workflow = flow(engine, name, {"a": [], "broken": [], **{child: ["a"] for child in children}})
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    started_by_hand(engine, workflow)

    def handle(task_id: str) -> Callable[[], Any]:
        return lambda: engine.worker(f"w-{task_id}").handle(message(workflow.task_run_id(task_id)))

    if racing == "the children's starts":
        # When a has ended (its children stored and sent), broken's failure races their twenty starts
        handle("a")()
        errors = at_once(handle("broken"), *map(handle, children))
    else:
        # When a's end (storing and sending its children) races broken's failure
        errors = at_once(handle("a"), handle("broken"))
    assert errors == [None] * len(errors)
    settle(engine, workflow)
    # Then no child started twice, each one ran or was cancelled, and the run ended FAILED once
    runs = assert_once_and_settled(engine, ledger, workflow, name, RunStatus.FAILED)
    assert {runs[child].status for child in children} <= {RunStatus.SUCCEEDED, RunStatus.CANCELLED}
    assert runs["broken"].status is RunStatus.FAILED


def test_a_cancel_of_the_workflow_run_racing_its_tasks_ends_leaves_nothing_hanging(engine: Engine) -> None:
    from tests.integration.test_pools_engine import pools_of

    pools = pools_of(engine)
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    for round_ in range(6):
        # Given a diamond whose extract has ended (left and right sent)
        name = f"cancel-{round_}"
        workflow = diamond(engine, name)
        ledger = Ledger()
        with ledger.installed(engine.dynamodb):
            race_a_cancel(engine, pools, workflow)
        # Then nothing started twice, nothing hangs, and the run ended once, as its tasks say
        runs = task_runs(engine, workflow)
        assert_once_and_settled(engine, ledger, workflow, name, outcome_of_tasks(runs))


def race_a_cancel(engine: Engine, pools: Any, workflow: Flow) -> None:
    started_by_hand(engine, workflow)
    engine.worker().handle(message(workflow.task_run_id("extract")))

    def handle(task_id: str) -> Callable[[], Any]:
        return lambda: engine.worker(f"w-{task_id}").handle(message(workflow.task_run_id(task_id)))

    # When a cancel of the workflow run races left's and right's ends
    errors = at_once(lambda: pools.cancel("acme", workflow.run_id), handle("left"), handle("right"))
    assert all(error is None or "ended" in str(error) for error in errors), errors
    settle(engine, workflow)


def test_a_pool_tasks_complete_whose_childrens_sends_failed_has_them_sent_by_its_own_message(
    engine: Engine, ledger: Ledger
) -> None:
    from tickwork.domain.pools import ClaimRequest, CompleteRequest

    # Given crunch (a pool task) -> publish, crunch claimed by a worker of the pool
    tasks = [
        {"id": "crunch", "target": {"type": "pool", "pool": "gpu"}},
        {"id": "publish", "target": engine.http("/pool-unsent/publish"), "depends_on": ["crunch"]},
    ]
    at = engine.clock()
    job_id = engine.create(
        schedule={"type": "once", "at": at.isoformat()}, target={"type": "workflow", "tasks": tasks}
    ).job.job_id
    workflow = Flow(job_id, scheduled_run_id(job_id, at), ("crunch", "publish"), at)
    engine.drain()
    pools = engine.runtime.pools
    [claimed] = pools.claim("acme", "gpu", ClaimRequest(worker_id="w1", max_runs=1, wait_seconds=0))
    assert claimed.run.lease_token is not None
    # When its complete's send of publish's message fails (SQS refusing batches), the call answered
    faults = FaultInjector([FaultRule("sqs", frozenset({"SendMessageBatch"}), 1.0, ("throttle",))])
    faults.install(engine.sqs)
    try:
        done = pools.complete(
            "acme", claimed.run.run_id, CompleteRequest(lease_token=claimed.run.lease_token, output={"n": 1})
        )
    finally:
        faults.uninstall(engine.sqs)
    assert done.status is RunStatus.SUCCEEDED
    assert "publish" not in task_runs(engine, workflow)
    # Then crunch's own message, a few seconds later, sends it: publish runs once, the run ends once
    settle(engine, workflow)
    [publish] = engine.receiver.for_path("/pool-unsent/publish")
    assert publish.json()["parents"] == {"crunch": {"n": 1}}
    assert stored(engine, workflow.run_id).status is RunStatus.SUCCEEDED
    assert Counter(ledger.ends) == {"crunch": 1, "publish": 1}
