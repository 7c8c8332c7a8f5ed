"""What pools cost: an idle worker's long polls for a month, and one pool run (claim, heartbeats, complete).

    python -m bench.pool_cost               # measure; print the figures and the table
    python -m bench.pool_cost --write-doc   # measure; save bench/pool_cost_figures.json, rewrite docs/cost.md
    python -m bench.pool_cost --write-doc --figures bench/pool_cost_figures.json   # the table again

Every call goes through the API Gateway stand-in (the TOKEN authorizer, then the API Lambda's handler) under
moto in process, on a fake clock, with the meter of ``bench.cost`` on the API's DynamoDB and SQS clients:
requests, table and index write units and read units, as DynamoDB bills them. The claim's long poll sleeps
on the fake clock, so a 20-second poll takes milliseconds here and its wait is counted, not guessed.

Priced with ``bench.cost``'s prices and Lambda model: billed duration = the wait slept, own CPU stretched to
the API function's share of a vCPU (``api_memory_mb``), and AWS's time per request. API Gateway REST bills
each request ($3.50 per million); its TOKEN authorizer's answer is cached ``authorizer_cache_seconds`` per
token, so an idle worker polling every 20 s invokes the authorizer once per 300 s, not once per poll.
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import ROOT, read_blocks, write_blocks
from bench._cost_meter import Meter, Tally
from bench.cost import (
    API_PRICE,
    DEPLOYED,
    DOC,
    EVENTBRIDGE_SCHEDULER_PRICE,
    GB_SECOND_PRICE,
    LAMBDA_REQUEST_PRICE,
    RRU_PRICE,
    SQS_PRICE,
    WRU_PRICE,
    Model,
    duration_s,
    total,
)

COMMAND = "python -m bench.pool_cost"
FIGURES = Path(ROOT) / "bench" / "pool_cost_figures.json"
PREFIX = "pool-cost"
BLOCKS = ("table",)

POOL = "gpu"
WAIT_SECONDS = 20
POLLS_PER_MONTH = 30 * 24 * 3600 // WAIT_SECONDS  # 30 days x 24 h x 180 polls an hour: 129,600
RUN_SECONDS = 3600
HEARTBEAT_EVERY = 20
HEARTBEATS = RUN_SECONDS // HEARTBEAT_EVERY  # 180
AUTHORIZER_MEMORY_MB = 256  # infra/stack.py
START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


# --- measuring ----------------------------------------------------------------------------------------------
def _part(tally: Tally, *, invocations: int, own_cpu_s: float, slept_s: float) -> dict[str, Any]:
    return {
        "count": invocations,
        "own_cpu_s": round(own_cpu_s, 6),
        "slept_s": round(slept_s, 3),
        "requests": dict(tally.requests),
        "wru": dict(tally.wru),
        "index_wru": dict(tally.index_wru),
        "rru": dict(tally.rru),
    }


def measure() -> dict[str, Any]:
    """The figures: one idle 20-second claim, one authorizer call, and one pool run of an hour (its claim,
    180 heartbeats and its complete), each as the API function's (and the authorizer's) requests and units."""
    import os
    from unittest import mock

    import boto3
    from tickwork import tables
    from tickwork.api.app import build_app
    from tickwork.app.pools import PoolService
    from tickwork.domain.models import RunMessage, scheduled_run_id
    from tickwork.runtime import runtime as process_runtime

    from bench._common import AwsClock
    from bench._moto import TENANT, TOKEN, moto_runtime
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler
    from tests.support.apigw import ApiGateway
    from tests.support.engine import FakeClock

    clock = FakeClock(START)
    with moto_runtime() as runtime:
        os.environ[tables.RUN_QUEUE.env_var] = runtime.settings.run_queue_url
        os.environ[tables.DEAD_RUN_QUEUE.env_var] = runtime.settings.dead_run_queue_url
        process_runtime.cache_clear()
        current = process_runtime()
        worker = current.worker(clock=clock, sleep=clock.sleep, worker_id="bench-worker")
        # The routes' pool service, on the fake clock: the long poll sleeps on it
        current.__dict__["pools"] = PoolService(
            jobs=current.jobs,
            runs=current.runs,
            lifecycle=worker.lifecycle,
            attempts=worker.attempts,
            after_end=worker.after_end,
            metrics=current.metrics,
            clock=clock,
            sleep=clock.sleep,
        )
        # The API on the fake clock too: its per-second request counter sees the run's 20 s between calls
        with mock.patch.object(api_handler, "build_app", return_value=build_app(clock=clock)):
            handler = api_handler.make_handler()
        gateway = ApiGateway(handler, authorizer_handler.lambda_handler)
        meter, aws = Meter(boto3.client("dynamodb")), AwsClock()
        for client in (current.dynamodb, current.sqs):
            meter.attach(client)
            aws.wrap(client)

        def metered(call: Any) -> tuple[Any, Tally, float, float]:
            before, cpu, sleeps = meter.tally.snapshot(), aws.own_thread_time(), len(clock.sleeps)
            answer = call()
            return answer, meter.tally.minus(before), aws.own_thread_time() - cpu, sum(clock.sleeps[sleeps:])

        def api(method: str, path: str, body: Any) -> Any:
            response = gateway.request(method, path, token=TOKEN, body=body)
            if response.status != 200:
                raise RuntimeError(f"{method} {path}: {response.status} {response.body}")
            return response.body

        claim_path = f"/v1/pools/{POOL}/claim"
        claim_body = {"worker_id": "w1", "max_runs": 1, "wait_seconds": WAIT_SECONDS}
        api("POST", claim_path, {**claim_body, "wait_seconds": 0})  # warm: cold-start reads out of the way

        # The authorizer alone (API Gateway caches its answer; the API function pays its own reads)
        _, authorizer, authorizer_cpu, _ = metered(
            lambda: gateway.authorize(f"Bearer {TOKEN}", "POST", claim_path)
        )
        # An idle long poll, 20 s after the last (a new window of the tenant's request counter, as when a
        # worker polls without pause): the pool is empty for all of its 20 s
        clock.advance(seconds=WAIT_SECONDS)
        answer, idle, idle_cpu, idle_slept = metered(lambda: api("POST", claim_path, claim_body))
        assert answer == {"runs": []}, answer
        idle = idle.minus(authorizer)
        idle_queries = idle.requests.get("dynamodb.Query", 0)

        # One pool run of an hour: a one-time pool job, handed to its pool by the worker at its time
        fire_at = START + timedelta(minutes=5)
        job = current.service.create_job(
            TENANT,
            _job_spec(fire_at),
            clock(),
        ).job
        clock.advance(seconds=(fire_at - clock()).total_seconds())
        handed = worker.handle(RunMessage(tenant_id=TENANT, run_id=scheduled_run_id(job.job_id, fire_at)))
        assert handed == "handed to its pool", handed
        claimed, claim, claim_cpu, _ = metered(lambda: api("POST", claim_path, claim_body))
        [run] = claimed["runs"]
        claim = claim.minus(authorizer)
        token, run_id = run["lease_token"], run["run_id"]
        beats, beat_cpu = Tally(), 0.0
        for beat in range(HEARTBEATS):
            clock.advance(seconds=HEARTBEAT_EVERY)
            body = {"lease_token": token, "progress": round((beat + 1) / HEARTBEATS, 4), "stage": "training"}
            _, tally, cpu, _ = metered(lambda body=body: api("POST", f"/v1/runs/{run_id}/heartbeat", body))
            _add(beats, tally.minus(authorizer))
            beat_cpu += cpu
        done, complete, complete_cpu, _ = metered(
            lambda: api("POST", f"/v1/runs/{run_id}/complete", {"lease_token": token, "output": {"ok": True}})
        )
        assert done["status"] == "SUCCEEDED", done
        complete = complete.minus(authorizer)
        process_runtime.cache_clear()

    return {
        "wait_seconds": WAIT_SECONDS,
        "polls_per_month": POLLS_PER_MONTH,
        "idle_queries_per_poll": idle_queries,
        "api_memory_mb": DEPLOYED.api_memory_mb,
        "authorizer_cache_seconds": DEPLOYED.authorizer_cache_seconds,
        "authorizer": _part(authorizer, invocations=1, own_cpu_s=authorizer_cpu, slept_s=0),
        "idle_poll": _part(idle, invocations=1, own_cpu_s=idle_cpu - authorizer_cpu, slept_s=idle_slept),
        "run": {
            "heartbeats": HEARTBEATS,
            "heartbeat_every_s": HEARTBEAT_EVERY,
            "claim": _part(claim, invocations=1, own_cpu_s=claim_cpu - authorizer_cpu, slept_s=0),
            "heartbeats_part": _part(
                beats, invocations=HEARTBEATS, own_cpu_s=beat_cpu - HEARTBEATS * authorizer_cpu, slept_s=0
            ),
            "complete": _part(complete, invocations=1, own_cpu_s=complete_cpu - authorizer_cpu, slept_s=0),
        },
    }


def _job_spec(fire_at: datetime) -> Any:
    from tickwork.domain.models import JobSpec

    return JobSpec.model_validate(
        {
            "name": "nightly-training",
            "schedule": {"type": "once", "at": fire_at.isoformat()},
            "target": {
                "type": "pool",
                "pool": POOL,
                "heartbeat_timeout_seconds": 60,
                "timeout_seconds": 7200,
            },
            "payload": {"dataset": "2026-11"},
        }
    )


def _add(into: Tally, part: Tally) -> None:
    for name in ("requests", "wru", "rru", "index_wru"):
        mine = getattr(into, name)
        for key, value in getattr(part, name).items():
            mine[key] += value


# --- pricing ------------------------------------------------------------------------------------------------
def _dollars(part: dict[str, Any], memory_mb: int, model: Model) -> dict[str, float]:
    """Dollars of a part's API calls: DynamoDB, SQS, the function's requests and duration, API Gateway."""
    gb_seconds = duration_s(part, memory_mb, model) * memory_mb / 1024
    sqs = sum(v for k, v in part["requests"].items() if k.startswith("sqs."))
    return {
        "DynamoDB writes": (total(part, "wru") + total(part, "index_wru")) * WRU_PRICE,
        "DynamoDB reads": total(part, "rru") * RRU_PRICE,
        "SQS requests": sqs * SQS_PRICE,
        "Lambda requests": part["count"] * LAMBDA_REQUEST_PRICE,
        "Lambda duration": gb_seconds * GB_SECOND_PRICE,
        "API Gateway requests": part["count"] * API_PRICE,
    }


def _scaled(dollars: dict[str, float], factor: float) -> dict[str, float]:
    return {key: value * factor for key, value in dollars.items()}


def _sum(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, 0.0) + value
    return out


def idle_month(figures: dict[str, Any], model: Model | None = None) -> dict[str, float]:
    """An idle worker's month: a 20-second long poll after another, and the authorizer once per cache."""
    model = model or Model()
    polls = figures["polls_per_month"]
    authorizations = math.ceil(polls * figures["wait_seconds"] / figures["authorizer_cache_seconds"])
    authorizer = _dollars(figures["authorizer"], AUTHORIZER_MEMORY_MB, model)
    authorizer.pop("API Gateway requests")
    return _sum(
        _scaled(_dollars(figures["idle_poll"], figures["api_memory_mb"], model), polls),
        _scaled(authorizer, authorizations),
    )


