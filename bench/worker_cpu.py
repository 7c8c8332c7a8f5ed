"""CPU time in tickwork's own code per run on the worker path, with AWS calls left out, and the worker's
requests and capacity units per run.

    python -m bench.worker_cpu --runs 100

DynamoDB and SQS are moto in process, on a fake clock that moto's SQS follows (so delayed messages become
visible when the clock says, and the worker's wait for a fire's sub-second remainder costs no real time).
Each round moves the clock a minute, runs a planner tick and hands every visible message to the worker's
record handler (the same ``handle_record`` the Lambda uses), batches of up to 10 as the event source
mapping delivers them, with a real loopback webhook receiver as the target. Recurring jobs fire once a
minute and are measured at steady state: their first two fires run before the timed rounds, so the job's
lane holds the previous run, as it does for any later fire.

cProfile's timer is the thread's CPU clock with the time inside boto3 client calls (botocore's request
building and parsing, and moto itself) taken out, so the figure is tickwork's code plus the libraries it
calls (pydantic, Powertools, urllib3), as a Lambda would spend it. Requests, WRU, RRU and index WRU come
from ``bench._cost_meter`` (the meter of ``python -m bench.cost``), over one more round of the same runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import AwsClock, machine, own_cpu_profile, table, top_functions
from bench._cost_meter import Tally

# The event source mapping's calls, not the worker's.
RUN_QUEUE_OPERATIONS = ("sqs.ReceiveMessage", "sqs.DeleteMessage", "sqs.DeleteMessageBatch")
START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
WARM_UP_ROUNDS = 2
SLOT_LIMIT = 100  # the limited tenant's max_in_flight: 10 slot items of 10


@dataclass(frozen=True)
class Kind:
    name: str
    recurring: bool = True
    overlap_policy: str | None = None  # None: the default (skip), a lane of one
    max_in_flight: int | None = None


KINDS = (
    Kind("recurring"),
    Kind("recurring, overlap allow (no lane)", overlap_policy="allow"),
    Kind("recurring, tenant in-flight limit", max_in_flight=SLOT_LIMIT),
    Kind("one-time", recurring=False),
)


@dataclass
class WorkerResult:
    kind: str
    runs: int
    own_cpu_ms_per_run: float
    aws_cpu_ms_per_run: float
    requests_per_run: dict[str, float]
    wru_per_run: float
    index_wru_per_run: float
    rru_per_run: float
    metered_runs: int
    top: list[tuple[str, str, str]] = field(default_factory=list)
    item_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def runs_per_vcpu_second(self) -> float:
        return 1000 / self.own_cpu_ms_per_run

    @property
    def dynamodb_requests_per_run(self) -> float:
        return sum(count for name, count in self.requests_per_run.items() if name.startswith("dynamodb."))


def per_run(tally: Tally, runs: int) -> dict[str, float]:
    """Requests per run by operation, the event source mapping's receive and delete left out."""
    return {
        name: count / runs
        for name, count in sorted(tally.requests.items())
        if name not in RUN_QUEUE_OPERATIONS and count
    }


class Bench:
    """One kind's jobs in moto on a fake clock, driven round by round."""

    def __init__(self, kind: Kind, current: Any, clock: Any, url: str, jobs: int):
        self.kind, self.current, self.clock, self.url, self.jobs = kind, current, clock, url, jobs
        self.worker = current.worker(clock=clock, sleep=clock.sleep, worker_id="bench-worker")
        self.created = 0

    def create(self, count: int, schedule: dict[str, Any]) -> None:
        from tickwork.domain.models import JobSpec

        from bench._moto import TENANT

        for _ in range(count):
            spec: dict[str, Any] = {
                "name": f"job-{self.created}",
                "schedule": schedule,
                "target": {"type": "http", "url": self.url, "timeout_seconds": 5},
                "payload": {"n": self.created},
            }
            if self.kind.overlap_policy is not None:
                spec["overlap_policy"] = self.kind.overlap_policy
            self.current.service.create_job(TENANT, JobSpec.model_validate(spec), self.clock())
            self.created += 1

    def setup(self) -> None:
        if self.kind.recurring:
            schedule = {"type": "rate", "every_seconds": 60, "start_at": START.isoformat()}
            self.create(self.jobs, schedule)

    def next_round(self) -> None:
        """Make the round's fires visible: a recurring job's next fire, or new one-time jobs' only fire."""
        if self.kind.recurring:
            self.clock.advance(minutes=1)
        else:
            self.create(self.jobs, {"type": "once", "at": (self.clock() + timedelta(seconds=30)).isoformat()})
            self.clock.advance(seconds=30)
        self.current.planner_tick.tick(self.clock(), list(range(self.current.settings.due_shards)))

    def drain(self, record_handler: Callable[[Any], str]) -> int:
        """The run queue's event source mapping into ``record_handler`` until nothing is visible."""
        from tickwork_local.harness import Pump, partial_batches

        mapping = Pump(
            self.current.sqs, self.current.queue_url, partial_batches(record_handler), visibility_timeout=30
        )
        return mapping.drain()


