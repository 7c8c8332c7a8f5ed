"""CPU time in tickwork's own code per run on the worker path, with AWS calls left out.

    python -m bench.worker_cpu --runs 100

DynamoDB and SQS are moto in process. Each run goes through the worker's record handler (the same
``handle_record`` the Lambda uses): read run and job, lease, the webhook call to a real loopback receiver
under Powertools idempotency, the recorded outcome. cProfile's timer is the thread's CPU clock with the time
inside boto3 client calls (botocore's request building and parsing, and moto itself) taken out, so the
figure is tickwork's code plus the libraries it calls (pydantic, Powertools, urllib3), as a Lambda would
spend it. Requests per run are counted by operation with a botocore event hook.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import AwsClock, CallCounter, machine, own_cpu_profile, table, top_functions

RUN_QUEUE_OPERATIONS = ("sqs.ReceiveMessage", "sqs.DeleteMessage")  # the event source mapping's, not ours


@dataclass
class WorkerResult:
    kind: str
    runs: int
    own_cpu_ms_per_run: float
    aws_cpu_ms_per_run: float
    requests_per_run: dict[str, float]
    wru_per_run: float
    rru_per_run: float
    top: list[tuple[str, str, str]] = field(default_factory=list)
    item_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def runs_per_vcpu_second(self) -> float:
        return 1000 / self.own_cpu_ms_per_run


def _table_item_sizes(dynamodb: Any) -> dict[str, int]:
    """The mean billed size of each table's items after the runs (the size updates are charged at)."""
    from tickwork import tables

    from bench._moto import item_size

    sizes = {}
    for definition in tables.ALL_TABLES:
        items = dynamodb.scan(TableName=definition.default_name)["Items"]
        if items:
            sizes[definition.default_name] = round(sum(item_size(item) for item in items) / len(items))
    return sizes


def measure(kind: str, runs: int, *, limited: bool = False) -> WorkerResult:
    """``kind``: "once" (one-time jobs) or "cron" (a cron job's fire: adds the overlap check).
    ``limited``: the tenant has an in-flight limit, so each run also claims and gives back a slot."""
    from tickwork.domain.models import JobSpec

    from bench._moto import TENANT, moto_runtime
    from functions.worker.handler import handle_record
    from tests.support.engine import deliver, receive, start_receiver

    receivers = start_receiver()
    receiver = next(receivers)
    try:
        max_in_flight = 100 if limited else None
        with moto_runtime(
            max_in_flight=max_in_flight, planner_horizon_seconds=60, planner_lookahead_seconds=10
        ) as current:
            counter, clock = CallCounter(), AwsClock()
            for client in (current.dynamodb, current.sqs):
                clock.wrap(client)
            now = datetime.now(UTC)
            due = now + timedelta(seconds=2)
            target = {"type": "http", "url": receiver.url("/run"), "timeout_seconds": 5}
            for index in range(runs):
                if kind == "once":
                    schedule: dict[str, Any] = {"type": "once", "at": due.isoformat()}
                else:
                    schedule = {
                        "type": "cron",
                        "expression": "* * * * * *",
                        "start_at": due.replace(microsecond=0).isoformat(),
                        "end_at": (due.replace(microsecond=0) + timedelta(milliseconds=500)).isoformat(),
                    }
                spec = JobSpec.model_validate(
                    {
                        "name": f"{kind}-{index}",
                        "schedule": schedule,
                        "target": target,
                        "payload": {"n": index},
                    }
                )
                current.service.create_job(TENANT, spec, now)
            time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()) + 1.1)
            for client in (current.dynamodb, current.sqs):
                counter.attach(client)
            worker = current.worker()
            handled = 0
            # Every other run under the profiler (for the top functions), the rest timed without it (for the
            # CPU figure: cProfile's own overhead would inflate it).
            plain_seconds, plain_runs, profiled_runs = 0.0, 0, 0
            with own_cpu_profile(clock) as profile:
                profile.disable()
                aws_before = clock.process_seconds

                def record_handler(record: Any) -> str:
                    nonlocal plain_seconds, plain_runs, profiled_runs
                    if (plain_runs + profiled_runs) % 2:
                        profiled_runs += 1
                        profile.enable()
                        try:
                            return handle_record(record, current, worker)
                        finally:
                            profile.disable()
                    started = clock.own_thread_time()
                    try:
                        return handle_record(record, current, worker)
                    finally:
                        plain_seconds += clock.own_thread_time() - started
                        plain_runs += 1

                idle = 0
                while handled < runs and idle < 20:
                    messages = receive(current.sqs, current.queue_url)
                    if not messages:
                        idle += 1
                        time.sleep(0.2)
                        continue
                    deliver(current.sqs, current.queue_url, messages, record_handler)
                    handled += len(messages)
                aws_seconds = clock.process_seconds - aws_before
            if len(receiver.requests) != runs:
                raise SystemExit(f"{kind}: {len(receiver.requests)} of {runs} webhooks arrived")
            ours = {name: count for name, count in counter.calls.items() if name not in RUN_QUEUE_OPERATIONS}
            sizes = _table_item_sizes(current.dynamodb)
            wru, rru = counter.capacity_units(sizes)
            return WorkerResult(
                kind=f"{kind}, tenant in-flight limit" if limited else kind,
                runs=runs,
                own_cpu_ms_per_run=plain_seconds * 1000 / max(1, plain_runs),
                aws_cpu_ms_per_run=aws_seconds * 1000 / runs,
                requests_per_run={name: count / runs for name, count in sorted(ours.items())},
                wru_per_run=wru / runs,
                rru_per_run=rru / runs,
                top=top_functions(profile, 10, divide_by=max(1, profiled_runs)),
                item_bytes=sizes,
            )
    finally:
        next(receivers, None)


