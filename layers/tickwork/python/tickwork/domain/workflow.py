"""Workflows: the pure rules of a DAG of tasks, with no I/O.

A workflow job's run is a workflow run; each of its tasks runs as a child run whose id is
``<run_id>/<task_id>``. This module holds what follows from the definition and the tasks' statuses alone: the
graph (roots, parents, children, an order, a cycle), whether a task runs or is skipped once its parents
ended (its trigger rule), what ``fail_fast`` cancels, the run's outcome, and what a retry re-runs.

A task's state is the status of its child run, or None while it has none (it waits for its parents).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    WORKFLOW_TASK_ID,
    FailureMode,
    Job,
    Run,
    RunKey,
    RunMessage,
    RunStatus,
    TriggerRule,
    WorkflowTarget,
    WorkflowTask,
    parse_run_id,
)
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms

TaskOutcome = Literal["succeeded", "failed", "skipped", "cancelled"]
"""How a task ended: ``failed`` covers FAILED, DEAD and ABANDONED."""
Decision = Literal["run", "skip"]
TaskStates = Mapping[str, RunStatus | None]
"""Each task's child run status by task id; None (or absent) while the task has no child run."""

_OUTCOME_BY_STATUS: Mapping[RunStatus, TaskOutcome] = MappingProxyType(
    {
        RunStatus.SUCCEEDED: "succeeded",
        RunStatus.FAILED: "failed",
        RunStatus.DEAD: "failed",
        RunStatus.ABANDONED: "failed",
        RunStatus.SKIPPED: "skipped",
        # A child run is never planned late, so never MISSED; were one, it did not run, like a skipped one.
        RunStatus.MISSED: "skipped",
        RunStatus.CANCELLED: "cancelled",
    }
)


# --- the graph --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskGraph:
    """The dependencies of a workflow's tasks, both ways, in the order the tasks are defined."""

    task_ids: tuple[str, ...]
    parents: Mapping[str, tuple[str, ...]]
    children: Mapping[str, tuple[str, ...]]

    @property
    def roots(self) -> tuple[str, ...]:
        """The tasks with no parent: a workflow run starts them first."""
        return tuple(task for task in self.task_ids if not self.parents[task])


def task_graph(tasks: Sequence[WorkflowTask]) -> TaskGraph:
    """The graph of ``tasks``; a parent that is not among them is left out (the model refuses those)."""
    ids = tuple(task.id for task in tasks)
    known = set(ids)
    parents = {task.id: tuple(parent for parent in task.depends_on if parent in known) for task in tasks}
    children: dict[str, list[str]] = {task_id: [] for task_id in ids}
    for task in tasks:
        for parent in parents[task.id]:
            children[parent].append(task.id)
    return TaskGraph(
        task_ids=ids,
        parents=MappingProxyType(parents),
        children=MappingProxyType({task_id: tuple(kids) for task_id, kids in children.items()}),
    )


def find_cycle(graph: TaskGraph) -> tuple[str, ...] | None:
    """A cycle of dependencies as the tasks along it, each before a task that depends on it, the first
    repeated at the end (``a, b, a``: b depends on a, a on b); None when the graph is a DAG. Searched from
    each task in the order they are defined, so the same definition always names the same cycle."""
    done: set[str] = set()
    for start in graph.task_ids:
        if start in done:
            continue
        path = [start]
        pending = [iter(graph.children[start])]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                done.add(path.pop())
                pending.pop()
            elif child in path:
                return (*path[path.index(child) :], child)
            elif child not in done:
                path.append(child)
                pending.append(iter(graph.children[child]))
    return None


def topological_order(graph: TaskGraph) -> tuple[str, ...]:
    """Every task after all of its parents; among tasks free at once, the one defined first comes first.
    Raises ValueError for a graph with a cycle."""
    waiting = {task: len(graph.parents[task]) for task in graph.task_ids}
    position = {task: index for index, task in enumerate(graph.task_ids)}
    ready = sorted((task for task, count in waiting.items() if count == 0), key=position.__getitem__)
    order: list[str] = []
    while ready:
        task = ready.pop(0)
        order.append(task)
        for child in graph.children[task]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
                ready.sort(key=position.__getitem__)
    if len(order) != len(graph.task_ids):
        raise ValueError(f"tasks {' -> '.join(find_cycle(graph) or ())} form a cycle")
    return tuple(order)


