"""Each trigger rule and both failure modes end to end on the local stack, as docs/workflows.md states them.

Every workflow has the same three roots: ``ok`` answers 200 at once, ``bad`` answers 500 with one attempt
allowed (it fails), ``slow`` answers 200 after SLOW_SECONDS. A rule that decides "as soon as" it can tell
settles its task before ``slow`` has answered; one that waits for every parent settles it after. Each test
checks through ``GET /v1/runs/{id}`` every task's final status and the workflow run's, and at the receiver
that a task that ran was called once and a task that did not was never called.

The trigger rules' workflows run under ``failure_mode: continue``: under ``fail_fast`` a failure cancels
every task not started but the clean-up and alert steps (tested below with the failure modes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork_local.harness import Reply

from tests.e2e.conftest import Local
from tests.e2e.test_workflows import finished_run
from tests.support.engine import Receiver

pytestmark = pytest.mark.e2e

SLOW_SECONDS = 2.0
CLOCK_SLACK = 0.01  # the API's instants are to the millisecond
ONE_ATTEMPT = {"max_attempts": 1}
ROOTS = {"ok": "SUCCEEDED", "bad": "DEAD", "slow": "SUCCEEDED"}
"""The roots' final statuses: ``bad``'s 500 is retryable, so with its one attempt spent it is DEAD (a
failure, as FAILED and ABANDONED are, for the rules)."""


@dataclass(frozen=True)
class Task:
    depends_on: tuple[str, ...]
    rule: str
    status: str
    """Its final status."""
    settles: str | None = None
    """``early``: run or skipped before ``slow`` answered; ``late``: only after; None: not checked."""


@dataclass(frozen=True)
class Case:
    tasks: dict[str, Task]
    run_status: str = "FAILED"
    roots: dict[str, str] = field(default_factory=lambda: dict(ROOTS))


RULES = {
    "all_success": Case(
        {
            # runs once every parent succeeded: after the slow one
            "run_me": Task(("ok", "slow"), "all_success", "SUCCEEDED", "late"),
            # skipped as soon as one parent ended otherwise, without waiting for the slow one
            "skip_me": Task(("bad", "slow"), "all_success", "SKIPPED", "early"),
            # a skipped parent did not succeed: everything below a failure is skipped
            "below": Task(("skip_me",), "all_success", "SKIPPED"),
        }
    ),
    "all_done": Case(
        {
            "gate": Task(("bad",), "all_success", "SKIPPED", "early"),
            # runs once every parent ended, whatever the outcomes
            "run_me": Task(("ok", "bad", "gate", "slow"), "all_done", "SUCCEEDED", "late"),
            # never skipped, even when no parent succeeded
            "no_success": Task(("bad", "gate"), "all_done", "SUCCEEDED", "early"),
        }
    ),
    "one_success": Case(
        {
            # runs as soon as one parent succeeded
            "run_me": Task(("ok", "slow"), "one_success", "SUCCEEDED", "early"),
            "gate": Task(("bad",), "all_success", "SKIPPED", "early"),
            # skipped once every parent ended without a success (failed, skipped)
            "skip_me": Task(("bad", "gate"), "one_success", "SKIPPED", "early"),
        }
    ),
    "one_failed": Case(
        {
            # runs as soon as one parent failed
            "run_me": Task(("bad", "slow"), "one_failed", "SUCCEEDED", "early"),
            # skipped once every parent ended without a failure: after the slow one
            "skip_me": Task(("ok", "slow"), "one_failed", "SKIPPED", "late"),
        }
    ),
    # The alert step of a run where nothing went wrong: skipped by its rule, and the run succeeds.
    "one_failed-clean": Case(
        {"alert": Task(("ok", "slow"), "one_failed", "SKIPPED", "late")},
        run_status="SUCCEEDED",
        roots={"ok": "SUCCEEDED", "slow": "SUCCEEDED"},
    ),
}


def create_workflow(local: Local, name: str, tasks: list[dict[str, Any]], failure_mode: str) -> str:
    """A one-time workflow job due in a second; its workflow run's id."""
    due = (datetime.now(UTC) + timedelta(seconds=1)).replace(microsecond=0)
    target = {"type": "workflow", "failure_mode": failure_mode, "tasks": tasks}
    status, job = local.call(
        "POST",
        "/v1/jobs",
        body={"name": name, "schedule": {"type": "once", "at": due.isoformat()}, "target": target},
    )
    assert status == 201, job
    return f"{job['job_id']}:{int(due.timestamp() * 1000)}"


def hook(receiver: Receiver, path: str) -> dict[str, Any]:
    return {"type": "http", "timeout_seconds": 10, "url": receiver.url(path)}


def at(instant: str) -> float:
    return datetime.fromisoformat(instant).timestamp()


