"""Planning: turn a job's due fires into run items, hand them to the dispatcher, advance the cursor.

The API calls this for fires inside the horizon (create, resume, update); the planner Lambda calls it on
every tick for the jobs the due index returns. Run ids are deterministic, so planning twice is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

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
        if not self.is_due(job, now):
            return PlanResult(next_fire_at=job.next_fire_at)
        decision = plan_fires(job, job.next_fire_at, now, self.horizon)
        missed = [
            new_run(job, fire_at, now, RunStatus.MISSED, reason="misfire") for fire_at in decision.missed
        ]
        planned = [new_run(job, fire_at, now, RunStatus.PLANNED) for fire_at in decision.run]
        for run in missed:
            self.runs.put_if_absent(run)
        fresh = [run for run in planned if self.runs.put_if_absent(run) is None]
        try:
            self.dispatcher.dispatch(fresh, now)
        except Exception:
            # The runs are stored PLANNED, so the sweeper sends them; the cursor must still move on.
            logger.exception("sending planned runs failed", extra={"job_id": job.job_id})
        advanced = self.jobs.advance_cursor(job, decision.next_fire_at)
        return PlanResult(
            planned=fresh, missed=missed, next_fire_at=decision.next_fire_at, cursor_advanced=advanced
        )