def pool_run(figures: dict[str, Any], model: Model | None = None) -> dict[str, float]:
    """One pool run of an hour: its claim (one that found the run at once), heartbeats and complete."""
    model = model or Model()
    run, memory = figures["run"], figures["api_memory_mb"]
    return _sum(*(_dollars(run[name], memory, model) for name in ("claim", "heartbeats_part", "complete")))


def run_writes(figures: dict[str, Any]) -> dict[str, float]:
    run = figures["run"]
    parts = [run[name] for name in ("claim", "heartbeats_part", "complete")]
    requests = sum(v for p in parts for k, v in p["requests"].items() if k.split(".")[1] in WRITE_OPERATIONS)
    return {
        "write_requests": requests,
        "wru": sum(total(p, "wru") for p in parts),
        "index_wru": sum(total(p, "index_wru") for p in parts),
    }


def run_item_writes(figures: dict[str, Any]) -> float:
    """The run item's writes (``PutItem``): the claim, each heartbeat and the complete."""
    run = figures["run"]
    return float(
        sum(
            run[name]["requests"].get("dynamodb.PutItem", 0)
            for name in ("claim", "heartbeats_part", "complete")
        )
    )


WRITE_OPERATIONS = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


# --- the document -------------------------------------------------------------------------------------------
def _money(value: float) -> str:
    if value == 0:
        return "$0.00"
    if value < 0.0001:
        return "<$0.0001"
    return f"${value:,.4f}" if value < 0.1 else f"${value:,.2f}"


