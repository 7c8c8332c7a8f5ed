"""`tickwork local`'s data folder: its user's alone from the first byte, and held by one stack at a time."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from tickwork_local.stack import free_port

from tests.e2e.conftest import Local, start_local, stop_local, tickwork_command, wait_for

pytestmark = pytest.mark.e2e

TENANTS = "acme:tw_e2e_acme"
JOB = {
    "name": "private",
    "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
    "target": {"type": "http", "url": "http://127.0.0.1:9/never"},
}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def start_with_umask(
    data_dir: Path, mask: int, *, tenants: str | None, environment: Mapping[str, str]
) -> Local:
    """The child inherits the umask at its start: this process's is put back once the stack is up."""
    previous = os.umask(mask)
    try:
        return start_local(data_dir, tenants=tenants, environment=environment)
    finally:
        os.umask(previous)


def test_under_an_open_umask_the_folder_is_0700_and_every_file_0600_through_a_compaction(
    tmp_path: Path,
) -> None:
    # Given a fresh folder and a umask that takes no bit away, with a compaction after the first write
    data_dir = tmp_path / "data"
    local = start_with_umask(
        data_dir, 0o000, tenants=None, environment={"TICKWORK_LOCAL_COMPACT_AFTER_LINES": "1"}
    )
    try:
        token = (data_dir / "default-token").read_text().strip()
        first_snapshot = (data_dir / "tables.json").stat().st_ino
        # When a job is created and the journal is folded into a new snapshot
        status, created = local.call("POST", "/v1/jobs", token=token, body=JOB)
        assert status == 201, created
        compacted = wait_for(
            lambda: (
                (data_dir / "tables.json").stat().st_ino != first_snapshot
                and created["job_id"] in (data_dir / "tables.json").read_text()
            ),
            timeout=20,
        )
        assert compacted, "the journal was not compacted"
    finally:
        stop_local(local)
    assert local.process.returncode == 0, "".join(local.output)
    # Then the folder is its user's alone, and so is every file the stack wrote in it
    assert mode(data_dir) == 0o700
    assert {path.name: oct(mode(path)) for path in data_dir.iterdir()} == {
        name: oct(0o600) for name in ("default-token", "journal.jsonl", "lock", "tables.json", "tickwork.log")
    }


def test_an_existing_folder_open_to_other_users_is_warned_about_and_the_stack_starts(tmp_path: Path) -> None:
    # Given a data folder that others may read
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    # When the stack starts on it
    local = start_local(data_dir, tenants=TENANTS)
    try:
        # Then one line says so and how to fix it, and the stack answers
        warning = f"warning: {data_dir} is readable by other users (mode 0755): chmod 700 {data_dir}\n"
        assert [line for line in local.output if line.startswith("warning:")] == [warning]
        assert local.call("GET", "/v1/jobs")[0] == 200
    finally:
        stop_local(local)
    assert mode(data_dir) == 0o755  # the user's folder: named, not changed
    assert mode(data_dir / "tables.json") == 0o600


def second_start(data_dir: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *tickwork_command(),
            "local",
            "--quiet",
            "--port",
            str(free_port()),
            "--data-dir",
            str(data_dir),
            *arguments,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_second_stack_on_the_same_folder_is_refused_and_a_killed_holder_leaves_no_stale_lock(
    tmp_path: Path,
) -> None:
    # Given a stack holding its data folder, with a job in it
    data_dir = tmp_path / "data"
    first = start_local(data_dir, tenants=TENANTS)
    try:
        assert first.call("POST", "/v1/jobs", body=JOB)[0] == 201
        port = first.url.rsplit(":", 1)[1]
        expected = (
            f"error: {data_dir.absolute()} is in use by another tickwork local"
            f" (pid {first.process.pid}, port {port}); stop it or use --data-dir"
        )
        kept = sorted(path.name for path in data_dir.iterdir())
        # When a second stack starts on it on another port, plainly or to wipe it
        for arguments in ((), ("--reset", "--yes")):
            refused = second_start(data_dir, *arguments)
            # Then it exits 1 with one line naming the folder and the holder, having touched nothing
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert refused.stderr.splitlines() == [expected]
            assert refused.stdout == ""
            assert sorted(path.name for path in data_dir.iterdir()) == kept
        assert first.call("GET", "/v1/jobs")[1]["items"][0]["name"] == "private"
        # When the holder is killed outright
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        stop_local(first)
    # Then the next start takes the folder at once and is healthy, with the job
    again = start_local(data_dir, tenants=TENANTS)
    try:
        assert not any("in use" in line for line in again.output)
        assert again.call("GET", "/v1/health")[0] == 200
        assert [job["name"] for job in again.call("GET", "/v1/jobs")[1]["items"]] == ["private"]
    finally:
        stop_local(again)
    assert again.process.returncode == 0, "".join(again.output)
