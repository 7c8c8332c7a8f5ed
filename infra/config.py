"""Stage settings for the CDK app: typed, validated, and overridable by CDK context.

`cdk.json` holds the defaults under the ``tickwork`` context key; any field can be overridden on the command
line with ``-c tickwork:<field>=<value>`` (lists as JSON or comma-separated).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from tickwork import tables
from tickwork.targets.registry import kinds

CONTEXT_KEY = "tickwork"
CONTEXT_PREFIX = "tickwork:"


def target_actions() -> dict[str, tuple[str, ...]]:
    """The services whose ARNs name targets (of the target kinds registered), and the IAM actions the worker
    needs to deliver to each."""
    return {kind.arn_service: kind.actions for kind in kinds() if kind.arn_service is not None}


def target_arn_pattern() -> re.Pattern[str]:
    """An ARN pattern of a target: a registered kind's service, and wildcards or values for the rest."""
    services = "|".join(re.escape(service) for service in target_actions())
    return re.compile(
        rf"^arn:(?P<partition>aws[a-z-]*|\*):(?P<service>{services}):"
        r"(?P<region>[a-z0-9-]+|\*):(?P<account>[0-9]{12}|\*):(?P<resource>.+)$"
    )


# CloudWatch Logs accepts only these retention periods (days), named as CDK's RetentionDays names them.
LOG_RETENTION_DAYS: Mapping[int, str] = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}

# CloudFormation takes at most 500 resources in one stack. Each planner group adds 2 (its EventBridge rule and
# Lambda permission) and each worker function past the first 9 (function, role, policy, log group, an event
# source mapping per priority's queue, errors and throttles alarms); the stack's other resources number under
# 134 (the indexer and the run index table took 9 of them, the pool routes' API resources and methods 16, the
# pools' alarms 2, the high and low priority queues with their policies and the first function's two more
# mappings 6).
STACK_RESOURCES_MAX = 500
OTHER_RESOURCES = 134
RESOURCES_PER_PLANNER_GROUP = 2
RESOURCES_PER_WORKER_FUNCTION = 9
# Planner groups a stack can have (see StageConfig.planner_groups), with one worker function.
PLANNER_GROUPS_MAX = (STACK_RESOURCES_MAX - OTHER_RESOURCES) // RESOURCES_PER_PLANNER_GROUP
# Worker functions a stack can have (see StageConfig.worker_functions).
WORKER_FUNCTIONS_MAX = 10
# Time the worker keeps after a target call to record the attempt and answer SQS.
WORKER_RECORDING_SECONDS = 10

StageName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,19}$")]


