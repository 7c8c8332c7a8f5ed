"""The pure rules of a workflow: its graph, each task's decision by its trigger rule, what ``fail_fast``
cancels, the run's outcome, what a retry re-runs, and child run ids."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tickwork.domain.models import (
    MAX_WORKFLOW_TASKS,
    HttpTarget,
    Job,
    JobSpec,
    Run,
    RunMessage,
    RunStatus,
    TriggerRule,
    WorkflowTarget,
    WorkflowTask,
    manual_run_id,
    parse_run_id,
)
from tickwork.domain.workflow import (
    TaskOutcome,
    child_run_id,
    children_settled_by,
    decide,
    decided_children,
    descendants,
    find_cycle,
    first_task_run,
    kept_ends,
    outcome_of,
    parents_outcomes,
    parse_child_run_id,
    ready_tasks,
    retry_set,
    task_graph,
    task_job,
    task_message_state,
    task_of,
    to_cancel,
    topological_order,
    workflow_outcome,
)
from tickwork_local.cli.output import plain_tree, workflow_tree

HOOK = {"type": "http", "url": "https://hooks.example.com/run"}
S, F, K, C = RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED


def task(task_id: str, *parents: str, rule: TriggerRule = "all_success") -> WorkflowTask:
    return WorkflowTask.model_validate(
        {"id": task_id, "target": HOOK, "depends_on": list(parents), "trigger_rule": rule}
    )


def unchecked(task_id: str, *parents: str) -> WorkflowTask:
    """A task as the graph sees it, without the model's own checks (which refuse a self-dependency)."""
    return WorkflowTask.model_construct(
        id=task_id, target=HttpTarget.model_validate(HOOK), depends_on=parents
    )


# extract -> (transform_a, transform_b) -> load
DIAMOND = (
    task("extract"),
    task("transform_a", "extract"),
    task("transform_b", "extract"),
    task("load", "transform_a", "transform_b"),
)


# --- the graph --------------------------------------------------------------------------------------------
def test_the_graph_of_a_diamond_has_its_roots_parents_children_and_order() -> None:
    graph = task_graph(DIAMOND)

    assert graph.roots == ("extract",)
    assert graph.parents["load"] == ("transform_a", "transform_b")
    assert graph.children["extract"] == ("transform_a", "transform_b")
    assert graph.children["load"] == ()
    assert topological_order(graph) == ("extract", "transform_a", "transform_b", "load")
    assert find_cycle(graph) is None
    assert descendants(graph, ["transform_a"]) == {"load"}
    assert descendants(graph, ["extract"]) == {"transform_a", "transform_b", "load"}


@pytest.mark.parametrize(
    ("tasks", "cycle"),
    [
        ((unchecked("a", "a"),), ("a", "a")),
        ((unchecked("a", "b"), unchecked("b", "a")), ("a", "b", "a")),
        ((unchecked("a", "c"), unchecked("b", "a"), unchecked("c", "b")), ("a", "b", "c", "a")),
        # the cycle below a root is found and named from where it loops back
        (
            (unchecked("root"), unchecked("x", "root", "z"), unchecked("y", "x"), unchecked("z", "y")),
            ("x", "y", "z", "x"),
        ),
    ],
)
def test_a_cycle_is_named_in_the_order_its_tasks_run(
    tasks: tuple[WorkflowTask, ...], cycle: tuple[str, ...]
) -> None:
    graph = task_graph(tasks)

    assert find_cycle(graph) == cycle
    with pytest.raises(ValueError, match="form a cycle"):
        topological_order(graph)


