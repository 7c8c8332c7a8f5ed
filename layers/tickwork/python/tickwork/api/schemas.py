"""Request and response bodies of the HTTP API (v1). Timestamps are RFC 3339, fields snake_case."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, JsonValue, StringConstraints

from tickwork.app.service import JobDetails, Preview, RunDetail, TenantStats
from tickwork.domain.describe import describe_schedule
from tickwork.domain.flow import KeyFlow, TenantFlow
from tickwork.domain.models import (
    STORED,
    GivenAsText,
    Instant,
    JitterSeconds,
    Job,
    JobSpec,
    JobStatus,
    PauseInfo,
    Run,
    RunStatus,
    RunSummary,
    Schedule,
    StrictModel,
)
from tickwork.domain.pools import PoolBacklog
from tickwork.domain.schedule import DstNote


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


class TaskRunOut(BaseModel):
    """A workflow run's task, as its run stands (a task not started yet has no run and is not listed)."""

    task_id: str
    run_id: str = Field(description="The task's run: GET /v1/runs/{run_id} shows it whole")
    status: RunStatus
    attempt: int
    started_at: Instant | None = None
    finished_at: Instant | None = None
    error_code: str | None = None

    @classmethod
    def of(cls, run: Run) -> TaskRunOut:
        last = run.attempts[-1] if run.attempts else None
        return cls(
            task_id=run.run_id.rsplit("/", 1)[1],
            run_id=run.run_id,
            status=run.status,
            attempt=run.attempt,
            started_at=run.started_at,
            finished_at=run.finished_at,
            error_code=last.error_code if last is not None else None,
        )


class RunDetailOut(RunOut):
    """One run as ``GET /v1/runs/{run_id}`` shows it: a pool run with its last checkpoint too, a workflow
    run with its tasks."""

    checkpoint: JsonValue = Field(
        None,
        description="A pool run's last saved checkpoint (null when none was saved, or not a pool run);"
        " shown for one run only, never in run lists",
    )
    tasks: list[TaskRunOut] | None = Field(
        None, description="A workflow run's tasks that have a run, in the order of its definition's runs"
    )

    @classmethod
    def of_detail(cls, detail: RunDetail) -> RunDetailOut:
        tasks = [TaskRunOut.of(task) for task in detail.tasks] if detail.tasks is not None else None
        return cls.model_validate(
            {**detail.run.model_dump(), "checkpoint": detail.checkpoint, "tasks": tasks}
        )


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
    jitter_seconds: JitterSeconds = Field(0, description="The job's jitter: each fire shows its starts_by")


class PreviewFireOut(BaseModel):
    at: Instant
    excluded: str | None = Field(
        None, description="Why schedule.exclude excludes this fire (it does not fire)"
    )
    dst: DstNote | None = Field(
        None,
        description="shifted: its local time fell in a spring-forward gap, it fires at the gap's end;"
        " repeated: its local time occurs twice at fall-back, and it fires at both",
    )
    starts_by: Instant | None = Field(None, description="With jitter_seconds: the latest it may start")


class PreviewResponse(BaseModel):
    fire_times: list[Instant] = Field(description="The next fires, excluded ones left out")
    fires: list[PreviewFireOut] = Field(
        description="The fires up to the last of fire_times, excluded ones included, with what changes them"
    )
    description: str = Field(description="The schedule in words")

    @classmethod
    def of(cls, preview: Preview, description: str) -> PreviewResponse:
        return cls(
            fire_times=preview.fire_times,
            fires=[
                PreviewFireOut(at=f.at, excluded=f.excluded, dst=f.dst, starts_by=f.starts_by)
                for f in preview.fires
            ],
            description=description,
        )


class PoolStatsOut(BaseModel):
    """One pool's runs waiting for a worker's claim."""

    pool: str
    waiting: int = Field(description="Runs due and waiting for a claim, counted up to 1,000")
    waiting_capped: bool = Field(description="More runs wait than `waiting` counts (shown as 1000+)")
    oldest_waiting_since: Instant | None = Field(
        None, description="When the oldest waiting run became due; null when none waits"
    )
    oldest_wait_seconds: float | None = Field(
        None, description="How long the oldest waiting run has waited; null when none waits"
    )

    @classmethod
    def of(cls, backlog: PoolBacklog, now: datetime) -> PoolStatsOut:
        wait = backlog.oldest_wait(now)
        return cls(
            pool=backlog.pool,
            waiting=backlog.waiting,
            waiting_capped=backlog.capped,
            oldest_waiting_since=backlog.oldest_due,
            oldest_wait_seconds=round(wait.total_seconds(), 3) if wait is not None else None,
        )


