"""A workflow run's tasks in the runs table (moto): each task's run in its workflow run's own partition, read
by its id (a manual workflow run's through its pointer), listed in one query, never in the job's history."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from tickwork import tables
from tickwork.adapters.runs import DynamoRunStore
from tickwork.adapters.task_ends import DynamoTaskEnds
from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunStatus, TriggerRule, manual_run_id, scheduled_run_id
from tickwork.domain.workflow import TaskEnds, TaskGraph, child_run_id, decided_children
from tickwork.errors import NotFound

from tests.support.engine import make_requests_atomic

AT = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
JOB = "01JOBWORKFLOW0000000000000"


def store(dynamodb: Any) -> DynamoRunStore:
    return DynamoRunStore(
        dynamodb, table=tables.RUNS.default_name, retention=timedelta(days=1), attention_shards=2
    )


def run(run_id: str, status: RunStatus = RunStatus.SUCCEEDED, tenant: str = "acme") -> Run:
    return Run(run_id=run_id, job_id=JOB, tenant_id=tenant, scheduled_for=AT, status=status, created_at=AT)


def test_a_scheduled_workflow_runs_tasks_are_read_listed_and_kept_out_of_the_jobs_history(
    dynamodb: Any,
) -> None:
    runs = store(dynamodb)
    parent = scheduled_run_id(JOB, AT)
    assert runs.put(run(parent, RunStatus.RUNNING), Expect(absent=True)).ok
    for task, status in (("extract", RunStatus.SUCCEEDED), ("load", RunStatus.RUNNING)):
        assert runs.put(run(child_run_id(parent, task), status), Expect(absent=True)).ok

    # Read by id, alone and among the job's runs
    assert runs.get("acme", child_run_id(parent, "extract")).status is RunStatus.SUCCEEDED
    found = runs.find_many("acme", JOB, [parent, child_run_id(parent, "load"), child_run_id(parent, "gone")])
    assert sorted(found) == sorted([parent, child_run_id(parent, "load")])
    # Listed in one query of the workflow run's tasks
    assert sorted(task.run_id for task in runs.tasks_of("acme", run(parent))) == [
        child_run_id(parent, "extract"),
        child_run_id(parent, "load"),
    ]
    # The job's history shows the workflow run only
    assert [listed.run_id for listed in runs.list_for_job("acme", JOB, limit=10, cursor=None).items] == [
        parent
    ]
    assert runs.latest("acme", JOB, until=AT + timedelta(hours=1)) is not None


def test_a_manual_workflow_runs_task_is_found_through_the_workflow_runs_pointer(dynamodb: Any) -> None:
    runs = store(dynamodb)
    parent = manual_run_id(JOB, "nightly-rerun")
    assert runs.put(run(parent, RunStatus.RUNNING), Expect(absent=True)).ok
    task = child_run_id(parent, "transform_a")
    assert runs.put(run(task), Expect(absent=True)).ok
    assert runs.get("acme", task).run_id == task
    assert [t.run_id for t in runs.tasks_of("acme", run(parent))] == [task]


def test_a_task_run_is_written_once_and_another_tenant_never_reads_it(dynamodb: Any) -> None:
    runs = store(dynamodb)
    parent = scheduled_run_id(JOB, AT)
    task = child_run_id(parent, "extract")
    assert runs.put(run(task, RunStatus.RUNNING), Expect(absent=True)).ok
    # a second start of the same task is refused: the conditional write that makes a task start once
    again = runs.put(run(task, RunStatus.RUNNING), Expect(absent=True))
    assert not again.ok and again.current is not None and again.current.run_id == task
    with pytest.raises(NotFound):
        runs.get("globex", task)
    assert runs.tasks_of("globex", run(parent, tenant="globex")) == []
    with pytest.raises(NotFound):
        runs.get("acme", child_run_id(parent, "never"))


# --- the fan-in ---------------------------------------------------------------------------------------------
def ends(dynamodb: Any) -> DynamoTaskEnds:
    return DynamoTaskEnds(dynamodb, table=tables.RUNS.default_name, retention_seconds=86_400)


def test_a_tasks_end_is_recorded_once_and_a_repeat_gets_the_ends_as_they_stand(dynamodb: Any) -> None:
    workflow_run = run(scheduled_run_id(JOB, AT), RunStatus.RUNNING)
    first = ends(dynamodb).record(workflow_run, "extract", "succeeded")
    assert first == TaskEnds({"extract": "succeeded"}, recorded=True)
    # a duplicate delivery's end, even one that says otherwise, changes nothing
    again = ends(dynamodb).record(workflow_run, "extract", "failed")
    assert again == TaskEnds({"extract": "succeeded"}, recorded=False)
    ends(dynamodb).record(workflow_run, "transform_a", "failed")
    assert ends(dynamodb).read(workflow_run) == {"extract": "succeeded", "transform_a": "failed"}
    # the ends' item is not a task
    assert store(dynamodb).tasks_of("acme", workflow_run) == []


@pytest.mark.parametrize("rule", ["all_success", "all_done"])
def test_of_50_parents_ending_at_once_exactly_one_decides_their_child(dynamodb: Any, rule: str) -> None:
    # Given a fan-in: 50 parents and one child, the parents' ends recorded from 50 threads at once (on a moto
    # whose requests are atomic, as DynamoDB's are)
    make_requests_atomic(dynamodb)
    parents = [f"shard-{index}" for index in range(50)]
    graph = TaskGraph(
        task_ids=(*parents, "merge"),
        parents={**dict.fromkeys(parents, ()), "merge": tuple(parents)},
        children={**dict.fromkeys(parents, ("merge",)), "merge": ()},
    )
    rules = cast(dict[str, TriggerRule], dict.fromkeys(graph.task_ids, rule))
    workflow_run = run(scheduled_run_id(JOB, AT), RunStatus.RUNNING)
    start = threading.Barrier(len(parents))
    decisions: list[dict[str, str]] = []
    lock = threading.Lock()

    def end(parent: str) -> None:
        start.wait()
        recorded = ends(dynamodb).record(workflow_run, parent, "succeeded")
        decided = decided_children(graph, rules, recorded.outcomes, parent)
        with lock:
            decisions.append(dict(decided))

    threads = [threading.Thread(target=end, args=(parent,)) for parent in parents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly one end saw all 50 and decided the child, to run
    assert [decision for decision in decisions if decision] == [{"merge": "run"}]


def test_each_go_of_a_workflow_run_has_its_own_ends_and_a_retry_begins_its_go_once(dynamodb: Any) -> None:
    first_go = run(scheduled_run_id(JOB, AT), RunStatus.FAILED)
    ends(dynamodb).record(first_go, "extract", "succeeded")
    ends(dynamodb).record(first_go, "load", "failed")
    second_go = first_go.model_copy(update={"manual_retries": 1})

    ends(dynamodb).begin_retry(second_go, {"extract": "succeeded"})
    ends(dynamodb).record(second_go, "load", "succeeded")
    # a repeated begin (a retry interrupted, then retried) leaves the go's ends as they stand
    ends(dynamodb).begin_retry(second_go, {"extract": "succeeded"})

    assert ends(dynamodb).read(second_go) == {"extract": "succeeded", "load": "succeeded"}
    # an end recorded late in the first go stays there, never counted in the second
    ends(dynamodb).record(first_go, "late", "failed")
    assert ends(dynamodb).read(first_go) == {"extract": "succeeded", "load": "failed", "late": "failed"}
    assert "late" not in ends(dynamodb).read(second_go)
    # neither ends' item is a task
    assert store(dynamodb).tasks_of("acme", second_go) == []


def test_a_tasks_run_is_deleted_only_as_read(dynamodb: Any) -> None:
    runs = store(dynamodb)
    parent = scheduled_run_id(JOB, AT)
    task = run(child_run_id(parent, "load"), RunStatus.FAILED)
    assert runs.put(task, Expect(absent=True)).ok
    refused = runs.delete(task, Expect(present=True, statuses=frozenset({RunStatus.SKIPPED})))
    assert not refused.ok and refused.current is not None and refused.current.status is RunStatus.FAILED
    assert runs.delete(task, Expect.at(task)).ok
    assert runs.tasks_of("acme", run(parent, RunStatus.FAILED)) == []
