"""The run lifecycle, carried out: every write of a run item's status goes through :class:`RunLifecycle`.

:mod:`tickwork.domain.lifecycle` says which moves are legal; this module makes them, one conditional write
each, and checks each move against that table before it writes. A move the lifecycle does not allow raises
:class:`~tickwork.domain.lifecycle.IllegalTransition` and writes nothing, whoever asked for it: the worker,
the API's service, the sweeper or the planner. A write that keeps the status (a lease extended, a message sent
again, a dead letter's debt paid) is no move: it is written only while the stored run is exactly as read, and
may not change the status.

A move starts from the stored status (None: no item yet), except an attempt's: a lane holder's attempt is
RUNNING before its run item says so (the item is written when the attempt ends), so an attempt's moves start
from RUNNING whatever the item held before it.

What follows a run's end (its dead letter, the job's completion, the fire after it) is not written here:
see :mod:`tickwork.app.after_end`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from tickwork.app.ports import Expect, RunStore, Written
from tickwork.domain.arrival import Candidate
from tickwork.domain.lifecycle import TERMINAL, IllegalTransition, ensure_move
from tickwork.domain.models import Attempt, Job, Run, RunStatus, manual_run_id, scheduled_run_id
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.domain.workflow import child_run_id


class RunLifecycle:
    """The one owner of run status writes. Each method is one conditional write (or none, when the move is
    illegal); what the store answered comes back to the caller, who decides what a lost race means."""

    def __init__(self, runs: RunStore):
        self.runs = runs

    # --- the API's and the sweeper's: a run stored before any worker sees it ------------------------------
    def plan_manual(
        self, *, tenant_id: str, job_id: str, idempotency_key: str | None, now: datetime
    ) -> tuple[Run, Written]:
        """A manual run, PLANNED: stored first, so the same idempotency key gives the same run."""
        run = Run(
            run_id=manual_run_id(job_id, idempotency_key),
            job_id=job_id,
            tenant_id=tenant_id,
            scheduled_for=now,
            status=RunStatus.PLANNED,
            trigger="manual",
            created_at=now,
        )
        return run, self._move(run, Expect.new(), was=None)

    def plan_task(
        self, workflow_run: Run, task_id: str, now: datetime, *, status: RunStatus = RunStatus.PLANNED
    ) -> tuple[Run, Written]:
        """A task's run in a workflow run, stored once (the conditional create is what starts a task once):
        PLANNED, for its message to follow; SKIPPED when its trigger rule can no longer be met; CANCELLED
        when a failure stops the run (``fail_fast``). It carries its workflow run's scheduled time, which
        places it in that run's tasks partition."""
        reasons = {
            RunStatus.SKIPPED: "its parents' outcomes do not meet its trigger rule",
            RunStatus.CANCELLED: "a task of its workflow run failed (fail_fast)",
        }
        run = Run(
            run_id=child_run_id(workflow_run.run_id, task_id),
            job_id=workflow_run.job_id,
            tenant_id=workflow_run.tenant_id,
            scheduled_for=workflow_run.scheduled_for,
            status=status,
            trigger="manual",
            created_at=now,
            finished_at=now if status in reasons else None,
            reason=reasons.get(status),
            workflow_retry=workflow_run.manual_retries,
        )
        return run, self._move(run, Expect.new(), was=None)

    def rerun(self, run: Run, now: datetime) -> tuple[Run, Written]:
        """A re-run by hand of an ended run: PLANNED again, for a new attempt under the same run id. Written
        only while it is stored as read and re-run as often: a retry that read an earlier end of the run
        cannot re-run a later one."""
        return self._reopen(run, _reopened(run, now))

    def rerun_task(self, task_run: Run, workflow_run: Run, now: datetime) -> tuple[Run, Written]:
        """A task that failed in an earlier go of its workflow run, run again in this one (the workflow run's
        retry): PLANNED as :meth:`rerun` makes it, its attempts kept, now of this go."""
        reopened = _reopened(task_run, now).model_copy(update={"workflow_retry": workflow_run.manual_retries})
        return self._reopen(task_run, reopened)

    def forget_task(self, task_run: Run) -> Written:
        """The run of a task that ended in an earlier go of its workflow run, deleted for the workflow run's
        retry to decide the task again (it waits for its parents as if it had never run), if still as read.
        Only an ended task's run is ever deleted."""
        if task_run.status not in TERMINAL:
            raise IllegalTransition(f"a {task_run.status.value} run cannot be forgotten")
        return self.runs.delete(task_run, Expect.at(task_run))

    def enqueued(self, run: Run, now: datetime) -> tuple[Run, Written]:
        """A stored run's message went out (again): ENQUEUED, as of ``now``."""
        enqueued = run.model_copy(update={"status": RunStatus.ENQUEUED, "enqueued_at": now})
        if run.status is RunStatus.ENQUEUED:
            return enqueued, self._keep(run, enqueued)
        return enqueued, self._move(enqueued, Expect.at(run), was=run.status)

    def retry_sent(self, run: Run, now: datetime) -> Written:
        """A run waiting for its retry: the next attempt's message went out at ``now``."""
        return self._keep(run, run.model_copy(update={"retry_sent_at": now}))

    # --- the planner's: fires that end before they are sent -----------------------------------------------
    def record_unrun_fire(
        self, job: Job, fire_at: datetime, now: datetime, reason: str, *, status: RunStatus
    ) -> Run | None:
        """A fire recorded as ended without running: MISSED (the misfire policy) or SKIPPED (excluded). None
        when the fire is stored already."""
        run = Run(
            run_id=scheduled_run_id(job.job_id, fire_at),
            job_id=job.job_id,
            tenant_id=job.tenant_id,
            scheduled_for=fire_at,
            status=status,
            trigger="schedule",
            created_at=now,
            finished_at=now,
            reason=reason,
        )
        return run if self._move(run, Expect.new(), was=None).ok else None

    # --- the worker's: the lease, the attempt, its end ----------------------------------------------------
    def claim(self, candidate: Candidate, leased: Run) -> Written:
        """Lease the run item itself (a job with no lane): written if it is absent, or exactly as read."""
        return self._move(leased, _as_read(candidate), was=_stored_status(candidate))

    def extend_lease(self, run: Run, until: datetime) -> Run | None:
        """The run-item lease's heartbeat: the run as extended, or None when the attempt lost it."""
        extended = run.model_copy(update={"lease_expires_at": until})
        return extended if self._keep(run, extended).ok else None

    def wait_for_retry(
        self, leased: Run, done: Run, *, in_lane: bool, retry_at: datetime, sent_at: datetime | None
    ) -> Run | None:
        """The attempt failed and another follows at ``retry_at``: RETRY_WAIT, its message sent at
        ``sent_at`` (None: later, by the sweeper). None when the lease was lost meanwhile."""
        waiting = done.model_copy(
            update={"status": RunStatus.RETRY_WAIT, "retry_at": retry_at, "retry_sent_at": sent_at}
        )
        return waiting if self._move(waiting, _fence(leased, in_lane), was=leased.status).ok else None

    def continue_attempt(self, leased: Run, continued: Run, *, in_lane: bool) -> Run | None:
        """The target answered 202: the attempt goes on outside tickwork, RUNNING under its lease token,
        until the heartbeat, complete and fail routes or the sweeper's lapse end it. None when the lease was
        lost meanwhile."""
        return continued if self._move(continued, _fence(leased, in_lane), was=leased.status).ok else None

    def end_attempt(
        self, leased: Run, done: Run, status: RunStatus, reason: str | None, now: datetime, *, in_lane: bool
    ) -> Run | None:
        """The attempt ended the run: SUCCEEDED, FAILED or DEAD. None when the lease was lost meanwhile."""
        final = _ended(done, status, reason, now)
        return final if self._move(final, _fence(leased, in_lane), was=leased.status).ok else None

    def end_unrun(self, candidate: Candidate, status: RunStatus, reason: str, now: datetime) -> Run | None:
        """The run ends without an attempt: MISSED, SKIPPED or CANCELLED. None when another write got there
        first (a fire of a job with no lane is decided before its item is read: it may exist after all)."""
        final = candidate.run.model_copy(update={"status": status, "reason": reason, "finished_at": now})
        return final if self._move(final, _as_read(candidate), was=_stored_status(candidate)).ok else None

    def record_lost(self, candidate: Candidate, lost: Run) -> bool:
        """A lane holder's lost attempt, which no run item holds yet, recorded before the next one starts:
        the history keeps it even if that one is lost too."""
        return self._move(lost, _fence(lost, in_lane=True), was=_attempt_status(candidate)).ok

    def end_lost(
        self, candidate: Candidate, lost: Run, status: RunStatus, reason: str, now: datetime
    ) -> Run | None:
        """A run whose last attempt was lost ends: ABANDONED, DEAD, or CANCELLED (its job was). None when
        another write got there first."""
        final = _ended(lost, status, reason, now)
        # A lane holder's attempt fences on its token (its item may be older); else the item as read.
        expect = _fence(final, in_lane=True) if candidate.lost_holder is not None else _as_read(candidate)
        return final if self._move(final, expect, was=_attempt_status(candidate)).ok else None

    # --- pools: runs the tenant's own workers claim -------------------------------------------------------
    def hand_to_pool(
        self,
        candidate: Candidate,
        run: Run,
        *,
        pool: str,
        in_lane: bool,
        now: datetime,
        wait_alarm: timedelta,
    ) -> Run | None:
        """The fire's attempt is the pool's to start: the run waits there, ENQUEUED, for a worker to claim it;
        the sweeper looks at it if it still waits ``wait_alarm`` after it became claimable. A lane holder's
        run carries the holder's token, and keeps the lane until it ends; a run with no lane is written if
        absent or as read. None when another write got there first."""
        waiting = run.model_copy(
            update={
                "status": RunStatus.ENQUEUED,
                "pool": pool,
                "enqueued_at": run.enqueued_at or now,
                "lease_owner": None,
                "lease_expires_at": None,
                "lease_token": None,
                "retry_at": None,
            }
        )
        since = max(now, waiting.due_at)
        waiting = waiting.model_copy(
            update={"pool_waiting_since": since, "pool_wait_alarm_at": since + wait_alarm}
        )
        expect = Expect.older_than(run.fencing_token + 1) if in_lane else _as_read(candidate)
        was = _stored_status(candidate)
        if was is RunStatus.ENQUEUED:  # a manual run's stored message: the same status, now in the pool
            assert candidate.stored is not None
            return waiting if self._keep(candidate.stored, waiting).ok else None
        return waiting if self._move(waiting, expect, was=was).ok else None

    def start_workflow(self, candidate: Candidate, run: Run, *, in_lane: bool, now: datetime) -> Run | None:
        """A workflow run starts: RUNNING, its tasks to run it (no lease of its own: the lane holder's token
        it carries keeps the job's lane until it ends). Written as hand_to_pool writes; None when another
        write got there first."""
        started = run.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "workflow": True,
                "attempt": run.attempt + 1,  # its first go, or a retry's
                "started_at": run.started_at or now,
                "lease_owner": None,
                "lease_expires_at": None,
                "lease_token": None,
                "retry_at": None,
            }
        )
        expect = Expect.older_than(run.fencing_token + 1) if in_lane else _as_read(candidate)
        return started if self._move(started, expect, was=_stored_status(candidate)).ok else None

    def end_workflow(self, running: Run, status: RunStatus, now: datetime) -> Run | None:
        """A workflow run ends with its last task: ``status`` from its tasks' outcomes, if still as read."""
        ended = running.model_copy(update={"status": status, "finished_at": now})
        return ended if self._move(ended, Expect.at(running), was=running.status).ok else None

    def claim_from_pool(self, waiting: Run, claimed: Run) -> bool:
        """A worker of the pool claims the waiting run: RUNNING under its lease token, if still as read."""
        return self._move(claimed, Expect.at(waiting), was=waiting.status).ok

    def pool_wait_noticed(self, waiting: Run, next_look: datetime) -> bool:
        """A run still waiting in its pool was counted as waiting long: the sweeper looks again at
        ``next_look``, if the run is still as read (a claim or a cancel got there first: nothing to count)."""
        return self._keep(waiting, waiting.model_copy(update={"pool_wait_alarm_at": next_look})).ok

    def pool_heartbeat(self, running: Run, beaten: Run) -> bool:
        """A claimed run's heartbeat (its lease renewed, its progress kept), if still as read."""
        return self._keep(running, beaten).ok

    def request_cancel(self, running: Run) -> Run | None:
        """A running run is asked to stop: its worker hears it at its next heartbeat."""
        asked = running.model_copy(update={"cancel_requested": True})
        return asked if self._keep(running, asked).ok else None

    def cancel_waiting(self, run: Run, now: datetime) -> Run | None:
        """A run not started (or between attempts) is cancelled at once."""
        final = _ended(run, RunStatus.CANCELLED, "run_cancelled", now)
        return final if self._move(final, Expect.at(run), was=run.status).ok else None

    def dead_letter_paid(self, run: Run) -> None:
        """The run's dead letter is in its queue: the debt is cleared (the run stays DEAD)."""
        self._keep(run, run.model_copy(update={"dead_letter_owed": False}))

    def _reopen(self, ended: Run, reopened: Run) -> tuple[Run, Written]:
        """An ended run PLANNED again, if stored as read and re-run as often as read."""
        expect = replace(Expect.at(ended), manual_retries=ended.manual_retries)
        return reopened, self._move(reopened, expect, was=ended.status)

    # --- the two kinds of write ---------------------------------------------------------------------------
    def _move(self, run: Run, expect: Expect, *, was: RunStatus | None) -> Written:
        """A move from ``was`` to the run's status, if the lifecycle allows it."""
        ensure_move(was, run.status)
        return self.runs.put(run, expect)

    def _keep(self, stored: Run, changed: Run) -> Written:
        """A change that keeps the status, written only while the run is stored exactly as read."""
        if changed.status is not stored.status:
            raise IllegalTransition(
                f"a write that keeps a run {stored.status.value} cannot make it {changed.status.value}"
            )
        return self.runs.put(changed, Expect.at(stored))


