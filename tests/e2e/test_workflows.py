"""Workflows end to end on the local stack (its API, planner, workers and queues as `tickwork local` runs
them): a diamond and a 50-wide fan-out/fan-in complete with every task called once, after its parents,
each under its own run id (its idempotency key), the children handed their parents' outputs."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork_local.harness import Reply

from tests.e2e.conftest import Local, wait_for
from tests.support.engine import Receiver

ARRIVAL_SECONDS = 60


def create_workflow(local: Local, name: str, tasks: list[dict[str, Any]]) -> tuple[str, str]:
    """A one-time workflow job due in a second; (its job id, its workflow run's id)."""
    at = (datetime.now(UTC) + timedelta(seconds=1)).replace(microsecond=0)
    status, job = local.call(
        "POST",
        "/v1/jobs",
        body={
            "name": name,
            "schedule": {"type": "once", "at": at.isoformat()},
            "target": {"type": "workflow", "tasks": tasks},
        },
    )
    assert status == 201, job
    return job["job_id"], f"{job['job_id']}:{int(at.timestamp() * 1000)}"


def finished_run(local: Local, run_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        status, run = local.call("GET", f"/v1/runs/{run_id}")
        return run if status == 200 and run["status"] not in ("PLANNED", "ENQUEUED", "RUNNING") else None

    found: dict[str, Any] = wait_for(ended, timeout=ARRIVAL_SECONDS)
    return found


def test_a_diamond_runs_each_task_once_after_its_parents_with_their_outputs(
    local: Local, receiver: Receiver
) -> None:
    receiver.replies["/e2e-wf/extract"] = Reply(200, body=json.dumps({"rows": 7}).encode())
    hook = {"type": "http", "timeout_seconds": 10}
    tasks = [
        {"id": "extract", "target": {**hook, "url": receiver.url("/e2e-wf/extract")}},
        {
            "id": "transform_a",
            "target": {**hook, "url": receiver.url("/e2e-wf/a")},
            "depends_on": ["extract"],
        },
        {
            "id": "transform_b",
            "target": {**hook, "url": receiver.url("/e2e-wf/b")},
            "depends_on": ["extract"],
        },
        {
            "id": "load",
            "target": {**hook, "url": receiver.url("/e2e-wf/load")},
            "depends_on": ["transform_a", "transform_b"],
        },
    ]
    job_id, run_id = create_workflow(local, "e2e-diamond", tasks)

    run = finished_run(local, run_id)

    assert run["status"] == "SUCCEEDED"
    assert {task["task_id"]: task["status"] for task in run["tasks"]} == dict.fromkeys(
        ("extract", "transform_a", "transform_b", "load"), "SUCCEEDED"
    )
    calls = {path: receiver.for_path(f"/e2e-wf/{path}") for path in ("extract", "a", "b", "load")}
    assert {path: len(received) for path, received in calls.items()} == dict.fromkeys(calls, 1)
    # children after their parents
    assert calls["extract"][0].at <= min(calls["a"][0].at, calls["b"][0].at)
    assert max(calls["a"][0].at, calls["b"][0].at) <= calls["load"][0].at
    # each task under its own run id, which is its idempotency key
    keys = {path: received[0].headers["Idempotency-Key"] for path, received in calls.items()}
    assert keys["extract"] == f"{run_id}/extract" and len(set(keys.values())) == 4
    # the parents' outputs
    assert calls["a"][0].json()["parents"] == {"extract": {"rows": 7}}
    status, job = local.call("GET", f"/v1/jobs/{job_id}")
    assert status == 200 and job["status"] == "COMPLETED"


def test_a_50_wide_fan_out_and_fan_in_runs_every_task_once(local: Local, receiver: Receiver) -> None:
    hook = {"type": "http", "timeout_seconds": 10}
    width = 50
    tasks = [
        {"id": "split", "target": {**hook, "url": receiver.url("/e2e-fan/split")}},
        *(
            {"id": f"part-{index}", "target": {**hook, "url": receiver.url(f"/e2e-fan/part-{index}")},
             "depends_on": ["split"]}
            for index in range(width)
        ),
        {
            "id": "merge",
            "target": {**hook, "url": receiver.url("/e2e-fan/merge")},
            "depends_on": [f"part-{index}" for index in range(width)],
        },
    ]  # fmt: skip
    _, run_id = create_workflow(local, "e2e-fan", tasks)

    run = finished_run(local, run_id)

    assert run["status"] == "SUCCEEDED"
    assert len(run["tasks"]) == width + 2
    assert len(receiver.for_path("/e2e-fan/split")) == 1
    parts = [receiver.for_path(f"/e2e-fan/part-{index}") for index in range(width)]
    assert [len(received) for received in parts] == [1] * width
    [merge] = receiver.for_path("/e2e-fan/merge")
    assert max(received[0].at for received in parts) <= merge.at
    assert sorted(merge.json()["parents"]) == sorted(f"part-{index}" for index in range(width))


def test_a_pool_task_is_claimed_heartbeaten_and_completed_through_the_api(
    local: Local, receiver: Receiver
) -> None:
    pool = "e2e-wf-pool"
    tasks = [
        {"id": "crunch", "target": {"type": "pool", "pool": pool}, "payload": {"n": 4}},
        {
            "id": "publish",
            "target": {"type": "http", "timeout_seconds": 10, "url": receiver.url("/e2e-wf-pool/publish")},
            "depends_on": ["crunch"],
        },
    ]
    _, run_id = create_workflow(local, "e2e-pool-task", tasks)

    def claimed() -> dict[str, Any] | None:
        status, answer = local.call(
            "POST", f"/v1/pools/{pool}/claim", body={"worker_id": "w1", "wait_seconds": 0}
        )
        assert status == 200, answer
        return answer["runs"][0] if answer["runs"] else None

    task: dict[str, Any] = wait_for(claimed, timeout=ARRIVAL_SECONDS)
    assert task["run_id"] == f"{run_id}/crunch" and task["payload"] == {"n": 4}
    # the task's run id in a path: its "/" percent-encoded
    path = "/v1/runs/" + urllib.parse.quote(task["run_id"], safe=":")
    status, beat = local.call(
        "POST", path + "/heartbeat", body={"lease_token": task["lease_token"], "progress": 0.5}
    )
    assert status == 200, beat
    status, shown = local.call("GET", path)
    assert status == 200 and shown["status"] == "RUNNING" and shown["progress"] == 0.5
    status, done = local.call(
        "POST", path + "/complete", body={"lease_token": task["lease_token"], "output": {"sum": 10}}
    )
    assert status == 200, done

    run = finished_run(local, run_id)
    assert run["status"] == "SUCCEEDED"
    [publish] = wait_for(lambda: receiver.for_path("/e2e-wf-pool/publish"), timeout=ARRIVAL_SECONDS)
    assert publish.json()["parents"] == {"crunch": {"sum": 10}}


def test_a_failed_workflow_run_retried_through_the_api_runs_again_only_its_failed_subtree(
    local: Local, receiver: Receiver
) -> None:
    # Given extract -> (transform_a, transform_b) -> load, transform_b failing once (a permanent 404)
    receiver.script["/e2e-retry/transform_b"] = [404, 200]
    receiver.replies["/e2e-retry/extract"] = Reply(200, body=json.dumps({"rows": 3}).encode())
    hook = {"type": "http", "timeout_seconds": 10}

    def task(task_id: str, *parents: str) -> dict[str, Any]:
        url = receiver.url(f"/e2e-retry/{task_id}")
        return {"id": task_id, "target": {**hook, "url": url}, "depends_on": list(parents)}

    tasks = [
        task("extract"),
        task("transform_a", "extract"),
        task("transform_b", "extract"),
        task("load", "transform_a", "transform_b"),
    ]
    _, run_id = create_workflow(local, "e2e-retry", tasks)
    failed = finished_run(local, run_id)
    assert failed["status"] == "FAILED"
    shown = {task["task_id"]: task["status"] for task in failed["tasks"]}
    assert shown == {
        "extract": "SUCCEEDED",
        "transform_a": "SUCCEEDED",
        "transform_b": "FAILED",
        "load": "CANCELLED",
    }

    # A task's run alone is refused, naming its workflow run
    task_path = "/v1/runs/" + urllib.parse.quote(f"{run_id}/transform_b", safe=":")
    status, refused = local.call("POST", task_path + "/retry")
    assert status == 409 and run_id in refused["error"]["message"], refused

    # When the workflow run is retried
    status, reopened = local.call("POST", f"/v1/runs/{run_id}/retry")
    assert status == 202, reopened
    assert reopened["manual_retries"] == 1

    # Then it succeeds, transform_b and load ran again, extract and transform_a did not
    run = finished_run(local, run_id)
    assert run["status"] == "SUCCEEDED", run
    assert {task["task_id"]: task["status"] for task in run["tasks"]} == dict.fromkeys(shown, "SUCCEEDED")
    called = {name: len(receiver.for_path(f"/e2e-retry/{name}")) for name in shown}
    assert called == {"extract": 1, "transform_a": 1, "transform_b": 2, "load": 1}
    again = receiver.for_path("/e2e-retry/transform_b")[-1].json()
    assert again["run_id"] == f"{run_id}/transform_b" and again["parents"] == {"extract": {"rows": 3}}