def measure(kind: Kind, runs: int, *, jobs: int = 25) -> WorkerResult:
    from tickwork_local.harness import Receiver, sqs_follows

    from bench._cost_meter import Meter
    from bench._moto import REGION, moto_runtime

    jobs = min(jobs, runs)
    rounds = math.ceil(runs / jobs)
    with (
        Receiver() as receiver,
        moto_runtime(
            max_in_flight=kind.max_in_flight, planner_horizon_seconds=60, planner_lookahead_seconds=10
        ) as current,
    ):
        # Imported in moto_runtime's environment: the logger takes its level from it.
        from functions.worker.handler import handle_record
        from tests.support.engine import FakeClock

        clock = FakeClock(START)
        with sqs_follows(clock):
            bench = Bench(kind, current, clock, receiver.url("/run"), jobs)
            bench.setup()

            def handle(record: Any) -> str:
                return handle_record(record, current, bench.worker)

            for _ in range(WARM_UP_ROUNDS):
                bench.next_round()
                bench.drain(handle)
            receiver.requests.clear()

            aws = AwsClock()
            for client in (current.dynamodb, current.sqs):
                aws.wrap(client)
            # Every other run under the profiler (for the top functions), the rest timed without it (for the
            # CPU figure: cProfile's own overhead would inflate it).
            plain_seconds, plain_runs, profiled_runs = 0.0, 0, 0
            with own_cpu_profile(aws) as profile:
                profile.disable()

                def timed(record: Any) -> str:
                    nonlocal plain_seconds, plain_runs, profiled_runs
                    if (plain_runs + profiled_runs) % 2:
                        profiled_runs += 1
                        profile.enable()
                        try:
                            return handle(record)
                        finally:
                            profile.disable()
                    started = aws.own_thread_time()
                    try:
                        return handle(record)
                    finally:
                        plain_seconds += aws.own_thread_time() - started
                        plain_runs += 1

                handled, aws_seconds = 0, 0.0
                for _ in range(rounds):
                    bench.next_round()
                    aws_before = aws.process_seconds
                    handled += bench.drain(timed)
                    aws_seconds += aws.process_seconds - aws_before
            if len(receiver.requests) != handled or handled != jobs * rounds:
                raise SystemExit(f"{kind.name}: {len(receiver.requests)} calls for {handled} messages")

            # One more round, metered: the planner's tick first, then the worker's part alone.
            meter = Meter(_peek(REGION))
            for client in (current.dynamodb, current.sqs):
                meter.attach(client)
            bench.next_round()
            planned = meter.tally.snapshot()
            metered = bench.drain(handle)
            worker = meter.tally.minus(planned)
        return WorkerResult(
            kind=kind.name,
            runs=handled,
            own_cpu_ms_per_run=plain_seconds * 1000 / max(1, plain_runs),
            aws_cpu_ms_per_run=aws_seconds * 1000 / max(1, handled),
            requests_per_run=per_run(worker, metered),
            wru_per_run=worker.total("wru") / metered,
            index_wru_per_run=worker.total("index_wru") / metered,
            rru_per_run=worker.total("rru") / metered,
            metered_runs=metered,
            top=top_functions(profile, 10, divide_by=max(1, profiled_runs)),
            item_bytes={name: size for name, size in worker.item_bytes.items() if size},
        )


