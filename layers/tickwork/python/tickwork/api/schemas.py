"""Request and response bodies of the HTTP API (v1). Timestamps are RFC 3339, fields snake_case."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from tickwork.app.service import JobDetails, TenantStats
from tickwork.domain.describe import describe_schedule
from tickwork.domain.models import (
    STORED,
    GivenAsText,
    Instant,
    Job,
    JobSpec,
    JobStatus,
    PauseInfo,
    Run,
    RunSummary,
    Schedule,
    StrictModel,
)


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorInfo(ErrorDetail):
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(BaseModel):
    error: ErrorInfo


class JobOut(JobSpec):
    job_id: str
    status: JobStatus
    version: int
    created_at: Instant
    updated_at: Instant
    next_fire_at: Instant | None = None
    pause: PauseInfo | None = None
    cancelled_at: Instant | None = None
    last_run: RunSummary | None = None
    schedule_description: str = Field(
        description="The schedule in words, e.g. 'At 09:00, Monday through Friday, America/New_York'"
    )

    @classmethod
    def of(cls, details: JobDetails) -> JobOut:
        job: Job = details.job
        return cls.model_validate(
            {
                **job.model_dump(exclude={"tenant_id", "next_fire_at", "last_fire_at"}),
                "next_fire_at": details.next_fire_at,
                "last_run": RunSummary.of(details.last_run) if details.last_run else None,
                "schedule_description": describe_schedule(job.schedule),
            },
            context={STORED: True},
        )


class RunOut(Run):
    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls.model_validate(run.model_dump())


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = None


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: str | None = None


class PauseRequest(StrictModel):
    reason: Annotated[str, StringConstraints(max_length=1024)] | None = None


class PreviewRequest(StrictModel):
    schedule: Schedule
    after: Annotated[Instant, GivenAsText] | None = None
    count: int = Field(10, ge=1, le=100)


class PreviewResponse(BaseModel):
    fire_times: list[Instant]
    description: str = Field(description="The schedule in words")


class StatsOut(BaseModel):
    jobs: dict[str, int]
    runs: dict[str, int]
    trigger_lag_ms: dict[str, int | None]
    queue_depth: int
    window_seconds: int
    sampled_runs: int

    @classmethod
    def of(cls, stats: TenantStats) -> StatsOut:
        return cls(
            jobs=stats.jobs,
            runs=stats.runs,
            trigger_lag_ms=stats.lag_ms,
            queue_depth=stats.queue_depth,
            window_seconds=stats.window_seconds,
            sampled_runs=stats.sampled_runs,
        )


class HealthOut(BaseModel):
    status: str
