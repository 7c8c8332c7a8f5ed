"""Workers of a pool: they claim the pool's runs, run a handler on each, and keep each run's lease with
heartbeats that carry its progress and checkpoint.

    from tickwork_client import Client, PoolWorker, RunContext

    worker = PoolWorker(Client(url, token), worker_id="gpu-host-1")

    @worker.handler("gpu")
    def train(ctx: RunContext) -> dict[str, int]:
        step = (ctx.checkpoint or {}).get("step", 0)  # where an earlier attempt got to
        while step < 100:
            ctx.check()  # raises Interrupted once the run is cancelled or lost, or the worker stops
            do_step(step)
            step += 1
            ctx.save_checkpoint({"step": step})  # sent with the next heartbeat
            ctx.progress(step / 100, stage=f"step {step}")
        return {"steps": step}  # the run's output

    worker.run()  # claims until SIGTERM or SIGINT

See ``docs/client.md`` (Pool workers).
"""

from __future__ import annotations

import logging
import math
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from types import FrameType
from typing import Any, Literal, TypeVar

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python
from tickwork.api.schemas import ClaimedRunOut
from tickwork.domain.pools import (
    MAX_CLAIM_RUNS,
    MAX_CLAIM_WAIT_SECONDS,
    MAX_STAGE_CHARS,
    POOL_NAME,
    Checkpoint,
    ClaimRequest,
    Output,
)

from tickwork_client.client import Client
from tickwork_client.errors import (
    ClientError,
    Conflict,
    InvalidRequest,
    LeaseLost,
    NotFound,
    RateLimited,
    Unauthorized,
)
from tickwork_client.retry import RetryPolicy

logger = logging.getLogger("tickwork_client.worker")

Handler = Callable[["RunContext"], Any]
"""Does one run's work. What it returns is the run's output (any JSON, up to 16 KB, or None for none)."""
Clock = Callable[[], float]
"""Epoch seconds."""
Wait = Callable[[threading.Event, float], bool]
"""Waits up to ``seconds`` for ``event``; True when the event was set."""
HandlerT = TypeVar("HandlerT", bound=Handler)

DEFAULT_GRACE_SECONDS = 30.0
# The contract's range of a pool target's heartbeat_timeout_seconds.
MIN_HEARTBEAT_TIMEOUT_SECONDS = 10.0
MAX_HEARTBEAT_TIMEOUT_SECONDS = 600.0
HEARTBEATS_PER_TIMEOUT = 3
# After a claim that failed (once the client's own retries are spent): full jitter, from 1 s up to 30 s.
CLAIM_BACKOFF = RetryPolicy(initial_delay=1.0, max_delay=30.0)
# Between claims that asked not to wait (wait_seconds=0) and found nothing: the long poll is the pacing
# otherwise.
EMPTY_CLAIM_PAUSE_SECONDS = 1.0
# How often the thread in run() looks at the signals received (their handler only counts them).
SIGNAL_POLL_SECONDS = 0.2
ERROR_CODE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_ERROR_MESSAGE_CHARS = 1000

_checkpoints: TypeAdapter[Any] = TypeAdapter(Checkpoint)
_outputs: TypeAdapter[Any] = TypeAdapter(Output)


def _wait(event: threading.Event, seconds: float) -> bool:
    return event.wait(max(0.0, seconds))


