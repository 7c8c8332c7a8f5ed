"""Settings, validated once at cold start from the environment (never at import time)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tickwork import tables
from tickwork.domain.targets import AwsTargetPolicy


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    jobs_table: str = tables.JOBS.default_name
    runs_table: str = tables.RUNS.default_name
    tenants_table: str = tables.TENANTS.default_name
    idempotency_table: str = tables.IDEMPOTENCY.default_name
    run_index_table: str = tables.RUN_INDEX.default_name
    run_queue_url: str | None = None
    # The high and low priority runs' queues; without them, those runs go to the run queue.
    run_queue_high_url: str | None = None
    run_queue_low_url: str | None = None
    dead_run_queue_url: str | None = None

    due_shards: int = Field(tables.DEFAULT_DUE_SHARDS, ge=1, le=1024)
    attention_shards: int = Field(tables.DEFAULT_ATTENTION_SHARDS, ge=1, le=1024)
    planner_horizon_seconds: int = Field(900, ge=1, le=900)
    """How far ahead a job's fires are sent once it is planned (SQS holds a message at most 900 s)."""
    planner_lookahead_seconds: int = Field(120, ge=1, le=900)
    """A job is planned once its next unsent fire is this close (two planner ticks)."""
    run_retention_days: int = Field(90, ge=1, le=3650)
    idempotency_ttl_seconds: int = Field(86_400, ge=60)
    planner_max_jobs_per_tick: int = Field(5000, ge=1)
    lease_margin_seconds: int = Field(30, ge=1, le=900)
    pool_wait_alarm_seconds: int = Field(900, ge=60, le=43_200)
    """A run waiting this long in its pool for a claim is counted (``PoolRunsWaitingLong``), then again
    after each further wait of as long."""
    # How long before its fire a run's message is timed to arrive: the worker reads what the run needs
    # meanwhile, so that at the fire only the claim and the call are left. Each millisecond is paid as
    # waiting Lambda time on AWS; the local stack, where nothing is paid, uses a longer one.
    send_lead_ms: int = Field(50, ge=0, le=10_000)
    # How long a call at a burst's fire keeps its turn among the process's runs, and the burst's records
    # waiting (tickwork.app.at_fire). 0 deployed, where an invocation's ten runs have a process of their own;
    # the local stack's hundreds of invocations share one interpreter, and call best a few at a time.
    burst_call_hold_ms: int = Field(0, ge=0, le=1000)
    # Records of a worker's batch handled at once, one thread per job (tickwork.batches).
    worker_parallelism: int = Field(10, ge=1, le=100)
    allow_private_targets: bool = False
    # A webhook may not take longer than the worker function may run (the stack sets it from the timeout).
    max_target_timeout_seconds: int = Field(900, ge=1, le=900)
    # ARN patterns of the AWS targets jobs may name; None (local mode) allows any, () allows none.
    allowed_target_arns: tuple[str, ...] | None = None
    aws_partition: str = "aws"
    aws_region: str = "us-east-1"
    aws_account_id: str = "000000000000"
    default_max_jobs: int = Field(10_000, ge=1)

    @field_validator("allowed_target_arns", mode="before")
    @classmethod
    def _split_patterns(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(pattern.strip() for pattern in value.split(",") if pattern.strip())
        return value

    def aws_target_policy(self) -> AwsTargetPolicy | None:
        if self.allowed_target_arns is None:
            return None
        return AwsTargetPolicy(
            patterns=self.allowed_target_arns,
            region=self.aws_region,
            account=self.aws_account_id,
            partition=self.aws_partition,
        )

    @property
    def planner_horizon(self) -> timedelta:
        return timedelta(seconds=self.planner_horizon_seconds)

    @property
    def send_lead(self) -> timedelta:
        return timedelta(milliseconds=self.send_lead_ms)

    @property
    def burst_call_hold(self) -> timedelta:
        return timedelta(milliseconds=self.burst_call_hold_ms)

    @property
    def pool_wait_alarm(self) -> timedelta:
        return timedelta(seconds=self.pool_wait_alarm_seconds)

    @property
    def planner_lookahead(self) -> timedelta:
        return timedelta(seconds=min(self.planner_lookahead_seconds, self.planner_horizon_seconds))

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Each field's environment variable; the table and queue ones come from ``tickwork.tables``."""
        names = {
            "jobs_table": tables.JOBS.env_var,
            "runs_table": tables.RUNS.env_var,
            "tenants_table": tables.TENANTS.env_var,
            "idempotency_table": tables.IDEMPOTENCY.env_var,
            "run_index_table": tables.RUN_INDEX.env_var,
            "run_queue_url": tables.RUN_QUEUE.env_var,
            "run_queue_high_url": tables.RUN_QUEUE_HIGH.env_var,
            "run_queue_low_url": tables.RUN_QUEUE_LOW.env_var,
            "dead_run_queue_url": tables.DEAD_RUN_QUEUE.env_var,
        }
        for field in cls.model_fields:
            names.setdefault(field, f"TICKWORK_{field.upper()}")
        return names

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read ``TICKWORK_*`` variables."""
        values = {field: environ[env] for field, env in cls.env_names().items() if env in environ}
        return cls.model_validate(values)

    def to_env(self) -> dict[str, str]:
        """The variables that :meth:`from_env` reads back into these settings; the CDK stack sets them."""
        values = self.model_dump(mode="json", exclude_none=True)
        return {env: _env_value(values[field]) for field, env in self.env_names().items() if field in values}


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)
