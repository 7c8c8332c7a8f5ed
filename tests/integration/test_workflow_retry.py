"""A failed workflow run retried by hand, through the real API service and worker (moto, loopback receiver):
it runs again exactly its failed and cancelled tasks and what depends on them, keeps what succeeded (and its
output), and starts each task once however the retry is repeated, raced or interrupted."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from tickwork.app.workflows import reopen_workflow
from tickwork.domain.models import Run, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.workflow import child_run_id, kept_ends
from tickwork.errors import InvalidState
from tickwork_local.harness import Reply

from tests.integration.conftest import Engine
from tests.support.engine import make_requests_atomic


def failed_workflow(engine: Engine, name: str, tasks: list[dict[str, Any]], **fields: Any) -> Run:
    """A one-time workflow job due now, run to its end (the caller scripts a task to fail)."""
    at = engine.clock()
    workflow = {"type": "workflow", "tasks": tasks, **fields}
    job_id = engine.create(schedule={"type": "once", "at": at.isoformat()}, target=workflow).job.job_id
    engine.drain()
    run = engine.run("acme", scheduled_run_id(job_id, at))
    assert run.status is RunStatus.FAILED, name
    return run


def failed_chain(engine: Engine, name: str, broken: list[int], *, last: bool = True) -> Run:
    """first -> broken (its target answering ``broken``'s statuses in turn) [-> last], run until it failed."""
    engine.receiver.script[f"/{name}-broken"] = broken
    hook = engine.http
    tasks = [
        {"id": "first", "target": hook(f"/{name}-first")},
        {"id": "broken", "target": hook(f"/{name}-broken"), "depends_on": ["first"]},
        *([{"id": "last", "target": hook(f"/{name}-last"), "depends_on": ["broken"]}] if last else []),
    ]
    return failed_workflow(engine, name, tasks)


def statuses(engine: Engine, run: Run) -> dict[str, RunStatus]:
    return {task.run_id.rsplit("/", 1)[1]: task.status for task in engine.runtime.runs.tasks_of("acme", run)}


def calls(engine: Engine, prefix: str, names: tuple[str, ...]) -> dict[str, int]:
    return {name: len(engine.receiver.for_path(f"/{prefix}-{name}")) for name in names}


def retry(engine: Engine, run: Run) -> Run:
    return engine.runtime.service.retry_run("acme", run.run_id, engine.clock())


def etl(engine: Engine, prefix: str) -> list[dict[str, Any]]:
    """extract -> (transform_a, transform_b) -> load -> report, and an alert when transform_b fails."""
    hook = engine.http

    def task(task_id: str, *parents: str, **fields: Any) -> dict[str, Any]:
        return {"id": task_id, "target": hook(f"/{prefix}-{task_id}"), "depends_on": list(parents), **fields}

    return [
        task("extract"),
        task("transform_a", "extract"),
        task("transform_b", "extract", retry={"max_attempts": 1}),
        task("load", "transform_a", "transform_b"),
        task("report", "load"),
        task("alert", "transform_b", trigger_rule="one_failed"),
    ]


NAMES = ("extract", "transform_a", "transform_b", "load", "report", "alert")


def test_a_retry_runs_again_the_failed_task_and_what_follows_it_and_nothing_upstream(engine: Engine) -> None:
    # Given transform_b failing once (then fixed), under `continue`: load and report skipped, alert run
    engine.receiver.script["/re-transform_b"] = [404, 200]
    engine.receiver.replies["/re-extract"] = Reply(200, body=json.dumps({"rows": 7}).encode())
    run = failed_workflow(engine, "etl", etl(engine, "re"), failure_mode="continue")
    assert statuses(engine, run) == {
        "extract": RunStatus.SUCCEEDED,
        "transform_a": RunStatus.SUCCEEDED,
        "transform_b": RunStatus.FAILED,
        "load": RunStatus.SKIPPED,
        "report": RunStatus.SKIPPED,
        "alert": RunStatus.SUCCEEDED,
    }

    # When the workflow run is retried
    reopened = retry(engine, run)
    assert (reopened.status, reopened.manual_retries) == (RunStatus.ENQUEUED, 1)
    engine.drain()

    # Then transform_b ran again and what depends on it was decided again: load and report ran, alert (one
    # failed parent wanted) skipped this time; extract and transform_a kept their first run
    after = engine.run("acme", run.run_id)
    assert (after.status, after.attempt, after.manual_retries) == (RunStatus.SUCCEEDED, 2, 1)
    assert statuses(engine, run) == {
        "extract": RunStatus.SUCCEEDED,
        "transform_a": RunStatus.SUCCEEDED,
        "transform_b": RunStatus.SUCCEEDED,
        "load": RunStatus.SUCCEEDED,
        "report": RunStatus.SUCCEEDED,
        "alert": RunStatus.SKIPPED,
    }
    assert calls(engine, "re", NAMES) == {
        "extract": 1,
        "transform_a": 1,
        "transform_b": 2,
        "load": 1,
        "report": 1,
        "alert": 1,
    }
    # the failed task ran again under its run id (its idempotency key), its first attempt kept
    transform_b = engine.run("acme", child_run_id(run.run_id, "transform_b"))
    assert [attempt.outcome for attempt in transform_b.attempts] == ["permanent_error", "succeeded"]
    assert transform_b.manual_retries == 1
    keys = {call.json()["run_id"] for call in engine.receiver.for_path("/re-transform_b")}
    assert keys == {child_run_id(run.run_id, "transform_b")}
    # a kept parent's output still reaches the tasks run again
    again = engine.receiver.for_path("/re-transform_b")[-1].json()
    assert again["parents"] == {"extract": {"rows": 7}}


def test_a_retry_under_fail_fast_runs_the_cancelled_tasks_too(engine: Engine) -> None:
    # Given broken failing once: fail_fast cancelled after_broken (never started)
    engine.receiver.script["/ff-broken"] = [404, 200]
    hook = engine.http
    tasks = [
        {"id": "extract", "target": hook("/ff-extract")},
        {"id": "broken", "target": hook("/ff-broken"), "depends_on": ["extract"]},
        {"id": "after_broken", "target": hook("/ff-after_broken"), "depends_on": ["broken"]},
    ]
    run = failed_workflow(engine, "ff", tasks)
    assert statuses(engine, run)["after_broken"] is RunStatus.CANCELLED

    retry(engine, run)
    engine.drain()

    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert calls(engine, "ff", ("extract", "broken", "after_broken")) == {
        "extract": 1,
        "broken": 2,
        "after_broken": 1,
    }


def test_a_run_that_fails_again_can_be_retried_again(engine: Engine) -> None:
    run = failed_chain(engine, "again", [404, 404, 200])

    retry(engine, run)
    engine.drain()
    assert engine.run("acme", run.run_id).status is RunStatus.FAILED
    retry(engine, run)
    engine.drain()

    final = engine.run("acme", run.run_id)
    assert (final.status, final.manual_retries, final.attempt) == (RunStatus.SUCCEEDED, 2, 3)
    assert calls(engine, "again", ("first", "broken", "last")) == {"first": 1, "broken": 3, "last": 1}
    # each go has its own ends: the last one holds every task's
    assert engine.runtime.task_ends.read(final) == dict.fromkeys(("first", "broken", "last"), "succeeded")


def test_a_succeeded_or_running_workflow_run_is_not_retried(engine: Engine) -> None:
    hook = engine.http
    at = engine.clock()
    tasks = [{"id": "only", "target": hook("/ok-only")}]
    job_id = engine.create(
        schedule={"type": "once", "at": at.isoformat()}, target={"type": "workflow", "tasks": tasks}
    ).job.job_id
    engine.drain()
    run = engine.run("acme", scheduled_run_id(job_id, at))
    assert run.status is RunStatus.SUCCEEDED
    with pytest.raises(InvalidState, match="only FAILED, DEAD or ABANDONED"):
        retry(engine, run)
    assert engine.run("acme", run.run_id).manual_retries == 0


def test_racing_retries_reopen_the_run_once_and_start_each_task_once(engine: Engine) -> None:
    make_requests_atomic(engine.dynamodb)
    engine.receiver.script["/race-broken"] = [404, 200]
    hook = engine.http
    tasks = [
        {"id": "first", "target": hook("/race-first")},
        {"id": "broken", "target": hook("/race-broken"), "depends_on": ["first"]},
        *(
            {"id": f"fan{index}", "target": hook(f"/race-fan{index}"), "depends_on": ["broken"]}
            for index in range(20)
        ),
    ]
    run = failed_workflow(engine, "race", tasks)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def one() -> None:
        barrier.wait()
        try:
            retry(engine, run)
            outcomes.append("reopened")
        except InvalidState:
            outcomes.append("refused")

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.drain()

    assert sorted(outcomes) == ["refused", "refused", "refused", "reopened"]
    final = engine.run("acme", run.run_id)
    assert (final.status, final.manual_retries) == (RunStatus.SUCCEEDED, 1)
    assert len(engine.receiver.for_path("/race-broken")) == 2
    assert all(len(engine.receiver.for_path(f"/race-fan{index}")) == 1 for index in range(20))


def test_a_retry_interrupted_after_its_fan_in_write_is_finished_by_the_next(engine: Engine) -> None:
    # Given a retry whose API process died after writing the new go's ends, before reopening the run
    run = failed_chain(engine, "cut", [404, 200])
    job = engine.runtime.jobs.get("acme", run.job_id)
    ends = engine.runtime.task_ends
    reopened = run.model_copy(update={"manual_retries": 1})
    assert job.workflow is not None
    ends.begin_retry(reopened, kept_ends(job.workflow.tasks, ends.read(run)))
    assert engine.run("acme", run.run_id).status is RunStatus.FAILED

    # When it is retried again
    retry(engine, run)
    engine.drain()

    # Then the run goes on as one retry: each task once more at most
    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert calls(engine, "cut", ("first", "broken", "last")) == {"first": 1, "broken": 2, "last": 1}


def test_a_stale_retry_cannot_reopen_a_later_failure(engine: Engine) -> None:
    # Given a retry that read the run's first failure, and another retry that ran meanwhile and failed again
    run = failed_chain(engine, "stale", [404], last=False)
    job = engine.runtime.jobs.get("acme", run.job_id)
    retry(engine, run)
    engine.drain()
    failed_again = engine.run("acme", run.run_id)
    assert (failed_again.status, failed_again.manual_retries) == (RunStatus.FAILED, 1)

    # When the stale retry writes, from what it read
    lifecycle = engine.runtime.service.lifecycle
    _, written = reopen_workflow(lifecycle, engine.runtime.task_ends, job, run, engine.clock())

    # Then nothing is reopened: the later failure stands, its go's ends untouched
    assert not written.ok
    assert engine.run("acme", run.run_id).manual_retries == 1
    assert engine.runtime.task_ends.read(failed_again) == {"first": "succeeded", "broken": "failed"}


def test_duplicate_deliveries_of_a_retrys_start_start_each_task_once(engine: Engine) -> None:
    run = failed_chain(engine, "dup", [404, 200])
    retry(engine, run)
    # the reopened run's message delivered three times, and the old task messages again
    for _ in range(2):
        engine.runtime.queue.send_later(RunMessage(tenant_id="acme", run_id=run.run_id, attempt=2), 0)
    for task_id in ("broken", "last"):
        engine.runtime.queue.send_later(
            RunMessage(tenant_id="acme", run_id=child_run_id(run.run_id, task_id)), 0
        )
    engine.drain()

    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    assert calls(engine, "dup", ("first", "broken", "last")) == {"first": 1, "broken": 2, "last": 1}
