"""A webhook that answers 202, end to end through the local stack: the loopback webhook takes the call,
answers 202 and hands the work to a thread of its own, which heartbeats and completes the run through the
real HTTP API with the token of the call's ``X-Tickwork-Lease-Token`` header. The run ends SUCCEEDED."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork_local.harness import Received, Receiver, Reply

from tests.e2e.conftest import Local, wait_for

PATH = f"/continued-{os.getpid()}"


class BackgroundWork:
    """What the webhook does after its 202: heartbeats with progress, then the run's completion."""

    def __init__(self, local: Local):
        self.local = local
        self.answers: list[tuple[str, int, Any]] = []
        self.threads: list[threading.Thread] = []

    def start(self, request: Received) -> None:
        run_id = request.headers["X-Tickwork-Run-Id"]
        token = request.headers["X-Tickwork-Lease-Token"]
        thread = threading.Thread(target=self._work, args=(run_id, token), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _work(self, run_id: str, token: str) -> None:
        # The first heartbeat goes at once: it may reach the API before the worker has recorded the 202.
        for step in (1, 2):
            body = {"lease_token": token, "progress": step / 2, "stage": f"part {step} of 2"}
            self._call(run_id, "heartbeat", body)
        self._call(run_id, "complete", {"lease_token": token, "output": {"parts": 2}})

    def _call(self, run_id: str, route: str, body: dict[str, Any]) -> None:
        status, answer = self.local.call("POST", f"/v1/runs/{run_id}/{route}", body=body)
        self.answers.append((route, status, answer))


def test_a_webhook_answering_202_finishes_its_run_through_heartbeat_and_complete(
    local: Local, receiver: Receiver
) -> None:
    work = BackgroundWork(local)
    before = receiver.answer

    def answer(request: Received) -> Reply | None:
        if request.path == PATH:
            work.start(request)
            return Reply(202)
        return before(request) if before is not None else None

    receiver.answer = answer
    try:
        at = datetime.now(UTC) + timedelta(seconds=2)
        job = {
            "name": f"continued-{os.getpid()}",
            "schedule": {"type": "once", "at": at.isoformat()},
            "target": {"type": "http", "url": receiver.url(PATH), "timeout_seconds": 5},
            "payload": {"export": "orders"},
        }
        status, created = local.call("POST", "/v1/jobs", body=job)
        assert status == 201, created
        [request] = wait_for(lambda: receiver.for_path(PATH), timeout=10)
        run_id = request.headers["X-Tickwork-Run-Id"]
        assert request.headers["X-Tickwork-Lease-Token"].startswith(
            request.headers["X-Tickwork-Fencing-Token"] + "."
        )

        def ended() -> dict[str, Any] | None:
            status, run = local.call("GET", f"/v1/runs/{run_id}")
            assert status == 200, run
            return run if run["status"] not in ("ENQUEUED", "RUNNING") else None

        run = wait_for(ended, timeout=15)
        for thread in work.threads:
            thread.join(timeout=5)
    finally:
        receiver.answer = before
    assert [(route, status) for route, status, _ in work.answers] == [
        ("heartbeat", 200),
        ("heartbeat", 200),
        ("complete", 200),
    ], work.answers
    assert run is not None
    assert (run["status"], run["attempt"]) == ("SUCCEEDED", 1)
    assert run["attempts"][0]["outcome"] == "succeeded"
    assert len(receiver.for_path(PATH)) == 1  # called once: the rest went through the API
    status, job_now = local.call("GET", f"/v1/jobs/{created['job_id']}")
    assert (status, job_now["status"]) == (200, "COMPLETED")
