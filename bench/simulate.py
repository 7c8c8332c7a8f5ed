"""Capacity model and burst simulation from published limits and the measured per-run CPU and requests.

    python -m bench.simulate                     # print the tables
    python -m bench.simulate --write-capacity    # rewrite the generated blocks of docs/capacity.md

Everything is computed from :class:`Params`: the figures measured by ``bench.worker_cpu`` and
``bench.planner_scale`` (CPU and requests per run and per planned job, item sizes), the limits and prices
of docs' AWS facts, and a few latencies that cannot be measured here (marked as assumptions). Change a
parameter (for instance after the request-reduction work lowers the counts) and rerun with
``--write-capacity``; ``tests/bench`` checks that docs/capacity.md shows what this module computes.

The burst simulation is discrete-event: the planner makes each run visible (a delayed SQS message) at the
rate its groups can plan; the event source mapping's concurrency grows as the scaling mode allows; each
concurrent worker takes batches of up to 10 messages and runs them one after the other; the tenant's
in-flight counter item caps a tenant's start rate at the partition limit. Lag = when the target is
called - the scheduled second.
"""

from __future__ import annotations

import argparse
import heapq
import math
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bench._common import ROOT, percentile, table

SECONDS_PER_MONTH = 30 * 86_400
CAPACITY_DOC = Path(ROOT) / "docs" / "capacity.md"


@dataclass(frozen=True)
class Params:
    # --- measured here (bench.worker_cpu, bench.planner_scale, docs/benchmarks.md) ---
    worker_cpu_ms: float = 2.65
    """tickwork's own CPU per run on the worker path, AWS calls excluded (one-time jobs, no counter)."""
    client_cpu_ms_per_request: float = 0.11
    """botocore's client-side CPU per call."""
    worker_dynamodb_requests: float = 8.0
    """GetItem 3 (run, job, tenant), PutItem 1 and UpdateItem 1 (idempotency), UpdateItem 2 (lease,
    outcome), UpdateItem 1 (a one-time job completed, or the overlap query of a recurring one)."""
    worker_dynamodb_before_call: float = 5.0
    """Of which before the target is called: 3 reads, the idempotency put, the lease."""
    worker_wru: float = 5.0
    """No tenant counter: the tenant's limit is at least the workers' maximum concurrency."""
    worker_rru: float = 3.0
    planner_cpu_ms_per_job: float = 0.6
    planner_dynamodb_requests_per_job: float = 2.0
    """PutItem run (stored ENQUEUED), UpdateItem job cursor; due jobs are read with BatchGetItem."""
    planner_sqs_requests_per_job: float = 0.1
    """SendMessageBatch: ten runs a request, across jobs."""
    planner_wru_per_job: float = 2.0
    planner_rru_per_job: float = 1.0
    # --- index writes per run, from the table definitions (tickwork.tables) and the writes above ---
    gsi_wru_by_job: float = 3.0
    """by_job projects ALL: each of the 3 writes of a run item (put, lease, outcome), under 1 KB."""
    gsi_wru_open_runs: float = 4.0
    """open_runs: attention set at the put, moved at the lease (a key change: delete + put), removed at
    the outcome."""
    gsi_wru_by_tenant: float = 3.0
    """by_tenant projects status and lag: rewritten at each of the 3 status changes."""
    gsi_wru_due: float = 2.0
    """due index: the cursor moves (a key change: delete + put) once per planned job."""
    counter_wru_per_run: float = 4.0
    """Where a tenant's limit can bind, its in-flight counter moves in the lease's and the outcome's
    transactions: +2 WRU on the counter item each, and the run's writes become transaction items too."""
    tenant_index_shards: int = 4
    """by_tenant shards per tenant (tickwork.tables.TENANT_SHARDS)."""
    # --- published limits and prices (docs: AWS facts) ---
    partition_wcu: float = 1000.0
    partition_rcu: float = 3000.0
    standard_start_concurrency: float = 5.0
    standard_ramp_per_minute: float = 300.0
    provisioned_ramp_per_minute: float = 1000.0
    provisioned_max_concurrency: float = 20_000.0
    batch_size: int = 10
    price_wru: float = 0.625e-6
    price_rru: float = 0.125e-6
    price_sqs_request: float = 0.40e-6
    price_lambda_invocation: float = 0.20e-6
    price_gb_second: float = 0.0000133334
    eventbridge_scheduler_per_invocation: float = 1.00e-6
    # --- assumptions (not measurable here) ---
    dynamodb_latency_ms: float = 5.0
    sqs_latency_ms: float = 10.0
    target_latency_ms: float = 50.0
    batch_overhead_ms: float = 20.0
    """Event source mapping: poll to invoke, and the batch response."""
    worker_memory_mb: float = 1024.0
    """1,769 MB is one vCPU; less memory, a slower CPU."""
    utilisation: float = 0.5
    """Headroom: plan for partitions and concurrency at half their limit."""

    @property
    def vcpu(self) -> float:
        return min(1.0, self.worker_memory_mb / 1769)

    @property
    def worker_cpu_total_ms(self) -> float:
        return (
            self.worker_cpu_ms + self.client_cpu_ms_per_request * self.worker_dynamodb_requests
        ) / self.vcpu

    @property
    def service_ms(self) -> float:
        """One run inside a worker invocation: CPU, DynamoDB round trips, the target call."""
        return (
            self.worker_cpu_total_ms
            + self.worker_dynamodb_requests * self.dynamodb_latency_ms
            + self.target_latency_ms
        )

    @property
    def before_call_ms(self) -> float:
        share = self.worker_dynamodb_before_call / self.worker_dynamodb_requests
        return self.worker_cpu_total_ms * share + self.worker_dynamodb_before_call * self.dynamodb_latency_ms

    @property
    def planner_job_ms(self) -> float:
        requests = self.planner_dynamodb_requests_per_job + self.planner_sqs_requests_per_job
        return (
            self.planner_cpu_ms_per_job
            + requests * self.client_cpu_ms_per_request
            + self.planner_dynamodb_requests_per_job * self.dynamodb_latency_ms
            + self.planner_sqs_requests_per_job * self.sqs_latency_ms
        )

    @property
    def planner_jobs_per_second(self) -> float:
        """One planner group plans its due jobs one after the other."""
        return 1000 / self.planner_job_ms

    @property
    def gsi_wru(self) -> float:
        return self.gsi_wru_by_job + self.gsi_wru_open_runs + self.gsi_wru_by_tenant + self.gsi_wru_due

    @property
    def tenant_runs_per_second(self) -> float:
        """A tenant's ceiling when its limit cannot bind: its by_tenant shards, one partition each."""
        return self.partition_wcu * self.tenant_index_shards / self.gsi_wru_by_tenant

    @property
    def counted_tenant_runs_per_second(self) -> float:
        """A tenant's ceiling when its in-flight counter is written: the counter item's partition (2 WRU
        in each of two transactions per run)."""
        return min(self.tenant_runs_per_second, self.partition_wcu / self.counter_wru_per_run)


