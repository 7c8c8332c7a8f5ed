"""Planning: turn a job's due fires into run items, hand them to the dispatcher, advance the cursor.

The API calls this for fires inside the horizon (create, resume, update); the planner Lambda calls it on
every tick for the jobs the due index returns. Run ids are deterministic, so planning twice is harmless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from tickwork.domain.misfire import plan_fires
from tickwork.domain.models import Job, JobStatus, Run, RunStatus, scheduled_run_id
from tickwork.domain.ports import JobStore, RunDispatcher, RunStore
from tickwork.observability import logger


@dataclass(frozen=True)
class PlanResult:
    planned: list[Run] = field(default_factory=list)
    missed: list[Run] = field(default_factory=list)
    next_fire_at: datetime | None = None
    cursor_advanced: bool = False


def new_run(job: Job, fire_at: datetime, now: datetime, status: RunStatus, reason: str | None = None) -> Run:
    return Run(
        run_id=scheduled_run_id(job.job_id, fire_at),
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        scheduled_for=fire_at,
        status=status,
        trigger="schedule",
        created_at=now,
        reason=reason,
    )


SEND_BATCH = 10  # SendMessageBatch's limit


@runtime_checkable
class StoringDispatcher(Protocol):
    """A dispatcher that can have runs stored as already sent, saving a write per run on success."""

    def stored_as(self, run: Run, now: datetime) -> Run: ...

    def send_stored(self, runs: Sequence[Run], now: datetime) -> None: ...


class JobPlanner:
    def __init__(self, *, jobs: JobStore, runs: RunStore, dispatcher: RunDispatcher, horizon: timedelta):
        self.jobs = jobs
        self.runs = runs
        self.dispatcher = dispatcher
        self.horizon = horizon

    def is_due(self, job: Job, now: datetime) -> bool:
        return (
            job.status is JobStatus.ACTIVE
            and job.next_fire_at is not None
            and job.next_fire_at <= now + self.horizon
        )

    def plan(self, job: Job, now: datetime) -> PlanResult:
        """Plan the job's fires up to ``now + horizon``: put runs first, dispatch, then move the cursor."""
        return self.plan_many([job], now)[0]

    def plan_many(self, jobs: Sequence[Job], now: datetime) -> list[PlanResult]:
        """Plan several jobs at once: runs are put job by job and sent ten to a request whatever their
        jobs (as soon as ten are waiting, so early jobs are not held up); a job's cursor moves once all
        its new runs went out, so a tick that dies midway keeps what it finished. A job whose write fails
        keeps its cursor (the next tick plans it again) and does not stop the others."""
        results: dict[str, PlanResult] = {}
        unsent_jobs: list[tuple[Job, datetime | None, list[Run], list[Run]]] = []
        waiting: list[Run] = []

        def send(runs: list[Run]) -> None:
            nonlocal unsent_jobs
            self._send(runs, now)
            still_waiting = {run.run_id for run in waiting}
            done = [entry for entry in unsent_jobs if not any(r.run_id in still_waiting for r in entry[3])]
            unsent_jobs = [entry for entry in unsent_jobs if entry not in done]
            for job, next_fire_at, missed, fresh in done:
                results[job.job_id] = PlanResult(
                    planned=fresh,
                    missed=missed,
                    next_fire_at=next_fire_at,
                    cursor_advanced=self._advance(job, next_fire_at),
                )

        for job in jobs:
            if not self.is_due(job, now):
                continue
            decision = plan_fires(job, job.next_fire_at, now, self.horizon)
            missed = [
                new_run(job, fire_at, now, RunStatus.MISSED, reason="misfire") for fire_at in decision.missed
            ]
            planned = [
                self._as_stored(new_run(job, fire_at, now, RunStatus.PLANNED), now)
                for fire_at in decision.run
            ]
            fresh: list[Run] = []
            try:
                for run in missed:
                    self.runs.put_if_absent(run)
                for run in planned:
                    if self.runs.put_if_absent(run) is None:
                        fresh.append(run)
            except Exception:
                # The runs already put still go out; the cursor stays, so the next tick redoes the rest.
                logger.exception("planning a job failed", extra={"job_id": job.job_id})
                waiting += fresh
                results[job.job_id] = PlanResult(planned=fresh, next_fire_at=job.next_fire_at)
                continue
            unsent_jobs.append((job, decision.next_fire_at, missed, fresh))
            waiting += fresh
            if len(waiting) >= SEND_BATCH:
                full = len(waiting) - len(waiting) % SEND_BATCH
                batch, waiting = waiting[:full], waiting[full:]
                send(batch)
        batch, waiting = waiting, []
        send(batch)
        return [results.get(job.job_id) or PlanResult(next_fire_at=job.next_fire_at) for job in jobs]

    def _advance(self, job: Job, next_fire_at: datetime | None) -> bool:
        try:
            return self.jobs.advance_cursor(job, next_fire_at)
        except Exception:
            # Planning again is harmless (run ids are deterministic): the next tick retries.
            logger.exception("moving a job's cursor failed", extra={"job_id": job.job_id})
            return False

    def _as_stored(self, run: Run, now: datetime) -> Run:
        return self.dispatcher.stored_as(run, now) if isinstance(self.dispatcher, StoringDispatcher) else run

    def _send(self, runs: list[Run], now: datetime) -> None:
        if not runs:
            return
        try:
            if isinstance(self.dispatcher, StoringDispatcher):
                self.dispatcher.send_stored(runs, now)
            else:
                self.dispatcher.dispatch(runs, now)
        except Exception:
            # The runs are stored, so the sweeper sends them; the cursors must still move on.
            logger.exception("sending planned runs failed", extra={"runs": len(runs)})
