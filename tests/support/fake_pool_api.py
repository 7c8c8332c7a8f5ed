"""A loopback HTTP stand-in for the pool routes of the API, in memory, to the contract in ``design.md``: claim
(a long poll), heartbeat, complete, fail, cancel, and reading a run.

- Each claim makes a new lease token (``tickwork.domain.pools.new_lease_token``: the fencing token goes up
  by one), and its lease lasts one heartbeat timeout, renewed by each heartbeat, never past the attempt's
  hard cap (``tickwork.domain.pools.Lease``).
- A lease that lapses fails its attempt as retryable (``heartbeat_timeout``): the run can be claimed at once
  at the next attempt, with the last progress, stage and checkpoint. Retry delays are not modelled.
- A token that is not the run's current lease gets 409 ``lease_lost``.
- Heartbeats keep what they were given, and only that: a ``"checkpoint": null`` erases the checkpoint, as
  the contract's "keeps what was given" reads, so a client that sends nulls is caught.
- A cancel ends a queued run at once, and makes the next heartbeat of a running one answer
  ``cancel_requested``; a run asked to stop that fails or lapses ends CANCELLED.

Time is a :class:`ManualTime` the test moves. A claim holds for ``wait_seconds * hold_scale`` of real time
(or until a run is there), so long polls stay short in tests.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ValidationError
from tickwork.api.errors import describe_validation_errors, error_body
from tickwork.api.schemas import RunOut
from tickwork.domain.models import TERMINAL_RUN_STATUSES, RunStatus
from tickwork.domain.pools import (
    ClaimRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
    Lease,
    PoolTarget,
    new_lease_token,
)
from tickwork.domain.timeutil import to_epoch_ms, to_rfc3339

TOKEN = "tw_token-for-pools"
CLAIMABLE = frozenset({RunStatus.ENQUEUED, RunStatus.RETRY_WAIT})
Body = TypeVar("Body", bound=BaseModel)


class ManualTime:
    """Time that moves only when the test moves it. ``wait`` returns once its event is set or the time it
    waits for has come (it looks every 2 ms of real time), so threads that wait on it wake as the test
    advances the time. Every wait is recorded with the name of the thread that waited."""

    def __init__(self, start: datetime):
        self._now = start.timestamp()
        self._lock = threading.Lock()
        self.waits: list[tuple[str, float]] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def now(self) -> datetime:
        return datetime.fromtimestamp(self(), UTC)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def wait(self, event: threading.Event, seconds: float) -> bool:
        with self._lock:
            self.waits.append((threading.current_thread().name, seconds))
            until = self._now + seconds
        while True:
            if event.wait(0.002):
                return True
            if self() >= until:
                return event.is_set()

    def waits_of(self, thread_prefix: str) -> list[float]:
        with self._lock:
            return [seconds for name, seconds in self.waits if name.startswith(thread_prefix)]


def eventually(check: Callable[[], Any], *, within: float = 5.0, what: str = "the condition") -> Any:
    """Wait (in real time) until ``check()`` is truthy, and return it."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not come within {within} s")
        time.sleep(0.002)


@dataclass
class FakeRun:
    run_id: str
    job_id: str
    pool: str
    target: PoolTarget
    payload: Any
    scheduled_for: datetime
    created_at: datetime
    max_attempts: int
    status: RunStatus = RunStatus.ENQUEUED
    attempt: int = 0
    fencing_token: int = 0
    lease_token: str | None = None
    lease: Lease | None = None
    worker_id: str | None = None
    progress: float | None = None
    stage: str | None = None
    checkpoint: Any = None
    output: Any = None
    cancel_requested: bool = False
    attempts: list[dict[str, Any]] = field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class Seen:
    """A request as the server received it."""

    method: str
    route: str  # claim, heartbeat, complete, fail, cancel, run
    target: str  # the pool or the run id
    body: Any  # parsed JSON, or None

    @property
    def token(self) -> str | None:
        return self.body.get("lease_token") if isinstance(self.body, dict) else None


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str):
        self.status = status
        self.body = error_body(code, message)