def leased(
    candidate: Candidate, *, attempt: int, token: int, now: datetime, lease_for: timedelta, worker_id: str
) -> Run:
    """The run as the attempt ``attempt`` holds it: RUNNING, leased to ``worker_id`` with ``token``. A lane
    holder's attempt is this run until it ends; a run-item lease writes it (:meth:`RunLifecycle.claim`)."""
    ensure_move(_stored_status(candidate), RunStatus.RUNNING)
    run = candidate.run
    record = Attempt(attempt=attempt, started_at=now, worker_id=worker_id)
    return run.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "attempt": attempt,
            "fencing_token": token,
            "lease_owner": worker_id,
            "lease_expires_at": now + lease_for,
            "lease_token": None,  # an earlier attempt's, continued after a 202, is not this one's
            "started_at": run.started_at or now,
            "lag_ms": run.lag_ms if run.lag_ms is not None else lag_ms(run, now),
            "attempts": [*run.attempts, record],
            "retry_at": None,
            "reason": None,
        }
    )


def started_now(run: Run, now: datetime) -> Run:
    """The leased run as its attempt starts at ``now``: a claim taken ahead of its fire holds the fire's time
    as its start until it is called."""
    started = run.attempts[-1].model_copy(update={"started_at": now})
    first = len(run.attempts) == 1
    return run.model_copy(
        update={
            "attempts": [*run.attempts[:-1], started],
            **({"started_at": now, "lag_ms": lag_ms(run, now)} if first else {}),
        }
    )