def client_cpu_per_request(calls: int = 2000) -> float:
    """CPU milliseconds botocore spends on the client side of one DynamoDB call (parameter validation,
    serialisation, signing, events), with botocore's Stubber answering in place of the network. Response
    parsing is not included, so this is a lower bound."""
    import boto3
    from botocore.stub import Stubber

    from bench._moto import aws_environment

    with aws_environment():
        client = boto3.client("dynamodb", region_name="us-east-1")
        key = {"pk": {"S": "bench#run"}}
        with Stubber(client) as stubber:
            for _ in range(calls + 100):
                stubber.add_response("get_item", {"Item": key})
            for _ in range(100):
                client.get_item(TableName="runs", Key=key, ConsistentRead=True)
            started = time.thread_time()
            for _ in range(calls):
                client.get_item(TableName="runs", Key=key, ConsistentRead=True)
            return (time.thread_time() - started) * 1000 / calls


def _markdown(results: list[WorkerResult], command: str, client_ms: float) -> str:
    rows = [
        (
            result.kind,
            result.runs,
            f"{result.own_cpu_ms_per_run:.2f}",
            f"{result.runs_per_vcpu_second:.0f}",
            f"{result.aws_cpu_ms_per_run:.2f}",
            f"{sum(result.requests_per_run.values()):.2f}",
            f"{result.wru_per_run:.1f}",
            f"{result.rru_per_run:.1f}",
        )
        for result in results
    ]
    parts = [
        "## Worker CPU per run",
        "",
        f"Command: `{command}`",
        "",
        "The worker's record handler over moto in process; a real loopback webhook receiver. `own CPU` is",
        "the thread CPU time outside boto3 client calls (tickwork, pydantic, Powertools, urllib3 for the",
        "webhook), from the half of the runs timed without a profiler; the top functions come from the other",
        "half, under cProfile (whose overhead inflates them). `in AWS calls` is botocore's request building",
        "and parsing plus moto, which a Lambda spends only",
        "in part (botocore yes, the service no). Runs/s per",
        "vCPU = 1000 / own CPU ms. Capacity units are counted",
        "from the requests (a transaction item twice) at",
        "the measured item sizes of each table. The tenant's in-flight counter is written only where its",
        "limit can bind: in the last kind the tenant's limit (100,000) is above the workers' maximum",
        "concurrency (1,000), so the lease and the outcome leave the counter alone.",
        "",
        "botocore's client-side CPU per DynamoDB call (Stubber in place of the network, so no response",
        f"parsing): {client_ms:.2f} ms. A Lambda spends that on top of the own CPU above, per request.",
        "",
        table(
            (
                "job kind",
                "runs",
                "own CPU ms/run",
                "runs/s per vCPU",
                "in AWS calls ms/run",
                "requests/run",
                "WRU/run",
                "RRU/run",
            ),
            rows,
        ),
        "",
        "Requests per run by operation (the event source mapping's receive and delete left out):",
        "",
        table(
            ("operation", *(result.kind for result in results)),
            [
                (name, *(f"{result.requests_per_run.get(name, 0):.2f}" for result in results))
                for name in sorted({name for result in results for name in result.requests_per_run})
            ],
        ),
    ]
    parts += [
        "",
        "Mean item size after the runs, bytes: "
        + ", ".join(f"{name} {size}" for name, size in sorted(results[0].item_bytes.items()))
        + ".",
    ]
    for result in results:
        parts += [
            "",
            f"Top 10 functions by own CPU, {result.kind} jobs (ms per run):",
            "",
            table(("function", "own ms/run", "cumulative ms/run"), result.top),
        ]
    return "\n".join(parts) + "\n"


def run(runs: int) -> list[WorkerResult]:
    return [measure("once", runs), measure("cron", runs), measure("once", runs, limited=True)]


def section(runs: int = 100) -> str:
    return _markdown(run(runs), f"python -m bench.worker_cpu --runs {runs}", client_cpu_per_request())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100, help="runs of each job kind")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    results = run(args.runs)
    if args.json:
        print(json.dumps([result.__dict__ for result in results], indent=2, default=str))
    print(f"machine: {machine()}\n")
    command = " ".join(["python -m bench.worker_cpu", *sys.argv[1:]])
    print(_markdown(results, command, client_cpu_per_request()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
