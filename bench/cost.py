"""Cost per successful recurring run, all-in, at steady state, for 1-second, 10-second and 1-minute rate jobs.

    python -m bench.cost                # measure; save bench/cost_figures.json, rewrite the generated
                                        # blocks of docs/cost.md, print the section of docs/benchmarks.md
    python -m bench.cost --json         # measure; print the figures as JSON
    python -m bench.cost --write-doc    # measure; save the figures, rewrite docs/cost.md's blocks
    python -m bench.cost --write-doc --figures bench/cost_figures.json   # the blocks again, no measuring

The workload (``bench._cost_workload``) runs each job shape through the real planner and worker handlers under
moto on a fake clock and meters every request (``bench._cost_meter``). This module turns the figures into
dollars: the published prices, and a stated model for what moto cannot show (Lambda duration, log platform
lines, X-Ray tracing and sampling). The figures from before run path v2 are in ``bench._cost_before``.

A planner tick's base (its invocation, base duration, the index queries of every due and attention shard, its
log lines) is paid every minute per planner group whatever the load: it is a fixed cost per month, measured
on the ticks that plan nothing, and a run is charged only the planner's marginal work for it (the planning
tick less one base tick). The all-in figure with whole ticks charged to the runs they plan is shown too.

The tenant-wide run list costs every run its share of the indexer (the runs table's stream into the run
index): the workload runs the indexer Lambda's handler on the stream's records, batched as its event source
mapping batches them, and meters its chunk writes, CPU and log bytes. Stream reads by a Lambda trigger are
free. A fleet's invocations per run are a model (a deployment of ten or more runs a second, one stream
shard, the 2 s window); a lone job's are measured with one invocation per run's writes, its worst case.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import ROOT, read_blocks, write_blocks
from bench._cost_before import BEFORE, BEFORE_TRACED, BEFORE_WAIT_S, QUOTED
from bench._cost_meter import write_units
from bench._cost_workload import INDEX_BATCH, INDEX_WINDOW_S, INDEXER_MEMORY_MB, PAGE
from infra.config import StageConfig

COMMAND = "python -m bench.cost"
DEPLOYED = StageConfig()
DOC = Path(ROOT) / "docs" / "cost.md"
FIGURES = Path(ROOT) / "bench" / "cost_figures.json"
"""The figures the generated blocks of ``docs/cost.md`` were made from (``--write-doc`` saves them)."""

# --- prices (us-east-1) -------------------------------------------------------------------------------------
WRU_PRICE = 0.625 / 1e6
RRU_PRICE = 0.125 / 1e6
SQS_PRICE = 0.40 / 1e6
LAMBDA_REQUEST_PRICE = 0.20 / 1e6
GB_SECOND_PRICE = 0.0000133334  # arm64
LOGS_PRICE_PER_GB = 0.50  # CloudWatch Logs ingestion
XRAY_TRACE_PRICE = 5.00 / 1e6  # traces recorded
API_PRICE = 3.50 / 1e6  # API Gateway REST
EVENTBRIDGE_SCHEDULER_PRICE = 1.00 / 1e6
BUDGET = 2.00 / 1e6

# --- the job shapes -----------------------------------------------------------------------------------------
PERIODS = (1, 10, 60)
FLEET = 20
HISTORY_SECONDS = 2 * 86_400
FLEET_HISTORY_RUNS = 3_600
"""A fleet's jobs carry two days of history or this many past runs each, whichever is fewer (moto holds every
item in memory); the history check shows the per-run figures do not depend on it."""
CHECK_HISTORY_RUNS = 600
MAX_METERED_RUNS = 300
"""A shape whose cycle holds more runs has its worker metered over the cycle's first minute only (see
``bench._cost_workload.Shape.worker_seconds``), so the whole benchmark runs in a few minutes."""
DEPLOYMENT_RUNS_PER_S = 10
"""A fleet's deployment runs this many runs a second or more (design.md): what fills the indexer's batches."""
CREATE_SHARE_DAYS = 30
"""A recurring job's create call is shared by its runs over this many days."""
TICKS_PER_MONTH = 30 * 1440
"""One planner group's ticks in a 30-day month (EventBridge ``rate(1 minute)``)."""
VARIANT_WORKER_MB = 256
"""The worker memory of the variant priced from the same measurements."""


@dataclass(frozen=True)
class Model:
    """What moto cannot show, stated. Duration = own CPU (plus botocore's per request) stretched to the
    function's share of a vCPU, plus AWS's time per request, plus the time the worker waits out before a
    fire, plus half a millisecond of billing round-up per invocation."""

    dynamodb_latency_s: float = 0.005
    sqs_latency_s: float = 0.010
    vcpu_mb: int = 1769
    """Lambda gives a function one full vCPU at 1,769 MB, in proportion below it."""
    botocore_ms: float = 0.3
    """botocore's client-side CPU per request (measured with ``bench.worker_cpu.client_cpu_per_request``)."""
    platform_log_bytes: int = 500
    """Lambda's own lines per invocation in JSON log format: platform.start and platform.report (with its
    metrics and X-Ray trace id)."""
    xray_reservoir_per_second: int = 1
    xray_rate: float = 0.05
    worker_memory_mb: int = DEPLOYED.worker_memory_mb
    planner_memory_mb: int = DEPLOYED.planner_memory_mb
    api_memory_mb: int = DEPLOYED.api_memory_mb
    trace_run_path: bool = DEPLOYED.trace_run_path
    """Active X-Ray tracing of the planner and the worker (``StageConfig.trace_run_path``). Off, they use
    PassThrough: invoked by EventBridge and SQS, with no sampled trace header coming in, they record no
    traces. The API and the authorizer are always traced."""
    run_path_platform_logs: bool = DEPLOYED.run_path_platform_logs
    """Lambda's START and REPORT lines for the planner and the worker (``StageConfig``); off, their system
    log level is WARN and a successful invocation writes none."""
    target_ms: float = 0.0
    """The webhook target's own response time, per run (excluded: priced separately per 10 ms)."""
    indexer_memory_mb: int = INDEXER_MEMORY_MB
    """The indexer function's (``infra/stack.py``); it is on the run path: PassThrough, system log WARN."""


def requests_of(part: dict[str, Any], service: str) -> float:
    return float(
        sum(value for key, value in part.get("requests", {}).items() if key.startswith(f"{service}."))
    )


def total(part: dict[str, Any], what: str) -> float:
    return float(sum(part.get(what, {}).values()))