@pytest.mark.parametrize("case_name", list(RULES))
def test_a_trigger_rule_runs_and_skips_tasks_by_their_parents_outcomes(
    local: Local, receiver: Receiver, case_name: str
) -> None:
    case = RULES[case_name]
    prefix = f"/e2e-rule/{case_name}"
    receiver.replies[f"{prefix}/bad"] = Reply(500, body=b"broken")
    receiver.replies[f"{prefix}/slow"] = Reply(200, body=b"{}", delay=SLOW_SECONDS)
    tasks: list[dict[str, Any]] = [
        {"id": root, "target": hook(receiver, f"{prefix}/{root}"), "retry": ONE_ATTEMPT}
        for root in case.roots
    ]
    tasks += [
        {
            "id": task_id,
            "target": hook(receiver, f"{prefix}/{task_id}"),
            "depends_on": list(task.depends_on),
            "trigger_rule": task.rule,
        }
        for task_id, task in case.tasks.items()
    ]
    run_id = create_workflow(local, f"e2e-rule-{case_name}", tasks, "continue")

    run = finished_run(local, run_id)

    shown = {task["task_id"]: task for task in run["tasks"]}
    expected = {**case.roots, **{task_id: task.status for task_id, task in case.tasks.items()}}
    assert {task_id: task["status"] for task_id, task in shown.items()} == expected, run
    assert run["status"] == case.run_status
    calls = {task_id: receiver.for_path(f"{prefix}/{task_id}") for task_id in expected}
    assert {task_id: len(received) for task_id, received in calls.items()} == {
        task_id: 0 if status == "SKIPPED" else 1 for task_id, status in expected.items()
    }
    slow_answered = calls["slow"][0].at + SLOW_SECONDS
    for task_id, task in case.tasks.items():
        settled = calls[task_id][0].at if calls[task_id] else at(shown[task_id]["finished_at"])
        if task.settles == "early":
            assert settled < slow_answered, f"{task_id} waited for the slow parent"
        elif task.settles == "late":
            assert settled >= slow_answered - CLOCK_SLACK, f"{task_id} did not wait for the slow parent"


# --- failure modes ----------------------------------------------------------------------------------------
BAD_SECONDS = 1.0
"""``bad`` fails this long after it was called, once ``slow`` (called with it) is running."""
LONG_SECONDS = 3.0
RETRY_SECONDS = 2.0
MODES = {
    "fail_fast": {
        "bad": "DEAD",
        # running when the failure came: it finishes
        "long": "SUCCEEDED",
        # not started: cancelled (one waiting for its next attempt too)...
        "flaky": "CANCELLED",
        "after_long": "CANCELLED",
        "after_bad": "CANCELLED",
        # ...but for an alert or clean-up step, left to its rule: it runs on the failure
        "alert": "SUCCEEDED",
    },
    "continue": {
        "bad": "DEAD",
        "long": "SUCCEEDED",
        # every task that can still run runs: a retry, the branch beside the failure, the alert
        "flaky": "SUCCEEDED",
        "after_long": "SUCCEEDED",
        "alert": "SUCCEEDED",
        # the one whose rule can no longer be met is skipped
        "after_bad": "SKIPPED",
    },
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_failure_cancels_what_has_not_started_under_fail_fast_and_nothing_under_continue(
    local: Local, receiver: Receiver, mode: str
) -> None:
    prefix = f"/e2e-mode/{mode}"
    receiver.replies[f"{prefix}/bad"] = Reply(500, body=b"broken", delay=BAD_SECONDS)
    receiver.replies[f"{prefix}/long"] = Reply(200, body=b"{}", delay=LONG_SECONDS)
    receiver.script[f"{prefix}/flaky"] = [500, 200]  # its second attempt, RETRY_SECONDS later, succeeds
    retry_later = {"max_attempts": 2, "initial_delay_seconds": RETRY_SECONDS, "jitter": "none"}
    tasks = [
        {"id": "bad", "target": hook(receiver, f"{prefix}/bad"), "retry": ONE_ATTEMPT},
        {"id": "long", "target": hook(receiver, f"{prefix}/long")},
        {"id": "flaky", "target": hook(receiver, f"{prefix}/flaky"), "retry": retry_later},
        {"id": "after_long", "target": hook(receiver, f"{prefix}/after_long"), "depends_on": ["long"]},
        {"id": "after_bad", "target": hook(receiver, f"{prefix}/after_bad"), "depends_on": ["bad"]},
        {
            "id": "alert",
            "target": hook(receiver, f"{prefix}/alert"),
            "depends_on": ["bad"],
            "trigger_rule": "one_failed",
        },
    ]
    run_id = create_workflow(local, f"e2e-mode-{mode}", tasks, mode)

    run = finished_run(local, run_id)

    expected = MODES[mode]
    assert {task["task_id"]: task["status"] for task in run["tasks"]} == expected, run
    assert run["status"] == "FAILED"
    calls = {task_id: receiver.for_path(f"{prefix}/{task_id}") for task_id in expected}
    [bad], [long] = calls["bad"], calls["long"]
    assert long.at < bad.at + BAD_SECONDS, "the long task was not running when the other failed"
    called = {task_id: len(received) for task_id, received in calls.items()}
    if mode == "fail_fast":
        # the flaky task's first attempt ran before the failure; its retry was cancelled
        assert called == {"bad": 1, "long": 1, "flaky": 1, "after_long": 0, "after_bad": 0, "alert": 1}
        # the workflow run ended with its last task, the one that was running
        assert at(run["finished_at"]) >= long.at + LONG_SECONDS - CLOCK_SLACK
    else:
        assert called == {"bad": 1, "long": 1, "flaky": 2, "after_long": 1, "after_bad": 0, "alert": 1}
        assert calls["after_long"][0].at >= long.at + LONG_SECONDS