def _requests(part: dict[str, Any], per: float = 1) -> str:
    return ", ".join(f"{k.split('.')[1]} {v / per:g}" for k, v in sorted(part["requests"].items())) or "none"


def table_block(figures: dict[str, Any]) -> str:
    model = Model()
    idle = idle_month(figures, model)
    run = pool_run(figures, model)
    writes = run_writes(figures)
    r = figures["run"]
    rows = [
        "| what | requests (API function) | RRU | WRU | index WRU | billed Lambda ms | $ |",
        "|---|---|---|---|---|---|---|",
        _row("one idle 20 s claim (empty pool)", figures["idle_poll"], figures["api_memory_mb"], model),
        _row("one authorizer call (cached 300 s)", figures["authorizer"], AUTHORIZER_MEMORY_MB, model),
        _row("claim (the run waiting)", r["claim"], figures["api_memory_mb"], model),
        _row(
            f"{r['heartbeats']} heartbeats, every {r['heartbeat_every_s']} s",
            r["heartbeats_part"],
            figures["api_memory_mb"],
            model,
        ),
        _row("complete", r["complete"], figures["api_memory_mb"], model),
    ]
    parts = sorted(set(idle) | set(run))
    dollars = [
        "| part | idle worker, a month of 20 s polls | one pool run of an hour | a million such runs |",
        "|---|---|---|---|",
        *(
            f"| {p} | {_money(idle.get(p, 0))} | {_money(run.get(p, 0))} | {_money(run.get(p, 0) * 1e6)} |"
            for p in parts
        ),
        f"| **total** | **{_money(sum(idle.values()))}** | **{_money(sum(run.values()))}** | "
        f"**{_money(sum(run.values()) * 1e6)}** |",
    ]
    notes = [
        f"An idle claim queries the pool's index {figures['idle_queries_per_poll']} times in its "
        f"{figures['wait_seconds']} s; {figures['polls_per_month']:,} polls a month (30 days x 24 h x 180). "
        f"The hour's run: {writes['write_requests']:g} write requests, {writes['wru']:g} WRU and "
        f"{writes['index_wru']:g} index WRU, of which {run_item_writes(figures):g} writes of the run item. "
        f"EventBridge Scheduler: ${EVENTBRIDGE_SCHEDULER_PRICE * 1e6:.2f} per million invocations.",
    ]
    return "\n".join([*rows, "", *dollars, "", *notes])


