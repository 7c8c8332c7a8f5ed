"""Starts `tickwork local` as a subprocess on a free port, and a webhook receiver on loopback."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tickwork_local.stack import LOCAL_REGION, free_port

from tests.support.engine import Receiver, start_receiver

TOKENS = {"acme": "tw_e2e_acme", "globex": "tw_e2e_globex"}
SIGNING_SECRET = "e2e-signing-secret"
STARTUP_LIMIT_SECONDS = 60
RATE_LIMIT_RETRIES = 30


@dataclass
class Local:
    url: str
    process: subprocess.Popen[str]
    data_dir: Path
    output: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def log_file(self) -> Path:
        return self.data_dir / "tickwork.log"

    @property
    def moto_endpoint(self) -> str:
        for line in self.output:
            match = re.search(r"AWS endpoint \(moto\): (\S+)", line)
            if match:
                return match.group(1)
        raise AssertionError("the banner did not name the moto endpoint")

    def call(
        self,
        method: str,
        path: str,
        *,
        tenant: str = "acme",
        token: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One request, as a well-behaved client makes it: a 429 for the tenant's API rate is waited out
        (``Retry-After``) and the request sent again, so tests that read a lot see answers, not the limit."""
        for _ in range(RATE_LIMIT_RETRIES):
            status, answer, retry_after = self._call_once(method, path, tenant, token, body, headers)
            if status != 429 or (answer or {}).get("error", {}).get("code") != "rate_limited":
                break
            time.sleep(float(retry_after or 1))
        return status, answer

    def _call_once(
        self,
        method: str,
        path: str,
        tenant: str,
        token: str | None,
        body: Any,
        headers: dict[str, str] | None,
    ) -> tuple[int, Any, str | None]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)  # noqa: S310 - loopback
        request.add_header("Authorization", f"Bearer {token or TOKENS[tenant]}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
                return response.status, json.loads(response.read() or b"null"), None
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null"), error.headers.get("Retry-After")


def tickwork_command() -> list[str]:
    script = Path(sys.executable).with_name("tickwork")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tickwork_local.cli"]


def start_local(
    data_dir: Path,
    *,
    tenants: str | None,
    environment: Mapping[str, str] | None = None,
    poll_seconds: float = 0.2,
    arguments: Sequence[str] = (),
) -> Local:
    """`tickwork local` in a subprocess on a free port, once it answers /v1/health. ``environment`` adds
    to (or overrides) this process's environment; ``arguments`` are further options of `tickwork local`."""
    port = free_port()
    env = {**os.environ, "TICKWORK_LOCAL_SIGNING_SECRET": SIGNING_SECRET, "PYTHONUNBUFFERED": "1"}
    env.update(environment or {})
    env["AWS_DEFAULT_REGION"] = LOCAL_REGION
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "TICKWORK_LOCAL_TENANTS"):
        env.pop(name, None)
    if tenants is not None:
        env["TICKWORK_LOCAL_TENANTS"] = tenants
    process = subprocess.Popen(
        [
            *tickwork_command(),
            "local",
            "--port",
            str(port),
            "--quiet",
            "--data-dir",
            str(data_dir),
            *arguments,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    local = Local(f"http://127.0.0.1:{port}", process, data_dir)

    def read_output() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            local.output.append(line)

    local.reader = threading.Thread(target=read_output, daemon=True)
    local.reader.start()
    deadline = time.monotonic() + STARTUP_LIMIT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("tickwork local exited:\n" + "".join(local.output))
        try:
            with urllib.request.urlopen(f"{local.url}/v1/health", timeout=1) as response:  # noqa: S310
                if response.status == 200 and any("AWS endpoint" in line for line in local.output):
                    return local
        except OSError:
            pass
        time.sleep(poll_seconds)
    process.kill()
    raise AssertionError("tickwork local was not healthy in time:\n" + "".join(local.output))


def stop_local(local: Local, *, within: float = 5.0) -> float:
    """Ctrl-C, as a person would; returns how long it took to stop."""
    started = time.monotonic()
    local.process.send_signal(signal.SIGINT)
    try:
        local.process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        local.process.kill()
        local.process.wait()
    if local.reader is not None:
        local.reader.join(timeout=5)
    if local.process.stdout is not None:
        local.process.stdout.close()
    return time.monotonic() - started


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    tenants = ",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items())
    running = start_local(tmp_path_factory.mktemp("tickwork-local"), tenants=tenants)
    yield running
    took = stop_local(running)
    assert running.process.returncode == 0, "tickwork local did not stop cleanly:\n" + "".join(
        running.output[-20:]
    )
    assert took < 5, f"stopping took {took:.1f} s"


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


def wait_for(condition: Any, *, timeout: float, interval: float = 0.1) -> Any:
    """Poll until ``condition()`` is truthy (end-to-end only: the local stack runs on the wall clock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    return condition()


LoggingState = tuple[list[tuple[logging.StreamHandler[Any], Any]], list[logging.Handler], bool]


def in_process_stack(
    tmp_path_factory: pytest.TempPathFactory, name: str, tenant: str, token: str
) -> Iterator[Any]:
    """A local stack in a thread of this process (its metrics readable), one local tenant, logs kept apart
    and the process's logging put back afterwards: a module fixture's body."""
    from tickwork_local.stack import running_in_thread

    logs = saved_logging()
    try:
        with running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": f"{tenant}:{token}"},
            ready_seconds=60,
            log_file=str(Path(tmp_path_factory.mktemp(name)) / "tickwork.log"),
            tick_seconds=0.5,
            workers=4,
        ) as running:
            yield running
    finally:
        restore_logging(logs)


def saved_logging() -> LoggingState:
    """The stack sends tickwork's and Powertools' logs to its log file; later tests expect them back."""
    streams = [
        (handler, handler.stream)
        for handler in logging.getLogger("tickwork").handlers
        if isinstance(handler, logging.StreamHandler)
    ]
    library = logging.getLogger("aws_lambda_powertools")
    return streams, list(library.handlers), library.propagate


def restore_logging(state: LoggingState) -> None:
    streams, handlers, propagate = state
    for handler, stream in streams:
        opened = handler.setStream(stream)
        if opened is not None and opened is not stream:
            opened.close()
    library = logging.getLogger("aws_lambda_powertools")
    for added in [handler for handler in library.handlers if handler not in handlers]:
        library.removeHandler(added)
        added.close()
    library.propagate = propagate
