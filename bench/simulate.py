"""Capacity model and burst simulation from published limits and the measured per-run CPU and requests.

    python -m bench.simulate                     # print the tables
    python -m bench.simulate --write-capacity    # rewrite the generated blocks of docs/capacity.md

Everything is computed from :class:`Params`: the figures measured by ``bench.worker_cpu`` and
``bench.planner_scale`` (CPU, requests and capacity units per run and per planned job), the limits and
prices of docs' AWS facts, and a few latencies that cannot be measured here (marked as assumptions), and
from a :class:`Deployment`: the stage settings of ``infra.config.StageConfig`` that size the stack (planner
groups, due shards, the worker functions and their event source mappings). Change a parameter and rerun
with ``--write-capacity``; ``tests/bench`` checks that docs/capacity.md shows what this module computes.

The burst simulation is discrete-event: the planner makes each run visible (a delayed SQS message) at the
rate its groups can plan; the event source mappings' concurrency grows as the scaling mode allows; each
concurrent worker takes batches of up to ``batch_size`` messages and runs them one after the other (the
worker runs different jobs' records side by side: the model is on the safe side); a
tenant with an in-flight limit starts at most as many runs per second as its slots allow. Lag = when the
target is called - the scheduled second.
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from tickwork.app.planner import SEND_BATCH, SEND_CHUNK, SEND_DRIFT

from bench._common import ROOT, percentile, read_blocks, table, write_blocks
from infra.config import WORKER_FUNCTIONS_MAX, planner_groups_max

SECONDS_PER_MONTH = 30 * 86_400
CAPACITY_DOC = Path(ROOT) / "docs" / "capacity.md"
TARGET_RATE = 10_000.0
REGISTERED_JOBS = 10_000_000


@dataclass(frozen=True)
class Params:
    # --- measured here (bench.worker_cpu, bench.planner_scale; docs/benchmarks.md) ---
    worker_cpu_ms: float = 1.81
    """tickwork's own CPU per run on the worker path, AWS calls excluded (a recurring job at steady state;
    1.83 ms with a tenant in-flight limit)."""
    client_cpu_ms_per_request: float = 0.06
    """botocore's client-side CPU per call."""
    worker_dynamodb_requests: float = 4.0
    """Query 2 (the job with its lane; the run items it needs), UpdateItem 1 (the lane: the lease),
    PutItem 1 (the run: the outcome)."""
    worker_dynamodb_before_call: float = 3.0
    """Of which before the target is called: the two queries and the lease."""
    worker_wru: float = 2.0
    worker_index_wru: float = 0.0
    """Nothing the worker writes for a recurring run is in an index."""
    worker_rru: float = 2.0
    slot_dynamodb_requests: float = 3.0
    """A tenant with an in-flight limit: GetItem of a slot item (consistent), UpdateItem to claim a slot
    (conditional on the item's version as read), UpdateItem to give it back after the outcome."""
    slots_per_item: int = 10
    """tickwork.domain.lanes.SLOTS_PER_SHARD: a limit of L is spread over ceil(L / 10) slot items."""
    slot_writes_per_run: float = 2.0
    slot_wru_per_write: float = 2.0
    """A slot item holding 8 to 10 holders is over 1 KB (1,285 bytes with 10): 2 WRU a write when it is
    nearly full, as it is when the limit binds."""
    tenant_count_wru_per_one_time_job: float = 4.0
    """A one-time job moves its tenant's job count twice, each time in a transaction (2 WRU): up when it is
    created, down when its run ends and the job completes. The only tenant item a run path writes."""
    planner_cpu_ms_per_job: float = 0.37
    planner_dynamodb_requests_per_job: float = 1.01
    """UpdateItem 1 (the job's cursor, conditional on it as read) and BatchGetItem 0.01 (due jobs, a hundred
    to a request). No run item is written when a fire is planned."""
    planner_sqs_requests_per_job: float = 0.1
    """SendMessageBatch: ten fires a request, across jobs."""
    planner_wru_per_job: float = 1.0
    planner_index_wru_per_job: float = 2.0
    """The cursor moves the job's entry in the due index: its sort key changes, a delete and a put."""
    planner_rru_per_job: float = 1.0
    """BatchGetItem, strongly consistent: 1 RRU per job item up to 4 KB."""
    # --- the workload ---
    planned_jobs_per_run: float = 1.0
    """Job visits by the planner per run. A visit sends every fire up to the horizon (900 s) once the
    cursor is within the lookahead (120 s), so a job firing every minute takes one visit per 13 runs; 10
    million jobs at 10,000 runs/s fire every 1,000 s on average, and in the worst case each of them once per
    visit: one visit per run."""
    # --- published limits and prices (docs: AWS facts) ---
    partition_wcu: float = 1000.0
    partition_rcu: float = 3000.0
    mapping_max_concurrency: int = 1000
    """ScalingConfig.MaximumConcurrency: 2 to 1,000 per mapping."""
    queue_max_in_flight: int = 120_000
    """A standard queue holds about 120,000 messages in flight (received, not yet deleted): every worker
    execution holds its batch."""
    standard_start_concurrency: float = 5.0
    standard_ramp_per_minute: float = 300.0
    provisioned_ramp_per_minute: float = 1000.0
    provisioned_max_concurrency: float = 20_000.0
    max_delay_seconds: int = 900
    price_wru: float = 0.625e-6
    price_rru: float = 0.125e-6
    price_sqs_request: float = 0.40e-6
    price_lambda_invocation: float = 0.20e-6
    price_gb_second: float = 0.0000133334
    # --- the stack (infra/planner.py, tickwork.config) ---
    tick_seconds: float = 60.0
    """Each planner group's EventBridge rule fires once a minute."""
    lookahead_seconds: float = 120.0
    """planner_lookahead_seconds: a job is planned once its cursor is this close."""
    # --- assumptions (not measurable here) ---
    dynamodb_latency_ms: float = 5.0
    sqs_latency_ms: float = 10.0
    target_latency_ms: float = 50.0
    batch_overhead_ms: float = 20.0
    """Event source mapping: poll to invoke, and the batch response."""
    early_wait_ms: float = 500.0
    """The planner sends a fire with DelaySeconds rounded down, so its message is visible up to a second
    before the fire and the worker sleeps out the remainder: half a second on average for fires on whole
    seconds, once per batch (a batch's messages share their fire second), holding the execution. A message
    sent a little after the instant its delay counts from (:meth:`Params.planner_sends`) waits less: the
    safe side."""
    utilisation: float = 0.5
    """Headroom: plan for partitions, concurrency and planner ticks at half their limit."""

    @staticmethod
    def vcpu(memory_mb: float) -> float:
        """1,769 MB is one vCPU; less memory, a slower CPU. This machine's core counts as one vCPU."""
        return min(1.0, memory_mb / 1769)

    def worker_cpu_total_ms(self, memory_mb: float) -> float:
        cpu = self.worker_cpu_ms + self.client_cpu_ms_per_request * self.worker_dynamodb_requests
        return cpu / self.vcpu(memory_mb)

    def service_ms(self, memory_mb: float) -> float:
        """One run inside a worker invocation: CPU, DynamoDB round trips, the target call."""
        return (
            self.worker_cpu_total_ms(memory_mb)
            + self.worker_dynamodb_requests * self.dynamodb_latency_ms
            + self.target_latency_ms
        )

    def before_call_ms(self, memory_mb: float) -> float:
        share = self.worker_dynamodb_before_call / self.worker_dynamodb_requests
        return (
            self.worker_cpu_total_ms(memory_mb) * share
            + self.worker_dynamodb_before_call * self.dynamodb_latency_ms
        )

    def execution_ms_per_run(self, memory_mb: float, batch_size: int) -> float:
        """Execution time a run holds: its service time, and its share of the batch's overhead and wait."""
        return self.service_ms(memory_mb) + (self.batch_overhead_ms + self.early_wait_ms) / batch_size

    def planner_job_ms(self, memory_mb: float) -> float:
        """One planned job, in a group that plans its jobs one after the other."""
        requests = self.planner_dynamodb_requests_per_job + self.planner_sqs_requests_per_job
        return (
            self.planner_cpu_ms_per_job / self.vcpu(memory_mb)
            + requests * self.client_cpu_ms_per_request
            + self.planner_dynamodb_requests_per_job * self.dynamodb_latency_ms
            + self.planner_sqs_requests_per_job * self.sqs_latency_ms
        )

    def planner_jobs_per_second(self, memory_mb: float) -> float:
        return 1000 / self.planner_job_ms(memory_mb)

    @property
    def send_request_ms(self) -> float:
        """One SendMessageBatch of ten messages."""
        return self.sqs_latency_ms + self.client_cpu_ms_per_request

    def planner_read_ms(self, jobs: int) -> float:
        """A tick's reads before it plans: the shard's query of the due index, then a BatchGetItem per
        hundred due jobs, one after the other."""
        return (1 + math.ceil(jobs / 100)) * self.dynamodb_latency_ms

    def planner_sends(self, jobs: int, memory_mb: float) -> list[tuple[float, float]]:
        """For each message of a tick planning ``jobs`` (a fire each), when it is sent and the instant its
        ``DelaySeconds`` counts from, in ms after the tick's start (``tickwork.app.planner``): the tick reads
        its due jobs, plans every one (CPU), then sends the messages in chunks of ``SEND_CHUNK``, ten to a
        request, one request after the other, and writes the cursors after the sends. Each chunk's delays
        count from the tick's start plus the time the pass (planning and sending, the reads not included)
        has run when the chunk goes out, once that is ``SEND_DRIFT`` or more; before, from the tick's start.
        So a message is sent at most the reads and one chunk's requests after its delay's instant, or, early
        in a short pass, the drift more."""
        read = self.planner_read_ms(jobs)
        plan = jobs * self.planner_cpu_ms_per_job / self.vcpu(memory_mb)
        chunk_ms = SEND_CHUNK // SEND_BATCH * self.send_request_ms
        drift_ms = SEND_DRIFT.total_seconds() * 1000
        sends = []
        for message in range(jobs):
            chunk, place = divmod(message, SEND_CHUNK)
            elapsed = plan + chunk * chunk_ms
            counted_from = elapsed if elapsed >= drift_ms else 0.0
            sends.append((read + elapsed + (place // SEND_BATCH + 1) * self.send_request_ms, counted_from))
        return sends

    def planner_send_offset_ms(self, jobs: int, memory_mb: float) -> float:
        """When a tick planning ``jobs`` sends its last message, after the tick's start: the reads, the
        planning, every request one after the other."""
        return (
            self.planner_read_ms(jobs)
            + jobs * self.planner_cpu_ms_per_job / self.vcpu(memory_mb)
            + math.ceil(jobs / SEND_BATCH) * self.send_request_ms
        )

    @property
    def wru_per_run(self) -> float:
        return self.worker_wru + self.planned_jobs_per_run * self.planner_wru_per_job

    @property
    def index_wru_per_run(self) -> float:
        return self.worker_index_wru + self.planned_jobs_per_run * self.planner_index_wru_per_job

    @property
    def rru_per_run(self) -> float:
        return self.worker_rru + self.planned_jobs_per_run * self.planner_rru_per_job

    def slot_hold_ms(self, memory_mb: float) -> float:
        """How long a run holds its slot: from the claim to the release, through the lane claim, the target
        call and the outcome (all of the run's CPU counted, the safe side)."""
        after_claim = self.worker_dynamodb_requests - self.worker_dynamodb_before_call + 2  # lease, release
        return (
            self.worker_cpu_total_ms(memory_mb)
            + after_claim * self.dynamodb_latency_ms
            + self.target_latency_ms
        )

    @property
    def slot_claims_per_item_per_second(self) -> float:
        """A claim reads the slot item and writes it conditional on the version it read, so two claims on
        one item succeed one after the other, at most once per read and write round trip."""
        return 1000 / (2 * self.dynamodb_latency_ms)

    def tenant_ceilings(self, max_in_flight: int, memory_mb: float) -> dict[str, float]:
        """One tenant's runs/s at 100% with an in-flight limit, by what binds it."""
        items = math.ceil(max_in_flight / self.slots_per_item)
        return {
            "slots held (limit / hold time)": max_in_flight * 1000 / self.slot_hold_ms(memory_mb),
            "claims per slot item (version round trips)": items * self.slot_claims_per_item_per_second,
            "slot items' partitions (2 writes of 2 WRU)": items
            * self.partition_wcu
            / (self.slot_writes_per_run * self.slot_wru_per_write),
        }

    def tenant_ceiling(self, max_in_flight: int | None, memory_mb: float) -> float:
        """One tenant's runs/s at 100%. Without an in-flight limit its runs write no item of the tenant's
        (each writes its job's lane and its run): no ceiling of its own. With a limit, the least of
        :meth:`tenant_ceilings`."""
        if max_in_flight is None:
            return math.inf
        return min(self.tenant_ceilings(max_in_flight, memory_mb).values())

    def limit_for(self, runs_per_second: float, memory_mb: float) -> int:
        """The smallest in-flight limit (a whole number of slot items) whose ceiling, at ``utilisation``,
        is ``runs_per_second``."""
        items = 1
        while (
            self.tenant_ceiling(items * self.slots_per_item, memory_mb) * self.utilisation < runs_per_second
        ):
            items += 1
        return items * self.slots_per_item

    @property
    def one_time_tenant_ceiling(self) -> float:
        """One tenant's one-time jobs/s, created and run: its job count item's partition."""
        return self.partition_wcu / self.tenant_count_wru_per_one_time_job


# --- a deployment and what it carries ---------------------------------------------------------------------
@dataclass(frozen=True)
class Deployment:
    """The settings that size the stack: ``infra.config.StageConfig`` fields. The stack builds
    ``worker_functions`` identical workers, each with its own event source mapping on the one run queue,
    each mapping at ``worker_max_concurrency`` (at most 1,000)."""

    planner_groups: int
    due_shards: int
    planner_max_jobs_per_tick: int = 5000
    planner_timeout_seconds: int = 60
    planner_memory_mb: int = 1024
    worker_max_concurrency: int = 1000
    worker_batch_size: int = 10
    worker_memory_mb: int = 512
    worker_functions: int = 1

    def stage_config(self) -> dict[str, int]:
        """The StageConfig fields (CDK context ``tickwork:<field>``) of this deployment."""
        return {
            "planner_groups": self.planner_groups,
            "due_shards": self.due_shards,
            "planner_max_jobs_per_tick": self.planner_max_jobs_per_tick,
            "planner_timeout_seconds": self.planner_timeout_seconds,
            "planner_memory_mb": self.planner_memory_mb,
            "worker_functions": self.worker_functions,
            "worker_max_concurrency": self.worker_max_concurrency,
            "worker_batch_size": self.worker_batch_size,
            "worker_memory_mb": self.worker_memory_mb,
        }

    @property
    def concurrency(self) -> int:
        return self.worker_functions * self.worker_max_concurrency

    @property
    def in_flight(self) -> int:
        """Messages the executions hold at most: a batch each."""
        return self.concurrency * self.worker_batch_size


@dataclass(frozen=True)
class Capacity:
    """Runs/s each part of a deployment carries at 100% of its limit."""

    worker: float
    planner: float
    planner_tick: float
    """The groups' per-tick caps: planner_max_jobs_per_tick, and a tick ending within its timeout."""
    due_index: float
    tenant: float
    """One tenant without an in-flight limit."""

    def bound(self) -> float:
        return min(self.worker, self.planner, self.planner_tick, self.due_index, self.tenant)

    def rows(self) -> list[tuple[str, float]]:
        return [
            ("worker executions", self.worker),
            ("planner groups (sequential cursor writes)", self.planner),
            ("planner per-tick caps (jobs per tick, timeout)", self.planner_tick),
            ("due-index partitions", self.due_index),
            ("one tenant without an in-flight limit", self.tenant),
        ]


def capacity(p: Params, d: Deployment) -> Capacity:
    per_run = p.execution_ms_per_run(d.worker_memory_mb, d.worker_batch_size)
    job_ms = p.planner_job_ms(d.planner_memory_mb)
    groups = min(d.planner_groups, d.due_shards)  # StageConfig.shard_groups: a group owns at least one shard
    visits = p.planned_jobs_per_run
    per_tick = min(d.planner_max_jobs_per_tick, d.planner_timeout_seconds * 1000 / job_ms)
    return Capacity(
        worker=d.concurrency * 1000 / per_run,
        planner=groups * 1000 / job_ms / visits,
        planner_tick=groups * per_tick / p.tick_seconds / visits,
        due_index=d.due_shards * p.partition_wcu / (p.planner_index_wru_per_job * visits),
        tenant=p.tenant_ceiling(None, d.worker_memory_mb),
    )


def sustains(p: Params, d: Deployment, runs_per_second: float) -> bool:
    """Every part at or under ``utilisation`` of its limit at this rate."""
    return capacity(p, d).bound() * p.utilisation >= runs_per_second


def needed(p: Params, runs_per_second: float = TARGET_RATE, *, worker_memory_mb: int = 512) -> Deployment:
    """The smallest deployment that carries ``runs_per_second`` at ``utilisation``, whatever the stack's
    bounds: worst case for the planner (``planned_jobs_per_run`` visits per run)."""
    u = p.utilisation
    planner_memory_mb = 1024
    job_ms = p.planner_job_ms(planner_memory_mb)
    visits = runs_per_second * p.planned_jobs_per_run
    groups = math.ceil(visits * job_ms / 1000 / u)
    # As many shards to each group (StageConfig.shard_groups deals them out in turn), enough for the index.
    index_shards = visits * p.planner_index_wru_per_job / (p.partition_wcu * u)
    shards = groups * math.ceil(index_shards / groups)
    per_tick = math.ceil(visits * p.tick_seconds / groups / u)
    concurrency = math.ceil(runs_per_second * p.execution_ms_per_run(worker_memory_mb, 10) / 1000 / u)
    functions = math.ceil(concurrency / p.mapping_max_concurrency)
    return Deployment(
        planner_groups=groups,
        due_shards=shards,
        planner_max_jobs_per_tick=max(5000, per_tick),
        planner_timeout_seconds=60,
        planner_memory_mb=planner_memory_mb,
        worker_max_concurrency=math.ceil(concurrency / functions),
        worker_batch_size=10,
        worker_memory_mb=worker_memory_mb,
        worker_functions=functions,
    )


def largest(p: Params) -> Deployment:
    """The most the stack expresses: of every count of worker functions StageConfig accepts (at most 10,
    mappings at 1,000), with as many planner groups as leave room for them in the stack
    (``planner_groups_max``: 200 with one), the one that carries the most. One shard per group, as many jobs
    per tick as a group plans in one tick's minute (a longer tick overlaps the next, which plans the same
    jobs again), a batch of 10 (a larger one needs a batching window, which the stack does not set)."""
    deployments = [
        Deployment(
            planner_groups=planner_groups_max(functions),
            due_shards=planner_groups_max(functions),
            planner_max_jobs_per_tick=math.floor(p.tick_seconds * p.planner_jobs_per_second(1024)),
            planner_timeout_seconds=60,
            planner_memory_mb=1024,
            worker_max_concurrency=p.mapping_max_concurrency,
            worker_batch_size=10,
            worker_memory_mb=512,
            worker_functions=functions,
        )
        for functions in range(1, WORKER_FUNCTIONS_MAX + 1)
    ]
    return max(deployments, key=lambda d: capacity(p, d).bound())


def tick_jobs(p: Params, d: Deployment, runs_per_second: float) -> int:
    """Jobs one planner group plans a tick at this rate."""
    groups = min(d.planner_groups, d.due_shards)
    return math.ceil(runs_per_second * p.planned_jobs_per_run * p.tick_seconds / groups)


def seen_after_fire_s(late_s: float) -> float:
    """How long after its fire a message sent ``late_s`` after its delay's instant is seen, on average over
    the sub-second part the delay rounds down (uniform over a second, fires being on whole seconds): a
    message seen before its fire counts as on time (the worker sleeps out the rest)."""
    return late_s - 0.5 if late_s >= 1 else late_s * late_s / 2


def tick_lateness_s(p: Params, d: Deployment, runs_per_second: float) -> tuple[float, float]:
    """How late a fire's message is seen at this rate, at steady state (seconds, mean and most): each message
    is sent a little after the instant its delay counts from (:meth:`Params.planner_sends`), and seen that
    much after the fire less the sub-second part its delay rounded down; the most is a message whose delay
    rounded nothing down."""
    late = [
        (sent - counted_from) / 1000
        for sent, counted_from in p.planner_sends(tick_jobs(p, d, runs_per_second), d.planner_memory_mb)
    ]
    return sum(seen_after_fire_s(value) for value in late) / len(late), max(late)


@dataclass(frozen=True)
class Steady:
    runs_per_second: float
    registered_jobs: int
    deployment: Deployment
    params: Params
    wcu_per_second: float
    index_wcu_per_second: float
    rcu_per_second: float
    sqs_per_second: float
    month_dynamodb: float
    month_sqs: float
    month_lambda: float

    @property
    def month_total(self) -> float:
        return self.month_dynamodb + self.month_sqs + self.month_lambda

    @property
    def per_million_runs(self) -> float:
        return self.month_total / (self.runs_per_second * SECONDS_PER_MONTH) * 1e6


def steady_state(
    p: Params, runs_per_second: float = TARGET_RATE, registered_jobs: int = REGISTERED_JOBS
) -> Steady:
    d = needed(p, runs_per_second)
    wru, index_wru, rru = p.wru_per_run, p.index_wru_per_run, p.rru_per_run
    sqs_per_run = p.planned_jobs_per_run * p.planner_sqs_requests_per_job + 2 / d.worker_batch_size
    invocations = runs_per_second / d.worker_batch_size
    execution_s = p.execution_ms_per_run(d.worker_memory_mb, d.worker_batch_size) / 1000
    gb_seconds = runs_per_second * execution_s * d.worker_memory_mb / 1024
    gb_seconds += (
        runs_per_second
        * p.planned_jobs_per_run
        * p.planner_job_ms(d.planner_memory_mb)
        / 1000
        * d.planner_memory_mb
        / 1024
    )
    return Steady(
        runs_per_second=runs_per_second,
        registered_jobs=registered_jobs,
        deployment=d,
        params=p,
        wcu_per_second=runs_per_second * wru,
        index_wcu_per_second=runs_per_second * index_wru,
        rcu_per_second=runs_per_second * rru,
        sqs_per_second=runs_per_second * sqs_per_run,
        month_dynamodb=SECONDS_PER_MONTH
        * runs_per_second
        * ((wru + index_wru) * p.price_wru + rru * p.price_rru),
        month_sqs=SECONDS_PER_MONTH * runs_per_second * sqs_per_run * p.price_sqs_request,
        month_lambda=SECONDS_PER_MONTH
        * (invocations * p.price_lambda_invocation + gb_seconds * p.price_gb_second),
    )


# --- bursts -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Burst:
    name: str
    jobs: int = 100_000
    mode: str = "standard"  # or "provisioned"
    start_concurrency: float = 5.0
    """Executions running at the fire, over all mappings."""
    max_concurrency: float = 1000.0
    """Over all mappings."""
    mappings: int = 1
    """Worker functions, each with its mapping: each one ramps at its mode's rate."""
    planner_groups: int = 200
    planner_max_jobs_per_tick: int = 5000
    max_in_flight: int | None = None
    """The tenant's in-flight limit (None: none, the default); the burst is one tenant's."""
    lead_seconds: float = 60.0
    """How long before the fire the planner starts on it: the lookahead (120 s) less up to one tick."""
    memory_mb: int = 512


@dataclass(frozen=True)
class BurstResult:
    burst: Burst
    p50: float
    p99: float
    max: float
    planned_by: float
    """Seconds after the fire when the last run's message was sent (negative: before it)."""
    tenant_cap: float


def concurrency_at(p: Params, burst: Burst, seconds: float) -> float:
    """Executions over all mappings: each mapping scales on its own, at its mode's rate."""
    ramp = p.standard_ramp_per_minute if burst.mode == "standard" else p.provisioned_ramp_per_minute
    ceiling = burst.max_concurrency
    if burst.mode == "provisioned":
        ceiling = min(ceiling, p.provisioned_max_concurrency * burst.mappings)
    return min(ceiling, burst.start_concurrency + burst.mappings * ramp * max(0.0, seconds) / 60)


def visible_times(p: Params, burst: Burst) -> tuple[list[float], float]:
    """When each run's message can be received (seconds from the fire, sorted), and when the last one was
    sent. The jobs are dealt out evenly to the groups; each group's tick takes at most
    ``planner_max_jobs_per_tick`` of them (the rest wait for its next tick, a minute later) and sends their
    messages as :meth:`Params.planner_sends` says. A message's delay counts from an instant of its tick and
    is rounded down, so a message whose delay counts from before the fire is seen at the fire plus how long
    after that instant it was sent, less the rounding (``early_wait_ms`` on average; the worker sleeps out
    any part before the fire), and never before it was sent; one whose delay counts from after the fire has
    no delay."""
    times: list[float] = []
    last_sent = -math.inf
    base, extra = divmod(burst.jobs, burst.planner_groups)
    rounding = p.early_wait_ms / 1000
    for group in range(burst.planner_groups):
        left = base + (1 if group < extra else 0)
        tick = 0
        while left > 0:
            jobs = min(left, burst.planner_max_jobs_per_tick)
            start = -burst.lead_seconds + tick * p.tick_seconds
            for sent_ms, counted_ms in p.planner_sends(jobs, 1024):
                sent, counted_from = start + sent_ms / 1000, start + counted_ms / 1000
                times.append(max(sent, sent - counted_from - rounding) if counted_from <= 0 else sent)
            last_sent = max(last_sent, start + p.planner_send_offset_ms(jobs, 1024) / 1000)
            left -= jobs
            tick += 1
    times.sort()
    return times, last_sent


def simulate_burst(p: Params, burst: Burst, step: float = 0.05) -> BurstResult:
    """Lags (seconds) of ``burst.jobs`` runs all scheduled at t = 0."""
    visible, last_sent = visible_times(p, burst)
    tenant_cap = p.tenant_ceiling(burst.max_in_flight, burst.memory_mb)
    # The k-th run can start once its message is seen (at t = 0 at the earliest: the worker never starts a
    # run early) and once the tenant's slots allow it.
    ready = [
        max(0.0, seen, 0.0 if math.isinf(tenant_cap) else k / tenant_cap) for k, seen in enumerate(visible)
    ]
    batch_size = 10
    service = p.service_ms(burst.memory_mb) / 1000
    overhead = p.batch_overhead_ms / 1000
    before_call = p.before_call_ms(burst.memory_mb) / 1000
    busy: list[float] = []  # end times of running invocations
    lags: list[float] = []
    next_run = 0
    now = 0.0
    while next_run < burst.jobs:
        while busy and busy[0] <= now:
            heapq.heappop(busy)
        free = math.floor(concurrency_at(p, burst, now)) - len(busy)
        while free > 0 and next_run < burst.jobs and ready[next_run] <= now:
            batch = 0
            while batch < batch_size and next_run < burst.jobs and ready[next_run] <= now:
                lags.append(now + overhead + batch * service + before_call)
                batch += 1
                next_run += 1
            heapq.heappush(busy, now + overhead + batch * service)
            free -= 1
        now = round(now + step, 6)
    return BurstResult(
        burst=burst,
        p50=percentile(lags, 50),
        p99=percentile(lags, 99),
        max=max(lags),
        planned_by=last_sent,
        tenant_cap=tenant_cap,
    )


def bursts(p: Params) -> list[Burst]:
    """The 09:00:00 burst of 100,000 runs of one tenant, from the shipped defaults to the deployment for
    10,000 runs/s."""
    target, top = needed(p), largest(p)
    cold = p.standard_start_concurrency
    largest_name = (
        f"the stack's largest: {top.planner_groups} groups, "
        f"{top.worker_functions} mappings at {top.worker_max_concurrency:,}"
    )
    target_name = (
        f"the 10,000 runs/s deployment: {target.planner_groups} groups, "
        f"{target.worker_functions} mappings at {target.worker_max_concurrency:,}"
    )
    return [
        Burst(
            "cdk.json as shipped: 2 planner groups, 1 mapping at 50, from cold",
            planner_groups=2,
            max_concurrency=50,
        ),
        Burst(
            f"{largest_name}, from cold (standard mode)",
            planner_groups=top.planner_groups,
            planner_max_jobs_per_tick=top.planner_max_jobs_per_tick,
            start_concurrency=cold * top.worker_functions,
            max_concurrency=top.concurrency,
            mappings=top.worker_functions,
        ),
        Burst(
            "as above, the tenant at max_in_flight 100 (10 slot items)",
            planner_groups=top.planner_groups,
            planner_max_jobs_per_tick=top.planner_max_jobs_per_tick,
            start_concurrency=cold * top.worker_functions,
            max_concurrency=top.concurrency,
            mappings=top.worker_functions,
            max_in_flight=100,
        ),
        Burst(
            f"{target_name}, from cold (standard mode)",
            planner_groups=target.planner_groups,
            planner_max_jobs_per_tick=target.planner_max_jobs_per_tick,
            start_concurrency=cold * target.worker_functions,
            max_concurrency=target.concurrency,
            mappings=target.worker_functions,
        ),
        Burst(
            f"{target_name}, {target.concurrency:,} executions already running",
            planner_groups=target.planner_groups,
            planner_max_jobs_per_tick=target.planner_max_jobs_per_tick,
            start_concurrency=target.concurrency,
            max_concurrency=target.concurrency,
            mappings=target.worker_functions,
        ),
        Burst(
            "as above, provisioned mode on its mappings, 10,000 executions in all before 09:00",
            mode="provisioned",
            planner_groups=target.planner_groups,
            planner_max_jobs_per_tick=target.planner_max_jobs_per_tick,
            start_concurrency=10_000,
            max_concurrency=20_000,
            mappings=target.worker_functions,
        ),
    ]


# --- rendering --------------------------------------------------------------------------------------------
def _money(value: float) -> str:
    return f"${value:,.0f}"


def _rate(value: float) -> str:
    return "no limit of its own" if math.isinf(value) else f"{value:,.0f}"


def render_inputs(p: Params) -> str:
    memory = 512
    rows = [
        ("worker CPU per run (own, measured)", f"{p.worker_cpu_ms} ms"),
        ("botocore client CPU per request (measured)", f"{p.client_cpu_ms_per_request} ms"),
        (f"worker CPU per run at {memory} MB", f"{p.worker_cpu_total_ms(memory):.1f} ms"),
        ("worker DynamoDB requests per run (measured)", f"{p.worker_dynamodb_requests:g}"),
        (f"worker service time per run at {memory} MB", f"{p.service_ms(memory):.1f} ms"),
        (
            "execution time per run, batch of 10 (service + (overhead + wait) / 10)",
            f"{p.execution_ms_per_run(memory, 10):.1f} ms",
        ),
        ("planner time per planned job (one group, sequential)", f"{p.planner_job_ms(1024):.1f} ms"),
        ("planner jobs/s per group", f"{p.planner_jobs_per_second(1024):.0f}"),
        ("planner visits per run (worst case)", f"{p.planned_jobs_per_run:g}"),
        (
            "WRU per run: worker + planner (measured)",
            f"{p.worker_wru:g} + {p.planned_jobs_per_run * p.planner_wru_per_job:g}",
        ),
        (
            "index WRU per run: worker + planner (measured)",
            f"{p.worker_index_wru:g} + {p.planned_jobs_per_run * p.planner_index_wru_per_job:g}",
        ),
        ("RRU per run (measured)", f"{p.rru_per_run:g}"),
        ("one tenant's ceiling, no in-flight limit (the default)", _rate(p.tenant_ceiling(None, memory))),
        (f"a slot held per run at {memory} MB (claim to release)", f"{p.slot_hold_ms(memory):.1f} ms"),
        *(
            (f"one tenant at max_in_flight 100: {name}", f"{value:,.0f} runs/s")
            for name, value in p.tenant_ceilings(100, memory).items()
        ),
        ("one tenant's ceiling, max_in_flight 100", f"{p.tenant_ceiling(100, memory):,.0f} runs/s"),
        (
            f"max_in_flight one tenant needs for {TARGET_RATE:,.0f} runs/s at 50% headroom",
            f"{p.limit_for(TARGET_RATE, memory):,}",
        ),
        ("one tenant's one-time jobs, created and run", f"{p.one_time_tenant_ceiling:,.0f} jobs/s"),
    ]
    return table(("input", "value"), rows)


def render_steady(s: Steady) -> str:
    d = s.deployment
    rows = [
        ("worker executions (Little's law at 50% headroom)", f"{d.concurrency:,}"),
        ("worker functions, each with its mapping on the run queue", f"{d.worker_functions:,}"),
        ("executions per mapping (worker_max_concurrency, at most 1,000)", f"{d.worker_max_concurrency:,}"),
        ("planner groups (one tick a minute each)", f"{d.planner_groups:,}"),
        ("due-index shards", f"{d.due_shards:,}"),
        ("planner_max_jobs_per_tick", f"{d.planner_max_jobs_per_tick:,}"),
        ("jobs a group plans a tick", f"{tick_jobs(s.params, d, s.runs_per_second):,}"),
        (
            "a fire's message seen after its fire, mean / most (s)",
            "{:.2f} / {:.2f}".format(*tick_lateness_s(s.params, d, s.runs_per_second)),
        ),
        ("DynamoDB WCU/s, tables", f"{s.wcu_per_second:,.0f}"),
        ("DynamoDB WCU/s, indexes", f"{s.index_wcu_per_second:,.0f}"),
        ("DynamoDB RCU/s", f"{s.rcu_per_second:,.0f}"),
        ("SQS requests/s", f"{s.sqs_per_second:,.0f}"),
        ("DynamoDB per month", _money(s.month_dynamodb)),
        ("SQS per month", _money(s.month_sqs)),
        ("Lambda per month", _money(s.month_lambda)),
        ("total per month", _money(s.month_total)),
        ("per million runs", f"${s.per_million_runs:.2f}"),
    ]
    return table((f"{s.runs_per_second:,.0f} runs/s, {s.registered_jobs:,} jobs", "value"), rows)


def render_deployments(p: Params) -> str:
    """The deployment 10,000 runs/s needs against the largest one the stack expresses."""
    target, top = needed(p), largest(p)
    both = (target, top)
    rows: list[tuple[str, ...]] = [
        (f"`{name}`", f"{target.stage_config()[name]:,}", f"{top.stage_config()[name]:,}")
        for name in target.stage_config()
    ]
    rows.append(
        ("worker executions (functions x executions per mapping)", *(f"{d.concurrency:,}" for d in both))
    )
    rows.append(
        (
            f"messages in flight at most, a batch an execution (a queue holds ~{p.queue_max_in_flight:,})",
            *(f"{d.in_flight:,}" for d in both),
        )
    )
    rows.append(
        (
            "planner groups the worker functions leave room for (500 resources a stack)",
            *(f"{planner_groups_max(d.worker_functions):,}" for d in both),
        )
    )
    for (name, need), (_, have) in zip(capacity(p, target).rows(), capacity(p, top).rows(), strict=True):
        rows.append((f"runs/s at 100%: {name}", _rate(need), _rate(have)))
    carried = [TARGET_RATE, capacity(p, top).bound() * p.utilisation]
    rows.append(("runs/s at 50% headroom (the least of the parts)", *(f"{rate:,.0f}" for rate in carried)))
    rows.append(
        (
            "at that rate: jobs a group plans a tick",
            *(f"{tick_jobs(p, d, rate):,}" for d, rate in zip(both, carried, strict=True)),
        )
    )
    rows.append(
        (
            "at that rate: a fire's message seen after its fire, mean / most (s)",
            *(
                "{:.2f} / {:.2f}".format(*tick_lateness_s(p, d, rate))
                for d, rate in zip(both, carried, strict=True)
            ),
        )
    )
    return table(("setting", "10,000 runs/s needs", "the stack's largest"), rows)


def render_bursts(results: list[BurstResult]) -> str:
    rows = [
        (
            result.burst.name,
            f"{result.p50:.1f}",
            f"{result.p99:.1f}",
            f"{result.max:.1f}",
            f"{result.planned_by:+.0f}",
            _rate(result.tenant_cap),
        )
        for result in results
    ]
    return table(
        (
            "configuration (one tenant)",
            "p50 lag s",
            "p99 lag s",
            "max lag s",
            "last message sent at s",
            "tenant's ceiling runs/s",
        ),
        rows,
    )


BLOCKS = ("inputs", "steady", "deployment", "burst")


def blocks(p: Params | None = None) -> dict[str, str]:
    """The generated blocks of docs/capacity.md, by marker name."""
    p = p or Params()
    return {
        "inputs": render_inputs(p),
        "steady": render_steady(steady_state(p)),
        "deployment": render_deployments(p),
        "burst": render_bursts([simulate_burst(p, burst) for burst in bursts(p)]),
    }


def doc_blocks(text: str) -> dict[str, str]:
    return read_blocks(text, "simulate", BLOCKS)


def write_capacity(path: Path = CAPACITY_DOC) -> None:
    write_blocks(path, "simulate", blocks())


def section() -> str:
    generated = blocks()
    return "\n".join(
        [
            "## Capacity model and burst simulation",
            "",
            "Command: `python -m bench.simulate` (no measurement: arithmetic and a discrete-event simulation",
            "over the per-run figures above and published limits; the reasoning is in",
            "[capacity.md](capacity.md)).",
            "",
            generated["inputs"],
            "",
            generated["steady"],
            "",
            "The deployment 10,000 runs/s needs, against the largest one the stack expresses:",
            "",
            generated["deployment"],
            "",
            "A burst of 100,000 runs of one tenant, all scheduled for 09:00:00:",
            "",
            generated["burst"],
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--write-capacity", action="store_true", help="rewrite the blocks of docs/capacity.md"
    )
    parser.add_argument("--worker-cpu-ms", type=float, help="override the measured own CPU per run")
    parser.add_argument("--target-latency-ms", type=float, help="override the assumed webhook latency")
    args = parser.parse_args()
    if args.write_capacity:
        write_capacity()
        print(f"rewrote {CAPACITY_DOC}", file=sys.stderr)
        return 0
    p = Params()
    if args.worker_cpu_ms is not None:
        p = replace(p, worker_cpu_ms=args.worker_cpu_ms)
    if args.target_latency_ms is not None:
        p = replace(p, target_latency_ms=args.target_latency_ms)
    generated = blocks(p)
    print(*(generated[name] for name in BLOCKS), sep="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