def xray_traces(per_second: dict[str, int], model: Model) -> float:
    """Traces recorded by the default sampling rule: the first ``reservoir`` invocations in each second, then
    ``rate`` of the rest. ``per_second`` maps an invocation count to the seconds that had it."""
    traces = 0.0
    for count, seconds in per_second.items():
        n = int(count)
        kept = min(n, model.xray_reservoir_per_second)
        traces += seconds * (kept + model.xray_rate * (n - kept))
    return traces


def duration_s(function: dict[str, Any], memory_mb: int, model: Model) -> float:
    """Billed seconds of a function's invocations (summed)."""
    dynamodb, sqs = requests_of(function, "dynamodb"), requests_of(function, "sqs")
    cpu = float(function["own_cpu_s"]) + (dynamodb + sqs) * model.botocore_ms / 1000
    stretch = max(1.0, model.vcpu_mb / memory_mb)
    # Threads that wait side by side (the worker's batch, the planner's sends): only the longest chain of
    # round trips is billed.
    serial = serial_requests(function)
    waits = serial.get("dynamodb", 0) * model.dynamodb_latency_s + serial.get("sqs", 0) * model.sqs_latency_s
    return float(cpu * stretch + waits + function.get("slept_s", 0.0) + function["count"] * 0.0005)


def function_dollars(
    function: dict[str, Any],
    *,
    memory_mb: int,
    traces: float,
    model: Model,
    mapping_requests: float = 0,
    run_path: bool = False,
) -> dict[str, float]:
    """Dollars, by part, of one function's invocations (summed over them). ``mapping_requests``: the event
    source mapping's SQS requests for these invocations."""
    gb_seconds = duration_s(function, memory_mb, model) * memory_mb / 1024
    platform = model.platform_log_bytes if model.run_path_platform_logs or not run_path else 0
    log_bytes = function.get("log_bytes", 0) + function["count"] * platform
    return {
        "DynamoDB writes": (total(function, "wru") + total(function, "index_wru")) * WRU_PRICE,
        "DynamoDB reads": total(function, "rru") * RRU_PRICE,
        "SQS requests": (requests_of(function, "sqs") + mapping_requests) * SQS_PRICE,
        "Lambda requests": function["count"] * LAMBDA_REQUEST_PRICE,
        "Lambda duration": gb_seconds * GB_SECOND_PRICE,
        "CloudWatch Logs": log_bytes / 1e9 * LOGS_PRICE_PER_GB,
        "X-Ray traces": traces * XRAY_TRACE_PRICE,
    }


PARTS = (
    "DynamoDB writes",
    "DynamoDB reads",
    "SQS requests",
    "Lambda requests",
    "Lambda duration",
    "CloudWatch Logs",
    "X-Ray traces",
    "planner share",
    "indexer share",
    "API create share",
)


def create_dollars(create: dict[str, Any], model: Model) -> float:
    """One create call: API Gateway, the authorizer and the API function (one trace)."""
    parts = function_dollars(
        {**create, "count": create["invocations"]}, memory_mb=model.api_memory_mb, traces=1, model=model
    )
    return sum(parts.values()) + API_PRICE


def runs_per_job(period: int) -> float:
    return CREATE_SHARE_DAYS * 86_400 / period


def planned_runs(shape: dict[str, Any]) -> int:
    """The runs the planner's metered ticks planned: what its share is spread over (the worker's figures are
    per metered run, ``shape["runs"]``)."""
    return int(shape.get("planned_runs", shape["runs"]))


FIELDS = ("count", "own_cpu_s", "slept_s", "log_bytes", "log_lines")
UNITS = ("requests", "wru", "index_wru", "rru")


def combine(a: dict[str, Any], b: dict[str, Any], scale: float) -> dict[str, Any]:
    """``a + scale * b``, field by field and request kind by request kind (kinds that come to 0 dropped)."""
    out: dict[str, Any] = {key: a.get(key, 0) + scale * b.get(key, 0) for key in FIELDS}
    for what in UNITS:
        kinds = set(a.get(what, {})) | set(b.get(what, {}))
        values = {k: a.get(what, {}).get(k, 0) + scale * b.get(what, {}).get(k, 0) for k in kinds}
        out[what] = {k: v for k, v in sorted(values.items()) if abs(v) > 1e-9}
    if "serial_requests" in a or "serial_requests" in b:
        mine, theirs = serial_requests(a), serial_requests(b)
        services = set(mine) | set(theirs)
        out["serial_requests"] = {s: mine.get(s, 0) + scale * theirs.get(s, 0) for s in sorted(services)}
    return out


def serial_requests(function: dict[str, Any]) -> dict[str, float]:
    """Requests per service made one after another: as measured, or, where not measured, every request."""
    measured = function.get("serial_requests")
    if measured is not None:
        return dict(measured)
    return {service: requests_of(function, service) for service in ("dynamodb", "sqs")}


def base_tick(shape: dict[str, Any]) -> dict[str, Any] | None:
    """A tick that plans nothing: the mean of the shape's metered idle ticks (``None`` for figures that do
    not tell them apart, which then charge whole ticks)."""
    idle = shape.get("planner_idle")
    if not idle or not idle["count"]:
        return None
    return combine({}, idle, 1 / idle["count"])


def planner_marginal(shape: dict[str, Any]) -> dict[str, Any]:
    """The planner's work for the runs it planned: its planning ticks less one base tick each (no invocation
    of its own: ``count`` 0). Without idle ticks to measure the base by, the whole ticks."""
    base = base_tick(shape)
    if base is None:
        return dict(shape["planner"])
    planning = combine(shape["planner"], shape["planner_idle"], -1)
    marginal = combine(planning, base, -planning["count"])
    marginal["count"] = 0
    # A planning tick whose CPU or log bytes come out below the base's mean (noise) adds nothing.
    marginal["own_cpu_s"] = max(0.0, marginal["own_cpu_s"])
    marginal["log_bytes"] = max(0.0, marginal["log_bytes"])
    return marginal


def worker_traces(shape: dict[str, Any], model: Model) -> float:
    return xray_traces(shape["invocations_per_second"], model) if model.trace_run_path else 0.0


def tick_traces(ticks: float, model: Model) -> float:
    """A tick is alone in its second: traced if the planner is."""
    return ticks if model.trace_run_path else 0.0