def _row(what: str, part: dict[str, Any], memory_mb: int, model: Model) -> str:
    billed_ms = duration_s(part, memory_mb, model) * 1000
    dollars = sum(_dollars(part, memory_mb, model).values())
    return (
        f"| {what} | {_requests(part)} | {total(part, 'rru'):g} | {total(part, 'wru'):g} | "
        f"{total(part, 'index_wru'):g} | {billed_ms:,.0f} | {_money(dollars)} |"
    )


def blocks(figures: dict[str, Any]) -> dict[str, str]:
    return {"table": table_block(figures)}


def doc_blocks(text: str) -> dict[str, str]:
    return read_blocks(text, PREFIX, BLOCKS)


def section(figures: dict[str, Any] | None = None) -> str:
    """The section of ``docs/benchmarks.md`` (``python -m bench``): measures (unless given figures), saves
    the figures and rewrites the pools table of ``docs/cost.md``, as ``--write-doc`` does."""
    if figures is None:
        figures = measure()
        FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        write_blocks(DOC, PREFIX, blocks(figures))
    month, run = idle_month(figures), pool_run(figures)
    idle, writes = figures["idle_poll"], run_writes(figures)
    parts = ", ".join(
        f"{name} {_money(month[name])}"
        for name in ("Lambda duration", "API Gateway requests", "DynamoDB reads", "DynamoDB writes")
        if name in month
    )
    queries = idle["requests"].get("dynamodb.Query", 0)
    idle_rru, idle_wru, total_month = total(idle, "rru"), total(idle, "wru"), _money(sum(month.values()))
    return f"""## Pools: an idle worker's month and an hour's run

`python -m bench.pool_cost` (seconds; `docs/cost.md`, "Pools", has the tables and the method): every call
through the API Gateway stand-in and the API Lambda's handler under moto on a fake clock, metered.

- An idle {figures["wait_seconds"]} s claim on an empty pool: {queries:g} index queries, {idle_rru:g} RRU
  with the principal's read, {idle_wru:g} WRU of the tenant's request counter. A worker polling
  without pause for a month ({figures["polls_per_month"]:,} polls): **{total_month}**, of which
  {parts}.
- A one-hour pool run heartbeating every 20 s (claim, heartbeats, complete): {run_item_writes(figures):g}
  writes of the run item (the budget is 200), {writes["write_requests"]:g} write requests in all with the
  request counter's, {writes["wru"]:g} WRU and {writes["index_wru"]:g} index WRU:
  **{_money(sum(run.values()))} a run**, about {_money(sum(run.values()) * 1_000_000)} per million."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write-doc", action="store_true", help="save the figures, rewrite docs/cost.md")
    parser.add_argument("--figures", type=Path, help="figures saved before, instead of measuring")
    args = parser.parse_args(argv)
    figures = json.loads(args.figures.read_text()) if args.figures else measure()
    if args.write_doc:
        if not args.figures:
            FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        write_blocks(DOC, PREFIX, blocks(figures))
    print(table_block(figures))


if __name__ == "__main__":
    main()