class PermanentFailure(Exception):
    """Raised by a handler: the run fails for good (``retryable: false``), whatever its retry policy."""

    def __init__(self, message: str = "", *, code: str = "permanent_failure"):
        if not ERROR_CODE.fullmatch(code):
            raise ValueError(f"code must be 1 to 64 of A-Z a-z 0-9 . _ -, not {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message


InterruptReason = Literal["cancelled", "lost", "stopping"]


class Interrupted(Exception):
    """Raised by :meth:`RunContext.check`: the run should stop now. ``reason`` says why:

    - ``cancelled``: the run was cancelled (it ends CANCELLED, and is not retried);
    - ``lost``: the lease is no longer this worker's (the run may be another worker's by now);
    - ``stopping``: the worker is stopping (the run fails as retryable, ``worker_stopped``, and another worker
      resumes it from its last checkpoint).
    """

    def __init__(self, reason: InterruptReason):
        super().__init__(f"the run was interrupted: {reason}")
        self.reason: InterruptReason = reason


class RunContext:
    """What a handler gets for one claimed run: its payload, the checkpoint to resume from, and the ways to
    report progress and hear that it should stop.

    ``progress`` and ``save_checkpoint`` only note the values: the next heartbeat sends the latest, so
    calling them often costs nothing.
    """

    def __init__(self, run: ClaimedRunOut, *, pool: str, wait: Wait = _wait):
        self.run = run
        self.pool = pool
        self._wait = wait
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}
        self._checkpoint: Any = run.checkpoint
        self._lease_expires_at = run.lease_expires_at
        self._cancelled = False
        self._lost = False
        self._stopping = False
        self.interrupted = threading.Event()
        """Set once the run is cancelled or lost, or the worker stops: wait on it between steps."""

    def __repr__(self) -> str:
        return f"RunContext({self.run_id!r}, attempt={self.attempt})"

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def job_id(self) -> str:
        return self.run.job_id

    @property
    def attempt(self) -> int:
        return self.run.attempt

    @property
    def scheduled_for(self) -> datetime:
        return self.run.scheduled_for

    @property
    def payload(self) -> Any:
        return self.run.payload

    @property
    def checkpoint(self) -> Any:
        """The checkpoint to resume from: the last one saved, by this attempt or an earlier one (None when
        none was)."""
        with self._lock:
            return self._checkpoint

    @property
    def lease_expires_at(self) -> datetime:
        """When the lease lapses unless a heartbeat extends it, as the API last said."""
        with self._lock:
            return self._lease_expires_at

    @property
    def cancelled(self) -> bool:
        """A heartbeat answered ``cancel_requested``: stop, and the run ends CANCELLED."""
        return self._cancelled

    @property
    def lost(self) -> bool:
        """The API refused this attempt's lease (``lease_lost``): the run may be another worker's now.
        Nothing this attempt sends is kept, its output included, so stop."""
        return self._lost

    @property
    def stopping(self) -> bool:
        """The worker is stopping: finish within the grace period, or save a checkpoint and stop (raise, or
        let :meth:`check` raise), and another worker resumes the run at once."""
        return self._stopping

    def progress(self, fraction: float, stage: str | None = None) -> None:
        """Note the run's progress (0 to 1) and, optionally, its stage (up to 200 characters)."""
        if not 0 <= fraction <= 1:
            raise ValueError(f"progress must lie between 0 and 1, not {fraction!r}")
        if stage is not None and len(stage) > MAX_STAGE_CHARS:
            raise ValueError(f"stage is {len(stage)} characters; the limit is {MAX_STAGE_CHARS}")
        with self._lock:
            self._pending["progress"] = float(fraction)
            if stage is not None:
                self._pending["stage"] = stage

    def save_checkpoint(self, value: Any) -> None:
        """Note a checkpoint (any JSON, up to 64 KB as compact UTF-8): the next heartbeat saves it, and an
        attempt after this one starts from it. Checked here, so a value the API would refuse raises at once.
        """
        if value is None:
            raise ValueError("a checkpoint cannot be None")
        checked = _checkpoints.validate_python(to_jsonable_python(value))
        with self._lock:
            self._pending["checkpoint"] = checked
            self._checkpoint = checked

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the run should stop; True then."""
        return self._wait(self.interrupted, seconds)

    def check(self) -> None:
        """Raise :class:`Interrupted` if the run should stop: cancelled, lost, or the worker stopping."""
        if self._lost:
            raise Interrupted("lost")
        if self._cancelled:
            raise Interrupted("cancelled")
        if self._stopping:
            raise Interrupted("stopping")

    # --- for the worker -------------------------------------------------------------------------------------
    def _take_pending(self) -> dict[str, Any]:
        with self._lock:
            pending, self._pending = self._pending, {}
            return pending

    def _restore_pending(self, sent: dict[str, Any]) -> None:
        """Put back what a heartbeat that failed carried, under anything noted since (newer wins)."""
        with self._lock:
            self._pending = {**sent, **self._pending}

    def _renewed(self, expires_at: datetime) -> None:
        with self._lock:
            self._lease_expires_at = expires_at

    def _interrupt(self, reason: InterruptReason) -> None:
        if reason == "cancelled":
            self._cancelled = True
        elif reason == "lost":
            self._lost = True
        else:
            self._stopping = True
        self.interrupted.set()


def heartbeat_timeout_of(run: ClaimedRunOut, claimed_at: float) -> float:
    """The run's heartbeat timeout as its claim tells it (the lease's length, on this host's clock), kept
    within the contract's 10 to 600 s so that a skewed clock cannot make it absurd."""
    length = run.lease_expires_at.timestamp() - claimed_at
    return min(max(length, MIN_HEARTBEAT_TIMEOUT_SECONDS), MAX_HEARTBEAT_TIMEOUT_SECONDS)


