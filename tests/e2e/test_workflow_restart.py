"""A workflow run on `tickwork local --data-dir` killed (SIGKILL) while its fan-out runs, and started again on
the same data: it ends with every task run once per attempt, the fan-in's task after all of its parents,
nothing left hanging."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tickwork_local.harness import Reply

from tests.e2e.conftest import Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

pytestmark = pytest.mark.e2e

TENANTS = "acme:tw_e2e_acme"
WIDTH = 12
ENDED_WITHIN = 150  # seconds: a killed worker's messages come back after their visibility timeout


def create(local: Local, receiver: Receiver) -> str:
    hook = {"type": "http", "timeout_seconds": 10}
    tasks = [
        {"id": "split", "target": {**hook, "url": receiver.url("/kill-wf/split")}},
        *(
            {"id": f"part-{index}", "target": {**hook, "url": receiver.url(f"/kill-wf/part-{index}")},
             "depends_on": ["split"]}
            for index in range(WIDTH)
        ),
        {
            "id": "merge",
            "target": {**hook, "url": receiver.url("/kill-wf/merge")},
            "depends_on": [f"part-{index}" for index in range(WIDTH)],
        },
    ]  # fmt: skip
    at = (datetime.now(UTC) + timedelta(seconds=1)).replace(microsecond=0)
    status, job = local.call(
        "POST",
        "/v1/jobs",
        body={
            "name": "kill-wf",
            "schedule": {"type": "once", "at": at.isoformat()},
            "target": {"type": "workflow", "tasks": tasks},
        },
    )
    assert status == 201, job
    return f"{job['job_id']}:{int(at.timestamp() * 1000)}"


def test_a_workflow_run_killed_mid_fan_out_ends_after_a_restart_with_each_task_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    # Given a 12-wide fan-out whose parts answer after a second, and the stack killed once some have been
    # called (others in flight, others not yet sent or claimed)
    for index in range(WIDTH):
        receiver.replies[f"/kill-wf/part-{index}"] = Reply(200, body=b"{}", delay=1.0)
    data_dir = tmp_path / "data"
    local = start_local(data_dir, tenants=TENANTS)
    try:
        run_id = create(local, receiver)
        wait_for(
            lambda: sum(1 for request in receiver.requests if request.path.startswith("/kill-wf/part-")) >= 3,
            timeout=60,
        )
        local.process.send_signal(signal.SIGKILL)
        local.process.wait(timeout=10)
        stop_local(local)
        # When it is started again on the same data
        local = start_local(data_dir, tenants=TENANTS)

        def ended() -> dict[str, Any] | None:
            status, run = local.call("GET", f"/v1/runs/{run_id}")
            return run if status == 200 and run["status"] not in ("PLANNED", "ENQUEUED", "RUNNING") else None

        run = wait_for(ended, timeout=ENDED_WITHIN, interval=0.5)
    finally:
        stop_local(local)

    # Then the run succeeded with every task, each called once per attempt (a call the kill cut short is a
    # new attempt, under the same idempotency key), merge once and after every part's last call
    assert run["status"] == "SUCCEEDED", run
    statuses = Counter(task["status"] for task in run["tasks"])
    assert statuses == {"SUCCEEDED": WIDTH + 2}, statuses
    calls = Counter(
        (request.headers["Idempotency-Key"], request.json()["attempt"])
        for request in receiver.requests
        if request.path.startswith("/kill-wf/")
    )
    assert set(calls.values()) == {1}, {key: count for key, count in calls.items() if count > 1}
    assert {key for key, _ in calls} == {task["run_id"] for task in run["tasks"]}
    [merge] = [request for request in receiver.requests if request.path == "/kill-wf/merge"]
    parts = [request for request in receiver.requests if request.path.startswith("/kill-wf/part-")]
    assert max(part.at for part in parts) <= merge.at
