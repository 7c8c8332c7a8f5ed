"""One attempt of a run: the target called while a heartbeat keeps the lease, then its outcome recorded.

The heartbeat extends every lease the attempt holds (its tenant slot, its lane holder or its run item) three
times a lease, until the call returns or a lease is lost: one thread of the process beats for all its
attempts (:class:`Heartbeats`), so an attempt starts no thread of its own. A webhook's call carries the
lease token the attempt would be continued with; if it answers 202, that one write instead records the
attempt RUNNING under the token, held outside as a pool run is (:mod:`tickwork.app.pools`). Else the outcome
is written in the run item, one write fenced on the attempt's token: RETRY_WAIT while the retry policy allows
another attempt (its message sent now when SQS can delay it that long, else by the sweeper nearer the time),
else the run's end. The tenant slot goes back once the attempt is over; what follows the end is
:class:`~tickwork.app.after_end.AfterEnd`'s.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import threading
import time
from collections.abc import Callable

from tickwork.app.after_end import AfterEnd, ChainStep, Ended, log_end
from tickwork.app.claims import Claims, Lease
from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import Clock, Metrics, RunQueue, TenantStore
from tickwork.domain.arrival import MAX_DELAY_SECONDS
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import Job, Run, RunMessage, RunStatus
from tickwork.domain.pools import LeaseTerms, continuation_terms, continued, new_lease_token
from tickwork.domain.priority import message_priority
from tickwork.domain.retry import OutcomeClass, decide_retry
from tickwork.domain.tenants import Tenant
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.observability import logger
from tickwork.targets import TargetResult

OUTCOME_OF = {
    OutcomeClass.SUCCESS: "succeeded",
    OutcomeClass.RETRYABLE: "retryable_error",
    OutcomeClass.PERMANENT: "permanent_error",
}

Execute = Callable[[Job, Run, Tenant], TargetResult]


class Heartbeats:
    """The process's heartbeat thread: each attempt's ``beat`` runs every ``every`` seconds until it returns
    False or the attempt stops it. Most calls end long before their first beat (a third of a lease, 20 s at
    least): they cost a heap entry, not a thread."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: list[tuple[float, int]] = []
        self._beats: dict[int, tuple[float, Callable[[], bool]]] = {}
        self._beating: int | None = None
        self._tickets = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self, every: float, beat: Callable[[], bool]) -> int:
        with self._changed:
            ticket = next(self._tickets)
            self._beats[ticket] = (every, beat)
            heapq.heappush(self._due, (time.monotonic() + every, ticket))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)
                self._thread.start()
            self._changed.notify_all()
            return ticket

    def stop(self, ticket: int) -> None:
        """No beat of ``ticket`` after this returns (one under way is waited for)."""
        with self._changed:
            self._beats.pop(ticket, None)
            while self._beating == ticket:
                self._changed.wait()

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._due and self._due[0][1] not in self._beats:
                    heapq.heappop(self._due)
                if not self._due:
                    self._changed.wait()
                    continue
                due, ticket = self._due[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                heapq.heappop(self._due)
                every, beat = self._beats[ticket]
                self._beating = ticket
            try:
                again = beat()
            except Exception:
                logger.exception("a heartbeat failed")
                again = True  # the next one may pass; the lease says whether the attempt still holds
            with self._changed:
                self._beating = None
                if again and ticket in self._beats:
                    heapq.heappush(self._due, (time.monotonic() + every, ticket))
                else:
                    self._beats.pop(ticket, None)
                self._changed.notify_all()


HEARTBEATS = Heartbeats()


class Attempts:
    def __init__(
        self,
        *,
        execute: Execute,
        tenants: TenantStore,
        claims: Claims,
        lifecycle: RunLifecycle,
        after_end: AfterEnd,
        queue: RunQueue,
        metrics: Metrics,
        clock: Clock,
        rng: random.Random,
        heartbeats: Heartbeats = HEARTBEATS,
    ):
        self.heartbeats = heartbeats
        self.execute = execute
        self.tenants = tenants
        self.claims = claims
        self.lifecycle = lifecycle
        self.after_end = after_end
        self.queue = queue
        self.metrics = metrics
        self.clock = clock
        self.rng = rng

    def run(
        self, message: RunMessage, job: Job, lease: Lease, *, called: Callable[[], None] | None = None
    ) -> str:
        """Attempt the leased run; returns what happened, for the message's note. ``called``, once the call
        has returned and before its outcome is written."""
        run = lease.run
        logger.append_keys(attempt=run.attempt)
        logger.debug("run started", extra={"lag_ms": run.lag_ms} if run.attempt == 1 else None)
        self.metrics.count("RunsStarted")
        if run.attempt == 1 and run.lag_ms is not None:
            self.metrics.milliseconds("TriggerLagMs", run.lag_ms)
        tenant = self.tenants.get(job.tenant_id)
        terms = continuation_terms(job)
        # The token the attempt would be continued with, sent on the call (a webhook's, which may answer 202):
        # kept in memory, and written only with the 202, so a call answered otherwise costs nothing more.
        token = new_lease_token(run.fencing_token) if terms is not None else None
        try:
            result = self._call_with_heartbeat(job, lease, tenant, token)
            if called is not None:
                called()
            if result.continues and token is not None and terms is not None:
                return self._continue(job, lease, token, terms)
            stored = self.record(job, lease.run, result, in_lane=lease.holder is not None)
        finally:
            # The call is over (recorded, continued outside, or its lease lost): its slots go back before
            # what follows it. A continued attempt holds no slot, as a pool run holds none.
            self.claims.give_back(job, lease.slots)
        if stored is not None:
            until = message.chain_until
            chain = ChainStep(until, run.attempts[-1].started_at) if until is not None else None
            hand_on = chain is None and stored.status in TERMINAL
            self.after_end(Ended(job, stored, status_code=result.status_code, hand_on=hand_on, chain=chain))
        return f"attempt {run.attempt}: {result.outcome.value}"

    def _continue(self, job: Job, lease: Lease, token: str, terms: LeaseTerms) -> str:
        """The webhook answered 202: its attempt stays RUNNING under ``token``, one write fenced on the
        attempt's fencing token (the write that would have recorded its outcome)."""
        run = lease.run
        held = continued(run, token, terms, self.clock())
        if self.lifecycle.continue_attempt(run, held, in_lane=lease.holder is not None) is None:
            self._lease_lost()
            return f"attempt {run.attempt}: lease lost before its 202 was recorded"
        self.metrics.count("RunsContinued")
        logger.debug("run continued by its target")
        return f"attempt {run.attempt}: continued by its target"

    def _call_with_heartbeat(self, job: Job, lease: Lease, tenant: Tenant, token: str | None) -> TargetResult:
        lease_for = self.claims.lease_for(job)
        kept = [lease]  # as this attempt last extended it

        def beat() -> bool:
            extended = self.claims.extend(job, kept[0], self.clock() + lease_for)
            if extended is None:
                logger.warning("lease lost during the target call")
                return False
            kept[0] = extended
            return True

        beating = self.heartbeats.start(lease_for.total_seconds() / 3, beat)
        # The lease token goes to the call only: the run as leased (which the heartbeat may write) holds none.
        called = lease.run.model_copy(update={"lease_token": token}) if token is not None else lease.run
        try:
            return self.execute(job, called, tenant)
        finally:
            self.heartbeats.stop(beating)

    def record(self, job: Job, run: Run, result: TargetResult, *, in_lane: bool) -> Run | None:
        """Store the outcome of ``run``'s attempt (as its lease holds it: a lane holder's when ``in_lane``,
        else the run item as read); returns the run as stored (None: the lease was lost meanwhile). A run
        asked to stop ends CANCELLED rather than retried."""
        now = self.clock()
        started = run.attempts[-1]
        attempt = started.model_copy(
            update={
                "finished_at": now,
                "duration_ms": max(0, to_epoch_ms(now) - to_epoch_ms(started.started_at)),
                "outcome": OUTCOME_OF[result.outcome],
                "error_code": result.error_code,
                "error_message": result.error_message,
            }
        )
        done = run.model_copy(
            update={
                "attempts": [*run.attempts[:-1], attempt],
                **({"output": result.output} if result.ok and result.output is not None else {}),
                "lease_owner": None,
                "lease_expires_at": None,
                "lease_token": None,
            }
        )
        policy = (
            job.retry if job.delivery == "at_least_once" else job.retry.model_copy(update={"max_attempts": 1})
        )
        decision = decide_retry(
            policy, run.attempt, result.outcome, scheduled_for=run.scheduled_for, now=now, rng=self.rng
        )
        if run.cancel_requested and result.outcome is not OutcomeClass.SUCCESS:
            cancelled = self.lifecycle.end_attempt(
                run, done, RunStatus.CANCELLED, "run_cancelled", now, in_lane=in_lane
            )
            if cancelled is None:
                self._lease_lost()
                return None
            log_end(cancelled, error_code=result.error_code, duration_ms=attempt.duration_ms)
            return cancelled
        if decision.retry:
            delay = math.ceil(decision.delay.total_seconds())
            soon = delay <= MAX_DELAY_SECONDS
            waiting = self.lifecycle.wait_for_retry(
                run,
                done,
                in_lane=in_lane,
                retry_at=now + decision.delay,
                # A retry SQS can delay is sent now; a later one is the sweeper's, nearer the time.
                sent_at=now if soon else None,
            )
            if waiting is None:
                self._lease_lost()
                return None
            self.metrics.count("RunsRetried")
            logger.debug(
                "run attempt failed, retry scheduled",
                extra={
                    "status": waiting.status.value,
                    "error_code": result.error_code,
                    "duration_ms": attempt.duration_ms,
                },
            )
            if soon:
                retry = RunMessage(
                    tenant_id=waiting.tenant_id,
                    run_id=waiting.run_id,
                    attempt=waiting.attempt + 1,
                    priority=message_priority(job.priority),
                )
                self.queue.send_later(retry, delay)
            return waiting
        if result.outcome is OutcomeClass.SUCCESS:
            status, reason, metric = RunStatus.SUCCEEDED, None, "RunsSucceeded"
        elif result.outcome is OutcomeClass.PERMANENT:
            status, reason, metric = RunStatus.FAILED, result.error_code, "RunsFailed"
        else:
            status, metric = RunStatus.DEAD, "RunsDead"
            reason = decision.stop_reason.value if decision.stop_reason else "retries_exhausted"
        final = self.lifecycle.end_attempt(run, done, status, reason, now, in_lane=in_lane)
        if final is None:
            self._lease_lost()
            return None
        self.metrics.count(metric)
        if status is not RunStatus.DEAD:  # a DEAD run's dead letter says it
            log_end(final, error_code=result.error_code, duration_ms=attempt.duration_ms)
        return final

    def _lease_lost(self) -> None:
        """The attempt's end was not written: its lease was lost, and a newer attempt owns the run."""
        self.metrics.count("LeaseConflicts")
        logger.warning("lease lost before the outcome was recorded; a newer attempt owns the run")