def lost_attempt_closed(candidate: Candidate, now: datetime) -> Run:
    """The run with its lost attempt closed (abandoned: the lease expired), still RUNNING: what follows it
    (an end, or the next attempt) is another move."""
    run, holder = candidate.run, candidate.lost_holder
    attempt = holder.attempt if holder is not None else run.attempt
    open_attempt = next((a for a in run.attempts if a.attempt == attempt and a.finished_at is None), None)
    started = (
        holder.started_at
        if holder is not None
        else open_attempt.started_at
        if open_attempt is not None
        else (run.started_at or now)
    )
    lost = Attempt(
        attempt=attempt,
        started_at=started,
        finished_at=now,
        duration_ms=max(0, to_epoch_ms(now) - to_epoch_ms(started)),
        outcome="abandoned",
        error_code="lease_expired",
        error_message="the worker's lease expired before the attempt's outcome was recorded",
        worker_id=holder.worker_id if holder is not None else run.lease_owner,
    )
    return run.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "attempt": attempt,
            "attempts": [*[a for a in run.attempts if a.attempt != attempt], lost],
            "started_at": run.started_at or started,
            "lag_ms": run.lag_ms if run.lag_ms is not None else lag_ms(run, started),
            "fencing_token": holder.token if holder is not None else run.fencing_token,
            "lease_owner": None,
            "lease_expires_at": None,
        }
    )