def descendants(graph: TaskGraph, task_ids: Iterable[str]) -> frozenset[str]:
    """The tasks downstream of ``task_ids``: their children, their children's children, and so on."""
    found: set[str] = set()
    pending = [child for task in task_ids for child in graph.children[task]]
    while pending:
        task = pending.pop()
        if task not in found:
            found.add(task)
            pending.extend(graph.children[task])
    return frozenset(found)


# --- deciding each task -----------------------------------------------------------------------------------
def outcome_of(status: RunStatus | None) -> TaskOutcome | None:
    """How a task with a child run in ``status`` ended; None while it has not ended (or has no run yet)."""
    return _OUTCOME_BY_STATUS.get(status) if status is not None else None


def decide(rule: TriggerRule, parents_outcomes: Mapping[str, TaskOutcome | None]) -> Decision | None:
    """Whether a task runs or is skipped, by its trigger rule and its parents' outcomes (None for a parent
    not ended); None while that is not yet known. A root task (no parents) always runs.

    - ``all_success``: runs once every parent succeeded; skipped as soon as one ended otherwise.
    - ``all_done``: runs once every parent ended, whatever the outcomes.
    - ``one_success``: runs as soon as one parent succeeded; skipped once all ended without a success.
    - ``one_failed``: runs as soon as one parent failed; skipped once all ended without a failure.
    """
    outcomes = list(parents_outcomes.values())
    if not outcomes:
        return "run"
    all_ended = all(outcome is not None for outcome in outcomes)
    if rule == "all_success":
        if any(outcome is not None and outcome != "succeeded" for outcome in outcomes):
            return "skip"
        return "run" if all_ended else None
    if rule == "all_done":
        return "run" if all_ended else None
    wanted: TaskOutcome = "succeeded" if rule == "one_success" else "failed"
    if wanted in outcomes:
        return "run"
    return "skip" if all_ended else None


def parents_outcomes(graph: TaskGraph, task_id: str, states: TaskStates) -> dict[str, TaskOutcome | None]:
    """The outcomes of a task's parents, as :func:`decide` takes them."""
    return {parent: outcome_of(states.get(parent)) for parent in graph.parents[task_id]}


def decided_children(
    graph: TaskGraph, rules: Mapping[str, TriggerRule], ended: Mapping[str, TaskOutcome], task_id: str
) -> dict[str, Decision]:
    """What the end of ``task_id`` decides for its children, from every task's end known so far
    (``ended``): each child whose rule it settles, run or skip. A child not yet decidable is left out; a
    child decided already is decided the same way again, which its conditional start absorbs."""
    decided: dict[str, Decision] = {}
    for child in graph.children[task_id]:
        outcomes = {parent: ended.get(parent) for parent in graph.parents[child]}
        decision = decide(rules[child], outcomes)
        if decision is not None:
            decided[child] = decision
    return decided


def children_settled_by(
    graph: TaskGraph, rules: Mapping[str, TriggerRule], ended: Mapping[str, TaskOutcome], task_id: str
) -> dict[str, Decision]:
    """What the end of ``task_id`` settles that no end before it had: ``ended`` as its fan-in write left the
    ends (its own and those recorded before it), so of all the ends that decide a child the same way, only
    the first in the fan-in's order starts it (or skips it), and later ones (a ``one_success`` child's other
    parents) send nothing."""
    before = {task: outcome for task, outcome in ended.items() if task != task_id}
    already = decided_children(graph, rules, before, task_id)
    return {
        child: decision
        for child, decision in decided_children(graph, rules, ended, task_id).items()
        if child not in already
    }


HANDLER_RULES: frozenset[TriggerRule] = frozenset({"all_done", "one_failed"})
"""The rules of clean-up and alert steps: ``fail_fast`` leaves them to their rules, for them to run on the
failure that stopped the rest."""


