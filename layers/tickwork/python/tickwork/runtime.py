"""The one place that builds boto3 clients and wires adapters into the engine, lazily, once per process.

Handlers call :func:`runtime` on their first invocation, never at import time; tests clear the cache between
moto sessions with ``runtime.cache_clear()``. Wiring only: the work is in ``tickwork.app``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from tickwork import tables
from tickwork.adapters.jobs import DynamoDueShards, DynamoJobStore
from tickwork.adapters.lanes import DynamoLanes, DynamoTenantSlots
from tickwork.adapters.queue import SqsDeadRunQueue, SqsRunQueue
from tickwork.adapters.run_index import DynamoRunIndex
from tickwork.adapters.runs import DynamoRunStore
from tickwork.adapters.task_ends import DynamoTaskEnds
from tickwork.adapters.tenants import DynamoApiRateLimiter, DynamoTenantStore
from tickwork.adapters.throttles import DynamoTenantThrottles
from tickwork.app.at_fire import LINE_EARLY, CallsFirst, LanesAtFire
from tickwork.app.flow import FlowReader
from tickwork.app.indexer import Indexer
from tickwork.app.planner import Planner, PlannerTick
from tickwork.app.pools import PoolService
from tickwork.app.ports import DeadLetters, Dispatch, Metrics, NoTenantGauges, RunQueue, TenantGauges
from tickwork.app.service import JobService
from tickwork.app.sweeper import Sweeper
from tickwork.app.worker import Worker
from tickwork.config import Settings
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import Job, Run, RunMessage
from tickwork.domain.priority import PRIORITIES, Priority
from tickwork.domain.tenants import Principal, Tenant
from tickwork.domain.workflow import child_run_id, parse_child_run_id, task_graph
from tickwork.observability import PowertoolsMetricSink, PowertoolsTenantGauges
from tickwork.targets import Delivery, LazyClients, Resolver, TargetResult, invoke

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


def _utcnow() -> datetime:
    return datetime.now(UTC)


# Connections enough for the planner's parallel sends and the worker's batch threads (tickwork.batches).
_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=32,
)
# A worker reads a tenant (its signing secret, its limits) at most this often: the contract lets a changed
# limit, a disabled tenant or a new secret take up to 10 s to reach the workers.
TENANT_CACHE_SECONDS = 10


class CachedTenants:
    """The tenant store, remembered for a while per process: a change to a tenant takes effect within
    ``TENANT_CACHE_SECONDS`` on the workers. A batch's threads that find a tenant missing at once wait for
    one read of it rather than each reading it."""

    def __init__(
        self,
        store: DynamoTenantStore,
        *,
        seconds: float = TENANT_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.seconds = seconds
        self.clock = clock
        self._cache: dict[str, tuple[float, Tenant]] = {}
        self._lock = threading.Lock()
        self._reading: dict[str, threading.Lock] = {}

    def get(self, tenant_id: str) -> Tenant:
        fresh = self._fresh(tenant_id)
        if fresh is not None:
            return fresh
        with self._lock:
            reading = self._reading.setdefault(tenant_id, threading.Lock())
        with reading:
            fresh = self._fresh(tenant_id)  # another thread may have read it meanwhile
            if fresh is not None:
                return fresh
            now = self.clock()
            tenant = self.store.get(tenant_id)
            with self._lock:
                self._cache[tenant_id] = (now, tenant)
            return tenant

    def _fresh(self, tenant_id: str) -> Tenant | None:
        now = self.clock()
        with self._lock:
            cached = self._cache.get(tenant_id)
        if cached is not None and now - cached[0] < self.seconds:
            return cached[1]
        return None

    def by_token(self, token: str) -> Principal | None:
        return self.store.by_token(token)


class NoRunQueue:
    """No run queue configured (an API-only deployment, some tests): fires are planned and not sent."""

    def send(self, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        return []

    def send_later(self, message: RunMessage, delay_seconds: int) -> None:
        return None


class NoDeadRunQueue:
    """No dead-run queue configured (an API-only deployment, some tests): a run that goes DEAD keeps its dead
    letter owed, and this says why, rather than the worker or the pool routes refusing to start."""

    def send(self, run: Run, *, reason: str, error: dict[str, Any] | None) -> None:
        raise RuntimeError(
            f"{tables.DEAD_RUN_QUEUE.env_var} is not set: the dead letter of {run.run_id} is owed"
        )


@dataclass
class Runtime:
    settings: Settings
    dynamodb: DynamoDBClient
    sqs: SQSClient
    queue_override: RunQueue | None = None
    metrics: Metrics = field(default_factory=PowertoolsMetricSink)
    gauges: TenantGauges = field(default_factory=PowertoolsTenantGauges)
    worker_id: str = field(default_factory=lambda: f"worker-{uuid.uuid4().hex[:12]}")
    resolver: Resolver = socket.getaddrinfo
    """How webhook hosts are resolved before their addresses are checked; tests name made-up hosts."""

    # --- stores -------------------------------------------------------------------------------------------
    @cached_property
    def jobs(self) -> DynamoJobStore:
        return DynamoJobStore(
            self.dynamodb,
            table=self.settings.jobs_table,
            tenants_table=self.settings.tenants_table,
            due_shards=self.settings.due_shards,
        )

    @cached_property
    def due_shards(self) -> DynamoDueShards:
        return DynamoDueShards(
            self.dynamodb,
            table=self.settings.jobs_table,
            tenants_table=self.settings.tenants_table,
            due_shards=self.settings.due_shards,
        )

    @cached_property
    def lanes(self) -> DynamoLanes:
        return DynamoLanes(self.dynamodb, table=self.settings.jobs_table)

    @cached_property
    def slots(self) -> DynamoTenantSlots:
        return DynamoTenantSlots(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def throttles(self) -> DynamoTenantThrottles:
        return DynamoTenantThrottles(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def runs(self) -> DynamoRunStore:
        return DynamoRunStore(
            self.dynamodb,
            table=self.settings.runs_table,
            retention=timedelta(days=self.settings.run_retention_days),
            attention_shards=self.settings.attention_shards,
        )

    @cached_property
    def index(self) -> DynamoRunIndex:
        return DynamoRunIndex(
            self.dynamodb,
            table=self.settings.run_index_table,
            retention=timedelta(days=self.settings.run_retention_days),
        )

    @cached_property
    def tenants(self) -> DynamoTenantStore:
        return DynamoTenantStore(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def cached_tenants(self) -> CachedTenants:
        return CachedTenants(self.tenants)

    @cached_property
    def api_rate_limiter(self) -> DynamoApiRateLimiter:
        return DynamoApiRateLimiter(self.dynamodb, table=self.settings.tenants_table)

    # --- queues -------------------------------------------------------------------------------------------
    @cached_property
    def queue(self) -> RunQueue:
        """The run queue when one is configured; without one, fires are planned but go nowhere."""
        if self.queue_override is not None:
            return self.queue_override
        if not self.settings.run_queue_url:
            return NoRunQueue()
        return SqsRunQueue(
            self.sqs,
            queue_url=self.settings.run_queue_url,
            queue_urls={"high": self.settings.run_queue_high_url, "low": self.settings.run_queue_low_url},
        )

    @property
    def queue_url(self) -> str:
        if not self.settings.run_queue_url:
            raise RuntimeError(f"{tables.RUN_QUEUE.env_var} is not set")
        return self.settings.run_queue_url

    @property
    def queue_urls(self) -> dict[Priority, str]:
        """The run queue of each priority that has one, highest first (``normal``'s is the run queue; a
        priority without one sends to it)."""
        configured = {
            "high": self.settings.run_queue_high_url,
            "normal": self.queue_url,
            "low": self.settings.run_queue_low_url,
        }
        return {priority: url for priority in PRIORITIES if (url := configured[priority])}

    @cached_property
    def dead_runs(self) -> DeadLetters:
        if not self.settings.dead_run_queue_url:
            return NoDeadRunQueue()
        return SqsDeadRunQueue(self.sqs, queue_url=self.settings.dead_run_queue_url)

    @cached_property
    def target_clients(self) -> LazyClients:
        return LazyClients()

    # --- the engine ---------------------------------------------------------------------------------------
    @cached_property
    def planner(self) -> Planner:
        return Planner(
            jobs=self.jobs,
            runs=self.runs,
            lanes=self.lanes,
            queue=self.queue,
            metrics=self.metrics,
            horizon=self.settings.planner_horizon,
            lookahead=self.settings.planner_lookahead,
            lead=self.settings.send_lead,
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(
            runs=self.runs,
            queue=self.queue,
            metrics=self.metrics,
            shards=self.settings.attention_shards,
            # Built on the first lapsed pool lease only: most sweeps find none.
            lapse=lambda run: self.pools.lapse(run),
            pool_wait_alarm=self.settings.pool_wait_alarm,
        )

    @cached_property
    def pools(self) -> PoolService:
        """The pool routes' service: a worker's lifecycle, attempt recording and after-end steps, so a pool
        run's attempt ends exactly as a called target's does."""
        worker = self.worker()
        return PoolService(
            jobs=self.jobs,
            runs=self.runs,
            lifecycle=worker.lifecycle,
            attempts=worker.attempts,
            after_end=worker.after_end,
            metrics=self.metrics,
            clock=_utcnow,
            sleep=time.sleep,
        )

    @cached_property
    def planner_tick(self) -> PlannerTick:
        return PlannerTick(
            jobs=self.jobs,
            planner=self.planner,
            sweeper=self.sweeper,
            metrics=self.metrics,
            due_shards=self.due_shards,
            max_jobs_per_tick=self.settings.planner_max_jobs_per_tick,
        )

    @cached_property
    def service(self) -> JobService:
        return JobService(
            jobs=self.jobs,
            lanes=self.lanes,
            runs=self.runs,
            index=self.index,
            tenants=self.tenants,
            queue=self.queue,
            planner=self.planner,
            flow=self.flow,
            allow_private_targets=self.settings.allow_private_targets,
            aws_targets=self.settings.aws_target_policy(),
            max_target_timeout_seconds=self.settings.max_target_timeout_seconds,
            task_ends=self.task_ends,
        )

    @cached_property
    def flow(self) -> FlowReader:
        return FlowReader(jobs=self.jobs, slots=self.slots, throttles=self.throttles, tenants=self.tenants)

    @cached_property
    def indexer(self) -> Indexer:
        return Indexer(index=self.index, metrics=self.metrics)

    def execute(self, job: Job, run: Run, tenant: Tenant) -> TargetResult:
        """Call the run's target once for this attempt (the run item already made the attempt exclusive)."""
        delivery = Delivery(
            job_id=job.job_id,
            run_id=run.run_id,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            fencing_token=run.fencing_token,
            payload=job.payload,
            tenant_secret=tenant.signing_secret,
            lease_token=run.lease_token,
            parents=self.parents_of(job, run),
        )
        return invoke(
            job.target,
            delivery,
            clients=self.target_clients,
            allow_private=self.settings.allow_private_targets,
            now_epoch=int(time.time()),
            resolver=self.resolver,
        )

    def parents_of(self, job: Job, run: Run) -> dict[str, Any] | None:
        """A workflow task's parents' outputs, by task id, for its envelope (None for a run that is not a
        task): one read of the parents' runs, in its workflow run's tasks partition."""
        child = parse_child_run_id(run.run_id)
        workflow = job.workflow
        if child is None or workflow is None:
            return None
        parents = task_graph(workflow.tasks).parents.get(child.task_id, ())
        if not parents:
            return {}
        ids = [child_run_id(child.parent_run_id, parent) for parent in parents]
        # Read eventually consistent (half the price): a parent found ended is as it ended, its output with
        # it; one found otherwise (a one_success child's parent still running, or a read older than its end)
        # is read again, consistently.
        found = self.runs.find_many(run.tenant_id, run.job_id, ids, consistent=False)
        unsure = [
            task_run for task_run in ids if task_run not in found or found[task_run].status not in TERMINAL
        ]
        if unsure:
            found.update(self.runs.find_many(run.tenant_id, run.job_id, unsure))
        outputs = {parent: found.get(task_run) for parent, task_run in zip(parents, ids, strict=True)}
        return {parent: task.output if task is not None else None for parent, task in outputs.items()}

    def worker(
        self,
        *,
        clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], None] = time.sleep,
        execute: Callable[[Job, Run, Tenant], TargetResult] | None = None,
        worker_id: str | None = None,
    ) -> Worker:
        return Worker(
            jobs=self.jobs,
            lanes=self.lanes,
            slots=self.slots,
            throttles=self.throttles,
            runs=self.runs,
            tenants=self.cached_tenants,
            queue=self.queue,
            dead_letters=self.dead_runs,
            execute=execute or self.execute,
            metrics=self.metrics,
            gauges=self.gauges,
            clock=clock,
            sleep=sleep,
            worker_id=worker_id or self.worker_id,
            lead=self.settings.send_lead,
            # Shared by the process's workers on its clock; a worker on a clock of its own has its own.
            calls_first=self.calls_first if clock is _utcnow else CallsFirst(clock),
            lanes_at_fire=self.lanes_at_fire if clock is _utcnow else LanesAtFire(clock),
            lease_margin=timedelta(seconds=self.settings.lease_margin_seconds),
            pool_wait_alarm=self.settings.pool_wait_alarm,
            task_ends=self.task_ends,
        )

    @cached_property
    def lanes_at_fire(self) -> LanesAtFire:
        """One for the process: the claims taken ahead of a fire are checked at it with one read."""
        return LanesAtFire(_utcnow)

    @cached_property
    def calls_first(self) -> CallsFirst:
        """One for the process: every worker's runs read ahead are called before their records."""
        hold = self.settings.burst_call_hold
        # A process that holds turns through calls (the local stack's hundreds of invocations) also lines its
        # runs up a little before their fire, rather than wake them all at it.
        return CallsFirst(_utcnow, hold=hold, early=LINE_EARLY if hold else timedelta(0))

    @cached_property
    def task_ends(self) -> DynamoTaskEnds:
        return DynamoTaskEnds(
            self.dynamodb,
            table=self.settings.runs_table,
            retention_seconds=self.settings.run_retention_days * 86_400,
        )

    def idempotency_store(self) -> DynamoDBPersistenceLayer:
        """A new store for each idempotent call. Powertools configures a store on every call (the key prefix)
        and keeps the first call's key expression for good, so one store shared by the API's routes, or by
        concurrent requests, would hash one call's key with another's settings."""
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        return DynamoDBPersistenceLayer(
            table_name=self.settings.idempotency_table, boto3_client=self.dynamodb
        )


def build_runtime(
    settings: Settings,
    *,
    dynamodb: Any = None,
    sqs: Any = None,
    queue: RunQueue | None = None,
    metrics: Metrics | None = None,
    gauges: TenantGauges | None = None,
) -> Runtime:
    """Wire the adapters; clients are built here unless given (tests pass moto's). Given metrics (tests, the
    local stack) come without per-tenant gauges unless those are given too."""
    built = Runtime(
        settings=settings,
        dynamodb=dynamodb or boto3.client("dynamodb", config=_CLIENT_CONFIG),
        sqs=sqs or boto3.client("sqs", config=_CLIENT_CONFIG),
        queue_override=queue,
    )
    if metrics is not None:
        built.metrics = metrics
        built.gauges = gauges or NoTenantGauges()
    elif gauges is not None:
        built.gauges = gauges
    return built


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The process-wide runtime, from the environment, built on first use."""
    return build_runtime(Settings.from_env(os.environ))
