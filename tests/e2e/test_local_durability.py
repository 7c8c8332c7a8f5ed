"""`tickwork local --data-dir` loses nothing it accepted: SIGKILL during a storm of creates and running jobs,
restart, and every job that got a 201 is there unchanged, every run seen recorded is still recorded."""

from __future__ import annotations

import http.client
import random
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

pytestmark = pytest.mark.e2e

TENANTS = "acme:tw_e2e_acme"
KILLS = 5
CLIENTS = 4
KEPT = ("job_id", "name", "schedule", "target", "payload", "status")


def storm(
    local: Local, receiver: Receiver, accepted: dict[str, dict[str, Any]], stop: threading.Event
) -> None:
    """Creates jobs until told to stop: one-time jobs far ahead, and every 50th a rate job calling the
    receiver every 5 s, so runs are being recorded when the stack is killed."""
    while not stop.is_set():
        index = len(accepted)
        if index % 50 == 0:
            schedule: dict[str, Any] = {"type": "rate", "every_seconds": 5}
        else:
            schedule = {"type": "once", "at": "2099-01-01T00:00:00Z"}
        body = {
            "name": f"storm-{threading.get_ident()}-{index}-{random.random()}",
            "schedule": schedule,
            "target": {"type": "http", "url": receiver.url("/storm"), "timeout_seconds": 5},
            "payload": {"index": index},
        }
        try:
            status, created = local.call("POST", "/v1/jobs", body=body)
        except (OSError, http.client.HTTPException):
            return  # the stack is gone, perhaps halfway through its answer: never accepted
        if status == 201:
            accepted[created["job_id"]] = created


def runs_seen(local: Local, job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """run id -> (job, status), for every run of these jobs that a worker has recorded, page by page (a
    fire still in the queue is shown ENQUEUED without an item: a restart plans it again)."""
    seen: dict[str, tuple[str, str]] = {}
    for job_id in job_ids:
        cursor = None
        while True:
            query = f"?limit=100&cursor={cursor}" if cursor else "?limit=100"
            status, page = local.call("GET", f"/v1/jobs/{job_id}/runs{query}")
            assert status == 200, page
            seen.update(
                {
                    run["run_id"]: (job_id, run["status"])
                    for run in page["items"]
                    if run["status"] != "ENQUEUED"
                }
            )
            cursor = page.get("next_cursor")
            if not cursor:
                break
    return seen


def test_sigkill_during_a_storm_loses_no_accepted_job_and_no_recorded_run(
    tmp_path: Path, receiver: Receiver
) -> None:
    data_dir = tmp_path / "data"
    accepted: dict[str, dict[str, Any]] = {}
    recorded: dict[str, tuple[str, str]] = {}
    rng = random.Random(20261126)
    local = start_local(data_dir, tenants=TENANTS)
    try:
        for kill in range(KILLS + 1):
            # Given clients creating jobs while earlier jobs run
            stop = threading.Event()
            clients = [
                threading.Thread(target=storm, args=(local, receiver, accepted, stop), daemon=True)
                for _ in range(CLIENTS)
            ]
            for client in clients:
                client.start()
            # the kill comes after a random number of creates (about 500 in all), or 20 s
            target = len(accepted) + rng.randint(60, 110)
            wait_for(lambda target=target: len(accepted) >= target, timeout=20)
            recurring = [job_id for job_id, job in accepted.items() if job["schedule"]["type"] == "rate"]
            recorded.update(runs_seen(local, recurring[:10]))
            if kill == KILLS:
                stop.set()
                for client in clients:
                    client.join(timeout=15)
                break
            # When the stack is killed mid-storm, and started again on the same data
            local.process.send_signal(signal.SIGKILL)
            local.process.wait(timeout=10)
            stop.set()
            for client in clients:
                client.join(timeout=15)
            stop_local(local)
            local = start_local(data_dir, tenants=TENANTS)
            # Then every job that was answered 201 is there, unchanged
            missing, changed = [], []
            for job_id, created in accepted.items():
                status, stored = local.call("GET", f"/v1/jobs/{job_id}")
                if status != 200:
                    missing.append(job_id)
                elif {k: stored.get(k) for k in KEPT} != {k: created.get(k) for k in KEPT}:
                    changed.append(job_id)
            assert missing == [], (
                f"after kill {kill + 1}: {len(missing)} of {len(accepted)} accepted jobs lost"
            )
            assert changed == []
            # and every run seen before is still recorded
            now = runs_seen(local, sorted({job_id for job_id, _ in recorded.values()}))
            lost = [(run_id, recorded[run_id][1]) for run_id in recorded if run_id not in now]
            assert lost == [], f"after kill {kill + 1}: runs lost {lost[:5]}"
        assert len(accepted) >= 400
    finally:
        stop_local(local)


def test_sighup_stops_cleanly_and_keeps_everything(tmp_path: Path, receiver: Receiver) -> None:
    data_dir = tmp_path / "data"
    local = start_local(data_dir, tenants=TENANTS)
    created = []
    for index in range(20):
        status, body = local.call(
            "POST",
            "/v1/jobs",
            body={
                "name": f"hup-{index}",
                "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
                "target": {"type": "http", "url": receiver.url("/hup")},
            },
        )
        assert status == 201
        created.append(body["job_id"])
    # When the terminal closes
    local.process.send_signal(signal.SIGHUP)
    assert local.process.wait(timeout=10) == 0
    stop_local(local)
    # Then the stack stopped cleanly, and started again it has every job
    local = start_local(data_dir, tenants=TENANTS)
    try:
        for job_id in created:
            assert local.call("GET", f"/v1/jobs/{job_id}")[0] == 200
        assert wait_for(lambda: local.call("GET", "/v1/health")[0] == 200, timeout=5)
    finally:
        stop_local(local)