def shape_dollars(
    shape: dict[str, Any], create: dict[str, Any], model: Model, *, tick_included: bool = False
) -> dict[str, float]:
    """Dollars per run, by part, of a measured shape: the worker's (with the event source mapping's requests)
    per metered run, the planner's marginal work per planned run (``tick_included``: its whole ticks), the
    create call's per run of the job's first 30 days."""
    runs = shape["runs"]
    worker = dict(shape["worker"])
    if model.target_ms:
        # A batch's jobs call their targets side by side: an invocation waits for about one call.
        worker["slept_s"] = worker["slept_s"] + worker["count"] * model.target_ms / 1000
    parts = function_dollars(
        worker,
        memory_mb=model.worker_memory_mb,
        traces=worker_traces(shape, model),
        model=model,
        mapping_requests=sum(shape["esm"].values()),
        run_path=True,
    )
    per_run = {part: value / runs for part, value in parts.items()}
    planner = planner_dollars(shape, model, tick_included=tick_included)
    per_run["planner share"] = sum(planner.values())
    per_run["indexer share"] = sum(indexer_dollars(shape, model).values())
    per_run["API create share"] = create_dollars(create, model) / runs_per_job(shape["period"])
    return per_run


def planner_dollars(shape: dict[str, Any], model: Model, *, tick_included: bool = False) -> dict[str, float]:
    """The planner's share per run, by part: its marginal work (``tick_included``: its whole ticks) over the
    runs it planned."""
    planner = shape["planner"] if tick_included else planner_marginal(shape)
    parts = function_dollars(
        planner,
        memory_mb=model.planner_memory_mb,
        traces=tick_traces(planner["count"], model),
        model=model,
        run_path=True,
    )
    return {part: value / planned_runs(shape) for part, value in parts.items()}


HOUR_ITEMS_KEY = "dynamodb.BatchWriteItem (hour item)"
"""The hour items' WRU among the indexer's, apart from its measured chunk writes: a model."""


def records_per_invocation(shape: dict[str, Any]) -> float:
    """Stream records per indexer invocation, as priced. A lone job: as measured, one invocation per run's
    writes (its worst case: no other run shares the window). A fleet: a model, the 2 s window's records of a
    deployment running ``DEPLOYMENT_RUNS_PER_S`` runs a second, or the fleet's own rate if higher, up to the
    batch size."""
    indexer = shape["indexer"]
    if shape["jobs"] == 1:
        return float(indexer["records"] / indexer["count"])
    records_per_run = indexer["records"] / shape["runs"]
    runs_per_s = max(DEPLOYMENT_RUNS_PER_S, shape["jobs"] / shape["period"])
    return float(min(INDEX_BATCH, runs_per_s * records_per_run * INDEX_WINDOW_S))


def hour_item_wru(shape: dict[str, Any]) -> float:
    """WRU of hour items over the shape's metered runs (a model): a warm indexer lists each of the tenant's
    hours once, one small item, spread over the tenant's runs in that hour."""
    indexer = shape["indexer"]
    runs_per_hour = shape["jobs"] * 3600 / shape["period"]
    return float(write_units(indexer["hour_item_bytes"]) * shape["runs"] / runs_per_hour)


def indexer_function(shape: dict[str, Any]) -> dict[str, Any] | None:
    """The indexer's work for the shape's metered runs, as priced: its invocations as
    ``records_per_invocation`` gives them, each with the measured mean own CPU, requests and log bytes of an
    invocation; the measured chunk writes; the hour items. None for figures without the indexer."""
    indexer = shape.get("indexer")
    if not indexer or not indexer["count"]:
        return None
    invocations = indexer["records"] / records_per_invocation(shape)
    scale = invocations / indexer["count"]
    function = combine({}, indexer, scale)
    function["count"] = invocations
    function["wru"] = {**indexer["wru"], HOUR_ITEMS_KEY: hour_item_wru(shape)}
    return function


def indexer_dollars(shape: dict[str, Any], model: Model) -> dict[str, float]:
    """The indexer's share per run, by part (all 0 for figures without it: before run path v2)."""
    function = indexer_function(shape)
    if function is None:
        return dict.fromkeys(PARTS[:7], 0.0)
    parts = function_dollars(
        function,
        memory_mb=model.indexer_memory_mb,
        traces=tick_traces(function["count"], model),  # a batch every 2 s at most: each alone in its second
        model=model,
        run_path=True,
    )
    return {part: value / shape["runs"] for part, value in parts.items()}


def tick_dollars(tick: dict[str, Any], model: Model) -> dict[str, float]:
    """One base tick (a measured idle tick, ``count`` 1), by part."""
    return function_dollars(
        tick,
        memory_mb=model.planner_memory_mb,
        traces=tick_traces(tick["count"], model),
        model=model,
        run_path=True,
    )


def pooled_base_tick(figures: dict[str, Any]) -> dict[str, Any]:
    """The base tick over every idle tick metered in the six shapes."""
    idle: dict[str, Any] = {}
    for name in _main_shapes(figures):
        idle = combine(idle, figures["shapes"][name]["planner_idle"], 1)
    return combine({}, idle, 1 / idle["count"])