def cancelled_by_failure(task: WorkflowTask) -> bool:
    """Whether ``fail_fast`` cancels this task when it has not started: every task but the handlers
    (:data:`HANDLER_RULES`), which run (or are skipped) by their rules as under ``continue``."""
    return task.trigger_rule not in HANDLER_RULES


def to_cancel(tasks: Sequence[WorkflowTask], states: TaskStates, failure_mode: FailureMode) -> frozenset[str]:
    """The tasks a workflow run cancels now. Under ``fail_fast``, once a task failed, every task not started
    (no child run yet, or one waiting for its next attempt) is cancelled, but for the clean-up and alert
    steps (``all_done``, ``one_failed``), left to their rules; those running finish. Under ``continue``
    nothing is: whatever can still run runs, and a task whose rule can no longer be met is skipped
    (:func:`decide`)."""
    if failure_mode == "continue":
        return frozenset()
    if not any(outcome_of(states.get(task.id)) == "failed" for task in tasks):
        return frozenset()
    return frozenset(
        task.id for task in tasks if _not_started(states.get(task.id)) and cancelled_by_failure(task)
    )


def _not_started(status: RunStatus | None) -> bool:
    return status is None or status in NOT_STARTED_RUN_STATUSES


# --- the run as a whole -----------------------------------------------------------------------------------
def workflow_outcome(states: TaskStates) -> RunStatus | None:
    """The status a workflow run ends with, from every task's state: None while a task can still start or
    is running; FAILED when a task failed; CANCELLED when, with none failed, a task was cancelled (the run
    was cancelled); SUCCEEDED otherwise (every task succeeded or was skipped by its rule)."""
    outcomes = [outcome_of(status) for status in states.values()]
    if any(outcome is None for outcome in outcomes):
        return None
    if "failed" in outcomes:
        return RunStatus.FAILED
    if "cancelled" in outcomes:
        return RunStatus.CANCELLED
    return RunStatus.SUCCEEDED


def retry_set(tasks: Sequence[WorkflowTask], ends: Mapping[str, TaskOutcome]) -> frozenset[str]:
    """The tasks a retry of an ended workflow run runs again, from its tasks' ends: those that failed or were
    cancelled, and every task downstream of them. What succeeded upstream of them keeps its outcome (and its
    output)."""
    unfinished = {task.id for task in tasks if ends.get(task.id) in ("failed", "cancelled")}
    return frozenset(unfinished | descendants(task_graph(tasks), unfinished))


def kept_ends(tasks: Sequence[WorkflowTask], ends: Mapping[str, TaskOutcome]) -> dict[str, TaskOutcome]:
    """The ends a retry of the workflow run keeps: every task's outside :func:`retry_set` (a task the job no
    longer has is dropped, so the run ends once each task it has now ended)."""
    again = retry_set(tasks, ends)
    return {task.id: ends[task.id] for task in tasks if task.id in ends and task.id not in again}


def ready_tasks(tasks: Sequence[WorkflowTask], ends: Mapping[str, TaskOutcome]) -> dict[str, Decision]:
    """What a workflow run's start decides: each task with no end whose rule its parents' ends settle, run or
    skip. On a first start (no ends) the roots; on a retry's start, the tasks it re-runs that need no parent
    of theirs to end again."""
    graph = task_graph(tasks)
    decided: dict[str, Decision] = {}
    for task in tasks:
        if task.id in ends:
            continue
        decision = decide(task.trigger_rule, {parent: ends.get(parent) for parent in graph.parents[task.id]})
        if decision is not None:
            decided[task.id] = decision
    return decided


@dataclass(frozen=True)
class TaskEnds:
    """The tasks of a workflow run that ended, with their outcomes; ``recorded``: the call that returned it
    recorded the end it was asked to (a repeat did not)."""

    outcomes: dict[str, TaskOutcome]
    recorded: bool


# --- a task as the run path sees it -------------------------------------------------------------------------
def task_of(job: Job, task_id: str) -> WorkflowTask | None:
    """The task ``task_id`` of a workflow job, or None (not a workflow, or no such task: a message for a
    task the job no longer has, after a change of its definition)."""
    target = job.target
    if not isinstance(target, WorkflowTarget):
        return None
    return next((task for task in target.tasks if task.id == task_id), None)


