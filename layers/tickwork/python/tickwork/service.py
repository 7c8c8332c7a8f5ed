"""The application service behind the HTTP API: one method per route, all scoped to a tenant.

It checks what the models cannot check alone (the clock, the tenant's limits, the job's state), then calls
the stores and the planner. It takes ``now`` from its caller and knows nothing of HTTP or AWS.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from ulid import ULID

from tickwork.domain.misfire import first_fire_anchor
from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    HttpTarget,
    Job,
    JobPatch,
    JobSpec,
    JobStatus,
    OnceSchedule,
    PauseInfo,
    RateSchedule,
    Run,
    RunStatus,
    manual_run_id,
)
from tickwork.domain.patch import merge_patch
from tickwork.domain.ports import JobStore, Page, RunDispatcher, RunStore, TenantStore
from tickwork.domain.schedule import AnySchedule, fire_times_between, next_fire_time, next_fire_times
from tickwork.domain.targets import (
    AwsTargetPolicy,
    check_aws_target,
    check_http_target,
    check_payload_fits_target,
)
from tickwork.errors import InvalidInput, InvalidSchedule, InvalidState, VersionConflict
from tickwork.planning import JobPlanner

# A one-time job may name a time this far in the past (clock skew, a slow client) and still be accepted.
ONCE_PAST_TOLERANCE = timedelta(seconds=60)
STATS_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class JobDetails:
    job: Job
    next_fire_at: datetime | None
    """The next fire strictly after now, for display; the stored cursor may run ahead of it."""
    last_run: Run | None = None


@dataclass(frozen=True)
class TenantStats:
    jobs: dict[str, int]
    runs: dict[str, int]
    lag_ms: dict[str, int | None]
    queue_depth: int
    window_seconds: int = int(STATS_WINDOW.total_seconds())
    sampled_runs: int = 0


class JobService:
    def __init__(
        self,
        *,
        jobs: JobStore,
        runs: RunStore,
        tenants: TenantStore,
        dispatcher: RunDispatcher,
        horizon: timedelta,
        allow_private_targets: bool,
        aws_targets: AwsTargetPolicy | None = None,
        max_target_timeout_seconds: int = 900,
    ):
        self.jobs = jobs
        self.runs = runs
        self.tenants = tenants
        self.dispatcher = dispatcher
        self.allow_private_targets = allow_private_targets
        self.aws_targets = aws_targets
        self.max_target_timeout_seconds = max_target_timeout_seconds
        self.planner = JobPlanner(jobs=jobs, runs=runs, dispatcher=dispatcher, horizon=horizon)

    # --- jobs ---------------------------------------------------------------------------------------------
    def create_job(self, tenant_id: str, spec: JobSpec, now: datetime) -> JobDetails:
        tenant = self.tenants.get(tenant_id)
        self._check_spec(spec, now)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # stored timestamps keep milliseconds
        created = Job(
            **spec.model_dump(),
            job_id=str(ULID.from_datetime(now)),
            tenant_id=tenant_id,
            created_at=now,
            updated_at=now,
        )
        job = created.model_copy(update={"next_fire_at": first_fire(created, now)})
        self.jobs.create(job, max_jobs=tenant.max_jobs)
        return self._details(self._plan(job, now), now)

    def get_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        job = self.jobs.get(tenant_id, job_id)
        return self._details(job, now, last_run=self.runs.latest_started(tenant_id, job_id, now))

    def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None, now: datetime
    ) -> Page[JobDetails]:
        page = self.jobs.list_for_tenant(tenant_id, status=status, limit=limit, cursor=cursor)
        return Page([self._details(job, now) for job in page.items], page.next_cursor)

    def update_job(
        self, tenant_id: str, job_id: str, patch: JobPatch, now: datetime, *, if_match: int | None = None
    ) -> JobDetails:
        job = self.jobs.get(tenant_id, job_id)
        self._require_not_ended(job, "update")
        expected = patch.version if patch.version is not None else if_match
        if expected is not None and expected != job.version:
            raise VersionConflict(
                f"job is at version {job.version}, not {expected}",
                field="version",
                current_version=job.version,
            )
        changes = patch.changes()
        spec = JobSpec.model_validate(merge_patch(job.spec().model_dump(mode="json"), changes))
        self._check_spec(spec, now)
        updated = Job(
            **spec.model_dump(),
            **job.model_dump(exclude=set(JobSpec.model_fields) | {"version", "updated_at"}),
            version=job.version + 1,
            updated_at=now,
        )
        if spec.schedule != job.schedule:
            updated = updated.model_copy(update={"next_fire_at": first_fire(updated, now)})
            self._drop_runs_of_the_old_schedule(job, updated, now)
        previous_name = job.name if spec.name != job.name else None
        self.jobs.save(updated, expected_version=job.version, previous_name=previous_name)
        return self._details(self._plan(updated, now), now)

    def pause_job(
        self, tenant_id: str, job_id: str, *, reason: str | None, actor: str, now: datetime
    ) -> JobDetails:
        job = self.jobs.get(tenant_id, job_id)
        self._require_not_ended(job, "pause")
        if job.status is JobStatus.ACTIVE:
            paused = next_version(
                job,
                now,
                status=JobStatus.PAUSED,
                pause=PauseInfo(reason=reason, paused_at=now, paused_by=actor),
            )
            self.jobs.save(paused, expected_version=job.version)
            job = paused
        return self._details(job, now)

    def resume_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        """Fires missed while paused are planned now under the job's misfire policy."""
        job = self.jobs.get(tenant_id, job_id)
        self._require_not_ended(job, "resume")
        if job.status is JobStatus.PAUSED:
            resumed = next_version(job, now, status=JobStatus.ACTIVE, pause=None)
            self.jobs.save(resumed, expected_version=job.version)
            job = self._plan(resumed, now)
        return self._details(job, now)

    def cancel_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        """Runs not yet started become CANCELLED; an attempt already running finishes."""
        job = self.jobs.get(tenant_id, job_id)
        if job.status is not JobStatus.CANCELLED:
            cancelled = next_version(job, now, status=JobStatus.CANCELLED, cancelled_at=now)
            self.jobs.cancel(cancelled, expected_version=job.version)
            oldest_open = now - timedelta(seconds=job.retry.max_age_seconds) - self.planner.horizon
            self.runs.cancel_not_started(tenant_id, job_id, since=oldest_open, now=now)
            job = cancelled
        return self._details(job, now)

    def trigger_job(self, tenant_id: str, job_id: str, *, idempotency_key: str | None, now: datetime) -> Run:
        """Run now, outside the schedule. The same idempotency key always gives the same run."""
        job = self.jobs.get(tenant_id, job_id)
        if job.status is JobStatus.CANCELLED:
            raise InvalidState("a cancelled job cannot be triggered", job_status=job.status)
        run = Run(
            run_id=manual_run_id(job_id, idempotency_key),
            job_id=job_id,
            tenant_id=tenant_id,
            scheduled_for=now,
            status=RunStatus.PLANNED,
            trigger="manual",
            created_at=now,
        )
        existing = self.runs.put_if_absent(run)
        if existing is not None:
            return existing
        self.dispatcher.dispatch([run], now)
        return self.runs.get(tenant_id, run.run_id)

    # --- runs ---------------------------------------------------------------------------------------------
    def list_runs(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        self.jobs.get(tenant_id, job_id)
        return self.runs.list_for_job(tenant_id, job_id, limit=limit, cursor=cursor)

    def get_run(self, tenant_id: str, run_id: str) -> Run:
        return self.runs.get(tenant_id, run_id)

    def retry_run(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        """A new attempt of a FAILED, DEAD or ABANDONED run, under the same run id and idempotency key."""
        run = self.runs.get(tenant_id, run_id)
        job = self.jobs.get(tenant_id, run.job_id)
        if job.status is JobStatus.CANCELLED:
            raise InvalidState("runs of a cancelled job cannot be retried", job_status=job.status)
        reopened = self.runs.reopen(tenant_id, run_id, now)
        self.dispatcher.dispatch([reopened], now)
        return self.runs.get(tenant_id, run_id)

    # --- read-only helpers --------------------------------------------------------------------------------
    @staticmethod
    def preview(schedule: AnySchedule, *, after: datetime, count: int) -> list[datetime]:
        """Fire times strictly after ``after``; a rate schedule with no start_at counts from ``after``."""
        anchor = None
        if isinstance(schedule, RateSchedule):
            try:
                anchor = after + timedelta(seconds=schedule.every_seconds)
            except OverflowError:  # the first fire would fall past year 9999
                return []
        return next_fire_times(schedule, after, count, anchor=anchor)

    def stats(self, tenant_id: str, now: datetime) -> TenantStats:
        job_counts = self.jobs.count_by_status(tenant_id)
        samples = self.runs.recent_for_tenant(tenant_id, since=now - STATS_WINDOW, until=now)
        by_status = Counter(sample.status.value for sample in samples)
        lags = sorted(sample.lag_ms for sample in samples if sample.lag_ms is not None)
        return TenantStats(
            jobs={status.value: job_counts.get(status, 0) for status in JobStatus},
            runs={status.value: by_status.get(status.value, 0) for status in RunStatus},
            lag_ms={"p50": percentile(lags, 50), "p95": percentile(lags, 95), "p99": percentile(lags, 99)},
            queue_depth=sum(1 for sample in samples if sample.status in NOT_STARTED_RUN_STATUSES),
            sampled_runs=len(samples),
        )

    # --- internals ----------------------------------------------------------------------------------------
    def _check_spec(self, spec: JobSpec, now: datetime) -> None:
        if isinstance(spec.schedule, OnceSchedule) and spec.schedule.at < now - ONCE_PAST_TOLERANCE:
            raise InvalidSchedule("schedule.at is in the past", field="schedule.at")
        check_payload_fits_target(spec)
        if isinstance(spec.target, HttpTarget):
            check_http_target(spec.target, allow_private=self.allow_private_targets)
            if spec.target.timeout_seconds > self.max_target_timeout_seconds:
                raise InvalidInput(
                    f"target.timeout_seconds may be at most {self.max_target_timeout_seconds} here",
                    field="target.timeout_seconds",
                )
        else:
            check_aws_target(spec.target, self.aws_targets)

    def _plan(self, job: Job, now: datetime) -> Job:
        """Plan fires inside the horizon at once, so they do not wait for the planner's next tick."""
        if not self.planner.is_due(job, now):
            return job
        result = self.planner.plan(job, now)
        if not result.cursor_advanced:
            return self.jobs.get(job.tenant_id, job.job_id)
        return job.model_copy(update={"next_fire_at": result.next_fire_at})

    def _drop_runs_of_the_old_schedule(self, old: Job, new: Job, now: datetime) -> None:
        """Fires already planned from the old schedule, still ahead and not fires of the new one, are
        CANCELLED (reason ``schedule_changed``). Past fires still retrying, and manual runs, go on."""
        if old.next_fire_at is None or old.next_fire_at <= now:
            return
        still_wanted = set(
            fire_times_between(
                new.schedule, now, old.next_fire_at, anchor=first_fire_anchor(new), limit=10_000
            )
        )
        self.runs.cancel_not_started(
            old.tenant_id,
            old.job_id,
            since=now,
            now=now,
            reason="schedule_changed",
            keep=lambda run: run.trigger == "manual" or run.scheduled_for in still_wanted,
        )

    def _details(self, job: Job, now: datetime, last_run: Run | None = None) -> JobDetails:
        upcoming = None
        if job.status is JobStatus.ACTIVE:
            upcoming = next_fire_time(job.schedule, now, anchor=first_fire_anchor(job))
        return JobDetails(job=job, next_fire_at=upcoming, last_run=last_run)

    @staticmethod
    def _require_not_ended(job: Job, action: str) -> None:
        if job.status in (JobStatus.CANCELLED, JobStatus.COMPLETED):
            raise InvalidState(f"a {job.status.value.lower()} job cannot {action}", job_status=job.status)


def next_version(job: Job, now: datetime, **changes: object) -> Job:
    """The job with ``changes``, as the tenant's next version of it."""
    return job.model_copy(update={**changes, "version": job.version + 1, "updated_at": now})


def first_fire(job: Job, now: datetime) -> datetime:
    """The first fire at or after ``now`` (a one-time job's own time, even slightly past). Raises
    InvalidSchedule when the schedule has none left."""
    if isinstance(job.schedule, OnceSchedule):
        return job.schedule.at
    fire_at = next_fire_time(job.schedule, now - timedelta(microseconds=1), anchor=first_fire_anchor(job))
    if fire_at is None:
        raise InvalidSchedule("the schedule has no fire time after now", field="schedule")
    return fire_at


def percentile(sorted_values: list[int], pct: int) -> int | None:
    if not sorted_values:
        return None
    if len(sorted_values) == 1:
        return sorted_values[0]
    return round(statistics.quantiles(sorted_values, n=100, method="inclusive")[pct - 1])
