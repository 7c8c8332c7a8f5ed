"""`tickwork runs get` on a workflow run: its tasks drawn as its definition's tree, each task with its run's
status, attempts and times, those with no run yet waiting; its tasks in -o json; a task's own run by its id;
another tenant's workflow run not found. The workflow run is driven by the real worker (moto, loopback
receiver, a fake clock), the CLI reads it through the API."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from tickwork.app.pools import PoolService
from tickwork.domain.models import JobPatch, RunStatus, scheduled_run_id
from tickwork.domain.pools import ClaimRequest, CompleteRequest
from tickwork.domain.workflow import child_run_id

from tests.conftest import TOKENS
from tests.integration.conftest import Engine
from tests.integration.test_cli import ANSI, Cli, api_url, clean_environment  # noqa: F401 - fixtures


@pytest.fixture
def cli(api_url: str) -> Cli:  # noqa: F811 - the fixture
    return Cli(api_url)


def diamond(engine: Engine) -> str:
    """A workflow run of extract -> (transform_a in pool gpu, transform_b) -> load, due now, on `continue`;
    transform_b's target answers 500, then 404 (a permanent failure). Its run id."""
    engine.receiver.script["/wf-cli-b"] = [500, 404]
    tasks = [
        {"id": "extract", "target": engine.http("/wf-cli-extract")},
        {"id": "transform_a", "target": {"type": "pool", "pool": "gpu"}, "depends_on": ["extract"]},
        {
            "id": "transform_b",
            "target": engine.http("/wf-cli-b"),
            "depends_on": ["extract"],
            "retry": {"max_attempts": 3, "initial_delay_seconds": 2, "jitter": "none"},
        },
        {"id": "load", "target": engine.http("/wf-cli-load"), "depends_on": ["transform_a", "transform_b"]},
    ]
    at = engine.clock()
    workflow = {"type": "workflow", "tasks": tasks, "failure_mode": "continue"}
    job_id = engine.create(
        name="etl", schedule={"type": "once", "at": at.isoformat()}, target=workflow
    ).job.job_id
    return scheduled_run_id(job_id, at)


def pools(engine: Engine) -> PoolService:
    """The pool routes' service, as the runtime builds it, on the engine's fake clock."""
    worker = engine.worker()
    return PoolService(
        jobs=engine.runtime.jobs,
        runs=engine.runtime.runs,
        lifecycle=worker.lifecycle,
        attempts=worker.attempts,
        after_end=worker.after_end,
        metrics=engine.metrics,
        clock=engine.clock,
        sleep=engine.clock.sleep,
    )


def tree_of(out: str) -> list[str]:
    """The lines of the tree ``runs get`` prints: from ``workflow:`` to the end."""
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("workflow:"))
    return lines[start:]