class _Attempt:
    """One claimed run on this worker: the handler's thread, the heartbeats' thread, and the one lock under
    which everything is sent, so that nothing follows the attempt's end (its complete or fail, or the lease
    found lost)."""

    def __init__(
        self, worker: PoolWorker, pool: str, run: ClaimedRunOut, handler: Handler, claimed_at: float
    ):
        self.worker = worker
        self.run = run
        self.handler = handler
        self.ctx = RunContext(run, pool=pool, wait=worker._wait)
        self.claimed_at = claimed_at
        self.interval = heartbeat_timeout_of(run, claimed_at) / HEARTBEATS_PER_TIMEOUT
        self._send = threading.Lock()
        self._ended: str | None = None  # why nothing more is sent
        self._done = threading.Event()  # the heartbeats stop
        self._threads = (
            threading.Thread(target=self._work, name=f"tickwork-run-{run.run_id}", daemon=True),
            threading.Thread(target=self._beat, name=f"tickwork-heartbeat-{run.run_id}", daemon=True),
        )

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    @property
    def _client(self) -> Client:
        return self.worker.client

    # --- the handler ----------------------------------------------------------------------------------------
    def _work(self) -> None:
        try:
            try:
                output = self.handler(self.ctx)
            except Exception as error:
                self._failed(error)
            else:
                self._succeeded(output)
        finally:
            self._done.set()
            self.worker._finished(self)

    def _succeeded(self, output: Any) -> None:
        try:
            checked = _outputs.validate_python(to_jsonable_python(output)) if output is not None else None
        except ValueError as error:
            self._fail("invalid_output", f"the handler's output was refused: {error}", retryable=False)
            return
        with self._send:
            if self._dropped("its output"):
                return
            self._ended = "completed"
            try:
                self._client.complete(self.run.run_id, lease_token=self.run.lease_token, output=checked)
            except LeaseLost:
                self.ctx._interrupt("lost")
                logger.warning("run %s: the lease was lost before the complete; dropped", self.run.run_id)
            except ClientError as error:
                logger.error(
                    "run %s: the complete was not recorded (%s); the run is tried again after its heartbeat"
                    " timeout",
                    self.run.run_id,
                    error,
                )
            else:
                logger.info("run %s: completed (attempt %d)", self.run.run_id, self.run.attempt)

    def _failed(self, error: Exception) -> None:
        ctx = self.ctx
        if isinstance(error, PermanentFailure):
            self._fail(error.code, error.message, retryable=False)
        elif ctx.cancelled:
            self._fail("cancelled", "the run was cancelled", retryable=False)
        elif isinstance(error, Interrupted) and error.reason == "stopping":
            self._fail("worker_stopped", "the worker stopped before the run ended", retryable=True)
        elif ctx.lost:
            self._dropped("its error")
        else:
            logger.error("run %s: the handler failed", self.run.run_id, exc_info=error)
            self._fail("handler_error", f"{type(error).__name__}: {error}", retryable=True)

    def _fail(self, code: str, message: str, *, retryable: bool) -> None:
        """Fail the attempt, after a last heartbeat with what the handler noted since the one before, so
        that the next attempt resumes from the latest checkpoint."""
        with self._send:
            if self._dropped(f"its failure ({code})"):
                return
            self._ended = "failed"
            pending = self.ctx._take_pending()
            if pending and not self._send_heartbeat(pending) and self.ctx.lost:
                return  # the lease went with the heartbeat: the fail would be refused too
            try:
                self._client.fail(
                    self.run.run_id,
                    lease_token=self.run.lease_token,
                    code=code,
                    message=message[:MAX_ERROR_MESSAGE_CHARS],
                    retryable=retryable,
                )
            except LeaseLost:
                self.ctx._interrupt("lost")
                logger.warning("run %s: the lease was lost before the fail; dropped", self.run.run_id)
            except ClientError as error:
                logger.error(
                    "run %s: the fail (%s) was not recorded (%s); the run is tried again after its heartbeat"
                    " timeout",
                    self.run.run_id,
                    code,
                    error,
                )
            else:
                logger.info(
                    "run %s: failed (attempt %d, %s, %s)",
                    self.run.run_id,
                    self.run.attempt,
                    code,
                    "retryable" if retryable else "not retryable",
                )

    def _dropped(self, what: str) -> bool:
        """Whether the attempt has ended already (then ``what`` the handler had is dropped, and logged)."""
        if self._ended is None:
            return False
        logger.warning(
            "run %s: %s came after the attempt ended (%s); dropped", self.run.run_id, what, self._ended
        )
        return True

    def give_up(self, code: str, message: str) -> None:
        """End the attempt while its handler still runs, as retryable: whatever the handler does next is
        dropped."""
        self.ctx._interrupt("stopping")
        self._fail(code, message, retryable=True)
        self._done.set()

    # --- the heartbeats -------------------------------------------------------------------------------------
    def _beat(self) -> None:
        """A heartbeat every third of the heartbeat timeout from the claim, whatever the handler does
        meanwhile; after one that failed, the next goes three times sooner, so a lease survives a brief
        outage. Heartbeats that fell behind (a stalled host) are not sent in a burst: one goes at once."""
        clock, wait = self.worker._clock, self.worker._wait
        due = self.claimed_at + self.interval
        while not wait(self._done, due - clock()):
            with self._send:
                if self._ended is not None:
                    return
                sent = self._send_heartbeat(self.ctx._take_pending())
            due = max(due + (self.interval if sent else self.interval / HEARTBEATS_PER_TIMEOUT), clock())

    def _send_heartbeat(self, fields: dict[str, Any]) -> bool:
        """One heartbeat with ``fields`` (progress, stage, checkpoint), under the send lock; whether it was
        answered."""
        run_id = self.run.run_id
        try:
            answer = self._client.heartbeat(run_id, lease_token=self.run.lease_token, **fields)
        except (LeaseLost, Conflict, NotFound) as error:
            # LeaseLost above all: the lease lapsed or the run ended. Nothing this attempt sends is kept.
            self._ended = "lease lost"
            self.ctx._interrupt("lost")
            self._done.set()
            logger.warning("run %s: the lease is lost (%s); its heartbeats stop", run_id, error)
            return False
        except InvalidRequest as error:
            logger.error("run %s: a heartbeat was refused (%s); what it carried is dropped", run_id, error)
            return False
        except ClientError as error:
            self.ctx._restore_pending(fields)
            logger.warning("run %s: a heartbeat failed (%s); sending again sooner", run_id, error)
            return False
        self.ctx._renewed(answer.lease_expires_at)
        if answer.cancel_requested and not self.ctx.cancelled:
            logger.info("run %s: cancel requested", run_id)
            self.ctx._interrupt("cancelled")
        return True


