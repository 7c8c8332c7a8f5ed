"""Fault-injection scenarios: tickwork under moto with AWS calls failing, processes dying, messages
delivered twice, planners racing and worker clocks skewed. Each scenario runs a few hundred fires to the
end on a fake clock and checks that nothing was lost, nothing ran twice at once, nothing ran early, and
the counters balance.

    python -m bench.faults                 # every scenario, 150 fires each, a markdown table
    python -m bench.faults --runs 100 --only sqs-sends,clock-skew

The same scenario code runs (smaller) in ``tests/reliability/test_faults.py``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork_local.harness import Message, Pump, Received, Receiver, Reply, partial_batches

from bench._faults import DYNAMODB_WRITES, SQS_SENDS, FaultInjector, FaultRule, Stratified

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
TENANT = "acme"
# Fires start this long after the jobs are created (beyond the planner's horizon, so the planner plans
# them all) and are spread over the window.
FIRST_FIRE = timedelta(seconds=20)
HORIZON_SECONDS = 10
LOOKAHEAD_SECONDS = 4  # twice the tick interval
TARGET_TIMEOUT = 5
RECEIVE_VISIBILITY = 30
MAX_FAKE_SECONDS = 1200
TICK_EVERY = 2  # fake seconds between planner ticks (a minute on AWS, a second locally)
# Planner ticks fall this far past the whole second, as they do in life: SQS delays are whole seconds
# rounded down, so messages arrive up to a second before their fire and workers wait out the rest.
TICK_PHASE = 0.25
RETRY = {"max_attempts": 6, "initial_delay_seconds": 1, "multiplier": 2.0, "jitter": "none"}


class ProcessKilled(BaseException):
    """The process died here: nothing after this point runs, and no handler catches it."""


# --- time ---------------------------------------------------------------------------------------------------
class FakeClock:
    """Time that moves only when the driver (or a worker's wait) moves it."""

    def __init__(self, now: datetime):
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        self.sleep(seconds)


@dataclass
class SkewedClock:
    """A worker's own clock: the true (fake) time plus an offset."""

    base: FakeClock
    offset: timedelta

    def __call__(self) -> datetime:
        return self.base() + self.offset


# --- the webhook receiver -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    path: str
    run_id: str
    attempt: int
    idempotency_key: str
    scheduled_for: datetime
    at: datetime
    status: int


def receiver(clock: FakeClock) -> Receiver:
    """A real webhook target on loopback (``tickwork_local.harness.Receiver``). ``/ok`` answers 200,
    ``/flaky/<k>`` 500 to attempts 1..k then 200, ``/down`` always 500. It records each call with the fake
    time it arrived, and the most calls of one run it had in progress at once."""

    def answer(request: Received) -> Reply:
        attempt = int(request.headers["X-Tickwork-Attempt"])
        flaky = request.path.startswith("/flaky/")
        failing = request.path == "/down" or (flaky and attempt <= int(request.path.rsplit("/", 1)[1]))
        return Reply(500 if failing else 200, body=b"ok")

    return Receiver(
        answer=answer,
        group=lambda request: str(request.json()["run_id"]),
        clock=lambda: clock().timestamp(),
    )


def calls_of(receiver: Receiver) -> list[Call]:
    """What the receiver got, call by call."""
    return [
        Call(
            path=request.path,
            run_id=str(request.json()["run_id"]),
            attempt=int(request.headers["X-Tickwork-Attempt"]),
            idempotency_key=request.headers["Idempotency-Key"],
            scheduled_for=datetime.fromisoformat(request.headers["X-Tickwork-Scheduled-For"]),
            at=datetime.fromtimestamp(request.at, UTC),
            status=request.status,
        )
        for request in list(receiver.requests)
    ]


# --- the world: moto, runtimes, clock -----------------------------------------------------------------------
class RecordingMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.counts[name] += int(value)

    def milliseconds(self, name: str, value: float) -> None:
        return None


@dataclass
class World:
    clock: FakeClock
    receiver: Receiver
    planners: list[Any]  # Runtime, each with its own clients
    workers: list[Any]
    checker: Any  # a DynamoDB client no fault touches
    sqs: Any
    queue_url: str
    metrics: RecordingMetrics
    expected: dict[str, datetime] = field(default_factory=dict)  # run id -> scheduled time

    def clients(self, role: str, service: str) -> list[Any]:
        runtimes = self.planners if role == "planner" else self.workers
        return [getattr(runtime, service) for runtime in runtimes]


@contextmanager
def world(*, planners: int = 2, workers: int = 3) -> Iterator[World]:
    from bench._moto import aws_environment

    with aws_environment():
        import boto3
        from tickwork import tables
        from tickwork.adapters.tenants import DynamoTenantStore
        from tickwork.config import Settings
        from tickwork.domain.tenants import Tenant
        from tickwork.runtime import build_runtime, runtime
        from tickwork_local.atomic import serialise_dynamodb
        from tickwork_local.harness import moto_aws

        runtime.cache_clear()
        clock = FakeClock(START)
        webhooks = receiver(clock)
        try:
            with moto_aws(clock=clock):
                checker = boto3.client("dynamodb")
                sqs = boto3.client("sqs")
                for definition in tables.ALL_TABLES:
                    checker.create_table(**definition.create_table_kwargs())
                urls = {
                    queue.logical_name: sqs.create_queue(QueueName=queue.default_name)["QueueUrl"]
                    for queue in tables.ALL_QUEUES
                }
                settings = Settings(
                    run_queue_url=urls[tables.RUN_QUEUE.logical_name],
                    dead_run_queue_url=urls[tables.DEAD_RUN_QUEUE.logical_name],
                    allow_private_targets=True,
                    due_shards=2,
                    attention_shards=2,
                    planner_horizon_seconds=HORIZON_SECONDS,
                    planner_lookahead_seconds=LOOKAHEAD_SECONDS,
                    # The world moves in whole steps: a message comes at its fire, as its checks expect.
                    send_lead_ms=0,
                )
                metrics = RecordingMetrics()

                def make(role: str, index: int) -> Any:
                    dynamodb = boto3.client("dynamodb")
                    serialise_dynamodb(dynamodb.meta.events)
                    built = build_runtime(
                        settings, dynamodb=dynamodb, sqs=boto3.client("sqs"), metrics=metrics
                    )
                    built.worker_id = f"{role}-{index}"
                    return built

                DynamoTenantStore(checker, table=settings.tenants_table).put(
                    Tenant(
                        tenant_id=TENANT,
                        name="Acme",
                        signing_secret="secret-acme",  # noqa: S106 - a throwaway secret
                        created_at=datetime(2026, 1, 1, tzinfo=UTC),
                        max_jobs=10_000,
                        max_concurrent_runs=10_000,
                    ),
                    token="tw_acme",  # noqa: S106 - a throwaway token
                )
                yield World(
                    clock=clock,
                    receiver=webhooks,
                    planners=[make("planner", i) for i in range(planners)],
                    workers=[make("worker", i) for i in range(workers)],
                    checker=checker,
                    sqs=sqs,
                    queue_url=urls[tables.RUN_QUEUE.logical_name],
                    metrics=metrics,
                )
        finally:
            webhooks.close()
            runtime.cache_clear()


# --- the workload -------------------------------------------------------------------------------------------
def create_workload(world: World, fires: int, rng: random.Random) -> None:
    """About ``fires`` fires over two minutes: one-time jobs, rate and six-field cron jobs, a fifth of them
    on targets that fail a few times first, and one job whose target always fails (its runs go DEAD)."""
    from tickwork.domain.models import JobSpec, scheduled_run_id
    from tickwork.domain.schedule import iter_fire_times

    first = START + FIRST_FIRE
    window = max(30, min(120, fires // 2))
    service = world.planners[0].service

    def target() -> dict[str, Any]:
        path = f"/flaky/{rng.randint(1, 2)}" if rng.random() < 0.2 else "/ok"
        return {"type": "http", "url": world.receiver.url(path), "timeout_seconds": TARGET_TIMEOUT}

    specs: list[dict[str, Any]] = [
        {
            "schedule": {
                "type": "rate",
                "every_seconds": 15,
                "start_at": first.isoformat(),
                "end_at": (first + timedelta(seconds=window)).isoformat(),
            },
            "target": {"type": "http", "url": world.receiver.url("/down"), "timeout_seconds": TARGET_TIMEOUT},
        }
    ]
    count = 9  # the /down job's fires
    while count < fires:
        roll = rng.random()
        offset = rng.randint(0, window // 2)
        if roll < 0.4:
            at = first + timedelta(seconds=rng.randint(0, window))
            specs.append({"schedule": {"type": "once", "at": at.isoformat()}, "target": target()})
            count += 1
            continue
        start = first + timedelta(seconds=offset)
        end = start + timedelta(seconds=rng.choice((20, 40, 60)))
        if roll < 0.7:
            every = rng.choice((5, 10))
            schedule = {"type": "rate", "every_seconds": every}
        else:
            every = 10
            schedule = {"type": "cron", "expression": "*/10 * * * * *"}
        schedule.update(start_at=start.isoformat(), end_at=end.isoformat())
        specs.append(
            {"schedule": schedule, "target": target(), "overlap_policy": rng.choice(("skip", "allow"))}
        )
        count += int((end - start).total_seconds()) // every + 1
    for spec in specs:
        job = service.create_job(
            TENANT,
            JobSpec.model_validate({"name": f"job-{uuid.uuid4().hex[:12]}", "retry": RETRY, **spec}),
            START,
        ).job
        for fire_at in iter_fire_times(job.schedule, job.created_at):
            world.expected[scheduled_run_id(job.job_id, fire_at)] = fire_at


# --- driving ------------------------------------------------------------------------------------------------
def mapping(world: World, runtime: Any, worker: Any) -> Pump:
    """The run queue's event source mapping into one worker (``handle_record`` with its runtime and worker),
    through the client no fault touches."""
    from functions.worker.handler import handle_record

    return Pump(
        world.sqs,
        world.queue_url,
        partial_batches(lambda record: handle_record(record, runtime, worker)),
        visibility_timeout=RECEIVE_VISIBILITY,
    )


def deliver(pump: Pump, messages: list[Message]) -> None:
    """One worker invocation, then what the event source mapping does: delete what succeeded. A process
    that dies mid-batch deletes nothing; its messages come back after their visibility timeout."""
    try:
        pump.deliver(messages)
    except ProcessKilled:
        return


@dataclass
class Scenario:
    """A workload run under one kind of trouble. The hooks change how the planner ticks, how workers are
    built and how messages are delivered; the rules are faults injected into AWS calls."""

    name: str
    injected: str
    planner_rules: list[FaultRule] = field(default_factory=list)
    worker_rules: list[FaultRule] = field(default_factory=list)
    kill_after_lease: float = 0.0
    kill_after_call: float = 0.0
    duplicate_deliveries: bool = False
    racing_planners: bool = False
    worker_skews: tuple[float, ...] = (0.0,)


@dataclass
class Drive:
    world: World
    scenario: Scenario
    rng: random.Random
    planner_faults: FaultInjector
    worker_faults: FaultInjector
    events: Counter[str] = field(default_factory=Counter)
    touched: set[str] = field(default_factory=set)  # run ids a kill or a duplicate delivery hit
    last_fault_at: datetime | None = None
    workers: list[Pump] = field(default_factory=list)  # the mapping into each worker

    def note(self, kind: str, run_id: str | None = None) -> None:
        self.events[kind] += 1
        self.last_fault_at = self.world.clock()
        if run_id:
            self.touched.add(run_id)

    def build_workers(self) -> None:
        kill_after_lease = Stratified(self.scenario.kill_after_lease, self.rng)
        kill_after_call = Stratified(self.scenario.kill_after_call, self.rng)

        from tickwork.domain.models import Job, Run
        from tickwork.domain.tenants import Tenant
        from tickwork.targets import TargetResult

        for index, runtime in enumerate(self.world.workers):
            skew = self.scenario.worker_skews[index % len(self.scenario.worker_skews)]
            clock = SkewedClock(self.world.clock, timedelta(seconds=skew)) if skew else self.world.clock
            real = runtime.execute

            def execute(job: Job, run: Run, tenant: Tenant, real: Any = real) -> TargetResult:
                if kill_after_lease.hit():
                    self.note("worker killed after the lease", run.run_id)
                    raise ProcessKilled
                result: TargetResult = real(job, run, tenant)
                if kill_after_call.hit():
                    self.note("worker killed after the call", run.run_id)
                    raise ProcessKilled
                return result

            worker = runtime.worker(
                clock=clock, sleep=self.world.clock.sleep, execute=execute, worker_id=f"worker-{index}"
            )
            self.workers.append(mapping(self.world, runtime, worker))

    def tick(self) -> None:
        planners = self.world.planners if self.scenario.racing_planners else self.world.planners[:1]
        shards = list(range(planners[0].settings.due_shards))
        barrier = threading.Barrier(len(planners))

        def one(planner: Any) -> None:
            if len(planners) > 1:
                barrier.wait()
            try:
                planner.planner_tick.tick(self.world.clock(), shards)
            except ProcessKilled:
                self.last_fault_at = self.world.clock()  # counted by the injector that killed it
            except Exception:
                self.events["planner tick failed"] += 1

        if len(planners) == 1:
            one(planners[0])
            return
        threads = [threading.Thread(target=one, args=(planner,)) for planner in planners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def work(self) -> None:
        for _ in range(100):  # bounded: each round takes at least one message off the queue's visible set
            messages = self.workers[0].receive()  # each worker's mapping receives from the same queue
            if not messages:
                return
            pick = self.rng.randrange(len(self.workers))
            one = self.workers[pick]
            if not self.scenario.duplicate_deliveries:
                deliver(one, messages)
                continue
            for message in messages:
                self.note("message delivered twice", json.loads(message["Body"])["run_id"])
            other = self.workers[(pick + 1) % len(self.workers)]
            if self.rng.random() < 0.5:
                threads = [
                    threading.Thread(target=deliver, args=(one, messages)),
                    threading.Thread(target=deliver, args=(other, messages)),
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                self.events["concurrent double deliveries"] += len(messages)
            else:
                deliver(one, messages)
                deliver(other, messages)


def all_runs(world: World) -> dict[str, Any]:
    from tickwork import tables
    from tickwork.adapters.runs import run_from_item

    runs: dict[str, Any] = {}
    for page in world.checker.get_paginator("scan").paginate(TableName=tables.RUNS.default_name):
        for item in page["Items"]:
            if item[tables.RUNS_SK]["S"].startswith(tables.MANUAL_POINTER_PREFIX):
                continue
            run = run_from_item(item)
            runs[run.run_id] = run
    return runs


def still_open(world: World, pending: set[str]) -> set[str]:
    """The run ids of ``pending`` that do not exist yet or have not reached a terminal status."""
    from tickwork import tables
    from tickwork.domain.models import TERMINAL_RUN_STATUSES, RunStatus, parse_run_id

    open_ids = set()
    for run_id in pending:
        key = parse_run_id(run_id)
        assert key is not None, run_id
        assert key.fire_ms is not None, run_id
        item = world.checker.get_item(
            TableName=tables.RUNS.default_name,
            Key={
                tables.RUNS_PK: {"S": tables.job_key(TENANT, key.job_id)},
                tables.RUNS_SK: {"S": tables.run_sort_key(key.fire_ms)},
            },
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
            ConsistentRead=True,
        ).get("Item")
        if item is None or RunStatus(item["status"]["S"]) not in TERMINAL_RUN_STATUSES:
            open_ids.add(run_id)
    return open_ids


# --- the verdict --------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    scenario: str
    injected: Counter[str]
    runs: int
    expected: int
    terminal: int
    statuses: Counter[str]
    lost: list[str]
    not_terminal: list[str]
    overlapping_attempts: list[str]
    concurrent_calls: list[str]
    duplicated: list[str]  # two successful calls of one run that at-least-once does not excuse
    at_least_once_repeats: list[str]  # two successful calls after a lost result, same key
    wrong_keys: list[str]
    early: list[str]
    recovered: int
    hit: int
    fake_seconds: float
    recover_seconds: float | None
    max_delay_hit: float
    max_delay_clean: float
    metric_balance: dict[str, int]
    unbalanced: bool
    dead_without_letter: list[str]
    wall_seconds: float
    max_early_seconds: float = 0.0

    @property
    def violations(self) -> dict[str, list[str]]:
        found = {
            "lost": self.lost,
            "not terminal": self.not_terminal,
            "overlapping attempts": self.overlapping_attempts,
            "concurrent calls": self.concurrent_calls,
            "duplicated": self.duplicated,
            "wrong idempotency keys": self.wrong_keys,
            "early": self.early,
            "unbalanced": ["counters"] if self.unbalanced else [],
        }
        return {name: ids for name, ids in found.items() if ids}


def verdict(drive: Drive, finished_at: datetime, wall_seconds: float) -> Outcome:
    from tickwork.domain.models import TERMINAL_RUN_STATUSES, RunStatus

    world = drive.world
    runs = all_runs(world)
    skew = timedelta(seconds=max((abs(s) for s in drive.scenario.worker_skews), default=0.0))
    calls_by_run: dict[str, list[Call]] = {}
    received = calls_of(world.receiver)
    for call in received:
        calls_by_run.setdefault(call.run_id, []).append(call)

    overlapping = []
    for run in runs.values():
        attempts = sorted(run.attempts, key=lambda attempt: attempt.attempt)
        for before, after in itertools.pairwise(attempts):
            # Each attempt's times come from its worker's clock: skewed clocks may disagree by 2 x skew
            if before.finished_at is None or before.finished_at > after.started_at + 2 * skew:
                overlapping.append(run.run_id)
    duplicated, repeats = [], []
    for run_id, calls in calls_by_run.items():
        successes = [call for call in calls if 200 <= call.status < 300]
        if len(successes) < 2:
            continue
        run = runs[run_id]
        recorded = {attempt.attempt: attempt.outcome for attempt in run.attempts}
        lost_results = [call for call in successes if recorded.get(call.attempt) == "abandoned"]
        succeeded = [attempt for attempt in run.attempts if attempt.outcome == "succeeded"]
        if len(succeeded) <= 1 and len(successes) - len(lost_results) <= 1:
            repeats.append(run_id)
        else:
            duplicated.append(run_id)
    statuses = Counter(run.status.value for run in runs.values())
    terminal = sum(1 for run in runs.values() if run.status in TERMINAL_RUN_STATUSES)
    hit_ids = (
        drive.touched | drive.planner_faults.faulted_run_ids() | drive.worker_faults.faulted_run_ids()
    ) & set(world.expected)
    hit_done = [runs[r] for r in hit_ids if r in runs and runs[r].status in TERMINAL_RUN_STATUSES]

    def delay(run: Any) -> float:
        end = run.finished_at or finished_at
        return float((end - run.scheduled_for).total_seconds())

    clean = [
        run for run_id, run in runs.items() if run_id not in hit_ids and run.status in TERMINAL_RUN_STATUSES
    ]
    counts = world.metrics.counts
    ended = {
        status: counts[name]
        for status, name in (
            ("SUCCEEDED", "RunsSucceeded"),
            ("FAILED", "RunsFailed"),
            ("DEAD", "RunsDead"),
            ("MISSED", "RunsMissed"),
            ("SKIPPED", "RunsSkipped"),
            ("ABANDONED", "RunsAbandoned"),
        )
    }
    store_planned = len(runs)
    store_ended = sum(statuses[status.value] for status in TERMINAL_RUN_STATUSES)
    letters = dead_letter_run_ids(world)
    last_fault = max(
        [
            at
            for at in (drive.last_fault_at, *(i.at for i in drive.planner_faults.injections))
            if at is not None
        ]
        + [i.at for i in drive.worker_faults.injections if i.at is not None],
        default=None,
    )
    injected = Counter(drive.events)
    injected.update(drive.planner_faults.counts)
    injected.update(drive.worker_faults.counts)
    injected.pop("planner tick failed", None)
    return Outcome(
        scenario=drive.scenario.name,
        injected=injected,
        runs=len(runs),
        expected=len(world.expected),
        terminal=terminal,
        statuses=statuses,
        lost=sorted(set(world.expected) - set(runs)),
        not_terminal=sorted(r for r, run in runs.items() if run.status not in TERMINAL_RUN_STATUSES),
        overlapping_attempts=sorted(set(overlapping)),
        concurrent_calls=sorted(r for r, n in world.receiver.most_at_once.items() if n > 1),
        duplicated=sorted(duplicated),
        at_least_once_repeats=sorted(repeats),
        wrong_keys=sorted({c.run_id for c in received if c.idempotency_key != c.run_id}),
        early=sorted({c.run_id for c in received if c.at < c.scheduled_for}),
        recovered=len(hit_done),
        hit=len(hit_ids),
        fake_seconds=(finished_at - START).total_seconds(),
        recover_seconds=(finished_at - last_fault).total_seconds() if last_fault else None,
        max_delay_hit=max((delay(run) for run in hit_done), default=0.0),
        max_delay_clean=max((delay(run) for run in clean), default=0.0),
        metric_balance={"planned": counts["RunsPlanned"], **ended},
        unbalanced=store_planned != store_ended or set(runs) != set(world.expected),
        dead_without_letter=sorted(
            r for r, run in runs.items() if run.status is RunStatus.DEAD and r not in letters
        ),
        wall_seconds=wall_seconds,
        max_early_seconds=max(
            (float((c.scheduled_for - c.at).total_seconds()) for c in received), default=0.0
        ),
    )


def dead_letter_run_ids(world: World) -> set[str]:
    from tickwork import tables

    url = world.sqs.get_queue_url(QueueName=tables.DEAD_RUN_QUEUE.default_name)["QueueUrl"]
    found: set[str] = set()
    for _ in range(100):
        messages = world.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get(
            "Messages", []
        )
        if not messages:
            break
        found.update(json.loads(message["Body"])["run_id"] for message in messages)
    return found


# --- the scenarios ------------------------------------------------------------------------------------------
SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "dynamodb-throttled",
            "10% of DynamoDB writes throttled (planner and workers)",
            planner_rules=[FaultRule("dynamodb", DYNAMODB_WRITES, 0.10, ("throttle",))],
            worker_rules=[FaultRule("dynamodb", DYNAMODB_WRITES, 0.10, ("throttle",))],
        ),
        Scenario(
            "dynamodb-errors",
            "10% of DynamoDB writes: 500, connection reset, or a read timeout after the write applied",
            planner_rules=[
                FaultRule("dynamodb", DYNAMODB_WRITES, 0.10, ("internal", "connection", "timeout"))
            ],
            worker_rules=[
                FaultRule("dynamodb", DYNAMODB_WRITES, 0.10, ("internal", "connection", "timeout"))
            ],
        ),
        Scenario(
            "sqs-sends",
            "5% of SQS sends fail: throttled, 500, connection reset, timeout after the send, partial batch",
            planner_rules=[
                FaultRule(
                    "sqs", SQS_SENDS, 0.05, ("throttle", "internal", "connection", "timeout", "partial")
                )
            ],
            worker_rules=[
                FaultRule("sqs", SQS_SENDS, 0.05, ("throttle", "internal", "connection", "timeout"))
            ],
        ),
        Scenario(
            "workers-killed",
            "5% of attempts: the worker dies after the lease; 5%: after the call, before the write",
            kill_after_lease=0.05,
            kill_after_call=0.05,
        ),
        Scenario(
            "planner-killed",
            "planner dies mid-tick: after a missed run's put, before or after a send, before a cursor moves",
            planner_rules=[
                FaultRule("dynamodb", frozenset({"PutItem"}), 0.05, ("crash_after",)),
                FaultRule("sqs", frozenset({"SendMessageBatch"}), 0.10, ("crash_before", "crash_after")),
                FaultRule("dynamodb", frozenset({"UpdateItem"}), 0.05, ("crash_before",)),
            ],
        ),
        Scenario(
            "duplicate-deliveries",
            "every message delivered twice, half of them to two workers at once",
            duplicate_deliveries=True,
        ),
        Scenario(
            "racing-planners", "two planners tick the same shards at once, every tick", racing_planners=True
        ),
        Scenario(
            "clock-skew",
            "three workers with clocks -2 s, 0 s and +2 s off the planner's",
            worker_skews=(-2.0, 0.0, 2.0),
        ),
    )
}


def run_scenario(scenario: Scenario, *, fires: int = 150, seed: int = 7) -> Outcome:
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not security
    wall = time.perf_counter()
    with world() as current:
        create_workload(current, fires, rng)
        drive = Drive(
            current,
            scenario,
            rng,
            FaultInjector(scenario.planner_rules, seed=seed + 1, clock=current.clock, crash=ProcessKilled),
            FaultInjector(scenario.worker_rules, seed=seed + 2, clock=current.clock, crash=ProcessKilled),
        )
        for planner in current.planners:
            for client in (planner.dynamodb, planner.sqs):
                drive.planner_faults.install(client)
        for worker in current.workers:
            for client in (worker.dynamodb, worker.sqs):
                drive.worker_faults.install(client)
        drive.build_workers()
        pending = set(current.expected)
        current.clock.advance(TICK_PHASE)
        for second in range(MAX_FAKE_SECONDS):
            if second % TICK_EVERY == 0:
                drive.tick()
            drive.work()
            if second % 5 == 4:
                pending = still_open(current, pending)
                if not pending:
                    break
            current.clock.advance(1)
        return verdict(drive, current.clock(), time.perf_counter() - wall)


# --- the report ---------------------------------------------------------------------------------------------
def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| scenario | injected | runs | terminal | lost | duplicated | at-least-once repeats | recovered "
        "| time to recover | max delay (hit / clean) | statuses | metrics planned / ended | violations |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for o in outcomes:
        injected = ", ".join(f"{kind} {n}" for kind, n in sorted(o.injected.items())) or "-"
        statuses = ", ".join(f"{status} {n}" for status, n in sorted(o.statuses.items()))
        recover = f"{o.recover_seconds:.0f} s" if o.recover_seconds is not None else "-"
        violations = "; ".join(f"{name} {len(ids)}" for name, ids in o.violations.items()) or "none"
        ended = sum(n for name, n in o.metric_balance.items() if name != "planned")
        lines.append(
            f"| {o.scenario} | {injected} | {o.runs} | {o.terminal} | {len(o.lost) + len(o.not_terminal)} "
            f"| {len(o.duplicated)} | {len(o.at_least_once_repeats)} | {o.recovered}/{o.hit} | {recover} "
            f"| {o.max_delay_hit:.0f} s / {o.max_delay_clean:.0f} s | {statuses} "
            f"| {o.metric_balance['planned']} / {ended} | {violations} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=150, help="fires per scenario (default 150)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name] or list(SCENARIOS)
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    outcomes = []
    for name in names:
        outcome = run_scenario(SCENARIOS[name], fires=args.runs, seed=args.seed)
        print(f"{name}: {outcome.runs} runs in {outcome.wall_seconds:.1f} s wall", file=sys.stderr)
        outcomes.append(outcome)
    print(table(outcomes))
    extra = [o for o in outcomes if o.dead_without_letter]
    for o in extra:
        print(f"\n{o.scenario}: {len(o.dead_without_letter)} DEAD runs without a dead letter")
    return 1 if any(o.violations for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
