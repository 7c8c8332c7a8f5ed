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