class FakePoolApi:
    """The pool routes in memory behind a ``ThreadingHTTPServer`` on 127.0.0.1. Use it as a context manager
    (the server runs in a thread in between)."""

    def __init__(self, time: ManualTime, *, token: str = TOKEN, hold_scale: float = 0.005):
        self.time = time
        self.token = token
        self.hold_scale = hold_scale
        self.runs: dict[str, FakeRun] = {}
        self.requests: list[Seen] = []
        self._faults: list[tuple[str, int | None]] = []
        self._cond = threading.Condition()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakePoolApi:
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- for tests --------------------------------------------------------------------------------------
    def add_run(
        self,
        pool: str = "gpu",
        *,
        payload: Any = None,
        heartbeat_timeout_seconds: int = 60,
        timeout_seconds: int = 3600,
        max_attempts: int = 3,
    ) -> str:
        """A run of a job whose target is ``{"type": "pool", "pool": pool, ...}``, waiting for a claim."""
        target = PoolTarget(
            type="pool",
            pool=pool,
            heartbeat_timeout_seconds=heartbeat_timeout_seconds,
            timeout_seconds=timeout_seconds,
        )
        now = self.time.now()
        with self._cond:
            job_id = f"01JOB{len(self.runs):04d}"
            run_id = f"{job_id}:{to_epoch_ms(now)}"
            self.runs[run_id] = FakeRun(run_id, job_id, pool, target, payload, now, now, max_attempts)
            self._cond.notify_all()
        return run_id

    def run(self, run_id: str) -> FakeRun:
        """The run as it stands (leases that lapsed by now are ended first)."""
        with self._cond:
            self._lapse(self.time.now())
            return self.runs[run_id]

    def fault(self, route: str, status: int | None, *, times: int = 1) -> None:
        """The next ``times`` requests of ``route`` are answered ``status`` (an error body), or dropped
        without an answer when ``status`` is None. Nothing else happens to them."""
        with self._cond:
            self._faults.extend([(route, status)] * times)

    def seen(self, route: str, target: str | None = None) -> list[Seen]:
        with self._cond:
            return [s for s in self.requests if s.route == route and target in (None, s.target)]

    # --- the routes -------------------------------------------------------------------------------------
    def answer(self, method: str, path: str, auth: str | None, raw: bytes) -> tuple[int, Any] | None:
        """The status and JSON body for a request, or None to drop the connection."""
        route, target = _route(method, urlsplit(path).path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._cond:
            self.requests.append(Seen(method, route, target, body))
            fault = next((f for f in self._faults if f[0] == route), None)
            if fault is not None:
                self._faults.remove(fault)
        if fault is not None:
            status = fault[1]
            return None if status is None else (status, error_body("injected", f"HTTP {status}"))
        if auth != f"Bearer {self.token}":
            return HTTPStatus.UNAUTHORIZED, error_body("unauthorized", "missing or invalid bearer token")
        try:
            if route == "claim":
                return HTTPStatus.OK, self._claim(target, _parse(ClaimRequest, raw))
            if route == "heartbeat":
                return HTTPStatus.OK, self._heartbeat(target, _parse(HeartbeatRequest, raw))
            if route == "complete":
                return HTTPStatus.OK, self._complete(target, _parse(CompleteRequest, raw))
            if route == "fail":
                return HTTPStatus.OK, self._fail(target, _parse(FailRequest, raw))
            if route == "cancel":
                return HTTPStatus.OK, self._cancel(target)
            if route == "run":
                with self._cond:
                    self._lapse(self.time.now())
                    return HTTPStatus.OK, _run_json(self._find(target))
            raise Refused(HTTPStatus.NOT_FOUND, "not_found", f"no route {method} {path}")
        except Refused as refused:
            return refused.status, refused.body
        except ValidationError as invalid:
            return describe_validation_errors(invalid.errors())

    def _claim(self, pool: str, request: ClaimRequest) -> dict[str, Any]:
        hold_until = time.monotonic() + request.wait_seconds * self.hold_scale
        with self._cond:
            while True:
                now = self.time.now()
                self._lapse(now)
                ready = [r for r in self.runs.values() if r.pool == pool and r.status in CLAIMABLE]
                left = hold_until - time.monotonic()
                if ready or left <= 0:
                    break
                self._cond.wait(min(left, 0.01))  # the time may move meanwhile, and a lease lapse
            return {"runs": [self._lease(run, request.worker_id, now) for run in ready[: request.max_runs]]}

    def _lease(self, run: FakeRun, worker_id: str, now: datetime) -> dict[str, Any]:
        run.attempt += 1
        run.fencing_token += 1
        run.lease_token = new_lease_token(run.fencing_token)
        run.lease = Lease.claimed(run.target, now)
        run.status = RunStatus.RUNNING
        run.worker_id = worker_id
        run.started_at = run.started_at or now
        run.attempts.append({"attempt": run.attempt, "started_at": now, "worker_id": worker_id})
        return {
            "run_id": run.run_id,
            "job_id": run.job_id,
            "attempt": run.attempt,
            "scheduled_for": to_rfc3339(run.scheduled_for),
            "payload": run.payload,
            "lease_token": run.lease_token,
            "lease_expires_at": to_rfc3339(run.lease.expires_at),
            "progress": run.progress,
            "stage": run.stage,
            "checkpoint": run.checkpoint,
        }

    def _heartbeat(self, run_id: str, request: HeartbeatRequest) -> dict[str, Any]:
        with self._cond:
            now = self.time.now()
            run = self._leased(run_id, request.lease_token, now)
            assert run.lease is not None
            run.lease = run.lease.renewed(run.target, now)
            for name in ("progress", "stage", "checkpoint"):
                if name in request.model_fields_set:
                    setattr(run, name, getattr(request, name))
            return {
                "lease_expires_at": to_rfc3339(run.lease.expires_at),
                "cancel_requested": run.cancel_requested,
            }

    def _complete(self, run_id: str, request: CompleteRequest) -> dict[str, Any]:
        with self._cond:
            now = self.time.now()
            run = self._leased(run_id, request.lease_token, now)
            run.output = request.output
            self._end_attempt(run, now, RunStatus.SUCCEEDED, "succeeded")
            return _run_json(run)

    def _fail(self, run_id: str, request: FailRequest) -> dict[str, Any]:
        with self._cond:
            now = self.time.now()
            run = self._leased(run_id, request.lease_token, now)
            error = request.error
            if run.cancel_requested:
                status = RunStatus.CANCELLED
            elif not request.retryable:
                status = RunStatus.FAILED
            else:
                status = RunStatus.DEAD if run.attempt >= run.max_attempts else RunStatus.RETRY_WAIT
            outcome = "retryable_error" if request.retryable else "permanent_error"
            self._end_attempt(run, now, status, outcome, error.code, error.message)
            return _run_json(run)

    def _cancel(self, run_id: str) -> dict[str, Any]:
        with self._cond:
            now = self.time.now()
            self._lapse(now)
            run = self._find(run_id)
            if run.status in TERMINAL_RUN_STATUSES:
                raise Refused(HTTPStatus.CONFLICT, "invalid_state", f"the run is {run.status} already")
            if run.status is RunStatus.RUNNING:
                run.cancel_requested = True
            else:
                run.status = RunStatus.CANCELLED
                run.finished_at = now
            return _run_json(run)

    # --- leases -----------------------------------------------------------------------------------------
    def _find(self, run_id: str) -> FakeRun:
        run = self.runs.get(run_id)
        if run is None:
            raise Refused(HTTPStatus.NOT_FOUND, "not_found", f"no run {run_id}")
        return run

    def _leased(self, run_id: str, token: str, now: datetime) -> FakeRun:
        self._lapse(now)
        run = self._find(run_id)
        if run.status is not RunStatus.RUNNING or token != run.lease_token:
            raise Refused(HTTPStatus.CONFLICT, "lease_lost", "this lease token is no longer the run's")
        return run

    def _lapse(self, now: datetime) -> None:
        """End the attempts whose lease lapsed by ``now``, as retryable (a run asked to stop ends)."""
        for run in self.runs.values():
            reason = run.lease.lapsed(now) if run.status is RunStatus.RUNNING and run.lease else None
            if reason is None:
                continue
            if run.cancel_requested:
                status = RunStatus.CANCELLED
            else:
                status = RunStatus.DEAD if run.attempt >= run.max_attempts else RunStatus.RETRY_WAIT
            self._end_attempt(run, now, status, "retryable_error", reason, f"the lease lapsed ({reason})")

    def _end_attempt(
        self,
        run: FakeRun,
        now: datetime,
        status: RunStatus,
        outcome: str,
        code: str | None = None,
        message: str | None = None,
    ) -> None:
        last = run.attempts[-1]
        duration = now - last["started_at"]
        last.update(
            finished_at=now,
            duration_ms=int(duration.total_seconds() * 1000),
            outcome=outcome,
            error_code=code,
            error_message=message,
        )
        run.status = status
        run.lease = None
        run.lease_token = None
        if status in TERMINAL_RUN_STATUSES:
            run.finished_at = now
        self._cond.notify_all()

    # --- HTTP -------------------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = api.answer(self.command, self.path, self.headers.get("Authorization"), raw)
                if answer is None:
                    self.close_connection = True
                    return
                status, body = answer
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _any  # noqa: N815 - http.server's naming

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


_CLAIM = re.compile(r"^/v1/pools/(?P<pool>[^/]+)/claim$")
_RUN_ACTION = re.compile(r"^/v1/runs/(?P<run>[^/]+)/(?P<action>heartbeat|complete|fail|cancel)$")
_RUN = re.compile(r"^/v1/runs/(?P<run>[^/]+)$")


def _route(method: str, path: str) -> tuple[str, str]:
    if method == "POST" and (matched := _CLAIM.match(path)):
        return "claim", unquote(matched["pool"])
    if method == "POST" and (matched := _RUN_ACTION.match(path)):
        return matched["action"], unquote(matched["run"])
    if method == "GET" and (matched := _RUN.match(path)):
        return "run", unquote(matched["run"])
    return "unknown", path


def _parse(model: type[Body], raw: bytes) -> Body:
    return model.model_validate_json(raw or b"{}")


def _run_json(run: FakeRun) -> dict[str, Any]:
    """The run as the API answers it: a ``RunOut``."""
    first = run.attempts[0]["started_at"] if run.attempts else None
    out = RunOut.model_validate(
        {
            "run_id": run.run_id,
            "job_id": run.job_id,
            "tenant_id": "acme",
            "scheduled_for": run.scheduled_for,
            "status": run.status,
            "attempt": run.attempt,
            "created_at": run.created_at,
            "enqueued_at": run.created_at,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "lag_ms": int((first - run.scheduled_for).total_seconds() * 1000) if first else None,
            "attempts": run.attempts,
            "fencing_token": run.fencing_token,
            "lease_owner": run.worker_id if run.status is RunStatus.RUNNING else None,
            "lease_expires_at": run.lease.expires_at if run.lease else None,
        }
    )
    return out.model_dump(mode="json")