def planner_groups_max(worker_functions: int = 1) -> int:
    """The most planner groups a stack with this many worker functions holds within CloudFormation's limit."""
    room = STACK_RESOURCES_MAX - OTHER_RESOURCES - RESOURCES_PER_WORKER_FUNCTION * (worker_functions - 1)
    return min(PLANNER_GROUPS_MAX, room // RESOURCES_PER_PLANNER_GROUP)


class ConfigError(ValueError):
    """The CDK context does not describe a valid stage."""


class StageConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: StageName = "dev"

    # planner
    due_shards: int = Field(tables.DEFAULT_DUE_SHARDS, ge=1, le=1024)
    # At most 183 (fewer with several worker functions: see planner_groups_max), within CloudFormation's 500
    # resources in one stack.
    planner_groups: int = Field(
        1, ge=1, le=PLANNER_GROUPS_MAX, description="EventBridge rules, each owning disjoint shards"
    )
    planner_horizon_seconds: int = Field(
        900, ge=120, le=900, description="how far ahead a job's fires are sent, in one cursor write"
    )
    planner_lookahead_seconds: int = Field(
        120, ge=60, le=900, description="a job is planned once its cursor is this close (at least a tick)"
    )
    planner_max_jobs_per_tick: int = Field(5000, ge=1)
    planner_memory_mb: int = Field(1024, ge=128, le=10240)
    planner_timeout_seconds: int = Field(60, ge=10, le=300)

    # worker
    worker_batch_size: int = Field(10, ge=1, le=100)
    worker_max_concurrency: int = Field(50, ge=2, le=1000, description="MaximumConcurrency of each mapping")
    # At most 10: every execution holds a batch in flight, and ten mappings at 1,000 executions with batches
    # of 10 hold 100,000 messages, under the about 120,000 in flight a standard queue allows.
    worker_functions: int = Field(
        1,
        ge=1,
        le=WORKER_FUNCTIONS_MAX,
        description="identical worker functions, each with its own event source mapping on the run queue",
    )
    worker_memory_mb: int = Field(512, ge=128, le=10240)
    trace_run_path: bool = Field(
        False,
        description="active X-Ray tracing of the planner and the worker (the API is always traced); off, they"
        " trace only what arrives sampled: a traced run costs more than the run itself (docs/cost.md)",
    )
    run_path_platform_logs: bool = Field(
        False,
        description="Lambda's own START and REPORT lines for the planner and the worker (system log level"
        " INFO); off, WARN: they are half a run's log bytes. Duration and errors are CloudWatch metrics"
        " either way; turn on to see each invocation's memory used",
    )
    worker_timeout_seconds: int = Field(120, ge=30, le=900)
    max_receive_count: int = Field(tables.RUN_QUEUE.max_receive_count, ge=1, le=1000)
    lease_margin_seconds: int = Field(30, ge=1, le=900)

    # api
    api_memory_mb: int = Field(512, ge=128, le=10240)
    api_timeout_seconds: int = Field(29, ge=3, le=29)
    api_rate_limit: float = Field(200, gt=0, description="steady requests per second for the whole API")
    api_burst_limit: int = Field(400, ge=1)
    authorizer_cache_seconds: int = Field(300, ge=0, le=3600)

    # data and targets
    run_retention_days: int = Field(90, ge=1, le=3650)
    log_retention_days: int = 30
    allowed_target_arns: tuple[str, ...] = ()
    allow_private_targets: bool = False

    # alarms
    alarm_email: Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] | None = None
    queue_age_alarm_seconds: int = Field(600, ge=60)
    trigger_lag_alarm_ms: int = Field(5000, ge=1)
    pool_lapsed_leases_alarm: int = Field(
        1,
        ge=1,
        description="pool leases lapsed (heartbeat timeouts and attempt caps) in 5 minutes that alarm",
    )
    # At most 12 hours: the alarm looks back over the threshold and two minutes, in minutes, and CloudWatch
    # evaluates at most a day.
    pool_wait_alarm_seconds: int = Field(
        900,
        ge=60,
        le=43_200,
        description="a pool run waiting this long for a claim is counted (PoolRunsWaitingLong), and alarms",
    )

    @field_validator("allowed_target_arns", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            if value.startswith("["):
                return json.loads(value)
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("allowed_target_arns")
    @classmethod
    def _target_arns(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            if not target_arn_pattern().match(pattern):
                services = ", ".join(target_actions())
                raise ValueError(f"{pattern!r} is not an ARN pattern of a target (a service of {services})")
        return patterns

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs retention must be one of {sorted(LOG_RETENTION_DAYS)} days")
        return days

    @field_validator("planner_lookahead_seconds")
    @classmethod
    def _lookahead_within_horizon(cls, seconds: int, info: ValidationInfo) -> int:
        horizon = info.data.get("planner_horizon_seconds")
        if horizon is not None and seconds > horizon:
            raise ValueError(f"must not exceed planner_horizon_seconds ({horizon})")
        return seconds

    @field_validator("worker_functions")
    @classmethod
    def _within_the_stacks_resources(cls, functions: int, info: ValidationInfo) -> int:
        groups = info.data.get("planner_groups")
        most = planner_groups_max(functions)
        if groups is not None and groups > most:
            raise ValueError(
                f"{functions} worker functions leave room for at most {most} planner_groups, not {groups}: "
                f"CloudFormation takes at most {STACK_RESOURCES_MAX} resources in one stack"
            )
        return functions

    @property
    def max_target_timeout_seconds(self) -> int:
        """A webhook call must end, and its outcome be recorded, before the worker's own timeout."""
        return max(1, self.worker_timeout_seconds - WORKER_RECORDING_SECONDS)

    @property
    def target_grants(self) -> dict[str, list[str]]:
        """The IAM actions for each service the patterns name, with the patterns for it."""
        grants: dict[str, list[str]] = {}
        actions, pattern_of = target_actions(), target_arn_pattern()
        for pattern in self.allowed_target_arns:
            match = pattern_of.match(pattern)
            assert match is not None  # checked by the validator
            for action in actions[match["service"]]:
                grants.setdefault(action, []).append(pattern)
        return grants

    def shard_groups(self) -> list[list[int]]:
        """Disjoint shard sets, one per planner rule, covering every shard."""
        groups = min(self.planner_groups, self.due_shards)
        return [list(range(group, self.due_shards, groups)) for group in range(groups)]

    @classmethod
    def from_context(cls, try_get_context: Any) -> StageConfig:
        """Build from ``node.try_get_context``: the ``tickwork`` object, then ``tickwork:<field>`` keys."""
        values: dict[str, Any] = dict(try_get_context(CONTEXT_KEY) or {})
        for field in cls.model_fields:
            override = try_get_context(f"{CONTEXT_PREFIX}{field}")
            if override is not None:
                values[field] = override
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            problems = "; ".join(
                f"{CONTEXT_PREFIX}{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}"
                for issue in error.errors()
            )
            raise ConfigError(f"invalid tickwork settings: {problems}") from None