def power_of_two(value: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, value))))


@dataclass(frozen=True)
class Steady:
    runs_per_second: float
    registered_jobs: int
    worker_concurrency: int
    planner_groups: int
    due_shards: int
    attention_shards: int
    min_tenants: int
    wcu_per_second: float
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


def steady_state(p: Params, runs_per_second: float = 10_000, registered_jobs: int = 10_000_000) -> Steady:
    """Sizing for a sustained rate. Worst case for the planner: every run is a separate job visit (jobs
    firing less often than the horizon), so planned jobs/s = runs/s."""
    budget = p.partition_wcu * p.utilisation
    concurrency = math.ceil(runs_per_second * p.service_ms / 1000 / p.utilisation)
    groups = math.ceil(runs_per_second / (p.planner_jobs_per_second * p.utilisation))
    due_shards = power_of_two(max(groups, runs_per_second * p.gsi_wru_due / budget))
    attention_shards = power_of_two(runs_per_second * p.gsi_wru_open_runs / budget)
    min_tenants = math.ceil(runs_per_second / (p.tenant_runs_per_second * p.utilisation))
    wru_per_run = p.worker_wru + p.planner_wru_per_job + p.gsi_wru
    rru_per_run = p.worker_rru + p.planner_rru_per_job
    sqs_per_run = p.planner_sqs_requests_per_job + 2 / p.batch_size  # the mapping's receive and delete
    invocations = runs_per_second / p.batch_size
    gb_seconds = runs_per_second * (p.service_ms / 1000) * p.worker_memory_mb / 1024
    gb_seconds += runs_per_second * (p.planner_job_ms / 1000) * 1.0  # planner groups at 1 GB
    return Steady(
        runs_per_second=runs_per_second,
        registered_jobs=registered_jobs,
        worker_concurrency=concurrency,
        planner_groups=groups,
        due_shards=due_shards,
        attention_shards=attention_shards,
        min_tenants=min_tenants,
        wcu_per_second=runs_per_second * wru_per_run,
        rcu_per_second=runs_per_second * rru_per_run,
        sqs_per_second=runs_per_second * sqs_per_run,
        month_dynamodb=SECONDS_PER_MONTH
        * runs_per_second
        * (wru_per_run * p.price_wru + rru_per_run * p.price_rru),
        month_sqs=SECONDS_PER_MONTH * runs_per_second * sqs_per_run * p.price_sqs_request,
        month_lambda=SECONDS_PER_MONTH
        * (invocations * p.price_lambda_invocation + gb_seconds * p.price_gb_second),
    )


