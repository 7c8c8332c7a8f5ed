"""A workflow run's tasks through the real worker (moto, loopback receiver): each task's run is run as its
own job would be, and its end starts (or skips) the children it settles, each once."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.workflow import child_run_id
from tickwork.errors import InvalidState
from tickwork_local.harness import Reply

from tests.integration.conftest import Engine


def diamond(engine: Engine, *, transform_b_path: str = "/transform_b", rule: str = "all_success") -> str:
    """extract -> (transform_a, transform_b) -> load, on a schedule that fires tomorrow: the test starts the
    workflow run's first task itself."""
    hook = engine.http

    def task(task_id: str, path: str, *parents: str, **fields: Any) -> dict[str, Any]:
        return {"id": task_id, "target": hook(path), "depends_on": list(parents), **fields}

    workflow = {
        "type": "workflow",
        # continue: what the trigger rules decide is shown, not fail_fast's cancels
        "failure_mode": "continue",
        "tasks": [
            task("extract", "/extract", payload={"step": "extract"}),
            task("transform_a", "/transform_a", "extract"),
            task("transform_b", transform_b_path, "extract", retry={"max_attempts": 1}),
            task("load", "/load", "transform_a", "transform_b", trigger_rule=rule),
        ],
    }
    schedule = {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"}
    return engine.create(schedule=schedule, target=workflow).job.job_id


def once_workflow(engine: Engine, tasks: list[dict[str, Any]], **fields: Any) -> tuple[str, datetime]:
    """A one-time workflow job of ``tasks`` due now; (its id, its fire time). The first drain runs it."""
    at = engine.clock()
    workflow = {"type": "workflow", "tasks": tasks, **fields}
    job_id = engine.create(schedule={"type": "once", "at": at.isoformat()}, target=workflow).job.job_id
    return job_id, at


def start(engine: Engine, job_id: str) -> Run:
    """The workflow run stored RUNNING and its root task sent, as the workflow run's start does."""
    at = engine.clock()
    workflow_run = Run(
        run_id=scheduled_run_id(job_id, at),
        job_id=job_id,
        tenant_id="acme",
        scheduled_for=at,
        status=RunStatus.RUNNING,
        created_at=at,
        started_at=at,
        attempt=1,
        workflow=True,
    )
    assert engine.runtime.runs.put(workflow_run, Expect.new()).ok
    root = child_run_id(workflow_run.run_id, "extract")
    engine.runtime.queue.send_later(RunMessage(tenant_id="acme", run_id=root, go=0), 0)
    return workflow_run


def task_statuses(engine: Engine, workflow_run: Run) -> dict[str, RunStatus]:
    tasks = engine.runtime.runs.tasks_of("acme", workflow_run)
    return {task.run_id.rsplit("/", 1)[1]: task.status for task in tasks}


def test_a_diamonds_tasks_each_run_once_after_their_parents(engine: Engine) -> None:
    job_id = diamond(engine)
    workflow_run = start(engine, job_id)

    engine.drain()

    calls = {
        path: engine.receiver.for_path(path) for path in ("/extract", "/transform_a", "/transform_b", "/load")
    }
    assert {path: len(received) for path, received in calls.items()} == dict.fromkeys(calls, 1)
    order = sorted(calls, key=lambda path: calls[path][0].at)
    assert order[0] == "/extract" and order[-1] == "/load"
    # each call is its task's run: its own id (the idempotency key), and the task's own payload
    extract = calls["/extract"][0]
    assert extract.json()["run_id"] == child_run_id(workflow_run.run_id, "extract")
    assert extract.json()["payload"] == {"step": "extract"}
    assert task_statuses(engine, workflow_run) == dict.fromkeys(
        ("extract", "transform_a", "transform_b", "load"), RunStatus.SUCCEEDED
    )
    assert engine.runtime.task_ends.read(workflow_run) == dict.fromkeys(
        ("extract", "transform_a", "transform_b", "load"), "succeeded"
    )


def test_a_failed_parent_skips_an_all_success_child_and_runs_an_all_done_one(engine: Engine) -> None:
    for rule, load_runs in (("all_success", 0), ("all_done", 1)):
        # transform_b's target answers 404: a permanent error, FAILED at once
        engine.receiver.script[f"/gone-{rule}"] = [404]
        job_id = diamond(engine, transform_b_path=f"/gone-{rule}", rule=rule)
        workflow_run = start(engine, job_id)
        engine.drain()
        statuses = task_statuses(engine, workflow_run)
        assert statuses["transform_b"] is RunStatus.FAILED
        assert statuses["load"] is (RunStatus.SKIPPED if load_runs == 0 else RunStatus.SUCCEEDED)
        assert len(engine.receiver.for_path("/load")) == load_runs


def test_a_duplicate_delivery_of_a_parent_starts_no_child_twice(engine: Engine) -> None:
    job_id = diamond(engine)
    workflow_run = start(engine, job_id)
    engine.drain()
    # every task's message delivered again, as SQS may
    for task_id in ("extract", "transform_a", "transform_b", "load"):
        engine.runtime.queue.send_later(
            RunMessage(tenant_id="acme", run_id=child_run_id(workflow_run.run_id, task_id)), 0
        )
    engine.drain()
    for path in ("/extract", "/transform_a", "/transform_b", "/load"):
        assert len(engine.receiver.for_path(path)) == 1, path


def test_a_workflow_jobs_fire_runs_its_tasks_and_ends_with_them(engine: Engine) -> None:
    # Given a one-time workflow job due now: extract -> (transform_a, transform_b) -> load
    hook = engine.http
    tasks = [
        {"id": "extract", "target": hook("/wf-extract")},
        {"id": "transform_a", "target": hook("/wf-a"), "depends_on": ["extract"]},
        {"id": "transform_b", "target": hook("/wf-b"), "depends_on": ["extract"]},
        {"id": "load", "target": hook("/wf-load"), "depends_on": ["transform_a", "transform_b"]},
    ]
    job_id, at = once_workflow(engine, tasks)

    # When its fire is delivered and every task's message after it
    engine.drain()

    # Then each task ran once, the workflow run SUCCEEDED with its last task, and the one-time job completed
    for path in ("/wf-extract", "/wf-a", "/wf-b", "/wf-load"):
        assert len(engine.receiver.for_path(path)) == 1, path
    workflow_run = engine.run("acme", scheduled_run_id(job_id, at))
    assert workflow_run.status is RunStatus.SUCCEEDED
    assert workflow_run.workflow
    assert engine.runtime.service.get_job("acme", job_id, engine.clock()).job.status.value == "COMPLETED"


def test_a_workflow_run_with_a_failed_task_ends_failed_and_cancels_what_had_not_started(
    engine: Engine,
) -> None:
    engine.receiver.script["/wf2-b"] = [404]
    hook = engine.http
    tasks = [
        {"id": "extract", "target": hook("/wf2-extract")},
        {"id": "transform_b", "target": hook("/wf2-b"), "depends_on": ["extract"]},
        {"id": "load", "target": hook("/wf2-load"), "depends_on": ["transform_b"]},
    ]
    job_id, at = once_workflow(engine, tasks)
    engine.drain()
    workflow_run = engine.run("acme", scheduled_run_id(job_id, at))
    assert workflow_run.status is RunStatus.FAILED
    assert task_statuses(engine, workflow_run) == {
        "extract": RunStatus.SUCCEEDED,
        "transform_b": RunStatus.FAILED,
        "load": RunStatus.CANCELLED,  # fail_fast, the default
    }
    assert engine.receiver.for_path("/wf2-load") == []
    # A failed task alone cannot be retried: its workflow run is, which runs it again with what follows it
    failed_task = child_run_id(workflow_run.run_id, "transform_b")
    with pytest.raises(InvalidState, match=f"retry {workflow_run.run_id}"):
        engine.runtime.service.retry_run("acme", failed_task, engine.clock())
    assert engine.run("acme", failed_task).status is RunStatus.FAILED
    assert engine.run("acme", workflow_run.run_id).status is RunStatus.FAILED


def test_a_tasks_envelope_carries_its_parents_outputs(engine: Engine) -> None:
    # Given extract and count answering JSON (their outputs), report depending on both
    engine.receiver.replies["/out-extract"] = Reply(200, body=json.dumps({"rows": 42}).encode())
    engine.receiver.replies["/out-count"] = Reply(200, body=b"[1, 2, 3]")
    hook = engine.http
    tasks = [
        {"id": "extract", "target": hook("/out-extract")},
        {"id": "count", "target": hook("/out-count")},
        {"id": "report", "target": hook("/out-report"), "depends_on": ["extract", "count"]},
    ]
    job_id, at = once_workflow(engine, tasks)

    engine.drain()

    # Then the roots' envelopes name no parents, and report's has both outputs
    assert engine.receiver.for_path("/out-extract")[0].json()["parents"] == {}
    [report] = engine.receiver.for_path("/out-report")
    assert report.json()["parents"] == {"extract": {"rows": 42}, "count": [1, 2, 3]}
    workflow_run = engine.run("acme", scheduled_run_id(job_id, at))
    assert workflow_run.status is RunStatus.SUCCEEDED
    # a plain job's envelope is as it was: no parents
    plain = engine.create(schedule={"type": "once", "at": at.isoformat()}, target=hook("/out-plain"))
    engine.drain()
    assert "parents" not in engine.receiver.for_path("/out-plain")[0].json()
    assert plain.job.job_id


@pytest.mark.parametrize("failure_mode", ["fail_fast", "continue"])
def test_fail_fast_cancels_what_has_not_started_and_continue_runs_what_still_can(
    engine: Engine, failure_mode: str
) -> None:
    # Given extract -> (broken, clean -> after_clean), broken's target answering 404
    engine.receiver.script[f"/ff-{failure_mode}-broken"] = [404]
    hook = engine.http

    def path(name: str) -> str:
        return f"/ff-{failure_mode}-{name}"

    tasks = [
        {"id": "extract", "target": hook(path("extract"))},
        {"id": "broken", "target": hook(path("broken")), "depends_on": ["extract"]},
        {"id": "clean", "target": hook(path("clean")), "depends_on": ["extract"]},
        {"id": "after_clean", "target": hook(path("after_clean")), "depends_on": ["clean"]},
    ]
    job_id, at = once_workflow(engine, tasks, failure_mode=failure_mode)

    engine.drain()

    workflow_run = engine.run("acme", scheduled_run_id(job_id, at))
    statuses = task_statuses(engine, workflow_run)
    assert workflow_run.status is RunStatus.FAILED
    assert statuses["broken"] is RunStatus.FAILED
    if failure_mode == "continue":
        assert statuses["after_clean"] is RunStatus.SUCCEEDED
        assert len(engine.receiver.for_path(path("after_clean"))) == 1
    else:
        # after_clean had not started when broken failed: cancelled, never called
        assert statuses["after_clean"] is RunStatus.CANCELLED
        assert engine.receiver.for_path(path("after_clean")) == []
    # every task ended once, none called twice
    names = ("extract", "broken", "clean", "after_clean")
    assert all(len(engine.receiver.for_path(path(name))) <= 1 for name in names)


def test_a_workflow_run_is_shown_with_its_tasks(engine: Engine) -> None:
    from tickwork.api.schemas import RunDetailOut

    engine.receiver.script["/show-b"] = [404]
    hook = engine.http
    tasks = [
        {"id": "extract", "target": hook("/show-a")},
        {"id": "broken", "target": hook("/show-b"), "depends_on": ["extract"]},
        {"id": "load", "target": hook("/show-c"), "depends_on": ["broken"]},
    ]
    job_id, at = once_workflow(engine, tasks)
    engine.drain()

    run_id = scheduled_run_id(job_id, at)
    shown = RunDetailOut.of_detail(engine.runtime.service.run_detail("acme", run_id, engine.clock()))
    assert shown.status is RunStatus.FAILED and shown.workflow
    assert shown.tasks is not None
    by_task = {task.task_id: task for task in shown.tasks}
    assert {task_id: task.status for task_id, task in by_task.items()} == {
        "extract": RunStatus.SUCCEEDED,
        "broken": RunStatus.FAILED,
        "load": RunStatus.CANCELLED,
    }
    assert by_task["broken"].error_code == "http_404" and by_task["broken"].attempt == 1
    # a task's own run is shown whole by its id
    broken = engine.runtime.service.get_run("acme", by_task["broken"].run_id, engine.clock())
    assert broken.attempts[0].error_code == "http_404"
    # a plain run has no tasks
    plain = engine.create(schedule={"type": "once", "at": at.isoformat()}, target=hook("/show-plain"))
    engine.drain()
    plain_run = engine.runtime.service.run_detail(
        "acme", scheduled_run_id(plain.job.job_id, at), engine.clock()
    )
    assert RunDetailOut.of_detail(plain_run).tasks is None


def test_a_pool_task_is_claimed_by_its_pool_and_its_output_reaches_its_children(engine: Engine) -> None:
    from tickwork.domain.pools import ClaimRequest, CompleteRequest

    hook = engine.http
    tasks = [
        {"id": "crunch", "target": {"type": "pool", "pool": "gpu"}, "payload": {"n": 3}},
        {"id": "publish", "target": hook("/pool-wf-publish"), "depends_on": ["crunch"]},
    ]
    job_id, at = once_workflow(engine, tasks)
    engine.drain()
    pools = engine.runtime.pools

    # The pool task waits in its pool; a worker of the pool claims it with the task's payload
    [claimed] = pools.claim("acme", "gpu", ClaimRequest(worker_id="w1", max_runs=10, wait_seconds=0))
    assert claimed.payload == {"n": 3}
    assert claimed.run.run_id == child_run_id(scheduled_run_id(job_id, at), "crunch")
    token = claimed.run.lease_token
    assert token is not None

    # When it completes with an output, the next task runs with it, and the workflow run ends
    pools.complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token, output={"sum": 6}))
    engine.drain()
    [publish] = engine.receiver.for_path("/pool-wf-publish")
    assert publish.json()["parents"] == {"crunch": {"sum": 6}}
    assert engine.run("acme", scheduled_run_id(job_id, at)).status is RunStatus.SUCCEEDED


