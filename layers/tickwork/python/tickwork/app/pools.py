"""Pools: the routes the tenant's own workers call to claim runs, keep them alive, and end them.

A run of a ``pool`` job waits in its pool (ENQUEUED) once a worker Lambda has taken its lease (the job's lane,
when it has one, which stays taken until the run ends). A claim takes the oldest waiting runs, each with one
conditional write that makes it RUNNING under a new lease token; heartbeats renew the lease and keep progress
and a checkpoint; complete and fail end the attempt as any attempt ends (the retry policy decides what
follows), and every call with a token that is not the run's current one is refused (409 ``lease_lost``). A
lease that lapses is the sweeper's to end (:meth:`PoolService.lapse`), retryable, so the next claim resumes
from the last checkpoint.

A webhook's attempt that answered 202 is held outside the same way (:mod:`tickwork.app.attempt` records it
RUNNING under the lease token its call carried), and these routes end it alike, under
:data:`~tickwork.domain.pools.HTTP_CONTINUATION`'s terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tickwork.app.after_end import AfterEnd, Ended
from tickwork.app.attempt import Attempts
from tickwork.app.lifecycle import RunLifecycle, lag_ms
from tickwork.app.ports import Clock, JobStore, Metrics, RunStore
from tickwork.domain.lifecycle import TERMINAL, WAITING
from tickwork.domain.models import Attempt, Job, Run, RunMessage, RunStatus
from tickwork.domain.pools import (
    ClaimRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
    Lease,
    LeaseTerms,
    PoolTarget,
    fencing_token_of,
    lease_terms_of,
    new_lease_token,
    pool_target_of,
)
from tickwork.domain.retry import OutcomeClass
from tickwork.domain.workflow import parse_child_run_id, task_job, task_of
from tickwork.errors import InvalidState, LeaseLost, NotFound, TaskMessagesUnsent
from tickwork.observability import logger
from tickwork.targets.result import TargetResult, success

# A long poll looks at the pool this often while it waits.
POLL_EVERY = timedelta(milliseconds=500)
# A claim reads a few more waiting runs than it wants: others' claims may take some first.
CLAIM_READ_EXTRA = 5
# A pool task whose children's messages were not sent at its end: its own message comes this much later.
UNSENT_CHILDREN_AGAIN_SECONDS = 5
# A call whose conditional write lost to another (a heartbeat racing a complete) reads again this often.
WRITE_TRIES = 5
# A webhook's 202 is recorded just after the webhook answered, so a call it makes at once may come first: a
# token newer than the run as stored is looked at again, this often, for this long, before it is refused.
RECORD_WAIT_STEP = timedelta(milliseconds=100)
RECORD_WAIT = timedelta(seconds=2)


@dataclass(frozen=True)
class Claimed:
    run: Run
    payload: Any
    checkpoint: Any


@dataclass(frozen=True)
class Beat:
    lease_expires_at: datetime
    cancel_requested: bool


class PoolService:
    def __init__(
        self,
        *,
        jobs: JobStore,
        runs: RunStore,
        lifecycle: RunLifecycle,
        attempts: Attempts,
        after_end: AfterEnd,
        metrics: Metrics,
        clock: Clock,
        sleep: Callable[[float], None],
    ):
        self.jobs = jobs
        self.runs = runs
        self.lifecycle = lifecycle
        self.attempts = attempts
        self.after_end = after_end
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep

    # --- claim ----------------------------------------------------------------------------------------------
    def claim(self, tenant_id: str, pool: str, request: ClaimRequest) -> list[Claimed]:
        """Up to ``max_runs`` waiting runs of the pool, oldest due first, each claimed by one conditional
        write; waits up to ``wait_seconds`` for the first (empty when none came)."""
        until = self.clock() + timedelta(seconds=request.wait_seconds)
        while True:
            claimed = self._claim_waiting(tenant_id, pool, request)
            if claimed or self.clock() >= until:
                return claimed
            self.sleep(min(POLL_EVERY, until - self.clock()).total_seconds())

    def _claim_waiting(self, tenant_id: str, pool: str, request: ClaimRequest) -> list[Claimed]:
        now = self.clock()
        claimed: list[Claimed] = []
        jobs: dict[str, Job | None] = {}  # by the job a run is run as (a workflow task's: its own)
        for waiting in self.runs.waiting_in_pool(tenant_id, pool, limit=request.max_runs + CLAIM_READ_EXTRA):
            if len(claimed) == request.max_runs:
                break
            if waiting.due_at > now:
                break  # a retry not due yet (the rest are later still)
            runs_as = _runs_as(waiting)
            if runs_as not in jobs:
                jobs[runs_as] = self._job_of(waiting)
            job = jobs[runs_as]
            target = pool_target_of(job) if job is not None else None
            if job is None or target is None or target.pool != pool:
                continue
            run = self._claimed(waiting, target, request.worker_id, now)
            if self.lifecycle.claim_from_pool(waiting, run):
                self.metrics.count("RunsStarted")
                if run.attempt == 1 and run.lag_ms is not None:
                    self.metrics.milliseconds("TriggerLagMs", run.lag_ms)
                checkpoint = self.runs.checkpoint_of(run) if run.attempt > 1 else None
                claimed.append(Claimed(run, job.payload, checkpoint))
        return claimed

    def _claimed(self, waiting: Run, target: PoolTarget, worker_id: str, now: datetime) -> Run:
        lease = Lease.claimed(target, now)
        token = waiting.fencing_token + 1
        attempt = waiting.attempt + 1
        return waiting.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "attempt": attempt,
                "fencing_token": token,
                "lease_token": new_lease_token(token),
                "lease_owner": worker_id,
                "lease_expires_at": lease.expires_at,
                "lease_deadline": lease.deadline,
                "heartbeat_at": None,
                "started_at": waiting.started_at or now,
                "lag_ms": waiting.lag_ms if waiting.lag_ms is not None else lag_ms(waiting, now),
                "attempts": [
                    *waiting.attempts,
                    Attempt(attempt=attempt, started_at=now, worker_id=worker_id),
                ],
                "retry_at": None,
                "reason": None,
                # Claimed: no longer waiting (its attention time is now its lease's expiry)
                "pool_waiting_since": None,
                "pool_wait_alarm_at": None,
            }
        )

    # --- heartbeat ------------------------------------------------------------------------------------------
    def heartbeat(self, tenant_id: str, run_id: str, request: HeartbeatRequest) -> Beat:
        """Renew the lease by a heartbeat timeout (never past the attempt's cap) and keep what was given."""
        for _ in range(WRITE_TRIES):
            run, _, terms = self._held(tenant_id, run_id, request.lease_token)
            now = self.clock()
            lease = Lease(_require(run.lease_expires_at), _require(run.lease_deadline))
            if lease.lapsed(now) is not None:
                raise LeaseLost("the lease lapsed before this heartbeat; the run is the sweeper's to end")
            renewed = lease.renewed(terms, now)
            given = request.model_dump(exclude_unset=True, exclude={"lease_token", "checkpoint"})
            beaten = run.model_copy(
                update={**given, "lease_expires_at": renewed.expires_at, "heartbeat_at": now}
            )
            if not self.lifecycle.pool_heartbeat(run, beaten):
                continue
            # A checkpoint given (null too: it clears the last one) is saved once the lease is renewed, so a
            # heartbeat refused (the lease lapsed meanwhile) saves nothing; it is fenced on the token too.
            given_checkpoint = "checkpoint" in request.model_fields_set
            if given_checkpoint and not self.runs.save_checkpoint(run, request.checkpoint):
                raise LeaseLost("a later attempt holds the run")
            return Beat(renewed.expires_at, beaten.cancel_requested)
        raise LeaseLost("the run changed under this heartbeat; claim again")

    # --- complete and fail ----------------------------------------------------------------------------------
    def complete(self, tenant_id: str, run_id: str, request: CompleteRequest) -> Run:
        return self._end(tenant_id, run_id, request.lease_token, success(), output=request.output)

    def fail(self, tenant_id: str, run_id: str, request: FailRequest) -> Run:
        outcome = OutcomeClass.RETRYABLE if request.retryable else OutcomeClass.PERMANENT
        result = TargetResult(
            outcome=outcome, error_code=request.error.code, error_message=request.error.message
        )
        return self._end(tenant_id, run_id, request.lease_token, result)

    def _end(
        self, tenant_id: str, run_id: str, token: str, result: TargetResult, *, output: Any = None
    ) -> Run:
        for _ in range(WRITE_TRIES):
            run, job, _ = self._held(tenant_id, run_id, token)
            ending = run.model_copy(update={"output": output}) if output is not None else run
            stored = self.attempts.record(job, ending, result, in_lane=False)
            if stored is not None:
                self._after(job, stored)
                return stored
        raise LeaseLost("the run changed under this call; it may have ended already")

    # --- the sweeper's --------------------------------------------------------------------------------------
    def lapse(self, run: Run) -> Run | None:
        """A claimed run whose lease lapsed (no heartbeat within the timeout, or its cap reached) ends its
        attempt as a retryable failure: the retry policy decides what follows. None when it is not lapsed (a
        heartbeat came), or another write got there first."""
        now = self.clock()
        if run.status is not RunStatus.RUNNING or run.lease_expires_at is None or run.lease_deadline is None:
            return None
        why = Lease(run.lease_expires_at, run.lease_deadline).lapsed(now)
        if why is None:
            return None
        job = self._job_of(run)
        if job is None:
            return None
        message = (
            "no heartbeat came within the heartbeat timeout"
            if why == "heartbeat_timeout"
            else "the attempt reached its timeout_seconds"
        )
        result = TargetResult(outcome=OutcomeClass.RETRYABLE, error_code=why, error_message=message)
        stored = self.attempts.record(job, run, result, in_lane=False)
        if stored is not None:
            self.metrics.count("PoolLeasesLapsed")
            logger.info(
                "a pool run's lease lapsed",
                extra={
                    "tenant_id": run.tenant_id,
                    "pool": run.pool,
                    "run_id": run.run_id,
                    "attempt": run.attempt,
                    "error_code": why,
                },
            )
            self._after(job, stored)
        return stored

    # --- cancel ---------------------------------------------------------------------------------------------
    def cancel(self, tenant_id: str, run_id: str) -> Run:
        """A run not started is CANCELLED at once; a running one is asked to stop (it ends CANCELLED, never
        retried); an ended run cannot be cancelled."""
        for _ in range(WRITE_TRIES):
            run = self.runs.get(tenant_id, run_id)
            now = self.clock()
            if run.status in TERMINAL:
                raise InvalidState(f"the run is {run.status.value} already", field="run_id")
            if run.status is RunStatus.RUNNING and run.workflow:
                return self._cancel_workflow(run)
            if run.status is RunStatus.RUNNING:
                if run.cancel_requested:
                    return run
                asked = self.lifecycle.request_cancel(run)
                if asked is not None:
                    return asked
                continue
            if run.status in WAITING:
                cancelled = self.lifecycle.cancel_waiting(run, now)
                if cancelled is not None:
                    job = self._job_of(run)
                    if job is not None:
                        self._after(job, cancelled)
                    return cancelled
        raise InvalidState("the run changed while it was being cancelled; try again", field="run_id")

    def _cancel_workflow(self, run: Run) -> Run:
        """A workflow run is cancelled through its tasks: those not started are cancelled, those running
        finish, and the run ends with the last of them (CANCELLED, or FAILED if a task failed)."""
        job = self._job(run.tenant_id, run.job_id)
        workflow = job.workflow if job is not None else None
        task_ends = self.after_end.task_ends
        if job is None or workflow is None or task_ends is None:
            raise InvalidState("the workflow run's job is gone", field="run_id")
        self.after_end.cancel_the_rest(job, workflow, run, task_ends.read(run), handlers_too=True)
        return self.runs.get(run.tenant_id, run.run_id)

    # --- helpers --------------------------------------------------------------------------------------------
    def _held(self, tenant_id: str, run_id: str, token: str) -> tuple[Run, Job, LeaseTerms]:
        """The run, its job and its lease's terms, if ``token`` is the lease of its running attempt."""
        run = self._recorded(tenant_id, run_id, fencing_token_of(token))
        if (
            run.status is not RunStatus.RUNNING
            or run.lease_token is None
            or fencing_token_of(token) is None
            or token != run.lease_token
        ):
            raise LeaseLost("this lease token is not the run's: another attempt holds it, or it ended")
        job = self._job_of(run)
        terms = lease_terms_of(job) if job is not None else None
        if job is None or terms is None:
            raise LeaseLost("the run's job is gone, or its target no longer takes a lease")
        return run, job, terms

    def _recorded(self, tenant_id: str, run_id: str, fence: int | None) -> Run:
        """The run as stored, once it is stored at ``fence``'s attempt or later: a webhook that answered 202
        may call before its answer is recorded (the run absent, or an earlier attempt's), so that is looked at
        again for a moment before the call is answered as things stand."""
        until = self.clock() + RECORD_WAIT
        while True:
            try:
                run = self.runs.get(tenant_id, run_id)
                if fence is None or run.fencing_token >= fence or self.clock() >= until:
                    return run
            except NotFound:
                if fence is None or self.clock() >= until:
                    raise
            self.sleep(RECORD_WAIT_STEP.total_seconds())

    def _job_of(self, run: Run) -> Job | None:
        """The job ``run`` is run as: its job, or for a workflow task's run the task's view of it (the task's
        pool target); None when the job, or the task, is gone."""
        job = self._job(run.tenant_id, run.job_id)
        child = parse_child_run_id(run.run_id)
        if job is None or child is None:
            return job
        task = task_of(job, child.task_id)
        return task_job(job, task) if task is not None else None

    def _job(self, tenant_id: str, job_id: str) -> Job | None:
        try:
            return self.jobs.get(tenant_id, job_id)
        except NotFound:
            return None

    def _after(self, job: Job, stored: Run) -> None:
        try:
            self.after_end(Ended(job, stored, hand_on=stored.status in TERMINAL))
        except TaskMessagesUnsent:
            # A workflow task's end is written, its children's messages not sent, and no message of its own
            # will come back to send them (its end came by this call): one is sent, a duplicate delivery
            # in a few seconds, which sends the children it settled that have no run.
            message = RunMessage(tenant_id=stored.tenant_id, run_id=stored.run_id)
            self.after_end.queue.send_later(message, UNSENT_CHILDREN_AGAIN_SECONDS)


def _runs_as(run: Run) -> str:
    """Which job view a run is run as: its job's id, with a workflow task's id after it."""
    child = parse_child_run_id(run.run_id)
    return run.job_id if child is None else f"{run.job_id}/{child.task_id}"


def _require(value: datetime | None) -> datetime:
    if value is None:
        raise LeaseLost("the run holds no lease")
    return value


__all__ = ["Beat", "Claimed", "PoolService"]