@dataclass(frozen=True)
class Burst:
    name: str
    jobs: int = 100_000
    mode: str = "standard"  # or "provisioned"
    start_concurrency: float = 5.0
    max_concurrency: float = 1000.0
    tenants: int = 1
    planner_groups: int = 16
    lead_seconds: float = 300.0
    """Planner horizon: how long before the fire the planner may enqueue it."""
    tenant_counter: bool = False
    """The tenants' in-flight limit is below the workers' maximum concurrency, so it is counted."""


@dataclass(frozen=True)
class BurstResult:
    burst: Burst
    p50: float
    p99: float
    max: float
    planned_by: float
    """Seconds after the fire when the last run was planned (negative: before it)."""
    tenant_cap: float


def concurrency_at(p: Params, burst: Burst, seconds: float) -> float:
    ramp = p.standard_ramp_per_minute if burst.mode == "standard" else p.provisioned_ramp_per_minute
    ceiling = burst.max_concurrency
    if burst.mode == "provisioned":
        ceiling = min(ceiling, p.provisioned_max_concurrency)
    return min(ceiling, burst.start_concurrency + ramp * max(0.0, seconds) / 60)


def simulate_burst(p: Params, burst: Burst, step: float = 0.05) -> BurstResult:
    """Lags (seconds) of ``burst.jobs`` runs all scheduled at t = 0."""
    plan_rate = burst.planner_groups * p.planner_jobs_per_second
    per_tenant = p.counted_tenant_runs_per_second if burst.tenant_counter else p.tenant_runs_per_second
    tenant_cap = burst.tenants * per_tenant
    # The k-th run can start once it is planned (visible at t = 0 at the earliest) and once the tenants'
    # counters allow it.
    ready = [max(0.0, -burst.lead_seconds + (k + 1) / plan_rate, k / tenant_cap) for k in range(burst.jobs)]
    service = p.service_ms / 1000
    overhead = p.batch_overhead_ms / 1000
    before_call = p.before_call_ms / 1000
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
            while batch < p.batch_size and next_run < burst.jobs and ready[next_run] <= now:
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
        planned_by=-burst.lead_seconds + burst.jobs / plan_rate,
        tenant_cap=tenant_cap,
    )


def bursts(p: Params, steady: Steady) -> list[Burst]:
    """The 09:00:00 burst of 100,000 runs, from the defaults to the recommended configuration."""
    warm = float(steady.worker_concurrency)
    return [
        Burst(
            "1 tenant at the default limit of 100 in flight (counted), standard mapping from cold",
            tenant_counter=True,
        ),
        Burst("1 tenant, limit above the mapping's concurrency, standard mapping from cold"),
        Burst("100 tenants, standard mapping from cold", tenants=100),
        Burst(
            "100 tenants, standard mapping already at the steady-state concurrency",
            tenants=100,
            start_concurrency=warm,
            max_concurrency=10_000,
        ),
        Burst(
            "100 tenants, provisioned mapping, minimum 1,000",
            mode="provisioned",
            tenants=100,
            start_concurrency=1000,
            max_concurrency=20_000,
        ),
        Burst(
            "100 tenants, provisioned mapping, minimum raised to 10,000 before 09:00",
            mode="provisioned",
            tenants=100,
            start_concurrency=10_000,
            max_concurrency=20_000,
        ),
        Burst(
            "1,000 tenants, provisioned mapping, minimum 10,000 before 09:00",
            mode="provisioned",
            tenants=1000,
            start_concurrency=10_000,
            max_concurrency=20_000,
        ),
        Burst(
            "as above, planner lead time cut to 60 s",
            mode="provisioned",
            tenants=1000,
            start_concurrency=10_000,
            max_concurrency=20_000,
            lead_seconds=60,
        ),
    ]


# --- rendering --------------------------------------------------------------------------------------------
def _money(value: float) -> str:
    return f"${value:,.0f}"