def test_a_cancelled_workflow_run_cancels_its_tasks_not_started_and_ends_cancelled(engine: Engine) -> None:
    tasks = [
        {"id": "crunch", "target": {"type": "pool", "pool": "cancel-me"}},
        {"id": "publish", "target": engine.http("/cancel-publish"), "depends_on": ["crunch"]},
    ]
    job_id, at = once_workflow(engine, tasks)
    engine.drain()
    run_id = scheduled_run_id(job_id, at)
    assert engine.run("acme", run_id).status is RunStatus.RUNNING  # crunch waits in its pool

    cancelled = engine.runtime.pools.cancel("acme", run_id)

    assert cancelled.status is RunStatus.CANCELLED
    assert task_statuses(engine, cancelled) == {"crunch": RunStatus.CANCELLED, "publish": RunStatus.CANCELLED}
    assert engine.receiver.for_path("/cancel-publish") == []


def test_max_parallel_holds_a_workflow_runs_tasks_beyond_it(engine: Engine) -> None:
    from tickwork.app.claims import Wait
    from tickwork.domain.workflow import task_job, task_of

    tasks = [{"id": f"part-{index}", "target": engine.http(f"/mp-{index}")} for index in range(3)]
    workflow = {"type": "workflow", "tasks": tasks, "max_parallel": 2}
    job = engine.create(
        schedule={"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"}, target=workflow
    ).job
    at = engine.clock()
    workflow_run_id = scheduled_run_id(job.job_id, at)
    claims = engine.runtime.worker().claims

    def task_run(index: int) -> tuple[Any, Run]:
        task = task_of(job, f"part-{index}")
        assert task is not None
        run = Run(
            run_id=child_run_id(workflow_run_id, f"part-{index}"),
            job_id=job.job_id,
            tenant_id="acme",
            scheduled_for=at,
            status=RunStatus.PLANNED,
            trigger="manual",
            created_at=at,
        )
        return task_job(job, task), run

    taken = [claims.take_slot(*task_run(index), at) for index in range(3)]
    assert isinstance(taken[0], tuple) and isinstance(taken[1], tuple)
    assert isinstance(taken[2], Wait) and taken[2].reason == "held back: its workflow run is at max_parallel"
    # a place freed: the third takes it
    first_job, _ = task_run(0)
    assert isinstance(taken[0], tuple)
    claims.give_back(first_job, taken[0])
    assert isinstance(claims.take_slot(*task_run(2), at), tuple)