def dags() -> st.SearchStrategy[tuple[WorkflowTask, ...]]:
    """Random DAGs: each task depends on some of the tasks defined before it, in a shuffled definition."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[WorkflowTask, ...]:
        size = draw(st.integers(1, 30))
        rules = get_args(TriggerRule)
        tasks = []
        for index in range(size):
            parents = draw(st.sets(st.integers(0, index - 1), max_size=4)) if index else set()
            rule = draw(st.sampled_from(rules))
            tasks.append(task(f"t{index}", *(f"t{parent}" for parent in sorted(parents)), rule=rule))
        return tuple(draw(st.permutations(tasks)))

    return build()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_a_topological_order_puts_every_task_after_its_parents(tasks: tuple[WorkflowTask, ...]) -> None:
    graph = task_graph(tasks)

    order = topological_order(graph)

    assert sorted(order) == sorted(graph.task_ids)
    position = {task_id: index for index, task_id in enumerate(order)}
    for child, parents in graph.parents.items():
        assert all(position[parent] < position[child] for parent in parents)
    assert find_cycle(graph) is None


# --- trigger rules ----------------------------------------------------------------------------------------
def parents(*outcomes: TaskOutcome | None) -> dict[str, TaskOutcome | None]:
    return {f"p{index}": outcome for index, outcome in enumerate(outcomes)}


@pytest.mark.parametrize(
    ("rule", "outcomes", "decision"),
    [
        ("all_success", (), "run"),
        ("all_done", (), "run"),
        ("one_success", (), "run"),
        ("one_failed", (), "run"),
        ("all_success", ("succeeded", "succeeded"), "run"),
        ("all_success", ("succeeded", None), None),
        ("all_success", ("failed", None), "skip"),
        ("all_success", ("skipped", "succeeded"), "skip"),
        ("all_success", (None, "cancelled"), "skip"),
        ("all_done", ("failed", "skipped"), "run"),
        ("all_done", ("succeeded", "cancelled"), "run"),
        ("all_done", ("failed", None), None),
        ("one_success", (None, "succeeded"), "run"),
        ("one_success", ("failed", None), None),
        ("one_success", ("failed", "skipped"), "skip"),
        ("one_failed", (None, "failed"), "run"),
        ("one_failed", ("succeeded", None), None),
        ("one_failed", ("succeeded", "skipped"), "skip"),
        ("one_failed", ("cancelled", "succeeded"), "skip"),
    ],
)
def test_a_trigger_rule_decides_from_the_parents_outcomes(
    rule: TriggerRule, outcomes: tuple[TaskOutcome | None, ...], decision: str | None
) -> None:
    assert decide(rule, parents(*outcomes)) == decision


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (RunStatus.SUCCEEDED, "succeeded"),
        (RunStatus.FAILED, "failed"),
        (RunStatus.DEAD, "failed"),
        (RunStatus.ABANDONED, "failed"),
        (RunStatus.SKIPPED, "skipped"),
        (RunStatus.CANCELLED, "cancelled"),
        (RunStatus.RUNNING, None),
        (RunStatus.RETRY_WAIT, None),
        (RunStatus.ENQUEUED, None),
        (None, None),
    ],
)
def test_a_task_ends_with_the_outcome_of_its_child_run(status: RunStatus | None, outcome: str | None) -> None:
    assert outcome_of(status) == outcome


OUTCOME_STATUS: Mapping[TaskOutcome, RunStatus] = {"succeeded": S, "failed": F}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.randoms(use_true_random=False), st.data())
def test_every_task_is_decided_exactly_once_whatever_order_outcomes_arrive_in(
    tasks: tuple[WorkflowTask, ...], shuffle: random.Random, data: st.DataObject
) -> None:
    # Given a workflow run whose running tasks end in a random order, each succeeding or failing at random
    graph = task_graph(tasks)
    rules = {each.id: each.trigger_rule for each in tasks}
    states: dict[str, RunStatus | None] = dict.fromkeys(graph.task_ids)
    decisions: dict[str, str] = {}
    running: list[str] = []

    def settle(candidates: list[str]) -> None:
        """Decide each candidate that can be decided; a skip ends it at once, which may decide others."""
        pending = list(candidates)
        while pending:
            task_id = pending.pop()
            if task_id in decisions:
                continue
            decision = decide(rules[task_id], parents_outcomes(graph, task_id, states))
            if decision == "run":
                decisions[task_id] = "run"
                running.append(task_id)
            elif decision == "skip":
                decisions[task_id] = "skip"
                states[task_id] = RunStatus.SKIPPED
                pending.extend(graph.children[task_id])

    # When the roots start and every end decides its children
    settle(list(graph.roots))
    while running:
        shuffle.shuffle(running)
        ended = running.pop()
        states[ended] = data.draw(st.sampled_from([S, F]))
        settle(list(graph.children[ended]))

    # Then every task was decided, and the run ended
    assert set(decisions) == set(graph.task_ids)
    assert workflow_outcome(states) in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    # And no decision would have been another with the outcomes that came later: each is taken once
    for task_id, decision in decisions.items():
        assert decide(rules[task_id], parents_outcomes(graph, task_id, states)) == decision


# --- failure modes ----------------------------------------------------------------------------------------
def test_fail_fast_cancels_what_has_not_started_once_a_task_failed() -> None:
    tasks = (*DIAMOND, task("audit"))
    states = {
        "extract": S,
        "transform_a": F,
        "transform_b": RunStatus.RUNNING,
        "load": None,
        "audit": RunStatus.ENQUEUED,
    }

    assert to_cancel(tasks, states, "fail_fast") == {"load", "audit"}
    assert to_cancel(tasks, states, "continue") == frozenset()


def test_fail_fast_leaves_the_clean_up_and_alert_steps_to_their_rules() -> None:
    tasks = (
        *DIAMOND,
        task("alert", "transform_a", rule="one_failed"),
        task("cleanup", "load", rule="all_done"),
        task("either", "transform_a", "transform_b", rule="one_success"),
    )
    states = {"extract": S, "transform_a": F, "transform_b": RunStatus.RUNNING}

    assert to_cancel(tasks, states, "fail_fast") == {"load", "either"}


def test_fail_fast_cancels_nothing_while_no_task_failed() -> None:
    states = {"extract": S, "transform_a": K, "transform_b": RunStatus.RUNNING, "load": None}

    assert to_cancel(DIAMOND, states, "fail_fast") == frozenset()


def test_a_task_waiting_for_its_next_attempt_has_not_started_it() -> None:
    states = {"extract": S, "transform_a": RunStatus.DEAD, "transform_b": RunStatus.RETRY_WAIT, "load": None}

    assert to_cancel(DIAMOND, states, "fail_fast") == {"transform_b", "load"}


# --- the run's outcome ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("states", "outcome"),
    [
        ({"a": S, "b": S}, RunStatus.SUCCEEDED),
        ({"a": S, "b": K}, RunStatus.SUCCEEDED),
        ({"a": S, "b": None}, None),
        ({"a": F, "b": RunStatus.RUNNING}, None),
        ({"a": F, "b": RunStatus.RETRY_WAIT}, None),
        ({"a": F, "b": C}, RunStatus.FAILED),
        ({"a": RunStatus.ABANDONED, "b": S}, RunStatus.FAILED),
        ({"a": RunStatus.DEAD, "b": K}, RunStatus.FAILED),
        ({"a": S, "b": C}, RunStatus.CANCELLED),
    ],
)
def test_a_workflow_run_ends_once_every_task_ended(
    states: dict[str, RunStatus | None], outcome: RunStatus | None
) -> None:
    assert workflow_outcome(states) == outcome


# --- retry ------------------------------------------------------------------------------------------------
def test_a_retry_re_runs_the_failed_and_cancelled_tasks_and_what_depends_on_them() -> None:
    tasks = (*DIAMOND, task("report", "load"), task("audit"))
    ends: dict[str, TaskOutcome] = {
        "extract": "succeeded",
        "transform_a": "failed",
        "transform_b": "succeeded",
        "load": "cancelled",
        "report": "cancelled",
        "audit": "succeeded",
    }

    assert retry_set(tasks, ends) == {"transform_a", "load", "report"}


def test_a_retry_re_runs_a_task_skipped_because_its_parent_failed() -> None:
    ends: dict[str, TaskOutcome] = {
        "extract": "failed",
        "transform_a": "skipped",
        "transform_b": "skipped",
        "load": "skipped",
    }

    assert retry_set(DIAMOND, ends) == {"extract", "transform_a", "transform_b", "load"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.data())
def test_a_retry_never_re_runs_a_success_upstream_of_every_failure(
    tasks: tuple[WorkflowTask, ...], data: st.DataObject
) -> None:
    graph = task_graph(tasks)
    states: dict[str, RunStatus | None] = {
        task_id: data.draw(st.sampled_from([S, F, K, C])) for task_id in graph.task_ids
    }

    ends = {task_id: outcome for task_id, status in states.items() if (outcome := outcome_of(status))}
    again = retry_set(tasks, ends)

    failed = {task_id for task_id, status in states.items() if status in (F, C)}
    assert failed <= again
    assert again == failed | descendants(graph, failed)
    # a task left out has no failed or cancelled task upstream
    for task_id in set(graph.task_ids) - again:
        assert not any(task_id in descendants(graph, [bad]) for bad in failed)


def test_a_retry_keeps_the_ends_of_what_it_does_not_re_run_and_drops_tasks_the_job_no_longer_has() -> None:
    ends: dict[str, TaskOutcome] = {
        "extract": "succeeded",
        "transform_a": "failed",
        "transform_b": "succeeded",
        "load": "skipped",
        "gone": "succeeded",
    }

    assert kept_ends(DIAMOND, ends) == {"extract": "succeeded", "transform_b": "succeeded"}


def test_a_first_start_decides_the_roots_alone() -> None:
    tasks = (*DIAMOND, task("audit"), task("alert", "extract", rule="one_failed"))

    assert ready_tasks(tasks, {}) == {"extract": "run", "audit": "run"}


def test_a_retrys_start_decides_the_tasks_whose_parents_ended_and_kept_their_ends() -> None:
    tasks = (
        *DIAMOND,
        task("either", "transform_a", "transform_b", rule="one_success"),
        task("alert", "extract", rule="one_failed"),
    )
    kept: dict[str, TaskOutcome] = {"extract": "succeeded", "transform_b": "succeeded"}

    # transform_a runs again; "either" has a success among its parents already; "alert" never will: skipped;
    # load waits for transform_a.
    assert ready_tasks(tasks, kept) == {"transform_a": "run", "either": "run", "alert": "skip"}


def test_of_the_ends_that_settle_a_child_the_same_way_only_the_first_in_the_fan_ins_order_sends_it() -> None:
    tasks = (
        task("a"),
        task("b"),
        task("c"),
        task("either", "a", "b", "c", rule="one_success"),
        task("every", "a", "b", "c", rule="all_done"),
    )
    graph = task_graph(tasks)
    rules = {item.id: item.trigger_rule for item in tasks}
    order = ["b", "a", "c"]
    sent: dict[str, list[str]] = {"either": [], "every": []}
    for index, ending in enumerate(order):
        ends: dict[str, TaskOutcome] = dict.fromkeys(order[: index + 1], "succeeded")
        for child, decision in children_settled_by(graph, rules, ends, ending).items():
            assert decision == "run"
            sent[child].append(ending)

    # the first success settles "either"; the last end settles "every"; nothing is settled twice
    assert sent == {"either": ["b"], "every": ["c"]}


def test_a_tasks_first_run_is_built_from_its_running_workflow_run_in_the_messages_go() -> None:
    at = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    running = Run(
        run_id="nightly-etl:1795000000000",
        job_id="nightly-etl",
        tenant_id="acme",
        scheduled_for=at,
        status=RunStatus.RUNNING,
        created_at=at,
        workflow=True,
        manual_retries=1,
    )
    sent = int(at.timestamp() * 1000)
    message = RunMessage(tenant_id="acme", run_id=child_run_id(running.run_id, "load"), go=1, sent_at=sent)

    assert task_message_state(running, message, at) == "current"
    first = first_task_run(running, "load", message, at)
    assert (first.run_id, first.scheduled_for, first.workflow_retry) == (message.run_id, at, 1)


@pytest.mark.parametrize(
    ("manual_retries", "status", "go", "state"),
    [
        (1, RunStatus.RUNNING, 0, "stale"),  # a message of the go before the retry
        (1, RunStatus.RUNNING, None, "stale"),
        (1, RunStatus.FAILED, 1, "stale"),  # its go is over
        (1, RunStatus.SUCCEEDED, 1, "stale"),
        (0, RunStatus.FAILED, 1, "early"),  # read before the retry reopened it
        (1, RunStatus.ENQUEUED, 1, "early"),  # read before its start's RUNNING write
        (1, RunStatus.PLANNED, 1, "early"),
    ],
)
def test_a_tasks_first_message_against_its_workflow_run_as_read(
    manual_retries: int, status: RunStatus, go: int | None, state: str
) -> None:
    at = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    read = Run(
        run_id="nightly-etl:1795000000000",
        job_id="nightly-etl",
        tenant_id="acme",
        scheduled_for=at,
        status=status,
        created_at=at,
        workflow=True,
        manual_retries=manual_retries,
    )
    message = RunMessage(tenant_id="acme", run_id=child_run_id(read.run_id, "load"), go=go, sent_at=0)

    assert task_message_state(read, message, at) == state


def test_a_tasks_workflow_run_not_found_is_a_read_too_early_for_a_minute_then_the_message_is_stale() -> None:
    at = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    sent = int(at.timestamp() * 1000)
    message = RunMessage(tenant_id="acme", run_id="nightly-etl:1795000000000/load", go=0, sent_at=sent)

    assert task_message_state(None, message, at + timedelta(seconds=59)) == "early"
    assert task_message_state(None, message, at + timedelta(seconds=61)) == "stale"


# --- child run ids ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "run_id", ["nightly-etl:1767225600000", manual_run_id("nightly-etl", "retry-1"), "J.x_1:0"]
)
def test_a_child_run_id_names_its_workflow_run_and_task(run_id: str) -> None:
    child = child_run_id(run_id, "transform_a")

    parsed = parse_child_run_id(child)

    assert child == f"{run_id}/transform_a"
    assert parsed is not None
    assert parsed.parent_run_id == run_id
    assert parsed.parent == parse_run_id(run_id)
    assert parsed.task_id == "transform_a"


@pytest.mark.parametrize(
    "run_id",
    [
        "nightly-etl:1767225600000",  # a plain run id
        "nightly-etl:1767225600000/",  # no task
        "nightly-etl:1767225600000/Transform",  # not a task id
        "nightly-etl:1767225600000/a/b",  # a child of a child: workflows do not nest
        "nightly-etl/extract",  # no run id before the task
        "/extract",
        "nightly-etl:m:xyz/extract",
    ],
)
def test_what_is_not_a_child_run_id_is_refused(run_id: str) -> None:
    assert parse_child_run_id(run_id) is None


def test_a_plain_run_id_parser_refuses_a_child_run_id_so_no_child_is_taken_for_its_parent() -> None:
    assert parse_run_id("nightly-etl:1767225600000/extract") is None
    assert parse_run_id(f"{manual_run_id('nightly-etl', 'k')}/extract") is None
    key = parse_run_id("nightly-etl:1767225600000")
    assert key is not None and key.fire_ms == 1767225600000


# --- the definition's limits ------------------------------------------------------------------------------
def workflow(tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"type": "workflow", "tasks": tasks, **fields}


def test_a_workflow_takes_up_to_100_tasks_with_defaults() -> None:
    tasks = [{"id": f"t{index}", "target": HOOK} for index in range(MAX_WORKFLOW_TASKS)]

    target = WorkflowTarget.model_validate(workflow(tasks))

    assert len(target.tasks) == MAX_WORKFLOW_TASKS
    assert target.max_parallel is None
    assert target.failure_mode == "fail_fast"
    assert target.tasks[0].trigger_rule == "all_success"
    assert target.tasks[0].depends_on == ()
    assert target.tasks[0].retry is None


def test_a_pool_task_is_allowed() -> None:
    target = WorkflowTarget.model_validate(
        workflow([{"id": "crunch", "target": {"type": "pool", "pool": "gpu"}, "payload": {"n": 1}}])
    )

    assert target.tasks[0].target.type == "pool"


# --- the documentation ------------------------------------------------------------------------------------
def test_the_documented_workflow_is_a_valid_job_and_its_tree_is_the_one_shown() -> None:
    page = (Path(__file__).parents[2] / "docs" / "workflows.md").read_text()
    example = re.search(r"```json\n(.*?)```", page, re.DOTALL)
    tree = re.search(r"```text\n(.*?)```", page, re.DOTALL)
    assert example is not None and tree is not None

    spec = JobSpec.model_validate(json.loads(example[1]))

    assert plain_tree(workflow_tree(spec.model_dump(mode="json")["target"])) + "\n" == tree[1]


# --- what a task's end decides ----------------------------------------------------------------------------
def test_a_tasks_end_decides_the_children_it_settles_and_leaves_the_others() -> None:
    graph = task_graph(DIAMOND)
    rules = {task.id: task.trigger_rule for task in DIAMOND}
    # extract's end settles both transforms
    assert decided_children(graph, rules, {"extract": "succeeded"}, "extract") == {
        "transform_a": "run",
        "transform_b": "run",
    }
    # transform_a alone does not settle load; with transform_b's end known, it does
    one: dict[str, TaskOutcome] = {"extract": "succeeded", "transform_a": "succeeded"}
    assert decided_children(graph, rules, one, "transform_a") == {}
    both: dict[str, TaskOutcome] = {**one, "transform_b": "succeeded"}
    assert decided_children(graph, rules, both, "transform_b") == {"load": "run"}
    # a failed parent settles an all_success child at once: skipped
    assert decided_children(graph, rules, {"transform_a": "failed"}, "transform_a") == {"load": "skip"}
    # a leaf decides nothing
    assert decided_children(graph, rules, both, "load") == {}


# --- a task as the run path sees it -------------------------------------------------------------------------
def workflow_job(**fields: Any) -> Job:
    at = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    spec = {
        "name": "nightly-etl",
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
        "target": {
            "type": "workflow",
            "tasks": [
                {"id": "extract", "target": HOOK, "payload": {"step": 1}, "retry": {"max_attempts": 2}},
                {
                    "id": "load",
                    "target": {**HOOK, "url": "https://hooks.example.com/load"},
                    "depends_on": ["extract"],
                },
            ],
        },
        "payload": {"whole": True},
        "retry": {"max_attempts": 7},
        "overlap_policy": "skip",
        "jitter_seconds": 30,
        "priority": "high",
        **fields,
    }
    return Job.model_validate(
        {**spec, "job_id": "01JOB", "tenant_id": "acme", "created_at": at, "updated_at": at}
    )


def test_a_task_runs_as_its_job_with_its_own_target_payload_and_retry() -> None:
    job = workflow_job(concurrency_key="warehouse", max_concurrency=3)
    extract, load = task_of(job, "extract"), task_of(job, "load")
    assert extract is not None and load is not None
    viewed = task_job(job, extract)
    assert viewed.target == extract.target and viewed.payload == {"step": 1}
    assert viewed.retry.max_attempts == 2
    assert task_job(job, load).retry.max_attempts == 7  # none of its own: the job's
    assert task_job(job, load).payload is None  # a task's payload is its own, not the job's
    # free to overlap and never jittered; the job's identity, priority and key kept
    assert (viewed.overlap_policy, viewed.max_concurrent_runs, viewed.jitter_seconds) == ("allow", None, 0)
    assert (viewed.job_id, viewed.tenant_id, viewed.priority) == ("01JOB", "acme", "high")
    assert (viewed.concurrency_key, viewed.max_concurrency) == ("warehouse", 3)


def test_a_task_the_job_does_not_have_is_none() -> None:
    assert task_of(workflow_job(), "transform") is None
    plain = workflow_job(target=HOOK)
    assert task_of(plain, "extract") is None
