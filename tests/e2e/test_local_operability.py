"""Starting `tickwork local` the way people do: another port, a port in use, `make run PORT=...`."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from tickwork_local.cli import CliError, UsageError, local_port, port_in_use
from tickwork_local.stack import free_port

from tests.e2e.conftest import tickwork_command

REPOSITORY = Path(__file__).resolve().parents[2]


def run_local(*arguments: str, environment: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(environment or {})}
    return subprocess.run(
        [*tickwork_command(), "local", "--quiet", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_a_port_in_use_is_one_line_naming_the_port_and_how_to_choose_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        done = run_local("--port", str(port))
    output = (done.stdout + done.stderr).strip()
    assert done.returncode == CliError.exit_code
    assert output == f"error: port {port} is in use on 127.0.0.1: choose another with --port or TICKWORK_PORT"
    assert "Traceback" not in output


def test_the_port_comes_from_the_flag_then_the_environment_then_8000() -> None:
    assert local_port(9100, {"TICKWORK_PORT": "9200"}) == 9100
    assert local_port(None, {"TICKWORK_PORT": "9200"}) == 9200
    assert local_port(None, {}) == 8000
    assert not port_in_use("127.0.0.1", free_port())


@pytest.mark.parametrize(("given", "environ"), [(None, {"TICKWORK_PORT": "http"}), (0, {}), (70000, {})])
def test_a_port_that_is_not_one_is_a_usage_error(given: int | None, environ: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        local_port(given, environ)


def test_a_bad_tickwork_port_is_refused_before_anything_starts() -> None:
    done = run_local(environment={"TICKWORK_PORT": "eighty"})
    assert done.returncode == UsageError.exit_code
    assert "TICKWORK_PORT must be a port number, not 'eighty'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("variables", "expected"), [(["PORT=8080"], "local --port 8080"), ([], "local")])
def test_make_run_passes_port_on(variables: list[str], expected: str) -> None:
    done = subprocess.run(
        ["make", "-n", "run", *variables],  # noqa: S607 - make from the PATH
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        timeout=30,
        check=True,
    )
    [line] = [line for line in done.stdout.splitlines() if "tickwork local" in line]
    assert line.rstrip().endswith(f"tickwork {expected}")


def start_in(directory: Path, *arguments: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`tickwork local` started from ``directory`` (as a person in their project would), until healthy."""
    import time
    import urllib.request

    port = free_port()
    env = {**os.environ, "TICKWORK_LOCAL_TENANTS": "acme:tw_op_acme", "PYTHONUNBUFFERED": "1"}
    env.pop("AWS_ENDPOINT_URL", None)
    process = subprocess.Popen(
        [*tickwork_command(), "local", "--port", str(port), "--quiet", *arguments],
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=1):  # noqa: S310 - loopback
                break
        except OSError:
            time.sleep(0.2)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C stops."):
            break
    return process, url, lines


def stop(process: subprocess.Popen[str]) -> None:
    import signal

    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)


def job_names(url: str) -> list[str]:
    import json
    import urllib.request

    request = urllib.request.Request(f"{url}/v1/jobs", headers={"Authorization": "Bearer tw_op_acme"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
        return [job["name"] for job in json.loads(response.read())["items"]]


def create(url: str, name: str) -> None:
    import json
    import urllib.request

    body = {
        "name": name,
        "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
        "target": {"type": "http", "url": "http://127.0.0.1:9/never"},
    }
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{url}/v1/jobs",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer tw_op_acme", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
        assert response.status == 201


def test_state_is_kept_under_dot_tickwork_by_default_and_nowhere_with_ephemeral(tmp_path: Path) -> None:
    process, url, _ = start_in(tmp_path)
    create(url, "kept")
    process.kill()  # not even a clean stop
    process.communicate(timeout=30)
    assert (tmp_path / ".tickwork" / "journal.jsonl").stat().st_size > 0
    process, url, _ = start_in(tmp_path)
    try:
        assert job_names(url) == ["kept"]
    finally:
        stop(process)

    elsewhere = tmp_path / "ephemeral"
    elsewhere.mkdir()
    process, url, _ = start_in(elsewhere, "--ephemeral")
    create(url, "forgotten")
    stop(process)
    assert not (elsewhere / ".tickwork" / "tables.json").exists()
    assert not (elsewhere / ".tickwork" / "journal.jsonl").exists()
    process, url, _ = start_in(elsewhere, "--ephemeral")
    try:
        assert job_names(url) == []
    finally:
        stop(process)


def test_the_banner_commands_work_as_printed(tmp_path: Path) -> None:
    process, url, lines = start_in(tmp_path, "--ephemeral")
    try:
        create(url, "listed")
        [listing] = [line.strip() for line in lines if line.strip().endswith("jobs list")]
        done = subprocess.run(  # noqa: S602 - the banner's line, run as a person pastes it into a shell
            listing, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "listed" in done.stdout
        [receiver_hint] = [line for line in lines if "receive --port 9000" in line]
        program = receiver_hint.split("first: ", 1)[1].split(" receive", 1)[0]
        helped = subprocess.run(  # noqa: S602 - as above
            f"{program} receive --help",
            shell=True,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert helped.returncode == 0, helped.stderr
    finally:
        stop(process)


def test_reset_deletes_only_the_stacks_files_and_only_once_confirmed(tmp_path: Path) -> None:
    import io

    from tickwork_local.cli import reset_data_dir

    data = tmp_path / "data"
    data.mkdir()
    for name in ("tables.json", "journal.jsonl", "default-token"):
        (data / name).write_text("x")
    (data / "notes.txt").write_text("mine")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with pytest.raises(UsageError, match="--yes"):
        reset_data_dir(data, confirmed=False, answer=io.StringIO("y\n"), out=io.StringIO())  # not a terminal
    with pytest.raises(CliError, match="nothing was deleted"):
        reset_data_dir(data, confirmed=False, answer=Terminal("n\n"), out=io.StringIO())
    assert (data / "tables.json").exists()
    reset_data_dir(data, confirmed=False, answer=Terminal("y\n"), out=io.StringIO())
    assert sorted(path.name for path in data.iterdir()) == ["notes.txt"]


def test_reset_then_start_begins_empty(tmp_path: Path) -> None:
    process, url, _ = start_in(tmp_path)
    create(url, "before-reset")
    stop(process)
    refused = subprocess.run(  # stdin is not a terminal: no one to ask
        [*tickwork_command(), "local", "--reset", "--port", str(free_port())],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == UsageError.exit_code, refused.stdout + refused.stderr
    assert (tmp_path / ".tickwork" / "tables.json").exists()
    process, url, _ = start_in(tmp_path, "--reset", "--yes")
    try:
        assert job_names(url) == []
    finally:
        stop(process)
