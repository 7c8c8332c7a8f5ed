"""Runs waiting in a pool, put straight into the runs table as the worker leaves them when it hands a fire to
its pool: for tests of what operators see of pools, without a planner and a worker to run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunStatus, scheduled_run_id


def seed_waiting(
    tenant_id: str, job_id: str, pool: str, *, waited: timedelta, now: datetime | None = None
) -> Run:
    """A fire of ``job_id`` due ``waited`` ago, waiting (ENQUEUED) in ``pool`` since."""
    from tickwork.runtime import runtime

    due = (now or datetime.now(UTC)) - waited
    due = due.replace(microsecond=due.microsecond // 1000 * 1000)
    run = Run(
        run_id=scheduled_run_id(job_id, due),
        job_id=job_id,
        tenant_id=tenant_id,
        scheduled_for=due,
        status=RunStatus.ENQUEUED,
        created_at=due,
        enqueued_at=due,
        pool=pool,
        fencing_token=1,
    )
    assert runtime().runs.put(run, Expect.new()).ok
    return run