def _peek(region: str) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name=region)


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
            f"{result.aws_cpu_ms_per_run:.1f}",
            f"{sum(result.requests_per_run.values()):.2f}",
            f"{result.dynamodb_requests_per_run:.2f}",
            f"{result.wru_per_run:.2f}",
            f"{result.index_wru_per_run:.2f}",
            f"{result.rru_per_run:.2f}",
        )
        for result in results
    ]
    by_kind = {result.kind: result for result in results}
    steady = by_kind.get("recurring")
    limited = by_kind.get("recurring, tenant in-flight limit")
    once = by_kind.get("one-time")
    notes = []
    if steady is not None:
        notes.append(
            "- **recurring**: a job with the default overlap policy (`skip`), so its runs take turns "
            "through the job's lane item. "
            f"{steady.dynamodb_requests_per_run:.0f} DynamoDB requests per run: one consistent query of "
            "the job's partition (job item and lane), one of the run items it needs (this fire's and the "
            "previous holder's, neighbours in the job's history), the lane claim (the lease, with the "
            "fencing token) and the run item's one put (the outcome). "
            f"{steady.wru_per_run:g} WRU, {steady.rru_per_run:g} RRU, {steady.index_wru_per_run:g} index "
            "WRU: nothing this path writes is in an index, and there is no transaction."
        )
    notes.append(
        "- **overlap allow (no lane)**: a job whose runs may overlap freely has no lane: the run item "
        "itself is leased (a conditional put that tells a new fire from a stored run), so no run item is "
        "read first."
    )
    if limited is not None and steady is not None:
        extra = limited.dynamodb_requests_per_run - steady.dynamodb_requests_per_run
        notes.append(
            "- **tenant in-flight limit**: the same recurring job, its tenant at `max_in_flight` "
            f"{SLOT_LIMIT} ({math.ceil(SLOT_LIMIT / 10)} slot items of 10 slots). Each run also reads "
            "one slot item, claims a slot in it and gives the slot back after the call: "
            f"{extra:+.0f} requests, {limited.wru_per_run - steady.wru_per_run:+g} WRU and "
            f"{limited.rru_per_run - steady.rru_per_run:+g} RRU against the row above. A tenant without "
            "a limit (the default) writes no item of its own on a run."
        )
    if once is not None:
        notes.append(
            "- **one-time**: the job's only fire. Its history has no previous run, so the run item is "
            "read with a `GetItem`; after the outcome the job is completed and the tenant's job count "
            "given back in one `TransactWriteItems` (2 items at 2 WRU each, and the job's `by_tenant` "
            f"index entry, whose status changes: {once.index_wru_per_run:g} index WRU)."
        )
    notes.append(
        "- A warm worker reads the tenant (its signing secret, its limit) at most once every 10 s; the "
        "metered round follows the timed ones, and a tenant read in it is counted with the run's requests."
    )
    parts = [
        "## Worker CPU per run",
        "",
        f"Command: `{command}`",
        "",
        "The worker's record handler (`handle_record`, as the Lambda calls it) over moto in process, on a",
        "fake clock that moto's SQS follows; each round moves the clock a minute, runs a planner tick and",
        "hands the visible messages to the handler in batches of up to 10, with a real loopback webhook",
        "receiver as the target. Recurring jobs fire every minute and are timed from their third fire on",
        "(steady state). `own CPU` is the thread CPU time outside boto3 client calls (tickwork, pydantic,",
        "Powertools, urllib3 for the webhook), from the half of the runs timed without a profiler; the top",
        "functions come from the other half, under cProfile (whose overhead inflates them). `in AWS calls`",
        "is the CPU inside boto3 calls per run (botocore and moto), which a Lambda spends only in part",
        "(botocore yes, the service no). Runs/s per vCPU = 1000 / own CPU ms. Requests and units come from",
        "the cost meter (`bench._cost_meter`) over one more round: the event source mapping's receive and",
        "delete are left out.",
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
                "DynamoDB requests/run",
                "WRU/run",
                "index WRU/run",
                "RRU/run",
            ),
            rows,
        ),
        "",
        *notes,
        "",
        "Requests per run by operation:",
        "",
        table(
            ("operation", *(result.kind for result in results)),
            [
                (name, *(f"{result.requests_per_run.get(name, 0):.2f}" for result in results))
                for name in sorted({name for result in results for name in result.requests_per_run})
            ],
        ),
        "",
        "Largest item written per table (bytes; one WRU per write up to 1,024): "
        + "; ".join(
            f"{result.kind}: "
            + ", ".join(f"{name} {size}" for name, size in sorted(result.item_bytes.items()))
            for result in results
        )
        + ".",
    ]
    for result in results:
        parts += [
            "",
            f"Top 10 functions by own CPU, {result.kind} (ms per run):",
            "",
            table(("function", "own ms/run", "cumulative ms/run"), result.top),
        ]
    return "\n".join(parts) + "\n"


def run(runs: int) -> list[WorkerResult]:
    return [measure(kind, runs) for kind in KINDS]


def section(runs: int = 200) -> str:
    return _markdown(run(runs), f"python -m bench.worker_cpu --runs {runs}", client_cpu_per_request())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200, help="timed runs of each job kind")
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