class KeyFlowOut(BaseModel):
    """One concurrency key of the tenant's jobs, counted from its slot items."""

    key: str
    max_concurrency: int = Field(description="The largest `max_concurrency` a job of the tenant names for it")
    running: int = Field(description="Attempts holding a slot of the key now (their lease not passed)")
    waiting: int = Field(
        description="Runs held back because the key is at `max_concurrency`, noted when first held and"
        " dropped when they take a slot (a note lapses 60 s after its run stops coming back)"
    )
    waiting_capped: bool = Field(
        description="More runs may wait than `waiting` counts (50 noted per slot item)"
    )

    @classmethod
    def of(cls, flow: KeyFlow) -> KeyFlowOut:
        return cls(
            key=flow.key,
            max_concurrency=flow.max_concurrency,
            running=flow.running,
            waiting=flow.waiting,
            waiting_capped=flow.waiting_capped,
        )


class FlowOut(BaseModel):
    """The tenant's flow control: its limits and what they hold now."""

    max_concurrent_runs: int | None = Field(description="The tenant's in-flight limit; null: none")
    max_runs_per_second: int | None = Field(description="The tenant's throttle on run starts; null: none")
    burst: int | None = Field(description="The throttle's burst; null: its rate")
    disabled: bool
    running: int = Field(
        description="With `max_concurrent_runs`: attempts holding one of the tenant's in-flight slots now."
        " Without: the RUNNING runs among `sampled_runs`. `running_from` says which"
    )
    running_from: Literal["in_flight_slots", "sampled_runs"]
    waiting: int = Field(
        description="Runs held back by the tenant's `max_concurrent_runs` or by one of its concurrency keys"
    )
    waiting_capped: bool = Field(description="More runs may wait than `waiting` counts")
    throttled: int = Field(
        description="Runs over `max_runs_per_second` waiting for the later start they reserved, exact from"
        " the throttle's state"
    )
    keys: list[KeyFlowOut] = Field(
        description="Each concurrency key the tenant's jobs name (up to 100), by key; never another tenant's"
    )

    @classmethod
    def of(cls, flow: TenantFlow) -> FlowOut:
        return cls(
            max_concurrent_runs=flow.max_concurrent_runs,
            max_runs_per_second=flow.max_runs_per_second,
            burst=flow.burst,
            disabled=flow.disabled,
            running=flow.running,
            running_from=flow.running_from,
            waiting=flow.waiting,
            waiting_capped=flow.waiting_capped,
            throttled=flow.throttled,
            keys=[KeyFlowOut.of(key) for key in flow.keys],
        )


class StatsOut(BaseModel):
    jobs: dict[str, int]
    runs: dict[str, int]
    trigger_lag_ms: dict[str, int | None]
    queue_depth: int
    window_seconds: int
    sampled_runs: int
    pools: list[PoolStatsOut] = Field(
        default_factory=list,
        description="Each pool the tenant's jobs have named, by name, with its runs waiting for a claim",
    )
    flow: FlowOut | None = Field(None, description="Flow control: running, waiting and throttled runs")

    @classmethod
    def of(cls, stats: TenantStats, now: datetime) -> StatsOut:
        return cls(
            jobs=stats.jobs,
            runs=stats.runs,
            trigger_lag_ms=stats.lag_ms,
            queue_depth=stats.queue_depth,
            window_seconds=stats.window_seconds,
            sampled_runs=stats.sampled_runs,
            pools=[PoolStatsOut.of(backlog, now) for backlog in stats.pools],
            flow=FlowOut.of(stats.flow) if stats.flow is not None else None,
        )


class HealthOut(BaseModel):
    status: str


# --- pools: what a worker of a pool is answered (complete and fail answer with the run, a RunOut) -----------
class ClaimedRunOut(BaseModel):
    """A run a worker claimed: everything it needs to do the work, resume it, and fence its later calls."""

    run_id: str
    job_id: str
    attempt: int = Field(description="The attempt this claim starts, 1 for the first")
    scheduled_for: Instant
    payload: JsonValue = None
    lease_token: str = Field(description="Sent with every heartbeat, complete and fail of this attempt")
    lease_expires_at: Instant = Field(
        description="When the lease lapses without a heartbeat: one heartbeat timeout after the claim"
    )
    progress: float | None = Field(None, description="The last progress saved; null on a first attempt")
    stage: str | None = Field(None, description="The last stage saved; null on a first attempt")
    checkpoint: JsonValue = Field(None, description="The last checkpoint saved, to resume from")

    @classmethod
    def of(cls, run: Run, payload: Any, checkpoint: Any) -> ClaimedRunOut:
        # A claimed run has both.
        assert run.lease_token is not None
        assert run.lease_expires_at is not None
        first = run.attempt == 1
        return cls(
            run_id=run.run_id,
            job_id=run.job_id,
            attempt=run.attempt,
            scheduled_for=run.scheduled_for,
            payload=payload,
            lease_token=run.lease_token,
            lease_expires_at=run.lease_expires_at,
            progress=None if first else run.progress,
            stage=None if first else run.stage,
            checkpoint=None if first else checkpoint,
        )


class ClaimOut(BaseModel):
    runs: list[ClaimedRunOut] = Field(description="Empty when no run came within the wait")


class HeartbeatOut(BaseModel):
    lease_expires_at: Instant = Field(description="The lease, extended by one heartbeat timeout")
    cancel_requested: bool = Field(
        description="The run was asked to stop (POST /v1/runs/{run_id}/cancel): end the work"
    )
