"""Requests, DynamoDB capacity units and price per run, measured on a fixed workload under moto.

    python -m bench.cost

Every AWS call of the real planner, dispatcher, worker and sweeper code is counted with botocore event hooks
(``bench._cost_meter``); the workload is in ``bench._cost_workload``. The figures from before the hot path was
cut are kept in ``bench._cost_before``, measured with the same workload at the commit named there.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench._cost_before import BEFORE, BEFORE_COMMIT
from bench._cost_workload import LIMITED_MAX_IN_FLIGHT

COMMAND = "python -m bench.cost"

# Published prices (us-east-1), see /docs: DynamoDB on-demand, SQS standard, Lambda arm64, API Gateway REST.
WRU_PRICE = 0.625 / 1e6
RRU_PRICE = 0.125 / 1e6
SQS_PRICE = 0.40 / 1e6
LAMBDA_REQUEST_PRICE = 0.20 / 1e6
LAMBDA_GB_SECOND_PRICE = 0.0000133334
API_PRICE = 3.50 / 1e6
EVENTBRIDGE_SCHEDULER_PRICE = 1.00 / 1e6
# Memory sizes of the deployed functions (infra/config.py defaults).
WORKER_GB, API_GB, PLANNER_GB = 0.5, 0.5, 1.0
# A recurring job's create is shared by its runs: one firing every minute for 30 days.
RUNS_PER_RECURRING_JOB = 60 * 24 * 30
TICKS_PER_MONTH = 60 * 24 * 30


def measure() -> dict[str, Any]:
    from bench._cost_workload import run_workload

    return run_workload()


# --- arithmetic -------------------------------------------------------------------------------------------
def per_run(scenario: dict[str, Any], what: str) -> dict[str, float]:
    return {key: value / scenario["runs"] for key, value in scenario[what].items()}


def totals(scenario: dict[str, Any]) -> dict[str, float]:
    """Per run: requests by service, table WRU, index WRU, RRU."""
    runs = scenario["runs"]
    requests = scenario["requests"]
    return {
        "dynamodb_requests": sum(v for k, v in requests.items() if k.startswith("dynamodb.")) / runs,
        "sqs_requests": sum(v for k, v in requests.items() if k.startswith("sqs.")) / runs,
        "wru": sum(scenario["wru"].values()) / runs,
        "index_wru": sum(scenario["index_wru"].values()) / runs,
        "rru": sum(scenario["rru"].values()) / runs,
    }


def run_price(scenario: dict[str, Any], *, gb: float = WORKER_GB) -> dict[str, float]:
    """Dollars per run, by part. Lambda time is the measured in-process wall time per message."""
    t = totals(scenario)
    return {
        "DynamoDB writes (table)": t["wru"] * WRU_PRICE,
        "DynamoDB writes (indexes)": t["index_wru"] * WRU_PRICE,
        "DynamoDB reads": t["rru"] * RRU_PRICE,
        "SQS": t["sqs_requests"] * SQS_PRICE,
        "Lambda requests": scenario["invocations"] / scenario["runs"] * LAMBDA_REQUEST_PRICE,
        "Lambda GB-s": scenario["handler_ms"] / 1000 * gb * LAMBDA_GB_SECOND_PRICE,
    }


def create_price(create: dict[str, Any]) -> float:
    parts = run_price(create, gb=API_GB)
    return sum(parts.values()) + API_PRICE


def tick_price(idle: dict[str, Any]) -> float:
    """Dollars per planner tick with nothing due (its queries, one invocation, its time)."""
    per_tick = {**idle, "runs": idle["ticks"], "invocations": idle["ticks"]}
    return sum(run_price(per_tick, gb=PLANNER_GB).values())


def per_million(figures: dict[str, Any]) -> dict[str, float]:
    """Dollars per million runs, per kind of run, with the create call where it belongs."""
    create = create_price(figures["create"])
    return {
        "recurring": (sum(run_price(figures["recurring"]).values()) + create / RUNS_PER_RECURRING_JOB) * 1e6,
        "limited": (sum(run_price(figures["limited"]).values()) + create / RUNS_PER_RECURRING_JOB) * 1e6,
        "once": (sum(run_price(figures["once"]).values()) + create) * 1e6,
        "retry": (sum(run_price(figures["retry"]).values()) + create) * 1e6,
        "dead": (sum(run_price(figures["dead"]).values()) + create) * 1e6,
    }


# --- the report -------------------------------------------------------------------------------------------
def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value else "0"


def _operation_table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = [
        "| operation | requests before | requests after | WRU before | WRU after | index WRU before "
        "| index WRU after | RRU before | RRU after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    columns = ("requests", "wru", "index_wru", "rru")
    operations = sorted({key for scenario in (before, after) for c in columns for key in scenario[c]})
    for operation in operations:
        cells = []
        for column in columns:
            for scenario in (before, after):
                cells.append(_fmt(per_run(scenario, column).get(operation, 0)))
        lines.append(f"| {operation} | " + " | ".join(cells) + " |")
    tb, ta = totals(before), totals(after)
    lines.append(
        "| **total** | "
        + " | ".join(
            f"**{_fmt(a)}**"
            for a in (
                tb["dynamodb_requests"] + tb["sqs_requests"],
                ta["dynamodb_requests"] + ta["sqs_requests"],
                tb["wru"],
                ta["wru"],
                tb["index_wru"],
                ta["index_wru"],
                tb["rru"],
                ta["rru"],
            )
        )
        + " |"
    )
    return lines


def section(figures: dict[str, Any] | None = None) -> str:
    after = figures if figures is not None else measure()
    before = BEFORE
    lines = [
        "## Cost per run: AWS requests, capacity units and dollars",
        "",
        f"Command: `{COMMAND}` (a fixed workload under moto, under a minute). Every AWS call of the real",
        "planner, dispatcher, worker and sweeper code is counted with botocore `provide-client-params` /",
        "`after-call` hooks. moto does not report size-based capacity, so units follow DynamoDB's rules from",
        "the items before and after each write: ceil(size / 1 KB) WRU, the larger side of an update, x2 in a",
        "transaction, a failed condition still charged; ceil(size / 4 KB) RRU for a strongly consistent",
        "read, half for an eventually consistent one (index queries); index WRU for every GSI entry a write",
        "puts, changes or removes (x2 when an index key moves). The worker is driven the way the event",
        "source mapping drives it: ReceiveMessage of up to 10, one invocation per batch, one",
        "DeleteMessageBatch. The fixed cost of planner ticks (due-index and sweeper queries) is measured on",
        "idle ticks and taken out of the per-run figures; it is priced per month below.",
        "",
        f"Before: measured with the same workload at commit `{BEFORE_COMMIT}`. After: this tree.",
        "",
        "### One successful run of a recurring job (10 jobs every 60 s, 5 fires each), per run",
        "",
        *_operation_table(before["recurring"], after["recurring"]),
        "",
        "### Per run, by kind of run",
        "",
        "| run | requests before | requests after | WRU before | WRU after | index WRU before "
        "| index WRU after | RRU before | RRU after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    names = {
        "recurring": "recurring job, succeeded",
        "limited": "the same, tenant limit below worker concurrency",
        "once": "one-time job, succeeded",
        "retry": "one retry, then succeeded",
        "dead": "two failed attempts, DEAD",
    }
    # Before, every tenant's leases moved the in-flight counter: the limited tenant ran the recurring path.
    before = {**before, "limited": before.get("limited", before["recurring"])}
    for key, label in names.items():
        tb, ta = totals(before[key]), totals(after[key])
        lines.append(
            f"| {label} | {_fmt(tb['dynamodb_requests'] + tb['sqs_requests'])} "
            f"| {_fmt(ta['dynamodb_requests'] + ta['sqs_requests'])} | {_fmt(tb['wru'])} | {_fmt(ta['wru'])} "
            f"| {_fmt(tb['index_wru'])} | {_fmt(ta['index_wru'])} | {_fmt(tb['rru'])} | {_fmt(ta['rru'])} |"
        )
    lines += [
        "",
        "A tenant with no `max_in_flight` (the default) takes no slot per run; a tenant with a limit",
        "claims and gives back a slot of its sharded slot items",
        f"(the second row: a limit of {LIMITED_MAX_IN_FLIGHT}).",
        "A one-time job also moves its job item twice (the cursor leaves the due index, then the job is",
        "COMPLETED after its run).",
    ]
    price_before, price_after = per_million(before), per_million(after)
    lines += [
        "",
        "### Dollars per million runs",
        "",
        "Prices: DynamoDB on-demand $0.625 per million WRU and $0.125 per million RRU, SQS $0.40 per million",
        "requests, Lambda $0.20 per million invocations plus $0.0000133334 per GB-s (arm64), API Gateway",
        f"$3.50 per million calls. Memory as deployed: worker {int(WORKER_GB * 1024)} MB, API and authorizer "
        f"{int(API_GB * 1024)} MB, planner {int(PLANNER_GB * 1024)} MB.",
        "Lambda time is the median in-process wall time per message (worker) or per call (API), moto",
        f"included: {before['recurring']['handler_ms']:.0f} ms before and "
        f"{after['recurring']['handler_ms']:.0f} ms after per recurring run, on a shared 2-core machine",
        "whose load moves it more than the code does; a webhook target's own response time adds to it on",
        "AWS. A one-time run pays its create call (API Gateway, authorizer",
        "and API invocations, its DynamoDB writes); a recurring job's create is shared by",
        f"{RUNS_PER_RECURRING_JOB:,} runs (every minute for 30 days).",
        "",
        "| run | before | after | EventBridge Scheduler |",
        "|---|---|---|---|",
    ]
    for key, label in names.items():
        lines.append(
            f"| {label} | ${price_before[key]:.2f} | ${price_after[key]:.2f} "
            f"| ${EVENTBRIDGE_SCHEDULER_PRICE * 1e6:.2f} |"
        )
    parts_before, parts_after = run_price(before["recurring"]), run_price(after["recurring"])
    lines += [
        "",
        "A recurring run, by part (dollars per million runs):",
        "",
        "| part | before | after |",
        "|---|---|---|",
        *(
            f"| {part} | ${parts_before[part] * 1e6:.2f} | ${parts_after[part] * 1e6:.2f} |"
            for part in parts_after
        ),
        "",
        f"Fixed: a planner tick with nothing due costs ${tick_price(after['idle_tick']) * 1e6:.2f} per "
        "million ticks",
        f"({after['idle_tick']['requests'].get('dynamodb.Query', 0) / after['idle_tick']['ticks']:.0f} "
        f"index queries); one planner ticking every minute is {TICKS_PER_MONTH:,} ticks, "
        f"${tick_price(after['idle_tick']) * TICKS_PER_MONTH:.2f} a month.",
        "The event source mapping's idle long polls (about 5 pollers, one ReceiveMessage per 20 s each) are",
        "about 650,000 requests, $0.26 a month.",
        "",
        "EventBridge Scheduler charges $1.00 per million invocations (after 14 million free a month) and",
        "delivers only to AWS targets at 60 s precision, with no run history; a webhook through it also",
        "needs an API destination.",
        "",
        "Largest items written on this workload: "
        + ", ".join(f"{table} {size} B" for table, size in sorted(after["item_bytes"].items()))
        + " (a run with two attempts is the largest run; one attempt is about 600 B), so every hot-path",
        "write is one unit. What is left is mostly index writes "
        f"({_fmt(totals(after['recurring'])['index_wru'])} WRU per recurring run): the put enters",
        "`by_job`, `open_runs` and `by_tenant` (3); the cursor moves the job's `due` entry (2); the lease",
        "rewrites `by_job` (ALL attributes), moves `open_runs` to the lease expiry and changes `by_tenant`'s",
        "status (4); the finish rewrites `by_job`, leaves `open_runs` and changes `by_tenant` (3). A",
        "narrower `by_job` projection would save 2 of them, if the overlap check and the run history read",
        "the run by key instead.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    figures = measure()
    if "--json" in args:
        print(json.dumps(figures, indent=1, sort_keys=True))
        return
    print(section(figures))


if __name__ == "__main__":
    main()