def task_job(job: Job, task: WorkflowTask) -> Job:
    """The job as a task's run is run: the task's target, payload and retry (the job's when it has none),
    its runs free to overlap (the workflow run holds the job's lane for them all) and never jittered; the
    job's identity, tenant, priority and concurrency key are kept, so its limits and queue apply."""
    workflow = job.target
    assert isinstance(workflow, WorkflowTarget)
    viewed = job.model_copy(
        update={
            "target": task.target,
            "payload": task.payload,
            "retry": task.retry or job.retry,
            "overlap_policy": "allow",
            "max_concurrent_runs": None,
            "jitter_seconds": 0,
        }
    )
    return viewed.as_task_of(workflow)


TaskMessageState = Literal["current", "stale", "early"]
"""A task's first message, against its workflow run as read: of the go it is running (``current``), of a go
that is over (``stale``: dropped), or read before its workflow run's start was (``early``: the read was
eventually consistent, and misses a write of the last second; it looks again)."""
EARLY_READ_WINDOW_MS = 60_000
"""A task's message sent longer ago than this whose workflow run is not found is stale, not early."""


def task_message_state(workflow_run: Run | None, message: RunMessage, now: datetime) -> TaskMessageState:
    """Where a task's first message stands, from its workflow run read eventually consistently (None: not
    found). Its tasks are sent once the run is RUNNING in their go, and a run's go only grows: a run read in
    an earlier go, or not yet RUNNING in the message's, or not found, is an older read than the send (unless
    the message is old: then the run is gone)."""
    go = message.go or 0
    if workflow_run is None:
        sent = message.sent_at if message.sent_at is not None else 0
        return "early" if to_epoch_ms(now) - sent < EARLY_READ_WINDOW_MS else "stale"
    if workflow_run.manual_retries > go:
        return "stale"
    if workflow_run.manual_retries < go or workflow_run.status in (RunStatus.PLANNED, RunStatus.ENQUEUED):
        return "early"
    if workflow_run.status is RunStatus.RUNNING and workflow_run.workflow:
        return "current"
    return "stale"


def first_task_run(workflow_run: Run, task_id: str, message: RunMessage, now: datetime) -> Run:
    """A task's run before its first write (its claim), from its workflow run (read RUNNING in the message's
    go: :func:`task_message_state` says ``current``)."""
    sent = from_epoch_ms(message.sent_at) if message.sent_at is not None else None
    return Run(
        run_id=child_run_id(workflow_run.run_id, task_id),
        job_id=workflow_run.job_id,
        tenant_id=workflow_run.tenant_id,
        scheduled_for=workflow_run.scheduled_for,
        status=RunStatus.ENQUEUED,
        trigger="manual",
        created_at=sent or now,
        enqueued_at=sent,
        workflow_retry=workflow_run.manual_retries,
    )


# --- child run ids ----------------------------------------------------------------------------------------
# A task id never holds '/', and a plain run id never does either: the last '/' splits a child run's id.
_TASK_ID = re.compile(WORKFLOW_TASK_ID)


@dataclass(frozen=True)
class ChildRunKey:
    """What a task's child run id names: the workflow run (and its parts) and the task."""

    parent_run_id: str
    parent: RunKey
    task_id: str


def child_run_id(run_id: str, task_id: str) -> str:
    """The id of task ``task_id``'s child run in workflow run ``run_id``: the idempotency key its target
    sees, the same however often the task is started."""
    return f"{run_id}/{task_id}"


def parse_child_run_id(run_id: str) -> ChildRunKey | None:
    """The parts of a task's child run id, or None if ``run_id`` is not one (a plain run id is not)."""
    parent_run_id, slash, task_id = run_id.rpartition("/")
    if not slash or not _TASK_ID.match(task_id):
        return None
    parent = parse_run_id(parent_run_id)
    if parent is None:
        return None
    return ChildRunKey(parent_run_id=parent_run_id, parent=parent, task_id=task_id)
