"""A pool run end to end through the local stack with the client's worker library: the example worker of
``docs/examples/pool_worker.py`` is killed with SIGKILL halfway, and a second worker takes the run over after
the heartbeat timeout, at attempt 2, from the last checkpoint saved."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.e2e.conftest import TOKENS, Local, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pool_worker.py"
STEP = re.compile(r"attempt (\d+): step (\d+) of (\d+) done")


class ExampleWorker:
    """The example, as a process of its own, its output lines collected as they come."""

    def __init__(self, local: Local, pool: str = "example"):
        environment = {
            **os.environ,
            "TICKWORK_API_URL": local.url,
            "TICKWORK_TOKEN": TOKENS["acme"],
            "TICKWORK_POOL": pool,
        }
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLE)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def steps(self) -> list[tuple[int, int]]:
        """(attempt, step) of every step done, in order."""
        return [(int(m.group(1)), int(m.group(2))) for line in self.lines if (m := STEP.search(line))]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Signal the worker, wait for it (killing it if it outstays 10 s), and close its output."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()


def run_of(local: Local, job_id: str) -> dict[str, Any] | None:
    status, page = local.call("GET", f"/v1/jobs/{job_id}/runs")
    assert status == 200, page
    return page["items"][0] if page["items"] else None


def test_a_killed_workers_run_is_taken_over_from_its_checkpoint_at_attempt_2(local: Local) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    job = {
        "name": f"pool-takeover-{os.getpid()}",
        "schedule": {"type": "once", "at": at},
        "target": {"type": "pool", "pool": "example", "heartbeat_timeout_seconds": 10},
        "payload": {"steps": 8, "step_seconds": 1},
        "retry": {"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"},
    }
    status, created = local.call("POST", "/v1/jobs", body=job)
    assert status == 201, created
    job_id = created["job_id"]

    first = ExampleWorker(local)
    try:
        wait_for(lambda: len(first.steps()) >= 5, timeout=30)
    finally:
        first.stop(signal.SIGKILL)  # no goodbye, no handing back
    assert {attempt for attempt, _ in first.steps()} == {1}, (first.lines, run_of(local, job_id))

    second = ExampleWorker(local)
    try:
        done = wait_for(
            lambda: (run := run_of(local, job_id)) is not None and run["status"] == "SUCCEEDED" and run,
            timeout=60,
        )
    finally:
        second.stop()
    assert done["attempt"] == 2
    assert [a["error_code"] for a in done["attempts"]] == ["heartbeat_timeout", None]
    resumed = [step for attempt, step in second.steps() if attempt == 2]
    # Attempt 2 resumed after a step attempt 1 saved (its checkpoint went out with a heartbeat), not from 0
    assert resumed and resumed[0] > 1, second.lines
    assert resumed[-1] == 8
    assert done["output"]["resumed_from"] == resumed[0] - 1
