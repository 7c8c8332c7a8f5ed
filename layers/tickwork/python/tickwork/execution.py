"""Executing one run: the worker's steps, from a queue message to a recorded attempt.

1. read the run and its job; drop what is finished, cancelled or paused (recorded);
2. wait out a sub-second remainder so nothing fires early;
3. apply the overlap policy;
4. take the lease (with the tenant's in-flight slot) in one conditional write;
5. call the target, with a heartbeat extending the lease while the call is in flight;
6. record the attempt and the run's next status, conditional on the fencing token;
7. retry with backoff (a delayed message, or RETRY_WAIT for the sweeper), or end FAILED / DEAD.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwork.adapters.jobs import DynamoJobStore
from tickwork.adapters.queue import MAX_DELAY_SECONDS, START_GRACE, SqsDeadRunQueue, SqsRunDispatcher
from tickwork.adapters.runs import (
    DynamoRunLeases,
    DynamoRunStore,
    LeaseConflict,
    TenantBusy,
    running_runs_of_job,
)
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    Attempt,
    Job,
    JobStatus,
    OnceSchedule,
    Run,
    RunMessage,
    RunStatus,
)
from tickwork.domain.retry import OutcomeClass, decide_retry
from tickwork.domain.tenants import Tenant
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.errors import DuplicateAttempt, NotFound
from tickwork.observability import logger
from tickwork.targets import TargetResult

# Sleep in the worker for at most this long before a run's time; later runs go back to the queue.
MAX_EARLY_WAIT = timedelta(seconds=3)
# A run held back by `overlap_policy: queue` or the tenant's in-flight limit comes back after this long.
HOLD_BACK_SECONDS = 5
OUTCOME_OF = {
    OutcomeClass.SUCCESS: "succeeded",
    OutcomeClass.RETRYABLE: "retryable_error",
    OutcomeClass.PERMANENT: "permanent_error",
}


class MetricSink(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...

    def milliseconds(self, name: str, value: float) -> None: ...


Execute = Callable[[Job, Run, Tenant], TargetResult]


@dataclass(frozen=True)
class Outcome:
    """What the message handler should do with the message: done, or back to the queue after a delay."""

    done: bool
    retry_in_seconds: int = 0
    note: str = ""

    @classmethod
    def finished(cls, note: str) -> Outcome:
        return cls(done=True, note=note)

    @classmethod
    def later(cls, seconds: int, note: str) -> Outcome:
        return cls(done=False, retry_in_seconds=max(1, seconds), note=note)


class RunExecutor:
    def __init__(
        self,
        *,
        runs: DynamoRunStore,
        leases: DynamoRunLeases,
        jobs: DynamoJobStore,
        tenants: DynamoTenantStore,
        queue: SqsRunDispatcher,
        dead_runs: SqsDeadRunQueue,
        execute: Execute,
        metrics: MetricSink,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        worker_id: str,
        lease_margin: timedelta = timedelta(seconds=30),
        rng: random.Random | None = None,
        max_concurrency: int | None = None,
    ):
        self.runs = runs
        self.leases = leases
        self.jobs = jobs
        self.tenants = tenants
        self.queue = queue
        self.dead_runs = dead_runs
        self.execute = execute
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.worker_id = worker_id
        self.lease_margin = lease_margin
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not security
        # Workers run one attempt at a time, so at most this many attempts run at once: a tenant whose
        # limit is at least that cannot exceed it, and its leases skip the in-flight counter.
        self.max_concurrency = max_concurrency

    def handle(self, message: RunMessage) -> Outcome:
        try:
            run = self.runs.get(message.tenant_id, message.run_id)
            job = self.jobs.get(run.tenant_id, run.job_id)
        except NotFound:
            self.metrics.count("MessagesDropped")
            logger.warning("message for an unknown run or job dropped", extra={"run_id": message.run_id})
            return Outcome.finished("unknown run")
        logger.append_keys(tenant_id=run.tenant_id, job_id=run.job_id, run_id=run.run_id)
        try:
            return self._handle(run, job)
        finally:
            logger.remove_keys(["tenant_id", "job_id", "run_id", "attempt", "fencing_token"])

    def _handle(self, run: Run, job: Job) -> Outcome:
        now = self.clock()
        if run.status is RunStatus.DEAD and self.runs.dead_letter_owed(run.tenant_id, run.run_id):
            self._send_dead_letter(run, reason=run.reason or "retries_exhausted", error=_last_error(run))
            return Outcome.finished("dead letter sent after a lost send")
        if run.status in TERMINAL_RUN_STATUSES or (
            run.status is RunStatus.RUNNING
            and run.lease_expires_at is not None
            and run.lease_expires_at > now
        ):
            self.metrics.count("DuplicateDeliveriesAbsorbed")
            return Outcome.finished(f"duplicate: run is {run.status.value}")
        if run.status is RunStatus.RUNNING and job.delivery == "at_most_once":
            return Outcome.finished("lease expired on an at-most-once run: the sweeper abandons it")
        dropped = self._drop_if_unwanted(run, job, now)
        if dropped is not None:
            return dropped

        wait = (run.due_at - now).total_seconds()
        if wait > MAX_EARLY_WAIT.total_seconds():
            return Outcome.later(math.ceil(wait), "early")
        if wait > 0:
            self.sleep(wait)  # never early: SQS delays are whole seconds, rounded down

        # A one-time job has a single fire, so nothing can overlap it: skip the index query.
        if (
            run.trigger == "schedule"
            and not isinstance(job.schedule, OnceSchedule)
            and job.overlap_policy != "allow"
            and run.status is not RunStatus.RUNNING
        ):
            running = [
                other
                for other in running_runs_of_job(self.runs, run.tenant_id, run.job_id, now=self.clock())
                if other != run.run_id
            ]
            if running and job.overlap_policy == "skip":
                if self.leases.close_unstarted(run, RunStatus.SKIPPED, "overlap", self.clock()):
                    self.metrics.count("RunsSkipped")
                return Outcome.finished("skipped: an earlier run is still running")
            if running:
                return Outcome.later(HOLD_BACK_SECONDS, "queued behind a running run")

        tenant = self.tenants.get(run.tenant_id)
        lease_for = timedelta(seconds=_timeout_of(job)) + self.lease_margin
        count_slot = self.max_concurrency is None or tenant.max_in_flight < self.max_concurrency
        # A lease taken over from an expired one keeps whatever slot that one held.
        slot_held = None if run.status is RunStatus.RUNNING else count_slot
        try:
            leased = self.leases.take(
                run,
                owner=self.worker_id,
                now=self.clock(),
                lease_for=lease_for,
                max_in_flight=tenant.max_in_flight,
                count_slot=count_slot,
            )
        except LeaseConflict:
            self.metrics.count("LeaseConflicts")
            return Outcome.finished("lease taken by another worker")
        except TenantBusy:
            return Outcome.later(HOLD_BACK_SECONDS, "tenant at its in-flight limit")
        logger.append_keys(attempt=leased.attempt, fencing_token=leased.fencing_token)
        self.metrics.count("RunsStarted")
        if leased.attempt == 1 and leased.lag_ms is not None:
            self.metrics.milliseconds("TriggerLagMs", leased.lag_ms)

        try:
            result = self._call_with_heartbeat(job, leased, tenant, lease_for)
        except DuplicateAttempt:
            self.metrics.count("DuplicateDeliveriesAbsorbed")
            return Outcome.finished("the same attempt is running elsewhere")
        if self._record(job, leased, result, slot_held) and job.next_fire_at is None:
            self.jobs.complete_if_exhausted(job)
        return Outcome.finished(f"attempt {leased.attempt}: {result.outcome.value}")

    def _drop_if_unwanted(self, run: Run, job: Job, now: datetime) -> Outcome | None:
        if run.status not in NOT_STARTED_RUN_STATUSES:
            return None
        if job.status is JobStatus.CANCELLED:
            self.leases.close_unstarted(run, RunStatus.CANCELLED, "job_cancelled", now)
            return Outcome.finished("job cancelled")
        if job.status is JobStatus.PAUSED and run.trigger == "schedule":
            if self.leases.close_unstarted(run, RunStatus.MISSED, "job_paused", now):
                self.metrics.count("RunsMissed")
            return Outcome.finished("job paused")
        return None

    def _call_with_heartbeat(self, job: Job, run: Run, tenant: Tenant, lease_for: timedelta) -> TargetResult:
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(lease_for.total_seconds() / 3):
                if not self.leases.extend(run, self.clock() + lease_for):
                    logger.warning("lease lost during the target call")
                    return

        heartbeat = threading.Thread(target=beat, name=f"heartbeat-{run.run_id}", daemon=True)
        heartbeat.start()
        try:
            return self.execute(job, run, tenant)
        finally:
            stop.set()
            heartbeat.join(timeout=5)

    def _record(self, job: Job, run: Run, result: TargetResult, slot_held: bool | None) -> bool:
        """Store the outcome; True when the run reached a final status."""
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
        retry = (
            job.retry if job.delivery == "at_least_once" else job.retry.model_copy(update={"max_attempts": 1})
        )
        decision = decide_retry(
            retry, run.attempt, result.outcome, scheduled_for=run.scheduled_for, now=now, rng=self.rng
        )
        if decision.retry:
            retry_at = now + decision.delay
            long_wait = decision.delay.total_seconds() > MAX_DELAY_SECONDS
            attention_at = retry_at if long_wait else retry_at + START_GRACE
            if self._finish(
                run,
                RunStatus.RETRY_WAIT,
                attempt,
                now,
                retry_at=retry_at,
                attention_at=attention_at,
                slot_held=slot_held,
            ):
                self.metrics.count("RunsRetried")
                if not long_wait:
                    self.queue.send_later(run, math.ceil(decision.delay.total_seconds()))
            return False
        if result.outcome is OutcomeClass.SUCCESS:
            finished = self._finish(run, RunStatus.SUCCEEDED, attempt, now, slot_held=slot_held)
            if finished:
                self.metrics.count("RunsSucceeded")
            return finished
        if result.outcome is OutcomeClass.PERMANENT:
            finished = self._finish(
                run, RunStatus.FAILED, attempt, now, reason=result.error_code, slot_held=slot_held
            )
            if finished:
                self.metrics.count("RunsFailed")
            return finished
        reason = decision.stop_reason.value if decision.stop_reason else "retries_exhausted"
        finished = self._finish(run, RunStatus.DEAD, attempt, now, reason=reason, slot_held=slot_held)
        if finished:
            self.metrics.count("RunsDead")
            error = {
                "code": result.error_code,
                "message": result.error_message,
                "status_code": result.status_code,
            }
            self._send_dead_letter(run, reason=reason, error=error)
        return finished

    def _send_dead_letter(self, run: Run, *, reason: str, error: dict[str, Any]) -> None:
        """Send, then clear the debt. A failure in between leaves the message undeleted and the debt
        recorded, so the letter goes out when the message comes back (at least once)."""
        self.dead_runs.send(run, reason=reason, error=error)
        self.leases.dead_letter_sent(run)

    def _finish(self, run: Run, status: RunStatus, attempt: Attempt, now: datetime, **fields: object) -> bool:
        finished = self.leases.finish(run, status=status, attempt=attempt, now=now, **fields)  # type: ignore[arg-type]
        if not finished:
            self.metrics.count("LeaseConflicts")
            logger.warning("lease lost before the outcome was recorded; a newer attempt owns the run")
        return finished


def _last_error(run: Run) -> dict[str, Any]:
    last = run.attempts[-1] if run.attempts else None
    return {
        "code": last.error_code if last else None,
        "message": last.error_message if last else None,
        "status_code": None,  # not kept on the attempt record
    }


def _timeout_of(job: Job) -> int:
    return int(getattr(job.target, "timeout_seconds", 30))
