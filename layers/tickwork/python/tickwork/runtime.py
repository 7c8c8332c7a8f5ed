"""The one place that builds boto3 clients and wires adapters into services, lazily, once per process.

Handlers call :func:`runtime` on their first invocation, never at import time; tests clear the cache between
moto sessions with ``runtime.cache_clear()``.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property, lru_cache, partial
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from botocore.config import Config

from tickwork import tables
from tickwork.adapters.jobs import DynamoJobStore
from tickwork.adapters.queue import SqsDeadRunQueue, SqsRunDispatcher
from tickwork.adapters.runs import DynamoRunLeases, DynamoRunStore
from tickwork.adapters.tenants import DynamoApiRateLimiter, DynamoTenantStore
from tickwork.config import Settings
from tickwork.domain.models import Job, Run
from tickwork.domain.ports import KeepPlanned, RunDispatcher
from tickwork.domain.retry import OutcomeClass
from tickwork.domain.tenants import Tenant
from tickwork.errors import DuplicateAttempt
from tickwork.execution import MetricSink, RunExecutor
from tickwork.observability import PowertoolsMetricSink
from tickwork.service import JobService
from tickwork.sweeping import Sweeper
from tickwork.targets import Delivery, LazyClients, Resolver, TargetResult, invoke
from tickwork.ticking import PlannerTick

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Budget:
    """Stands in for a Lambda context where there is none: the time an attempt may take."""

    milliseconds: int

    def get_remaining_time_in_millis(self) -> int:
        return self.milliseconds


_CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=2, read_timeout=5)


@dataclass
class Runtime:
    settings: Settings
    dynamodb: DynamoDBClient
    sqs: SQSClient
    dispatcher_override: RunDispatcher | None = None
    metrics: MetricSink = field(default_factory=PowertoolsMetricSink)
    worker_id: str = field(default_factory=lambda: f"worker-{uuid.uuid4().hex[:12]}")
    resolver: Resolver = socket.getaddrinfo
    """How webhook hosts are resolved before their addresses are checked; tests name made-up hosts."""

    @cached_property
    def leases(self) -> DynamoRunLeases:
        return DynamoRunLeases(self.runs, tenants_table=self.settings.tenants_table)

    @cached_property
    def queue(self) -> SqsRunDispatcher:
        if not self.settings.run_queue_url:
            raise RuntimeError(f"{tables.RUN_QUEUE.env_var} is not set")
        return SqsRunDispatcher(self.sqs, queue_url=self.settings.run_queue_url, leases=self.leases)

    @cached_property
    def dispatcher(self) -> RunDispatcher:
        """The run queue when one is configured; without one, runs stay PLANNED."""
        if self.dispatcher_override is not None:
            return self.dispatcher_override
        return self.queue if self.settings.run_queue_url else KeepPlanned()

    @cached_property
    def dead_runs(self) -> SqsDeadRunQueue:
        if not self.settings.dead_run_queue_url:
            raise RuntimeError(f"{tables.DEAD_RUN_QUEUE.env_var} is not set")
        return SqsDeadRunQueue(self.sqs, queue_url=self.settings.dead_run_queue_url)

    @cached_property
    def target_clients(self) -> LazyClients:
        return LazyClients()

    def execute(self, job: Job, run: Run, tenant: Tenant, *, budget: Any = None) -> TargetResult:
        """Call the run's target once for this attempt. Powertools idempotency, keyed on the run id and the
        attempt, makes a second processing of the same attempt return the first result. ``budget`` is the
        invocation's Lambda context (its remaining time); without one, the attempt's lease is the budget."""
        delivery = Delivery(
            job_id=job.job_id,
            run_id=run.run_id,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            fencing_token=run.fencing_token,
            payload=job.payload,
            tenant_secret=tenant.signing_secret,
        )

        def call(attempt: dict[str, Any]) -> dict[str, Any]:
            result = invoke(
                job.target,
                delivery,
                clients=self.target_clients,
                allow_private=self.settings.allow_private_targets,
                now_epoch=int(time.time()),
                resolver=self.resolver,
            )
            return {**asdict(result), "outcome": result.outcome.value}

        config = IdempotencyConfig(
            event_key_jmespath="[tenant_id, run_id, attempt]",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=self.settings.idempotency_ttl_seconds,
        )
        # The in-progress record must not outlive the attempt's lease: without a Lambda context, say so.
        lease_ms = (getattr(job.target, "timeout_seconds", 30) + self.settings.lease_margin_seconds) * 1000
        config.register_lambda_context(budget or _Budget(lease_ms))  # type: ignore[arg-type]
        wrapped = idempotent_function(
            data_keyword_argument="attempt",
            persistence_store=self.idempotency_store(),
            config=config,
            key_prefix="tickwork.execute_attempt",
        )(call)
        try:
            raw = wrapped(attempt={"tenant_id": run.tenant_id, "run_id": run.run_id, "attempt": run.attempt})
        except IdempotencyAlreadyInProgressError as error:
            raise DuplicateAttempt(
                f"attempt {run.attempt} of {run.run_id} is in progress elsewhere"
            ) from error
        return TargetResult(**{**raw, "outcome": OutcomeClass(raw["outcome"])})

    def executor(
        self,
        *,
        clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], None] = time.sleep,
        budget: Any = None,
    ) -> RunExecutor:
        """An executor for one worker invocation (``budget``: its Lambda context) or one local poller."""
        return RunExecutor(
            runs=self.runs,
            leases=self.leases,
            jobs=self.jobs,
            tenants=self.tenants,
            queue=self.queue,
            dead_runs=self.dead_runs,
            execute=partial(self.execute, budget=budget),
            metrics=self.metrics,
            clock=clock,
            sleep=sleep,
            worker_id=self.worker_id,
            lease_margin=timedelta(seconds=self.settings.lease_margin_seconds),
            max_concurrency=self.settings.worker_max_concurrency,
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(
            runs=self.runs,
            leases=self.leases,
            jobs=self.jobs,
            queue=self.queue,
            metrics=self.metrics,
            shards=self.settings.attention_shards,
        )

    @cached_property
    def planner_tick(self) -> PlannerTick:
        return PlannerTick(
            jobs=self.jobs,
            planner=self.service.planner,
            sweeper=self.sweeper,
            metrics=self.metrics,
            max_jobs_per_tick=self.settings.planner_max_jobs_per_tick,
        )

    @cached_property
    def jobs(self) -> DynamoJobStore:
        return DynamoJobStore(
            self.dynamodb,
            table=self.settings.jobs_table,
            tenants_table=self.settings.tenants_table,
            due_shards=self.settings.due_shards,
        )

    @cached_property
    def runs(self) -> DynamoRunStore:
        return DynamoRunStore(
            self.dynamodb,
            table=self.settings.runs_table,
            retention=timedelta(days=self.settings.run_retention_days),
            attention_shards=self.settings.attention_shards,
        )

    @cached_property
    def tenants(self) -> DynamoTenantStore:
        return DynamoTenantStore(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def api_rate_limiter(self) -> DynamoApiRateLimiter:
        return DynamoApiRateLimiter(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def service(self) -> JobService:
        return JobService(
            jobs=self.jobs,
            runs=self.runs,
            tenants=self.tenants,
            dispatcher=self.dispatcher,
            horizon=self.settings.planner_horizon,
            allow_private_targets=self.settings.allow_private_targets,
            aws_targets=self.settings.aws_target_policy(),
            max_target_timeout_seconds=self.settings.max_target_timeout_seconds,
        )

    def idempotency_store(self) -> DynamoDBPersistenceLayer:
        """A new store for each idempotent call. Powertools configures a store on every call (the key prefix)
        and keeps the first call's key expression for good, so one store shared by the API's routes and the
        worker, or by concurrent requests, would hash one call's key with another's settings."""
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        return DynamoDBPersistenceLayer(
            table_name=self.settings.idempotency_table, boto3_client=self.dynamodb
        )


def build_runtime(
    settings: Settings,
    *,
    dynamodb: Any = None,
    sqs: Any = None,
    dispatcher: RunDispatcher | None = None,
    metrics: MetricSink | None = None,
) -> Runtime:
    """Wire the adapters; clients are built here unless given (tests pass moto's)."""
    built = Runtime(
        settings=settings,
        dynamodb=dynamodb or boto3.client("dynamodb", config=_CLIENT_CONFIG),
        sqs=sqs or boto3.client("sqs", config=_CLIENT_CONFIG),
        dispatcher_override=dispatcher,
    )
    if metrics is not None:
        built.metrics = metrics
    return built


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The process-wide runtime, from the environment, built on first use."""
    return build_runtime(Settings.from_env(os.environ))