class PoolWorker:
    """Claims the runs of the pools it has handlers for, runs up to ``max_runs`` of them at once (a thread
    each), and keeps their leases with heartbeats.

    - A handler that returns completes the run with what it returned as the output. One that raises fails
      it as retryable, unless it raises :class:`PermanentFailure` (not retried), or the run was cancelled
      (it ends CANCELLED). Before a fail, a last heartbeat saves the checkpoint noted since the one before.
    - A heartbeat goes every third of the run's heartbeat timeout (read from the claim's
      ``lease_expires_at``). A ``cancel_requested`` answer sets ``ctx.cancelled``; a ``lease_lost`` one sets
      ``ctx.lost``, stops the heartbeats, and drops whatever the handler ends with.
    - :meth:`run` stops on SIGTERM or SIGINT (or :meth:`stop`): it claims no more, and gives the handlers
      ``grace_seconds`` to end (``ctx.stopping`` tells them). A run whose handler is still going then is
      failed as retryable (``worker_stopped``), so another worker takes it over at once rather than after
      the heartbeat timeout. A second signal ends the grace period at once.
    - A claim that failed (once the client's own retries are spent) is sent again after a backoff with full
      jitter (1 s, doubling up to 30 s; longer when a 429 asks). One that cannot succeed as sent (400, 404,
      401 or 403 other than ``tenant_disabled``) stops the worker, and :meth:`run` raises it once the runs
      in hand have ended.

    ``clock`` (epoch seconds), ``wait`` (``wait(event, seconds)``: True once the event is set) and ``draw``
    (uniform in [0, 1), for the jitter) are there for tests to replace.
    """

    def __init__(
        self,
        client: Client,
        *,
        worker_id: str,
        max_runs: int = 1,
        wait_seconds: int = MAX_CLAIM_WAIT_SECONDS,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        clock: Clock = time.time,
        wait: Wait = _wait,
        draw: Callable[[], float] = random.random,
    ):
        ClaimRequest(worker_id=worker_id, wait_seconds=wait_seconds)  # refused here rather than at each claim
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        if grace_seconds < 0:
            raise ValueError("grace_seconds must not be negative")
        self.client = client
        self.worker_id = worker_id
        self.max_runs = max_runs
        self.wait_seconds = wait_seconds
        self.grace_seconds = grace_seconds
        self._clock = clock
        self._wait = wait
        self._draw = draw
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()
        self._slot_freed = threading.Condition(self._lock)
        self._free = max_runs
        self._active: dict[str, _Attempt] = {}  # by lease token: one run may come back at a later attempt
        self._started = False
        self._stopping = threading.Event()
        self._forced = threading.Event()
        self._changed = threading.Event()  # a run ended, or stop() was called
        self._stop_at: float | None = None
        self._fatal: ClientError | None = None
        self._signals_received = 0
        self._signals_seen = 0

    def __repr__(self) -> str:
        return f"PoolWorker({self.worker_id!r}, pools={sorted(self._handlers)})"

    # --- handlers -------------------------------------------------------------------------------------------
    def handler(self, pool: str) -> Callable[[HandlerT], HandlerT]:
        """Register the decorated function as the handler of ``pool``'s runs."""

        def register(handler: HandlerT) -> HandlerT:
            self.register(pool, handler)
            return handler

        return register

    def register(self, pool: str, handler: Handler) -> None:
        if not re.fullmatch(POOL_NAME, pool):
            raise ValueError(
                f"pool must be 1 to 64 of a-z 0-9 and '-', starting with a letter or digit: {pool!r}"
            )
        if pool in self._handlers:
            raise ValueError(f"pool {pool!r} has a handler already")
        if self._started:
            raise RuntimeError("register handlers before run()")
        self._handlers[pool] = handler

    @property
    def pools(self) -> list[str]:
        return list(self._handlers)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def active_runs(self) -> list[RunContext]:
        """The contexts of the runs in hand."""
        with self._lock:
            return [attempt.ctx for attempt in self._active.values()]

    # --- running --------------------------------------------------------------------------------------------
    def run(self, *, handle_signals: bool = True) -> None:
        """Claim and work until :meth:`stop` (or SIGTERM or SIGINT, with ``handle_signals`` in the main
        thread), then end as the class says. Raises the claim error that stopped the worker, if one did."""
        if not self._handlers:
            raise RuntimeError("register a handler before run()")
        if self._started:
            raise RuntimeError("a PoolWorker runs once")
        self._started = True
        previous = self._handle_signals() if handle_signals else {}
        try:
            claimers = [
                threading.Thread(
                    target=self._claim_loop, args=(pool,), name=f"tickwork-claim-{pool}", daemon=True
                )
                for pool in self._handlers
            ]
            for claimer in claimers:
                claimer.start()
            logger.info("worker %s: claiming runs of %s", self.worker_id, ", ".join(self._handlers))
            while not self._stopping.wait(SIGNAL_POLL_SECONDS):
                self._read_signals()
            self._drain(claimers)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self._fatal is not None:
            raise self._fatal

    def stop(self) -> None:
        """Stop claiming, and end the runs in hand within the grace period. A second call ends it at once.
        Not for a signal handler (run() installs its own): it takes locks."""
        with self._lock:
            if self._stopping.is_set():
                self._forced.set()
            else:
                self._stop_at = self._clock()
                self._stopping.set()
            self._slot_freed.notify_all()
            attempts = list(self._active.values())
        for attempt in attempts:
            attempt.ctx._interrupt("stopping")
        self._changed.set()

    def _drain(self, claimers: list[threading.Thread]) -> None:
        """Wait for the runs in hand up to the end of the grace period, then hand back those still going."""
        assert self._stop_at is not None
        deadline = self._stop_at + self.grace_seconds
        logger.info("worker %s: stopping; %d run(s) in hand", self.worker_id, len(self._active))
        while True:
            self._read_signals()
            self._changed.clear()
            with self._lock:
                busy = bool(self._active)
            remaining = deadline - self._clock()
            if not busy or self._forced.is_set() or remaining <= 0:
                break
            self._wait(self._changed, min(remaining, SIGNAL_POLL_SECONDS))
        with self._lock:
            left = list(self._active.values())
        for attempt in left:
            logger.warning(
                "run %s: its handler did not end within the grace period; failed as retryable",
                attempt.run.run_id,
            )
            attempt.give_up(
                "worker_stopped",
                f"the worker stopped and the handler did not end within {self.grace_seconds:g} s",
            )
        # A claim still waiting hands back the runs it brings: it gets what is left of the grace period (a
        # second stop ends that too; the runs of a claim left waiting lapse after their heartbeat timeout).
        for claimer in claimers:
            while claimer.is_alive() and not self._forced.is_set():
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                claimer.join(timeout=min(remaining, SIGNAL_POLL_SECONDS))
                self._read_signals()
        logger.info("worker %s: stopped", self.worker_id)

    # --- claiming -------------------------------------------------------------------------------------------
    def _claim_loop(self, pool: str) -> None:
        failures = 0
        while True:
            slots = self._reserve()
            if not slots:
                return
            try:
                answer = self.client.claim(
                    pool, worker_id=self.worker_id, max_runs=slots, wait_seconds=self.wait_seconds
                )
            except Exception as error:
                self._release(slots)
                if isinstance(error, ClientError) and _hopeless(error):
                    logger.error("worker %s: claims of %s cannot succeed: %s", self.worker_id, pool, error)
                    self._fatal = error
                    self.stop()
                    return
                failures += 1
                delay = CLAIM_BACKOFF.backoff(failures, self._draw())
                if isinstance(error, RateLimited) and error.retry_after is not None:
                    delay = max(delay, error.retry_after)
                logger.warning(
                    "worker %s: a claim of %s failed (%s); again in %.1f s",
                    self.worker_id,
                    pool,
                    error,
                    delay,
                    exc_info=not isinstance(error, ClientError),
                )
                self._wait(self._stopping, delay)
                continue
            failures = 0
            claimed_at = self._clock()
            taken, extra = answer.runs[:slots], answer.runs[slots:]
            self._release(slots - len(taken))
            for run in extra:  # more than asked for: not this worker's to do
                _Attempt(self, pool, run, self._handlers[pool], claimed_at)._fail(
                    "worker_busy", "the claim answered more runs than it asked for", retryable=True
                )
            for run in taken:
                self._start(pool, run, claimed_at)
            if not taken and self.wait_seconds == 0:
                self._wait(self._stopping, EMPTY_CLAIM_PAUSE_SECONDS)

    def _reserve(self) -> int:
        """Slots for the next claim (0 once stopping): all that are free, at most 10 and a fair share of
        max_runs when several pools share them; waits for a slot when none is."""
        share = max(1, math.ceil(self.max_runs / len(self._handlers)))
        with self._slot_freed:
            while self._free == 0 and not self._stopping.is_set():
                self._slot_freed.wait()
            if self._stopping.is_set():
                return 0
            slots = min(self._free, MAX_CLAIM_RUNS, share)
            self._free -= slots
            return slots

    def _release(self, slots: int) -> None:
        if slots:
            with self._slot_freed:
                self._free += slots
                self._slot_freed.notify_all()

    def _start(self, pool: str, run: ClaimedRunOut, claimed_at: float) -> None:
        attempt = _Attempt(self, pool, run, self._handlers[pool], claimed_at)
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._active[run.lease_token] = attempt
        if stopping:
            self._release(1)
            attempt._fail("worker_stopped", "the worker stopped as the run was claimed", retryable=True)
            return
        logger.info("run %s: claimed (attempt %d) from %s", run.run_id, run.attempt, pool)
        attempt.start()

    def _finished(self, attempt: _Attempt) -> None:
        with self._slot_freed:
            if self._active.pop(attempt.run.lease_token, None) is not None:
                self._free += 1
                self._slot_freed.notify_all()
        self._changed.set()

    # --- signals --------------------------------------------------------------------------------------------
    def _handle_signals(self) -> dict[int, Any]:
        """SIGTERM and SIGINT stop the worker, in the main thread only (Python's rule); the old handlers are
        put back when run() returns. The handler only counts: run()'s thread calls stop(), which takes locks
        a signal handler must not."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._on_signal)
        return {
            signum: handler if handler is not None else signal.SIG_DFL for signum, handler in previous.items()
        }

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals_received += 1

    def _read_signals(self) -> None:
        while self._signals_seen < self._signals_received:
            self._signals_seen += 1
            if self._stopping.is_set():
                logger.warning("worker %s: a second signal; the grace period ends now", self.worker_id)
            else:
                logger.info("worker %s: signal received; stopping", self.worker_id)
            self.stop()


def _hopeless(error: ClientError) -> bool:
    """A claim refused as sent: sending it again cannot help. A disabled tenant's claims wait instead (its
    runs wait too, and nothing is lost)."""
    if isinstance(error, Unauthorized):
        return error.code != "tenant_disabled"
    return isinstance(error, InvalidRequest | NotFound)
