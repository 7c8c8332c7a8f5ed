"""The tenant-wide run list and stats on `tickwork local`, through real HTTP: a tenant of more than 100 jobs
(the old limit of GET /v1/runs), and run changes not yet indexed when the stack is killed or stopped."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TOKENS, Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

pytestmark = pytest.mark.e2e

TENANTS = ",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items())
TERMINAL = {"SUCCEEDED", "FAILED", "DEAD"}


def create_jobs(local: Local, receiver: Receiver, count: int, prefix: str) -> list[str]:
    job_ids = []
    for index in range(count):
        status, job = local.call(
            "POST",
            "/v1/jobs",
            body={
                "name": f"{prefix}-{index}",
                "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
                "target": {"type": "http", "url": receiver.url(f"/{prefix}")},
            },
        )
        assert status == 201, job
        job_ids.append(job["job_id"])
    return job_ids


def trigger_all(local: Local, job_ids: list[str]) -> list[str]:
    run_ids = []
    for job_id in job_ids:
        status, run = local.call("POST", f"/v1/jobs/{job_id}/trigger")
        assert status == 202, run
        run_ids.append(run["run_id"])
    return run_ids


def every_listed(local: Local, **query: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = "&".join(
            f"{key}={value}" for key, value in {**query, **({"cursor": cursor} if cursor else {})}.items()
        )
        status, page = local.call("GET", f"/v1/runs?{params}")
        assert status == 200, page
        listed += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return listed


def all_ended(local: Local, run_ids: list[str]) -> bool:
    return all(local.call("GET", f"/v1/runs/{run_id}")[1]["status"] in TERMINAL for run_id in run_ids)


def test_runs_of_more_than_a_hundred_jobs_are_listed_tenant_wide_newest_first(
    local: Local, receiver: Receiver
) -> None:
    prefix = f"many-{uuid.uuid4().hex[:6]}"
    job_ids = create_jobs(local, receiver, 110, prefix)
    run_ids = trigger_all(local, job_ids)
    assert wait_for(lambda: all_ended(local, run_ids), timeout=60)

    def listed_ids() -> set[str]:
        return {run["run_id"] for run in every_listed(local, limit="100")}

    assert wait_for(lambda: set(run_ids) <= listed_ids(), timeout=15)
    listed = [run for run in every_listed(local, limit="37") if run["run_id"] in set(run_ids)]
    # by time, not by its text: a time on a whole second is written without a fraction ("...:59Z" sorts
    # after "...:59.411Z" as text)
    order = [(datetime.fromisoformat(run["scheduled_for"]), run["run_id"]) for run in listed]
    assert order == sorted(order, reverse=True)
    assert {run["status"] for run in listed} == {"SUCCEEDED"}
    succeeded = every_listed(local, status="SUCCEEDED", limit="100")
    assert set(run_ids) <= {run["run_id"] for run in succeeded}
    assert local.call("GET", "/v1/runs?status=RUNNING&limit=100")[0] == 200

    status, stats = local.call("GET", "/v1/stats")
    assert status == 200, stats
    assert stats["runs"]["SUCCEEDED"] >= 110
    assert stats["trigger_lag_ms"]["p50"] is not None


def held_back_stack(data_dir: Path) -> Local:
    """A stack whose indexer waits an hour for a batch: its run changes stay in the feed."""
    return start_local(data_dir, tenants=TENANTS, environment={"TICKWORK_INDEX_WINDOW_SECONDS": "3600"})


def indexing_stack(data_dir: Path) -> Local:
    return start_local(data_dir, tenants=TENANTS, environment={"TICKWORK_INDEX_WINDOW_SECONDS": "0.2"})


def test_run_changes_not_yet_indexed_survive_kill_9_and_a_clean_stop(
    tmp_path: Path, receiver: Receiver
) -> None:
    data_dir = tmp_path / "data"
    first = held_back_stack(data_dir)
    try:
        killed_runs = trigger_all(first, create_jobs(first, receiver, 3, "killed"))
        assert wait_for(lambda: all_ended(first, killed_runs), timeout=30)
        assert not set(killed_runs) & {run["run_id"] for run in every_listed(first)}
    finally:
        first.process.kill()  # SIGKILL: the feed's records are only in the journal
        first.process.wait(timeout=10)
        stop_local(first)  # closes what the test kept of the killed process

    second = held_back_stack(data_dir)
    try:
        stopped_runs = trigger_all(second, create_jobs(second, receiver, 3, "stopped"))
        assert wait_for(lambda: all_ended(second, stopped_runs), timeout=30)
    finally:
        stop_local(second)  # a clean stop: the feed's records go into the snapshot
    assert second.process.returncode == 0

    third = indexing_stack(data_dir)
    try:
        expected = set(killed_runs) | set(stopped_runs)
        assert wait_for(lambda: expected <= {run["run_id"] for run in every_listed(third)}, timeout=15)
        listed = [run for run in every_listed(third) if run["run_id"] in expected]
        assert len(listed) == len(expected)  # each once, however often its changes were indexed
        assert {run["status"] for run in listed} == {"SUCCEEDED"}
    finally:
        stop_local(third)