def before_shape(before: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """The before figures in the shape of a measured one. Requests, units and invocations are measured; the
    parts moto cannot show take the present engine's figures per invocation (``like``: the lone job of the
    same period): its own CPU, its wait before the fire (the engine waited the same way), its log bytes. The
    mapping's requests are one receive and one delete per invocation, as now; the empty polls and the
    per-message deletes of the measuring script are left out."""

    def minus(total_: dict[str, float], part: dict[str, float]) -> dict[str, float]:
        out = {key: value - part.get(key, 0) for key, value in total_.items()}
        return {key: value for key, value in out.items() if value}

    mapping = ("sqs.ReceiveMessage", "sqs.DeleteMessage", "sqs.DeleteMessageBatch")
    invocations, ticks = before["invocations"], before["ticks"]
    per_invocation = {
        key: like["worker"][key] / like["worker"]["count"] for key in ("own_cpu_s", "log_bytes")
    }
    per_invocation["slept_s"] = BEFORE_WAIT_S
    per_tick = {key: like["planner"][key] / like["planner"]["count"] for key in ("own_cpu_s", "log_bytes")}
    requests = {k: v for k, v in before["requests"].items() if k not in mapping}
    worker = {
        "count": invocations,
        "requests": minus(requests, before["tick_requests"]),
        "wru": minus(before["wru"], before["tick_wru"]),
        "index_wru": minus(before["index_wru"], before["tick_index_wru"]),
        "rru": minus(before["rru"], before["tick_rru"]),
        **{key: value * invocations for key, value in per_invocation.items()},
    }
    planner = {
        "count": ticks,
        "requests": before["tick_requests"],
        "wru": before["tick_wru"],
        "index_wru": before["tick_index_wru"],
        "rru": before["tick_rru"],
        "slept_s": 0.0,
        **{key: value * ticks for key, value in per_tick.items()},
    }
    return {
        "period": before["period"],
        "jobs": 1,
        "runs": before["runs"],
        "worker": worker,
        "planner": planner,
        "esm": {"sqs.ReceiveMessage": invocations, "sqs.DeleteMessageBatch": invocations},
        "invocations_per_second": {"1": invocations},
    }


# --- measuring ----------------------------------------------------------------------------------------------
def worker_seconds(period: int, jobs: int) -> int:
    """The worker's metered seconds for a shape: the whole 14-minute cycle, or its first minute when the cycle
    holds more than ``MAX_METERED_RUNS`` runs."""
    from bench._cost_workload import CYCLE_TICKS

    cycle = CYCLE_TICKS * 60
    return cycle if jobs * cycle // period <= MAX_METERED_RUNS else 60


def index_window(jobs: int) -> float:
    """The indexer's batching window in a shape's workload: a lone job's runs each in an invocation of their
    own (its worst case), a fleet's in the deployed 2 s window."""
    return INDEX_WINDOW_S if jobs > 1 else 0.0


def shapes() -> list[tuple[str, Any]]:
    from bench._cost_workload import Shape

    found: list[tuple[str, Any]] = []
    for period in PERIODS:
        history = HISTORY_SECONDS // period
        for name, jobs, seeded in (("lone", 1, history), ("fleet", FLEET, min(history, FLEET_HISTORY_RUNS))):
            shape = Shape(period, jobs, seeded, worker_seconds(period, jobs), index_window(jobs))
            found.append((f"{period}s {name}", shape))
    short = Shape(1, 1, CHECK_HISTORY_RUNS, worker_seconds(1, 1), index_window(1))
    found.append(("1s lone, short history", short))
    return found


def _effort(shape: Any) -> float:
    """Roughly the seconds a shape takes under moto: its metered runs, the messages drained past them, the
    planner's 16 minutes, and its seeded items."""
    metered = shape.jobs * shape.worker_seconds / shape.period
    drained = shape.jobs * 840 / shape.period - metered
    return float(metered * 0.1 + drained * 0.003 + shape.jobs * shape.history * 0.0006 + 5)


def _measure_one(item: tuple[str, Any]) -> tuple[str, dict[str, Any]]:
    from bench._cost_workload import measure as measure_shape

    name, shape = item
    started = time.perf_counter()
    result = measure_shape(shape)
    print(f"{name}: measured in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return name, result


def measure(processes: int = 2) -> dict[str, Any]:
    """Every shape, ``processes`` at a time (each in a process of its own: moto's state is per process), the
    longest first; then the create call and botocore's CPU per request."""
    from bench._cost_workload import measure_create
    from bench.worker_cpu import client_cpu_per_request

    work = sorted(shapes(), key=lambda item: -_effort(item[1]))
    with ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        measured = dict(pool.map(_measure_one, work))
    return {
        "shapes": {name: measured[name] for name, _ in shapes()},
        "create": measure_create(60),
        "botocore_ms": round(client_cpu_per_request(), 4),
    }


# --- the report ---------------------------------------------------------------------------------------------
def _money(value: float) -> str:
    """Dollars per million."""
    if 0 < value * 1e6 < 0.005:
        return "<$0.01"
    if value * 1e6 <= -0.005:
        return f"-${-value * 1e6:.2f}"
    if value < 0:
        return "$0.00"
    return f"${value * 1e6:.2f}"


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def model_of(figures: dict[str, Any]) -> Model:
    return Model(botocore_ms=figures.get("botocore_ms", Model.botocore_ms))


def _main_shapes(figures: dict[str, Any]) -> list[str]:
    """The six shapes, by period, the fleet before the lone job (the saved figures' keys are sorted)."""
    names = [name for name in figures["shapes"] if "short" not in name]
    return sorted(names, key=lambda n: (figures["shapes"][n]["period"], -figures["shapes"][n]["jobs"]))


def _per_run(shape: dict[str, Any], what: str) -> float:
    """Requests or units of one kind per run: the worker's (and the mapping's) per metered run plus the
    planner's marginal work per planned run."""
    worker = total(shape["worker"], what) + (total(shape, "esm") if what == "requests" else 0)
    indexer = indexer_function(shape)
    worker += total(indexer, what) if indexer is not None else 0
    return float(worker / shape["runs"] + total(planner_marginal(shape), what) / planned_runs(shape))


def _requests_per_run(shape: dict[str, Any]) -> float:
    return _per_run(shape, "requests")


def before_dollars(figures: dict[str, Any], period: int) -> dict[str, float] | None:
    if str(period) not in BEFORE:
        return None
    like = figures["shapes"][f"{period}s lone"]
    shape = before_shape(BEFORE[str(period)], like)
    model = Model(
        botocore_ms=model_of(figures).botocore_ms, trace_run_path=BEFORE_TRACED, run_path_platform_logs=True
    )
    return shape_dollars(shape, figures["create"], model, tick_included=True)


def summary_block(figures: dict[str, Any]) -> str:
    model = model_of(figures)
    rows = []
    for name in _main_shapes(figures):
        shape = figures["shapes"][name]
        dollars = sum(shape_dollars(shape, figures["create"], model).values())
        all_in = sum(shape_dollars(shape, figures["create"], model, tick_included=True).values())
        before = before_dollars(figures, shape["period"])
        history = f"{shape['history_per_job']:,} runs" + (" each" if shape["jobs"] > 1 else "")
        rows.append(
            [
                f"every {shape['period']} s",
                "lone job" if shape["jobs"] == 1 else f"fleet of {shape['jobs']}",
                history,
                f"{shape['runs']:,}",
                _num(_requests_per_run(shape)),
                f"**{_money(dollars)}**" if shape["jobs"] > 1 else _money(dollars),
                _money(all_in),
                _money(sum(before.values())) if before else QUOTED.get(str(shape["period"]), "not measured"),
                _money(EVENTBRIDGE_SCHEDULER_PRICE),
            ]
        )
    return _table(
        [
            "rate job",
            "shape",
            "history seeded",
            "runs metered (worker)",
            "requests per run",
            "$ per million runs (tick's base as fixed cost)",
            "$ per million runs, all-in, tick included",
            "before (lone job, all-in)",
            "EventBridge Scheduler",
        ],
        rows,
    )


def dollars_block(figures: dict[str, Any]) -> str:
    model = model_of(figures)
    names = _main_shapes(figures)
    per_shape = {name: shape_dollars(figures["shapes"][name], figures["create"], model) for name in names}
    all_in = {
        name: sum(
            shape_dollars(figures["shapes"][name], figures["create"], model, tick_included=True).values()
        )
        for name in names
    }
    befores = {period: before_dollars(figures, period) for period in PERIODS}
    header = ["part", *names, *(f"{p}s before" for p in PERIODS if befores[p])]
    rows = []
    for part in PARTS:
        label = "planner share (marginal)" if part == "planner share" else part
        rows.append(
            [
                label,
                *(_money(per_shape[name][part]) for name in names),
                *(_money(b[part]) for b in befores.values() if b),
            ]
        )
    rows.append(
        [
            "**total**",
            *(f"**{_money(sum(per_shape[name].values()))}**" for name in names),
            *(f"**{_money(sum(b.values()))}**" for b in befores.values() if b),
        ]
    )
    rows.append(
        [
            "the ticks' base, spread over the runs they planned",
            *(_money(all_in[name] - sum(per_shape[name].values())) for name in names),
            *("in the total" for b in befores.values() if b),
        ]
    )
    rows.append(
        [
            "all-in, tick included",
            *(_money(all_in[name]) for name in names),
            *(_money(sum(b.values())) for b in befores.values() if b),
        ]
    )
    return _table(header, rows)


def planner_block(figures: dict[str, Any]) -> str:
    model = model_of(figures)
    names = _main_shapes(figures)
    shares = {name: planner_dollars(figures["shapes"][name], model) for name in names}
    whole = {name: planner_dollars(figures["shapes"][name], model, tick_included=True) for name in names}
    rows = [[part, *(_money(shares[name][part]) for name in names)] for part in PARTS[:7]]
    rows.append(["**marginal share**", *(f"**{_money(sum(shares[name].values()))}**" for name in names)])
    rows.append(["whole ticks' share (all-in)", *(_money(sum(whole[name].values())) for name in names)])
    ticks = [
        "runs planned per planning tick",
        *(_num(planned_runs(figures["shapes"][n]) / _planning_ticks(figures["shapes"][n])) for n in names),
    ]
    return _table(["part", *names], [ticks, *rows])


def _planning_ticks(shape: dict[str, Any]) -> int:
    return int(shape["planner"]["count"] - shape.get("planner_idle", {}).get("count", 0))


def fixed_block(figures: dict[str, Any]) -> str:
    """The base tick per month per planner group, by part, with the arithmetic."""
    model = model_of(figures)
    tick = pooled_base_tick(figures)
    parts = tick_dollars(tick, model)
    dynamodb = requests_of(tick, "dynamodb")
    one_after_another = serial_requests(tick).get("dynamodb", 0)
    billed_ms = duration_s(tick, model.planner_memory_mb, model) * 1000
    platform = model.platform_log_bytes if model.run_path_platform_logs else 0
    log_bytes = tick["log_bytes"] + platform
    how = {
        "DynamoDB writes": "none",
        "DynamoDB reads": f"{_num(total(tick, 'rru'))} RRU ("
        + ", ".join(f"{_num(v)} `{k.split('.')[1]}`" for k, v in sorted(tick["requests"].items()))
        + f") x ${RRU_PRICE * 1e6:.3f} per million",
        "SQS requests": "none",
        "Lambda requests": f"1 invocation x ${LAMBDA_REQUEST_PRICE * 1e6:.2f} per million",
        "Lambda duration": f"{billed_ms:.0f} ms billed ({tick['own_cpu_s'] * 1000:.1f} ms own CPU x"
        f" {model.vcpu_mb / model.planner_memory_mb:.2f}; of its {_num(dynamodb)} DynamoDB requests,"
        f" {_num(one_after_another)} one after another, the shard queries four at a time, x"
        f" {model.dynamodb_latency_s * 1000:.0f} ms) x {model.planner_memory_mb / 1024:g} GB x"
        f" ${GB_SECOND_PRICE:.10f}",
        "CloudWatch Logs": f"{log_bytes:.0f} B ({tick['log_bytes']:.0f} B written,"
        f" {platform} B platform) x ${LOGS_PRICE_PER_GB:.2f} per GB",
        "X-Ray traces": "1 trace x $5.00 per million" if model.trace_run_path else "none (PassThrough)",
    }
    rows = [
        [part, how[part], _money(value), f"${value * TICKS_PER_MONTH:.4f}"] for part, value in parts.items()
    ]
    rows.append(
        [
            "**total**",
            f"{int(tick['count'] and 1)} tick; {TICKS_PER_MONTH:,} ticks a month (30 days, one a minute)",
            f"**{_money(sum(parts.values()))}**",
            f"**${sum(parts.values()) * TICKS_PER_MONTH:.2f}**",
        ]
    )
    idle = sum(figures["shapes"][n]["planner_idle"]["count"] for n in _main_shapes(figures))
    return (
        _table(
            [
                "part",
                "per base tick (mean of measured idle ticks)",
                "$ per million ticks",
                "$ per month per group",
            ],
            rows,
        )
        + f"\n\nMeasured on the {idle} ticks of the six shapes' windows that planned nothing (16 due shards"
        " and the 4 attention shards, as one planner group holds them all)."
    )


def _billed_ms(function: dict[str, Any], memory_mb: int, model: Model) -> str:
    return f"{duration_s(function, memory_mb, model) * 1000 / function['count']:.0f}"


def variant_block(figures: dict[str, Any]) -> str:
    """The same measurements priced with a smaller worker."""
    deployed = model_of(figures)
    small = Model(botocore_ms=deployed.botocore_ms, worker_memory_mb=VARIANT_WORKER_MB)
    rows = []
    for name in _main_shapes(figures):
        shape = figures["shapes"][name]
        a = shape_dollars(shape, figures["create"], deployed)
        b = shape_dollars(shape, figures["create"], small)
        rows.append(
            [
                name,
                _money(sum(a.values())),
                _money(a["Lambda duration"]),
                _billed_ms(shape["worker"], deployed.worker_memory_mb, deployed),
                _money(sum(b.values())),
                _money(b["Lambda duration"]),
                _billed_ms(shape["worker"], small.worker_memory_mb, small),
            ]
        )
    return _table(
        [
            "shape",
            f"worker {deployed.worker_memory_mb} MB (deployed): $ per million runs",
            "of which Lambda duration",
            "worker billed ms per invocation",
            f"worker {VARIANT_WORKER_MB} MB: $ per million runs",
            "of which Lambda duration",
            "worker billed ms per invocation",
        ],
        rows,
    )


def _operations(shape: dict[str, Any]) -> list[tuple[str, str, dict[str, float]]]:
    """(who, operation, per-run figures) of every request kind of a shape."""
    runs = shape["runs"]
    found = []
    for who, part in (("worker", shape["worker"]), ("planner", planner_marginal(shape))):
        per = runs if who == "worker" else planned_runs(shape)
        for operation in sorted(set().union(*(part.get(what, {}) for what in UNITS))):
            found.append(
                (
                    who,
                    operation,
                    {
                        what: part.get(what, {}).get(operation, 0) / per
                        for what in ("requests", "wru", "index_wru", "rru")
                    },
                )
            )
    indexer = indexer_function(shape)
    if indexer is not None:
        for operation in sorted(set().union(*(indexer.get(what, {}) for what in UNITS))):
            values = {what: indexer.get(what, {}).get(operation, 0) / runs for what in UNITS}
            found.append(("indexer", operation, values))
    for operation, count in shape["esm"].items():
        found.append(("event source mapping", operation, {"requests": count / runs}))
    return found


def requests_block(figures: dict[str, Any], period: int) -> str:
    pair = [name for name in _main_shapes(figures) if figures["shapes"][name]["period"] == period]
    operations: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for name in pair:
        for who, operation, values in _operations(figures["shapes"][name]):
            operations.setdefault((who, operation), {})[name] = values
    header = ["who", "request"]
    for name in pair:
        header += [f"{name}: requests", "WRU", "index WRU", "RRU"]
    rows = []
    for (who, operation), by_shape in operations.items():
        row = [who, f"`{operation}`"]
        for name in pair:
            values = by_shape.get(name, {})
            row += [_num(values.get(what, 0)) for what in ("requests", "wru", "index_wru", "rru")]
        rows.append(row)
    totals = ["**total**", ""]
    for name in pair:
        shape = figures["shapes"][name]
        totals += [
            f"**{_num(_requests_per_run(shape))}**",
            *(f"**{_num(_per_run(shape, what))}**" for what in ("wru", "index_wru", "rru")),
        ]
    rows.append(totals)
    return _table(header, rows)


def lambda_block(figures: dict[str, Any]) -> str:
    """Per invocation: what the duration model starts from, measured."""
    model = model_of(figures)
    rows = []
    for name in _main_shapes(figures):
        shape = figures["shapes"][name]
        worker = shape["worker"]
        count = worker["count"]
        base = base_tick(shape) or shape["planner"]
        marginal = planner_marginal(shape)
        planning = _planning_ticks(shape)
        rows.append(
            [
                name,
                _num(shape["runs"] / count),
                f"{worker['own_cpu_s'] * 1000 / count:.2f}",
                f"{worker['slept_s'] * 1000 / count:.0f}",
                f"{duration_s(worker, model.worker_memory_mb, model) * 1000 / count:.0f}",
                f"{worker['log_bytes'] / count:.0f} B in {worker['log_lines'] / count:.1f}",
                f"{base['own_cpu_s'] * 1000:.1f}",
                f"{duration_s(base, model.planner_memory_mb, model) * 1000:.0f}",
                f"{marginal['own_cpu_s'] * 1000 / planning:.1f}",
                f"{marginal['slept_s'] * 1000 / planning:.0f}",
                f"{duration_s(marginal, model.planner_memory_mb, model) * 1000 / planning:.0f}",
            ]
        )
    return _table(
        [
            "shape",
            "runs per worker invocation",
            "worker own CPU ms",
            "worker wait before the fire ms",
            "worker billed ms (model)",
            "worker log bytes (lines)",
            "base tick: planner own CPU ms",
            "base tick: billed ms (model)",
            "planning tick, marginal: own CPU ms",
            "planning tick, marginal: sleep between sends ms",
            "planning tick, marginal: billed ms (model)",
        ],
        rows,
    )


def history_block(figures: dict[str, Any]) -> str:
    long_, short = figures["shapes"]["1s lone"], figures["shapes"]["1s lone, short history"]
    rows = []
    for name, shape in (("1s lone", long_), ("1s lone, short history", short)):
        runs = shape["runs"]
        rows.append(
            [
                name,
                f"{shape['history_per_job']:,}",
                f"{shape['runs']:,}",
                ", ".join(
                    f"{op.split('.')[1]} {_num(v / runs)}"
                    for op, v in sorted(shape["worker"]["requests"].items())
                ),
                _num(total(shape["worker"], "wru") / runs),
                _num(total(shape["worker"], "index_wru") / runs),
                _num(total(shape["worker"], "rru") / runs),
                _num(sum(shape["planner"]["requests"].values()) / planned_runs(shape)),
                _num(total(shape["planner"], "rru") / planned_runs(shape)),
            ]
        )
    return _table(
        [
            "measurement",
            "past runs seeded",
            "runs measured",
            "worker requests per run",
            "WRU",
            "index WRU",
            "RRU",
            "planner requests per run (whole ticks)",
            "planner RRU per run (whole ticks)",
        ],
        rows,
    )


def _per_run_counts(shape: dict[str, Any]) -> tuple[Any, ...]:
    per = {"worker": shape["runs"], "planner": planned_runs(shape)}
    return tuple(
        (who, what, tuple(sorted((k, round(v / per[who], 6)) for k, v in shape[who].get(what, {}).items())))
        for who in ("worker", "planner")
        for what in ("requests", "wru", "index_wru", "rru")
    )


def history_holds(figures: dict[str, Any]) -> bool:
    shapes_ = figures["shapes"]
    return _per_run_counts(shapes_["1s lone"]) == _per_run_counts(shapes_["1s lone, short history"])


def before_block(figures: dict[str, Any]) -> str:
    rows = []
    for period in PERIODS:
        before = BEFORE.get(str(period))
        if before is None:
            continue
        like = figures["shapes"][f"{period}s lone"]
        shape = before_shape(before, like)
        rows.append(
            [
                f"every {period} s",
                before["history"],
                f"{shape['runs']:,}",
                *(_num(_per_run(shape, what)) for what in ("requests", "wru", "index_wru", "rru")),
            ]
        )
    return _table(
        ["rate job (lone)", "history", "runs measured", "requests per run", "WRU", "index WRU", "RRU"], rows
    )


def model_block(figures: dict[str, Any]) -> str:
    m = model_of(figures)
    per_10ms = 0.010 * m.worker_memory_mb / 1024 * GB_SECOND_PRICE
    per_100ms_wait = 0.100 * m.worker_memory_mb / 1024 * GB_SECOND_PRICE
    return "\n".join(
        [
            "- Lambda duration, per invocation: own CPU (measured) plus botocore's "
            f"{m.botocore_ms:.2f} ms per request (measured with a stubbed client), stretched by "
            f"{m.vcpu_mb:,} MB / memory (a vCPU at {m.vcpu_mb:,} MB: worker {m.worker_memory_mb} MB "
            f"x{m.vcpu_mb / m.worker_memory_mb:.2f}, planner {m.planner_memory_mb} MB "
            f"x{m.vcpu_mb / m.planner_memory_mb:.2f}, this machine's core taken as a Graviton vCPU); plus "
            f"{m.dynamodb_latency_s * 1000:.0f} ms per DynamoDB request and {m.sqs_latency_s * 1000:.0f} ms "
            "per SQS request the function makes one after another, as measured (the planner, which sends a "
            "moment's batches sixteen at a time: its own thread's requests and its busiest sending "
            "thread's; the worker, which handles a batch's jobs side by side: the invoking thread's and the "
            "busiest batch thread's); plus the worker's wait before a fire (the longest of its threads') "
            "and the planner's sleep between its timed sends (both measured on the fake clock, on which "
            "the planner's own requests pass that latency, so that its sleep until a moment's sends is "
            "what its work before them leaves, as on AWS); plus "
            "0.5 ms of billing round-up. The GIL runs one thread at a time, so the CPU of every thread "
            "counts. "
            f"${GB_SECOND_PRICE:.10f} per GB-s (arm64).",
            "- The webhook target's own response time is left out: each 10 ms of it adds "
            f"${per_10ms * 1e6:.3f} per million invocations (a batch's jobs call their targets side by "
            "side; a batch of ten runs of one job would wait for ten calls), "
            f"and each 100 ms of wait per invocation ${per_100ms_wait * 1e6:.3f} per million invocations.",
            f"- CloudWatch Logs: the bytes the handlers wrote (measured) plus {m.platform_log_bytes} B of "
            "Lambda platform lines (START and REPORT) per invocation of the API and the authorizer"
            + (
                ", the planner and the worker"
                if m.run_path_platform_logs
                else "; none for the planner and the worker, whose system log level is WARN"
                " (`run_path_platform_logs` off, as deployed)"
            )
            + f", ${LOGS_PRICE_PER_GB:.2f} per GB (10^9 B) ingested.",
            (
                f"- X-Ray, ${XRAY_TRACE_PRICE * 1e6:.2f} per million traces: `trace_run_path` is "
                f"{'on' if m.trace_run_path else 'off'} (`StageConfig`, deployed default off), so "
                + (
                    f"the planner and the worker record {m.xray_reservoir_per_second} invocation per second "
                    f"and {m.xray_rate:.0%} of the rest (the default rule, taken per function; a tick is "
                    "alone in its second: every tick is traced)."
                    if m.trace_run_path
                    else "the planner and the worker run PassThrough: invoked by EventBridge and by SQS "
                    "with no sampled trace header coming in, they record no traces. The API and the "
                    "authorizer are traced (the create call's one trace). The before column is priced as "
                    "that run path was deployed, every function traced (1 invocation per second and "
                    f"{m.xray_rate:.0%} of the rest)."
                )
            ),
            "- Planner: a tick's base (measured on the window's ticks that plan nothing: the invocation, "
            "its CPU, the index queries of the 16 due and 4 attention shards, the due shard count, its log "
            "lines) is a fixed cost per month per planner group (see Fixed cost); a run is charged the "
            "planning tick less one base tick (its per-job requests and units, its CPU beyond the base, "
            "its sleep between sends, its extra log bytes), over the runs it planned.",
            "- Indexer: the runs table's stream records go to the indexer Lambda's handler in the workload, "
            f"batched as its event source mapping batches them ({INDEX_WINDOW_S:g} s window, up to "
            f"{INDEX_BATCH:,} records): each invocation's own CPU, `BatchWriteItem` and log bytes are "
            "measured, and each chunk item's size (one WRU per KB). Its duration is priced as the planner's, "
            f"at {m.indexer_memory_mb} MB (x{m.vcpu_mb / m.indexer_memory_mb:.2f}); it is on the run path "
            "(PassThrough, system log level WARN). Stream reads by a Lambda trigger are not billed. A "
            "fleet's invocations per run are a model: its deployment runs "
            f"{DEPLOYMENT_RUNS_PER_S} runs a second or more (or the fleet's own rate if higher) on one "
            f"stream shard, so a {INDEX_WINDOW_S:g} s window holds at least "
            f"{DEPLOYMENT_RUNS_PER_S * INDEX_WINDOW_S:g} records (the workload's own batches of the fleet "
            "alone hold as many); a lone job's are measured with each run's writes in an invocation of their "
            "own, its worst case. The hour items are a model too: one per tenant and hour per warm indexer, "
            "spread over the tenant's runs in the hour.",
            f"- API create share: one `POST /v1/jobs` (API Gateway ${API_PRICE * 1e6:.2f} per million, the "
            "authorizer and API invocations at the API's memory, their requests and log lines, one trace) "
            f"spread over the job's runs in {CREATE_SHARE_DAYS} days.",
        ]
    )


def indexer_block(figures: dict[str, Any]) -> str:
    """What the indexer does per run and per invocation, measured and (invocations of a fleet) modelled; then
    its share per run, by part."""
    model = model_of(figures)
    names = _main_shapes(figures)
    rows = []
    for name in names:
        shape = figures["shapes"][name]
        indexer = shape["indexer"]
        runs, count = shape["runs"], indexer["count"]
        function = indexer_function(shape)
        assert function is not None
        chunks = indexer["chunk_entries"]
        sizes = indexer["chunk_item_bytes"]
        chunk_wru = indexer["wru"].get("dynamodb.BatchWriteItem", 0)
        priced = records_per_invocation(shape)
        rows.append(
            [
                name,
                _num(indexer["records"] / runs),
                _num(indexer["records"] / count),
                f"{_num(priced)} (model)" if shape["jobs"] > 1 else f"{_num(priced)} (a batch per run)",
                _num(function["count"] / runs),
                _num(len(chunks) / runs),
                _num(sum(chunks) / len(chunks)),
                f"{sum(sizes) / len(sizes):.0f} B (max {max(sizes)})",
                _num(chunk_wru / runs),
                _num(hour_item_wru(shape) / runs),
                f"{indexer['own_cpu_s'] * 1000 / count:.2f}",
                _billed_ms(indexer, model.indexer_memory_mb, model),
                f"{indexer['log_bytes'] / count:.0f} B",
            ]
        )
    measured = _table(
        [
            "shape",
            "stream records per run",
            "records per invocation, measured",
            "records per invocation, priced",
            "invocations per run",
            "chunk items per run",
            "runs per chunk",
            "chunk item size",
            "chunk WRU per run",
            "hour item WRU per run (model)",
            "own CPU ms per invocation",
            "billed ms per invocation (model)",
            "log bytes per invocation",
        ],
        rows,
    )
    shares = {name: indexer_dollars(figures["shapes"][name], model) for name in names}
    parts = [
        ["stream records (read by the event source mapping)", *("$0.00" for _ in names)],
        *([part, *(_money(shares[name][part]) for name in names)] for part in PARTS[:7]),
        ["**indexer share**", *(f"**{_money(sum(shares[name].values()))}**" for name in names)],
    ]
    return measured + "\n\n" + _table(["part", *names], parts)


def _fleets(figures: dict[str, Any]) -> list[str]:
    return [name for name in _main_shapes(figures) if figures["shapes"][name]["jobs"] > 1]


def listing_block(figures: dict[str, Any]) -> str:
    """A first page of the tenant-wide run list, read after each fleet's window: its DynamoDB reads."""
    rows = []
    for name in _fleets(figures):
        shape = figures["shapes"][name]
        page, sizes = shape["page"], shape["indexer"]["chunk_item_bytes"]
        queries = page["requests"].get("dynamodb.Query", 0)
        rru = total(page, "rru")
        rows.append(
            [
                name,
                f"{page['runs']}",
                f"1 + {queries - 1}",
                f"{sum(sizes) / len(sizes) / 1000:.2f} kB",
                _num(page["rru"].get("dynamodb.Query", 0)),
                f"{page['requests'].get('dynamodb.BatchGetItem', 0)}",
                _num(page["rru"].get("dynamodb.BatchGetItem", 0)),
                _num(rru),
                f"${rru * RRU_PRICE * 1e6:.2f}",
            ]
        )
    return _table(
        [
            "index written by",
            f"runs on the page (of {PAGE})",
            "queries (hour list + chunks)",
            "chunk item size (mean)",
            "query RRU",
            "`BatchGetItem`",
            "its RRU",
            "RRU per page",
            "$ per million pages (DynamoDB reads)",
        ],
        rows,
    )


BLOCKS = (
    "summary",
    "fixed",
    "variant",
    "model",
    "lambda",
    "requests-1",
    "requests-10",
    "requests-60",
    "dollars",
    "planner",
    "indexer",
    "listing",
    "before",
    "history",
)


def blocks(figures: dict[str, Any]) -> dict[str, str]:
    return {
        "summary": summary_block(figures),
        "fixed": fixed_block(figures),
        "variant": variant_block(figures),
        "model": model_block(figures),
        "lambda": lambda_block(figures),
        **{f"requests-{p}": requests_block(figures, p) for p in PERIODS},
        "dollars": dollars_block(figures),
        "planner": planner_block(figures),
        "indexer": indexer_block(figures),
        "listing": listing_block(figures),
        "before": before_block(figures),
        "history": history_block(figures)
        + "\n\n"
        + (
            "The worker's and the planner's requests and units per run are the same with either history."
            if history_holds(figures)
            else "**The per-run figures differ with the history: the engine is not O(1) here.**"
        ),
    }


def write_doc(figures: dict[str, Any], path: Path = DOC) -> None:
    write_blocks(path, "cost", blocks(figures))


def doc_blocks(text: str) -> dict[str, str]:
    return read_blocks(text, "cost", BLOCKS)


def save(figures: dict[str, Any]) -> None:
    """The figures to ``bench/cost_figures.json`` and the generated blocks of ``docs/cost.md`` from them."""
    FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    # From the figures as saved (their keys sorted), as the test that checks the document reads them: a
    # table's rows follow its keys' order.
    write_doc(json.loads(FIGURES.read_text()))


def section(figures: dict[str, Any] | None = None) -> str:
    """The markdown section of ``docs/benchmarks.md``. Measuring (no figures given) also saves the figures and
    rewrites the generated blocks of ``docs/cost.md``, so the two documents show the same run."""
    if figures is None:
        figures = measure()
        save(figures)
    generated = blocks(figures)
    model = model_of(figures)
    fleets = {
        name: sum(shape_dollars(figures["shapes"][name], figures["create"], model).values())
        for name in _main_shapes(figures)
        if figures["shapes"][name]["jobs"] > 1
    }
    over = [name for name, dollars in fleets.items() if dollars > BUDGET]
    verdict = (
        f"and it is not met by {', '.join(over)} (at the deployed settings)"
        if over
        else "and every fleet shape meets it at the deployed settings (a lone job does not: it pays"
        " a whole invocation's receive, delete and request per run)"
    )
    month = sum(tick_dollars(pooled_base_tick(figures), model).values()) * TICKS_PER_MONTH
    return "\n".join(
        [
            "## Cost per run: requests and dollars, all-in",
            "",
            f"Command: `{COMMAND}` (rate jobs at steady state through the real planner and worker",
            "handlers under moto on a fake clock, every request metered; a few minutes on the",
            "shared two-core machine). It also rewrites the tables of [cost.md](cost.md), which gives the",
            "method, the model for what moto cannot show, the requests per run by kind and what is on the",
            "run path. A planner tick's base is a fixed cost of the planner group (measured on ticks that",
            f"plan nothing: ${month:.2f} a month per group); a run pays the planner's marginal work for it.",
            "The all-in column charges whole ticks to the runs they plan. Fleet rows are in bold; the",
            f"budget is ${BUDGET * 1e6:.2f} per million runs, {verdict}. The worker's measured wait",
            "before a fire assumes the planner's sends take no time, the early side: see cost.md.",
            "",
            generated["summary"],
            "",
            "Dollars per million runs, by part:",
            "",
            generated["dollars"],
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print the measured figures as JSON")
    parser.add_argument(
        "--write-doc", action="store_true", help="rewrite the generated blocks of docs/cost.md"
    )
    parser.add_argument("--figures", help="figures from an earlier --json run instead of measuring")
    args = parser.parse_args(argv)
    figures = json.loads(Path(args.figures).read_text()) if args.figures else measure()
    if args.json:
        print(json.dumps(figures, indent=1, sort_keys=True))
        return 0
    if not args.figures:
        save(figures)
        print(f"saved {FIGURES} and rewrote {DOC}", file=sys.stderr)
    elif args.write_doc:
        write_doc(figures)
        print(f"rewrote {DOC}", file=sys.stderr)
    if not args.write_doc:
        print(section(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