def test_a_workflow_runs_tasks_are_shown_as_its_tree_with_each_tasks_run(cli: Cli, engine: Engine) -> None:
    # Given the diamond's run started: extract ran, transform_a waits in its pool, transform_b failed once
    run_id = diamond(engine)
    engine.drain()

    # When it is shown, its tasks are its definition's tree, each with its run; load has none yet
    shown = cli("runs", "get", run_id)
    assert shown.code == 0, shown.err
    assert re.search(r"^status\s+RUNNING$", shown.out, re.MULTILINE), shown.out
    assert tree_of(shown.out) == [
        "workflow: 4 tasks (continue)",
        "└── extract  SUCCEEDED  1 attempt  took 0 ms (finished 2026-11-22T09:00:00Z)",
        "    ├── transform_a  ENQUEUED  0 attempts",
        "    └── transform_b  RETRY_WAIT  1 attempt  started 2026-11-22T09:00:00Z  http_500",
        "        └── load  waiting  (after transform_a, transform_b)",
    ]
    assert "attempts       none yet" not in shown.out  # a workflow run's attempts are its tasks'

    # Given a worker of pool gpu claims transform_a, and transform_b's second attempt fails for good
    [claimed] = pools(engine).claim("acme", "gpu", ClaimRequest(worker_id="w1", wait_seconds=0))
    engine.clock.advance(seconds=3)
    engine.drain()

    # Then transform_a is RUNNING since its claim, transform_b FAILED after 2 attempts, and load (all_success)
    # SKIPPED at once, while the workflow run goes on with transform_a
    again = cli("runs", "get", run_id)
    assert re.search(r"^status\s+RUNNING$", again.out, re.MULTILINE), again.out
    assert tree_of(again.out) == [
        "workflow: 4 tasks (continue)",
        "└── extract  SUCCEEDED  1 attempt  took 0 ms (finished 2026-11-22T09:00:00Z)",
        "    ├── transform_a  RUNNING  1 attempt  started 2026-11-22T09:00:00Z",
        "    └── transform_b  FAILED  2 attempts  took 3.0s (finished 2026-11-22T09:00:03Z)  http_404",
        "        └── load  SKIPPED  0 attempts  finished 2026-11-22T09:00:03Z"
        "  (after transform_a, transform_b)",
    ]

    # Given transform_a completes 4 minutes later: the workflow run ends FAILED
    token = claimed.run.lease_token
    assert token is not None
    engine.clock.advance(minutes=4)
    pools(engine).complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    engine.drain()
    assert engine.run("acme", run_id).status is RunStatus.FAILED

    # Then every task has its end, on a terminal too
    ended = cli("runs", "get", run_id)
    terminal = cli("runs", "get", run_id, env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    assert re.search(r"^status\s+FAILED$", ended.out, re.MULTILINE), ended.out
    tree = [
        "workflow: 4 tasks (continue)",
        "└── extract  SUCCEEDED  1 attempt  took 0 ms (finished 2026-11-22T09:00:00Z)",
        "    ├── transform_a  SUCCEEDED  1 attempt  took 4m3s (finished 2026-11-22T09:04:03Z)",
        "    └── transform_b  FAILED  2 attempts  took 3.0s (finished 2026-11-22T09:00:03Z)  http_404",
        "        └── load  SKIPPED  0 attempts  finished 2026-11-22T09:00:03Z"
        "  (after transform_a, transform_b)",
    ]
    assert tree_of(ended.out) == tree
    assert "\n".join(tree) in terminal.out, terminal.out


def test_on_a_colour_terminal_each_task_is_in_its_statuss_colour(cli: Cli, engine: Engine) -> None:
    run_id = diamond(engine)
    engine.drain()
    terminal = cli("runs", "get", run_id, env={"TTY_COMPATIBLE": "1"})
    assert terminal.code == 0, terminal.err
    lines = {
        ANSI.sub("", line).split("── ")[-1].split()[0]: line
        for line in terminal.out.splitlines()
        if "── " in line
    }
    assert "\x1b[32mextract  SUCCEEDED" in lines["extract"]  # green
    assert "\x1b[33mtransform_b  RETRY_WAIT" in lines["transform_b"]  # yellow
    assert "\x1b[2mload  waiting" in lines["load"]  # dim


def test_json_and_yaml_carry_the_runs_tasks_as_the_api_gives_them(cli: Cli, engine: Engine) -> None:
    run_id = diamond(engine)
    engine.drain()
    for form in ("json", "yaml"):
        shown = cli("runs", "get", run_id, "-o", form)
        assert shown.code == 0, shown.err
        run = shown.json() if form == "json" else shown.yaml()
        assert (run["run_id"], run["status"], run["workflow"]) == (run_id, "RUNNING", True)
        tasks = {task["task_id"]: task for task in run["tasks"]}
        # load has no run yet: the API lists the tasks that have one
        assert {task_id: task["status"] for task_id, task in tasks.items()} == {
            "extract": "SUCCEEDED",
            "transform_a": "ENQUEUED",
            "transform_b": "RETRY_WAIT",
        }
        assert tasks["transform_b"]["run_id"] == child_run_id(run_id, "transform_b")
        assert (tasks["transform_b"]["attempt"], tasks["transform_b"]["error_code"]) == (1, "http_500")


def test_a_tasks_own_run_is_shown_by_its_id(cli: Cli, engine: Engine) -> None:
    # Given the diamond's transform_b failed twice: 500, then 404
    run_id = diamond(engine)
    engine.drain()
    engine.clock.advance(seconds=3)
    engine.drain()
    task_run_id = child_run_id(run_id, "transform_b")
    assert "/" in task_run_id

    # When its run is asked for by its id, a / in it (sent as %2F)
    shown = cli("runs", "get", task_run_id)

    # Then it is shown whole: its workflow run and task, and each attempt with its error
    assert shown.code == 0, shown.err
    assert re.search(rf"^run_id\s+{re.escape(task_run_id)}$", shown.out, re.MULTILINE), shown.out
    assert re.search(rf"^workflow_run\s+{re.escape(run_id)}$", shown.out, re.MULTILINE), shown.out
    assert re.search(r"^task\s+transform_b$", shown.out, re.MULTILINE), shown.out
    assert re.search(r"^status\s+FAILED$", shown.out, re.MULTILINE), shown.out
    attempts = [line.split() for line in shown.out.splitlines() if re.match(r"^[12]\s", line)]
    assert [(row[0], row[6]) for row in attempts] == [("1", "http_500:"), ("2", "http_404:")], shown.out
    assert "workflow:" not in shown.out  # a task's run has no tasks of its own
    document = cli("runs", "get", task_run_id, "-o", "json")
    assert document.code == 0, document.err
    assert (document.json()["run_id"], document.json()["tasks"]) == (task_run_id, None)


def test_another_tenants_workflow_run_and_its_tasks_are_not_found(cli: Cli, engine: Engine) -> None:
    run_id = diamond(engine)
    engine.drain()
    for asked in (run_id, child_run_id(run_id, "extract")):
        for argv in (("runs", "get", asked), ("runs", "get", asked, "-o", "json")):
            refused = cli(*argv, token=TOKENS["globex"])
            assert refused.code == 1, refused.out
            assert refused.err.startswith("error: not_found: "), refused.err
            assert " not found" in refused.err
            assert refused.out == ""
    assert cli("runs", "get", run_id).code == 0  # its own tenant sees it


def test_a_run_of_a_definition_changed_since_shows_each_task_it_ran_and_what_it_did_not(
    cli: Cli, engine: Engine
) -> None:
    # Given the diamond's run ended, then its job's definition changed: load removed, report added
    run_id = diamond(engine)
    engine.drain()
    [claimed] = pools(engine).claim("acme", "gpu", ClaimRequest(worker_id="w1", wait_seconds=0))
    engine.clock.advance(seconds=3)
    engine.drain()
    token = claimed.run.lease_token
    assert token is not None
    pools(engine).complete("acme", claimed.run.run_id, CompleteRequest(lease_token=token))
    engine.drain()
    job = cli("jobs", "get", "etl", "-o", "json").json()
    tasks = [task for task in job["target"]["tasks"] if task["id"] != "load"]
    tasks.append({"id": "report", "target": engine.http("/wf-cli-report"), "depends_on": ["transform_a"]})
    # (the job completed with its one fire: a change takes a new fire too, tomorrow)
    tomorrow = (engine.clock() + timedelta(days=1)).isoformat()
    patch = JobPatch.model_validate(
        {"target": {**job["target"], "tasks": tasks}, "schedule": {"type": "once", "at": tomorrow}}
    )
    # changed on the engine's clock: the API's would find the job's fire (a week ago) in the past
    engine.runtime.service.update_job("acme", job["job_id"], patch, engine.clock())

    # When the run is shown
    shown = cli("runs", "get", run_id)

    # Then report, which it never ran, is "not run", and load, which it ran, is still shown, at the top
    assert shown.code == 0, shown.err
    assert tree_of(shown.out) == [
        "workflow: 5 tasks (continue)",
        "├── extract  SUCCEEDED  1 attempt  took 0 ms (finished 2026-11-22T09:00:00Z)",
        "│   ├── transform_a  SUCCEEDED  1 attempt  took 3.0s (finished 2026-11-22T09:00:03Z)",
        "│   │   └── report  not run",
        "│   └── transform_b  FAILED  2 attempts  took 3.0s (finished 2026-11-22T09:00:03Z)  http_404",
        "└── load  SKIPPED  0 attempts  finished 2026-11-22T09:00:03Z",
    ]
