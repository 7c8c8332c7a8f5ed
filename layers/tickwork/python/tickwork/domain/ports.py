"""The ports the application needs from storage and the run queue; adapters implement them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from tickwork.domain.models import Job, JobStatus, Run, RunStatus
from tickwork.domain.tenants import Principal, Tenant

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True)
class RunSample:
    """The little the stats route needs of one recent run."""

    status: RunStatus
    lag_ms: int | None


class JobStore(Protocol):
    def create(self, job: Job, *, max_jobs: int) -> None:
        """Store a new job and claim its name. Raises NameTaken or QuotaExceeded."""

    def get(self, tenant_id: str, job_id: str) -> Job:
        """Raises NotFound, also for another tenant's job."""

    def list_for_tenant(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[Job]:
        """Newest first. ``status=None`` lists every job but the cancelled ones."""

    def save(self, job: Job, *, expected_version: int, previous_name: str | None = None) -> None:
        """Replace the job if its stored version is ``expected_version``; move the name lock on a rename."""

    def cancel(self, job: Job, *, expected_version: int) -> None:
        """Store the cancelled job, free its name and its slot in the tenant's quota."""

    def advance_cursor(self, job: Job, next_fire_at: datetime | None) -> bool:
        """Move the planning cursor if the job's version is unchanged; False when it changed meanwhile."""

    def count_by_status(self, tenant_id: str) -> dict[JobStatus, int]: ...


class RunStore(Protocol):
    def put_if_absent(self, run: Run) -> Run | None:
        """Store the run unless it exists; returns the existing run when it does, else None."""

    def get(self, tenant_id: str, run_id: str) -> Run:
        """Raises NotFound, also for another tenant's run."""

    def list_for_job(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        """Newest scheduled time first."""

    def latest_started(self, tenant_id: str, job_id: str, now: datetime) -> Run | None: ...

    def cancel_not_started(
        self,
        tenant_id: str,
        job_id: str,
        *,
        since: datetime,
        now: datetime,
        reason: str = "job_cancelled",
        keep: Callable[[Run], bool] | None = None,
    ) -> int:
        """Mark the job's runs scheduled since ``since`` that have not started CANCELLED with ``reason``,
        except those ``keep`` accepts; returns how many."""

    def reopen(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        """Put a FAILED, DEAD or ABANDONED run back to PLANNED for a new attempt. Raises InvalidState."""

    def recent_for_tenant(self, tenant_id: str, *, since: datetime, until: datetime) -> list[RunSample]: ...


class TenantStore(Protocol):
    def get(self, tenant_id: str) -> Tenant:
        """Raises NotFound."""

    def by_token(self, token: str) -> Principal | None:
        """Who a bearer token belongs to (an active tenant), or None."""


class RunDispatcher(Protocol):
    """Hands planned runs to the execution engine (the run queue)."""

    def dispatch(self, runs: Sequence[Run], now: datetime) -> None: ...


class KeepPlanned:
    """A dispatcher that leaves runs PLANNED, for deployments without an execution engine."""

    def dispatch(self, runs: Sequence[Run], now: datetime) -> None:
        return None
