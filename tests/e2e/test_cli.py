"""The `tickwork` CLI against `tickwork local`: runs that really happen (trigger --wait, runs watch,
dead-letters --retry) and `jobs export | apply -f -` through a shell pipe, as a person types it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from tickwork_local.cli.app import app
from typer.testing import CliRunner

from tests.e2e.conftest import TOKENS, Local, tickwork_command, wait_for
from tests.support.engine import Receiver

pytestmark = pytest.mark.e2e

TERMINAL = {"SUCCEEDED", "FAILED", "DEAD", "ABANDONED", "MISSED", "SKIPPED", "CANCELLED"}


class Cli:
    def __init__(self, local: Local):
        self.local = local

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        prefix = ["--api-url", self.local.url, "--token", TOKENS["acme"]]
        result = CliRunner().invoke(app, [*prefix, *argv], prog_name="tickwork", catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def cli(local: Local, monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("TICKWORK_TOKEN", "TICKWORK_API_URL", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(local)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def webhook_job(cli: Cli, receiver: Receiver, path: str, *flags: str) -> str:
    """A one-time job far ahead (so it fires only when triggered) that calls ``path`` on the receiver."""
    name = unique(path.strip("/"))
    code, _, err = cli("jobs", "create", "--name", name, "--at", "+1d", "--url", receiver.url(path), *flags)
    assert code == 0, err
    return name


def run_of(local: Local, run_id: str) -> dict[str, Any]:
    status, run = local.call("GET", f"/v1/runs/{run_id}")
    assert status == 200, run
    return dict(run)


def ended_run(local: Local, run_id: str) -> dict[str, Any] | None:
    run = run_of(local, run_id)
    return run if run["status"] in TERMINAL else None


def test_trigger_wait_exits_with_how_the_run_ended(cli: Cli, local: Local, receiver: Receiver) -> None:
    path = f"/ok-{uuid.uuid4().hex[:8]}"
    succeeded = cli("jobs", "trigger", webhook_job(cli, receiver, path), "--wait", "--interval", "0.2")
    assert succeeded[0] == 0, succeeded
    assert "SUCCEEDED" in succeeded[1]
    assert len(receiver.for_path(path)) == 1

    dead_path = f"/fail-{uuid.uuid4().hex[:8]}"
    receiver.script[dead_path] = [500]
    dead = webhook_job(cli, receiver, dead_path, "--max-attempts", "1")
    code, out, _ = cli("jobs", "trigger", dead, "--wait", "--interval", "0.2", "-o", "json")
    assert code == 5  # DEAD: its one attempt failed
    assert '"status": "DEAD"' in out

    refused_path = f"/refuse-{uuid.uuid4().hex[:8]}"
    receiver.script[refused_path] = [400]
    code, out, _ = cli(
        "jobs", "trigger", webhook_job(cli, receiver, refused_path), "--wait", "--interval", "0.2"
    )
    assert code == 4  # FAILED: a 4xx is permanent
    assert "FAILED" in out

    slow_path = f"/slow-{uuid.uuid4().hex[:8]}"
    receiver.delays[slow_path] = 3
    code, out, err = cli(
        "jobs",
        "trigger",
        webhook_job(cli, receiver, slow_path),
        "--wait",
        "--wait-timeout",
        "1",
        "-o",
        "json",
    )
    assert code == 7, err  # still running when the wait ran out
    assert "stopped waiting" in err
    run_id = json.loads(out)["run_id"]
    assert wait_for(lambda: run_of(local, run_id)["status"] == "SUCCEEDED", timeout=20)


def test_runs_watch_prints_runs_as_they_change_until_its_bound(
    cli: Cli, local: Local, receiver: Receiver
) -> None:
    # Overlap allowed: the two manual runs may overlap, and neither is SKIPPED for the other.
    name = webhook_job(cli, receiver, f"/watched-{uuid.uuid4().hex[:8]}", "--overlap-policy", "allow")
    job_id = json.loads(cli("jobs", "get", name, "-o", "json")[1])["job_id"]

    def trigger_twice() -> None:
        for _ in range(2):
            assert local.call("POST", f"/v1/jobs/{job_id}/trigger")[0] == 202

    timer = threading.Timer(1.0, trigger_twice)
    timer.start()
    try:
        code, out, err = cli(
            "runs", "watch", "--job", name, "--interval", "0.2", "--count", "2", "--for", "60s"
        )
    finally:
        timer.join()
    assert code == 0, err
    lines = out.splitlines()  # each run when it is first seen, and again when it has changed
    assert len(lines) == 2
    assert all(f" {job_id}:m:" in line for line in lines)
    assert all(line.split()[3] == f"job={name}" for line in lines)  # the run's job, by its name
    assert {line.split()[2] for line in lines} <= {"ENQUEUED", "RUNNING", "SUCCEEDED"}
    assert "watching runs scheduled from" in err

    now = datetime.now(UTC).isoformat()
    quiet = cli("runs", "watch", "--job", name, "--since", now, "--interval", "0.2", "--for", "1s")
    assert quiet[0] == 0
    assert quiet[1] == ""  # nothing new after it started


def test_runs_watch_stops_with_ctrl_c_and_exit_code_0(local: Local) -> None:
    env = {**os.environ, "TICKWORK_API_URL": local.url, "TICKWORK_TOKEN": TOKENS["acme"]}
    process = subprocess.Popen(
        [*tickwork_command(), "runs", "watch", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    started = process.stderr.readline()  # once this is printed, it is polling
    assert "watching runs" in started
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Traceback" not in err


def test_jobs_export_piped_to_apply_changes_nothing(cli: Cli, local: Local, receiver: Receiver) -> None:
    name = unique("exported")
    code, _, err = cli(
        "jobs", "create", "--name", name, "--cron", "0 9 * * 1-5", "--timezone", "America/New_York",
        "--exclude-holidays", "US-NY", "--exclude-date", "2026-12-24", "--jitter", "5m",
        "--url", receiver.url("/exported"), "--payload", '{"report": "daily", "rows": [1, 2]}',
        "--max-attempts", "3", "--misfire-policy", "skip",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = cli(
        "jobs", "update", name, "--header", "X-Team=ops", "--tag", "team=ops", "--description", "d"
    )
    assert code == 0, err
    before = [job for job in local.call("GET", "/v1/jobs?limit=100")[1]["items"] if job["name"] == name]
    program = shlex.join(tickwork_command())
    env = {**os.environ, "TICKWORK_API_URL": local.url, "TICKWORK_TOKEN": TOKENS["acme"]}
    done = subprocess.run(  # noqa: S602 - a pipe, as a person types it
        f"set -o pipefail; {program} jobs export {name} -o yaml | {program} apply -f -",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"job {name} unchanged" in done.stdout
    after = [job for job in local.call("GET", "/v1/jobs?limit=100")[1]["items"] if job["name"] == name]
    assert after == before  # same version, same everything


def test_dead_letters_retry_gives_a_dead_run_another_attempt(
    cli: Cli, local: Local, receiver: Receiver
) -> None:
    path = f"/dead-{uuid.uuid4().hex[:8]}"
    receiver.script[path] = [500]
    name = webhook_job(cli, receiver, path, "--max-attempts", "1")
    code, out, _ = cli("jobs", "trigger", name, "--wait", "--interval", "0.2", "-o", "json")
    assert code == 5
    run_id = json.loads(out)["run_id"]
    code, out, err = cli("dead-letters", "--job", name)
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == [run_id]
    code, out, err = cli("dead-letters", "--job", name, "--retry")
    assert code == 0, err
    assert f"retrying run {run_id}:" in out
    ended = wait_for(lambda: ended_run(local, run_id), timeout=20)
    assert ended is not None
    assert ended["status"] == "DEAD"
    assert len(ended["attempts"]) == 2  # the first, and the one asked for by hand
    assert len(receiver.for_path(path)) == 2