def lag_ms(run: Run, started: datetime) -> int:
    """From when the fire was due, its jitter included, to ``started``."""
    return max(0, to_epoch_ms(started) - to_epoch_ms(run.scheduled_for) - (run.jitter_ms or 0))


def _reopened(run: Run, now: datetime) -> Run:
    return run.model_copy(
        update={
            "status": RunStatus.PLANNED,
            "created_at": now,
            "finished_at": None,
            "reason": None,
            "manual_retries": run.manual_retries + 1,
            "dead_letter_owed": False,
        }
    )


def _ended(run: Run, status: RunStatus, reason: str | None, now: datetime) -> Run:
    """The run at its end; a DEAD run owes its dead letter until it is known to be sent."""
    return run.model_copy(
        update={
            "status": status,
            "reason": reason,
            "finished_at": now,
            "dead_letter_owed": status is RunStatus.DEAD,
        }
    )


def _stored_status(candidate: Candidate) -> RunStatus | None:
    return candidate.stored.status if candidate.stored is not None else None


def _attempt_status(candidate: Candidate) -> RunStatus | None:
    """Where a lost attempt's run stands: RUNNING while a lane holder held it, else as stored."""
    return RunStatus.RUNNING if candidate.lost_holder is not None else _stored_status(candidate)


def _as_read(candidate: Candidate) -> Expect:
    """The item must still be as the worker read it: absent, or exactly that."""
    return Expect.new() if candidate.stored is None else Expect.at(candidate.stored)


def _fence(leased: Run, in_lane: bool) -> Expect:
    """An attempt's later writes, fenced on its token: a lane holder's, when no newer attempt is stored (its
    item may be absent or older); the run item's own lease, while it is still exactly this attempt's."""
    return Expect.older_than(leased.fencing_token + 1) if in_lane else Expect.at(leased)
