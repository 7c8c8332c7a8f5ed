"""Disabling and enabling a tenant: its fires wait as in a pause of each of its jobs.

Disabling sets the tenant's flag (its API requests get 403 ``tenant_disabled`` from the next one) and then
pauses each of its active jobs as of the moment it was disabled, marked as the switch's pause. A paused job
leaves the planner's due index, and a worker drops the fires sent for a time in the pause, as for any pause;
a fire or a retry that reaches a worker of a disabled tenant before its job's pause waits in the queue.
Enabling resumes exactly the jobs the switch paused (a job its tenant had paused stays paused) with their
cursors back at the first fire in the pause, for the planner to plan under each job's misfire policy, and
then clears the flag.

Both walk the tenant's jobs, a page at a time: an operator's action, not a request path. Either can be run
again after a crash and carries on where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tickwork.app.ports import JobStore, TenantAdmin
from tickwork.app.service import next_version, resumed
from tickwork.domain.models import Job, JobStatus, PauseInfo
from tickwork.domain.tenants import Tenant, TenantChanges
from tickwork.errors import NotFound, VersionConflict

# Who paused a job when the tenant was disabled: enabling resumes these jobs and no others.
PAUSED_BY_TENANT_SWITCH = "tickwork:tenant-disabled"
PAUSE_REASON = "the tenant is disabled"
_PAGE = 100
_TRIES = 5


class TenantSwitch:
    def __init__(self, *, tenants: TenantAdmin, jobs: JobStore, clock: Callable[[], datetime]):
        self.tenants = tenants
        self.jobs = jobs
        self.clock = clock

    def disable(self, tenant_id: str) -> Tenant:
        """The tenant disabled, and each of its active jobs paused as of that moment."""
        tenant = self.tenants.get(tenant_id)
        if not tenant.disabled or tenant.disabled_at is None:
            since = tenant.disabled_at or self.clock()
            tenant = self.tenants.update(tenant_id, TenantChanges(disabled=True, disabled_at=since))
        assert tenant.disabled_at is not None
        for job in self._jobs(tenant_id, JobStatus.ACTIVE):
            self._change(job, lambda current: _held(current, tenant.disabled_at))
        return tenant

    def enable(self, tenant_id: str) -> Tenant:
        """The jobs the switch paused resumed, then the tenant enabled."""
        self.tenants.get(tenant_id)
        for job in self._jobs(tenant_id, JobStatus.PAUSED):
            self._change(job, lambda current: _released(current, self.clock()))
        return self.tenants.update(tenant_id, TenantChanges(disabled=False, disabled_at=None))

    def _jobs(self, tenant_id: str, status: JobStatus) -> list[Job]:
        """The tenant's jobs in ``status``, read in full before any is changed: a change moves a job out of
        the status being paged through."""
        found: list[Job] = []
        cursor: str | None = None
        while True:
            page = self.jobs.list_for_tenant(tenant_id, status=status, limit=_PAGE, cursor=cursor)
            found += page.items
            cursor = page.next_cursor
            if cursor is None:
                return found

    def _change(self, job: Job, change: Callable[[Job], Job | None]) -> None:
        """Save ``change(job)`` conditional on the version read; read again and decide again when the job
        changed meanwhile (a worker completed it, the planner ended its schedule)."""
        current: Job | None = job
        for _ in range(_TRIES):
            if current is None:
                return
            changed = change(current)
            if changed is None:
                return
            try:
                self.jobs.save(changed, expected_version=current.version)
                return
            except VersionConflict:
                try:
                    current = self.jobs.get(current.tenant_id, current.job_id)
                except NotFound:
                    return
        raise VersionConflict(f"job {job.job_id!r} kept changing while its tenant was switched")


def _held(job: Job, since: datetime | None) -> Job | None:
    """An active job paused by the switch as of ``since``; None for a job in any other state."""
    if job.status is not JobStatus.ACTIVE or since is None:
        return None
    pause = PauseInfo(reason=PAUSE_REASON, paused_at=since, paused_by=PAUSED_BY_TENANT_SWITCH)
    return next_version(job, max(since, job.updated_at), status=JobStatus.PAUSED, pause=pause)


def _released(job: Job, now: datetime) -> Job | None:
    """A job the switch paused, resumed; None for any other (its tenant's own pause stays)."""
    if job.status is not JobStatus.PAUSED or job.pause is None:
        return None
    if job.pause.paused_by != PAUSED_BY_TENANT_SWITCH:
        return None
    return resumed(job, now)


__all__ = ["PAUSED_BY_TENANT_SWITCH", "TenantSwitch"]