def render_inputs(p: Params) -> str:
    rows = [
        ("worker CPU per run (own, measured)", f"{p.worker_cpu_ms} ms"),
        ("botocore client CPU per request (measured)", f"{p.client_cpu_ms_per_request} ms"),
        ("worker CPU per run at the worker's memory", f"{p.worker_cpu_total_ms:.1f} ms"),
        ("worker DynamoDB requests per run (measured)", f"{p.worker_dynamodb_requests:g}"),
        ("worker service time per run", f"{p.service_ms:.1f} ms"),
        ("planner time per planned job (one group, sequential)", f"{p.planner_job_ms:.1f} ms"),
        ("planner jobs/s per group", f"{p.planner_jobs_per_second:.1f}"),
        ("WRU per run: worker + planner (measured)", f"{p.worker_wru:g} + {p.planner_wru_per_job:g}"),
        ("WRU per run: index writes (modelled)", f"{p.gsi_wru:g}"),
        ("RRU per run (measured)", f"{p.worker_rru + p.planner_rru_per_job:g}"),
        ("one tenant's ceiling (by_tenant shards)", f"{p.tenant_runs_per_second:.0f} runs/s"),
        ("one tenant's ceiling, in-flight counter written", f"{p.counted_tenant_runs_per_second:.0f} runs/s"),
    ]
    return table(("input", "value"), rows)


def render_steady(s: Steady) -> str:
    rows = [
        ("worker concurrency (Little's law at 50% headroom)", f"{s.worker_concurrency:,}"),
        ("planner groups (one invocation each per tick)", f"{s.planner_groups:,}"),
        ("due-index shards", f"{s.due_shards:,}"),
        ("open-runs (attention) shards", f"{s.attention_shards:,}"),
        ("fewest tenants that can carry the rate", f"{s.min_tenants:,}"),
        ("DynamoDB WCU/s (table and indexes)", f"{s.wcu_per_second:,.0f}"),
        ("DynamoDB RCU/s", f"{s.rcu_per_second:,.0f}"),
        ("SQS requests/s", f"{s.sqs_per_second:,.0f}"),
        ("DynamoDB per month", _money(s.month_dynamodb)),
        ("SQS per month", _money(s.month_sqs)),
        ("Lambda per month", _money(s.month_lambda)),
        ("total per month", _money(s.month_total)),
        ("per million runs", f"${s.per_million_runs:.2f}"),
    ]
    return table((f"{s.runs_per_second:,.0f} runs/s, {s.registered_jobs:,} jobs", "value"), rows)


def render_bursts(results: list[BurstResult]) -> str:
    rows = [
        (
            result.burst.name,
            f"{result.p50:.1f}",
            f"{result.p99:.1f}",
            f"{result.max:.1f}",
            f"{result.planned_by:+.0f}",
            f"{result.tenant_cap:,.0f}",
        )
        for result in results
    ]
    return table(
        (
            "configuration",
            "p50 lag s",
            "p99 lag s",
            "max lag s",
            "last planned at s",
            "tenants' ceiling runs/s",
        ),
        rows,
    )


def blocks(p: Params | None = None) -> dict[str, str]:
    """The generated blocks of docs/capacity.md, by marker name."""
    p = p or Params()
    steady = steady_state(p)
    return {
        "inputs": render_inputs(p),
        "steady": render_steady(steady),
        "burst": render_bursts([simulate_burst(p, burst) for burst in bursts(p, steady)]),
    }


def _marker(name: str) -> tuple[str, str]:
    return f"<!-- simulate:{name}:start -->", f"<!-- simulate:{name}:end -->"


def doc_blocks(text: str) -> dict[str, str]:
    found = {}
    for name in ("inputs", "steady", "burst"):
        start, end = _marker(name)
        match = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
        if match:
            found[name] = match.group(1)
    return found


def write_capacity(path: Path = CAPACITY_DOC) -> None:
    text = path.read_text()
    for name, body in blocks().items():
        start, end = _marker(name)
        if start not in text:
            raise SystemExit(f"{path} has no {start} marker")
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = f"{before}{start}\n{body}\n{end}{after}"
    path.write_text(text)


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
            "A burst of 100,000 runs all scheduled for 09:00:00:",
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
    parser.add_argument("--worker-wru", type=float, help="override the measured worker WRU per run")
    args = parser.parse_args()
    if args.write_capacity:
        write_capacity()
        print(f"rewrote {CAPACITY_DOC}", file=sys.stderr)
        return 0
    p = Params()
    if args.worker_cpu_ms is not None:
        p = replace(p, worker_cpu_ms=args.worker_cpu_ms)
    if args.worker_wru is not None:
        p = replace(p, worker_wru=args.worker_wru)
    steady = steady_state(p)
    print(render_inputs(p), render_steady(steady), sep="\n\n")
    print()
    print(render_bursts([simulate_burst(p, burst) for burst in bursts(p, steady)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
