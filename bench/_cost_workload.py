"""The workload behind ``bench.cost``: rate jobs at steady state, through the real Lambda handlers under
moto on a fake clock, every AWS request metered.

For one shape (a period, a number of jobs of that period, the history each job carries):

- the jobs' past runs are written straight to moto's runs table, one SUCCEEDED item per past fire with its
  one attempt, as the worker leaves them (unmetered);
- the jobs are created through the service 11 min 59.5 s before their first fire, so the API sends their
  first fires at once and the planner takes over two minutes into the run, at the same phase as ever after;
- time moves from event to event on the fake clock. Every minute (at :00.5, as a tick lands some time into
  its second) the planner Lambda's handler ticks over all due shards; a tick that sends sweeps up to a second,
  sleeping on the fake clock until each batch's moment comes. Whenever a message becomes visible (moto's own
  delay of each message, read from its queue) the run queue is drained the way the event source mapping's
  long poll drains it (``tickwork_local.harness.Pump``): ReceiveMessage of up to 10, one invocation of the
  worker Lambda's handler per batch (the batches of one moment run side by side, as concurrent invocations
  do), then the deletes of what it finished. The mapping's own requests go through a client the meter does
  not watch and are counted here as AWS makes them, one receive and one DeleteMessageBatch per invocation;
  its empty polls are not per-run work;
- the measured window is one planning cycle at steady state: from the tick that plans the jobs' next fires
  (two minutes in) to the next one that does (a job is planned when its cursor is within the 120 s
  lookahead, up to the 900 s horizon: every 14 ticks at this phase). The window's ticks plan exactly the runs
  of the cycle, which the workload checks. The planner is metered over the whole cycle, its ticks that plan
  nothing apart (the tick's base cost). The worker is metered over the runs of the fires that tick planned,
  one minute later than the ticks (the first minute's fires were sent by the API, which does not time its
  sends): the shape's ``worker_seconds`` of them (all of them unless that is too many runs to run under moto
  in a few minutes), every metered run SUCCEEDED at its first attempt; the cycle's later messages are
  received and deleted without a worker, unmetered. A run's cost is then the worker's per metered run plus
  the planner's per planned run;
- the runs table's stream records (moto's stream of the table, one record per write) go to the indexer
  Lambda's handler in batches as its event source mapping makes them: the records of a batching window
  (``Shape.index_window_s``, 2 s as deployed: from the first record, up to 1,000 records) in one invocation,
  or, with a window of 0, the records of each moment's writes in an invocation of their own (a lone job's
  worst case). The indexer runs from the first run on, so the tenant's hour is listed before the window,
  and is metered over the batches of the worker's metered runs: its requests and chunk writes, its own CPU,
  its log bytes, and each chunk item's size. After the window, a first page of the tenant-wide run list
  (``GET /v1/runs``, 100 runs) is read through the service, metered;

Measured per invocation, outside AWS calls: the worker's and the planner's own CPU (tickwork, pydantic,
Powertools, the webhook's HTTP client; botocore and moto are left out, as in ``bench.worker_cpu``), the time
the worker slept before a fire and the planner slept between its sends (both on the fake clock, both billed
Lambda time), and the bytes the handlers write to stdout (Powertools log lines and the EMF metrics blob),
with the log level the stack deploys (INFO).

Two things of moto's would make this workload quadratic: a query of moto's sorts every item of the table, and
every SQS send recomputes the queue's approximate message counts by scanning all messages. moto runs as the
local stack runs it (``tickwork_local.harness.moto_aws``), whose changes to moto do neither and give the same
answers.
"""

from __future__ import annotations

import io
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from unittest import mock

from bench._common import AwsClock
from bench._cost_meter import Meter, Tally
from infra.config import StageConfig

if TYPE_CHECKING:
    from tickwork.domain.models import Run

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
"""The first fire of every job."""
TICK_PHASE = timedelta(milliseconds=500)
"""Ticks and message arrivals fall half a second into their second (see ``docs/cost.md``)."""
CREATED = START - timedelta(minutes=12) + TICK_PHASE
WINDOW_START = START + timedelta(minutes=2) + TICK_PHASE
CYCLE_TICKS = 14
WINDOW_END = WINDOW_START + timedelta(minutes=CYCLE_TICKS)
WORKER_LAG = timedelta(minutes=1)
"""The worker's window starts this much after the planner's: with the runs of the fires the window's planning
tick sent, not of those the API sent at create."""
WORKER_START = WINDOW_START + WORKER_LAG
DRAIN_END = WINDOW_END + WORKER_LAG
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEPLOYED = StageConfig()
VISIBILITY_TIMEOUT = DEPLOYED.worker_timeout_seconds * 6  # the run queue's (infra/storage.py)
PAYLOAD = {"report": "daily", "format": "csv"}
INDEX_WINDOW_S = 2.0
"""The indexer's event source mapping (``infra/indexer.py``): its batching window and batch size."""
INDEX_BATCH = 1000
INDEXER_MEMORY_MB = 256
"""The indexer function's memory (``infra/stack.py``)."""
PAGE = 100
"""The runs of the first page of the tenant-wide run list read after the window."""


@dataclass(frozen=True)
class Shape:
    period: int
    jobs: int
    history: int
    """Past runs seeded per job."""
    worker_seconds: int = CYCLE_TICKS * 60
    """The worker is metered over this many seconds from the start of its window (a multiple of 60 s, so the
    tenant cache's minute is whole); the rest of the cycle's messages are received and deleted unmetered,
    without a worker. The planner is metered over the whole cycle."""
    index_window_s: float = INDEX_WINDOW_S
    """The indexer's batching window: the stream records written within it from the batch's first go to one
    invocation (up to ``INDEX_BATCH``); 0: each moment's writes to an invocation of their own."""

    @property
    def name(self) -> str:
        return f"{self.period}s x{self.jobs}"

    @property
    def planned(self) -> int:
        """Runs the window's planning tick plans: every fire of the cycle."""
        return self.jobs * CYCLE_TICKS * 60 // self.period

    @property
    def expected_runs(self) -> int:
        """Runs the metered worker runs."""
        return self.jobs * self.worker_seconds // self.period


@dataclass
class Invocations:
    """What the invocations of one function in the window did, summed."""

    count: int = 0
    tally: Tally = field(default_factory=Tally)
    own_cpu_s: float = 0.0
    slept_s: float = 0.0
    log_bytes: int = 0
    log_lines: int = 0
    serial: Counter[str] | None = None
    """Requests per service one after another: per invocation, the invoking thread's and those of the
    busiest of the other threads it ran side by side (the worker's batch threads, the planner's sending
    pool); None: every request. ``slept_s`` is then that chain's sleep too."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "own_cpu_s": round(self.own_cpu_s, 6),
            "slept_s": round(self.slept_s, 3),
            **({"serial_requests": dict(sorted(self.serial.items()))} if self.serial is not None else {}),
            "log_bytes": self.log_bytes,
            "log_lines": self.log_lines,
            **tally_dict(self.tally),
        }


def tally_dict(tally: Tally) -> dict[str, Any]:
    return {
        name: {key: value for key, value in sorted(getattr(tally, name).items()) if value}
        for name in ("requests", "wru", "index_wru", "rru")
    }


def add_tally(total: Tally, part: Tally) -> None:
    for name in ("requests", "wru", "index_wru", "rru"):
        mine = getattr(total, name)
        for key, value in getattr(part, name).items():
            mine[key] += value


# --- moto ---------------------------------------------------------------------------------------------------
def _moto_queue(url: str) -> Any:
    """moto's own queue object, to read when its delayed messages become visible."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    from bench._moto import REGION

    return sqs_backends[DEFAULT_ACCOUNT_ID][REGION].get_queue(url.rsplit("/", 1)[-1])


def moto_table(name: str) -> Any:
    """moto's own table object (in process), to seed items without going through botocore and moto's
    request parsing: the same ``put_item`` the API ends in."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from bench._moto import REGION

    return dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(name)


# --- capturing what a handler writes ------------------------------------------------------------------------
@contextmanager
def captured_output() -> Iterator[io.StringIO]:
    """stdout (the EMF blob is printed) and the Powertools logger's stream, at INFO as deployed."""
    from tickwork.observability import logger

    buffer = io.StringIO()
    handler: Any = logger.registered_handler
    level = logger.log_level
    logger.setLevel("INFO")
    previous = handler.setStream(buffer)
    try:
        with redirect_stdout(buffer):
            yield buffer
    finally:
        handler.setStream(previous)
        logger.setLevel(level)


def _lines(text: str) -> tuple[int, int]:
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(len(line.encode()) + 1 for line in lines), len(lines)


class _Context:
    """The parts of a Lambda context Powertools reads."""

    def __init__(self, name: str, memory_mb: int, timeout_s: int):
        self.function_name = f"tickwork-{name}"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:tickwork-{name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/tickwork-{name}"
        self.log_stream_name = "2026/11/22/[$LATEST]0123456789abcdef0123456789abcdef"
        self._timeout_ms = timeout_s * 1000

    def get_remaining_time_in_millis(self) -> int:
        return self._timeout_ms


class _WorkerRuntime:
    """The runtime the worker handler gets: the bench's, with workers on the fake clock, and their tenant
    cache too (10 s of it, as on a warm Lambda instance: a real clock would never let it expire in a
    workload that runs minutes of fake time in seconds)."""

    def __init__(self, runtime: Any, clock: Any):
        self._runtime, self._clock = runtime, clock
        runtime.cached_tenants.clock = lambda: clock().timestamp()

    def worker(self, **_: Any) -> Any:
        return self._runtime.worker(clock=self._clock, sleep=self._clock.sleep)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


def _fake_datetime(clock: Callable[[], datetime]) -> type[datetime]:
    class FakeDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return clock()

    return FakeDatetime


# --- the workload -------------------------------------------------------------------------------------------
@dataclass
class Workload:
    shape: Shape
    runtime: Any
    clock: Any
    receiver: Any
    meter: Meter
    aws: AwsClock
    esm: Any
    peek: Any
    job_ids: list[str] = field(default_factory=list)
    worker: Invocations = field(default_factory=lambda: Invocations(serial=Counter()))
    thread_cpu_s: float = 0.0
    """Own CPU of the worker's batch threads (other than the invoking one), added up across them."""
    planner: Invocations = field(default_factory=lambda: Invocations(serial=Counter()))
    planner_idle: Invocations = field(default_factory=lambda: Invocations(serial=Counter()))
    """The metered ticks that planned nothing (also in ``planner``): what a tick costs whatever the load."""
    runs: int = 0
    planned: list[int] = field(default_factory=list)
    per_second: Counter[int] = field(default_factory=Counter)
    """Worker invocations per second of the fake clock (for X-Ray's per-second sampling)."""
    moments: int = 0
    """Drains that found messages (moments at which messages became visible) in the worker's window."""
    deletes: int = 0
    skipped: int = 0
    """Messages of the cycle past the worker's metered seconds, received and deleted without a worker."""
    indexer: Invocations = field(default_factory=Invocations)
    """The indexer's metered invocations: those of the batches of the worker's metered runs."""
    index_records: int = 0
    """Stream records in the metered batches."""
    chunks: list[tuple[int, int, int]] = field(default_factory=list)
    """(summaries, item bytes, compressed bytes) of each chunk item the metered batches wrote."""
    hour_items: list[int] = field(default_factory=list)
    """Bytes of each hour item written (metered or not)."""
    page: dict[str, Any] = field(default_factory=dict)
    _stream_read: int = 0
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _opened: datetime | None = None
    _pool_rounds: Counter[str] = field(default_factory=Counter)
    """The requests of the planner's thread-pool rounds in the current tick, each round's slowest item's."""
    _written: list[dict[str, Any]] = field(default_factory=list)

    def seed(self) -> None:
        """Each job's history, straight into the runs table: one SUCCEEDED run per past fire."""
        from tickwork import tables

        store = self.runtime.runs
        table = moto_table(tables.RUNS.default_name)
        # The history is older than the index's window: no stream records for it (moto builds one per put).
        shard, table.stream_shard = table.stream_shard, None
        try:
            self._seed_runs(table, store)
        finally:
            table.stream_shard = shard

    def _seed_runs(self, table: Any, store: Any) -> None:
        from tickwork.domain.models import Attempt, Run, RunStatus, scheduled_run_id

        for job_id in self.job_ids:
            for index in range(1, self.shape.history + 1):
                fire = START - timedelta(seconds=index * self.shape.period)
                done = fire + timedelta(milliseconds=120)
                attempt = Attempt(
                    attempt=1,
                    started_at=fire,
                    finished_at=done,
                    duration_ms=120,
                    outcome="succeeded",
                    worker_id="worker-0123456789ab",
                )
                run = Run(
                    run_id=scheduled_run_id(job_id, fire),
                    job_id=job_id,
                    tenant_id=self._tenant,
                    scheduled_for=fire,
                    status=RunStatus.SUCCEEDED,
                    attempt=1,
                    created_at=fire - timedelta(seconds=600),
                    enqueued_at=fire - timedelta(seconds=600),
                    started_at=fire,
                    finished_at=done,
                    lag_ms=40,
                    attempts=[attempt],
                    fencing_token=self.shape.history - index + 1,
                )
                table.put_item(store.run_to_item(run))

    @property
    def _tenant(self) -> str:
        from bench._moto import TENANT

        return TENANT

    def create_jobs(self) -> None:
        from tickwork.domain.models import JobSpec

        self.clock.now = CREATED
        for index in range(self.shape.jobs):
            spec = JobSpec.model_validate(
                {
                    "name": f"every-{self.shape.period}s-{index}",
                    "schedule": {
                        "type": "rate",
                        "every_seconds": self.shape.period,
                        "start_at": START.isoformat(),
                    },
                    "target": self.target(index),
                    "payload": PAYLOAD,
                }
            )
            self.job_ids.append(self.runtime.service.create_job(self._tenant, spec, self.clock()).job.job_id)

    def target(self, index: int) -> dict[str, Any]:
        """The target of the shape's ``index``-th job: a webhook of the loopback receiver."""
        return {"type": "http", "url": self.receiver.url(f"/job-{index}"), "timeout_seconds": 10}

    def run(self) -> None:
        from tickwork.adapters.run_index import DynamoRunIndex

        from functions.indexer import handler as indexer_handler
        from functions.planner import handler as planner_handler
        from functions.worker import handler as worker_handler

        worker_runtime = _WorkerRuntime(self.runtime, self.clock)
        write_batch = DynamoRunIndex._write_batch
        written = self._written

        def noted(index: Any, items: list[dict[str, Any]]) -> None:
            written.extend(items)
            write_batch(index, items)

        with (
            mock.patch.object(worker_handler, "runtime", return_value=worker_runtime),
            mock.patch.object(planner_handler, "runtime", return_value=self.runtime),
            mock.patch.object(indexer_handler, "runtime", return_value=self.runtime),
            mock.patch.object(planner_handler, "datetime", _fake_datetime(self.clock)),
            mock.patch.object(DynamoRunIndex, "_write_batch", noted),
        ):
            # Ticks at :00.5 of every minute up to the window's end (its last fires are planned by then);
            # drains whenever a message becomes visible, until the worker's window ends.
            self.clock.now = START - timedelta(seconds=1) + TICK_PHASE
            tick_at = START + TICK_PHASE
            while True:
                now = self._settle(
                    self.clock(), worker_handler.lambda_handler, indexer_handler.lambda_handler
                )
                arrival = self._next_arrival(now)
                events = [at for at in (arrival, tick_at if tick_at < WINDOW_END else None) if at is not None]
                if not events or min(events) >= DRAIN_END:
                    break
                self.clock.now = max(now, min(events))
                if tick_at < WINDOW_END and self.clock() >= tick_at:
                    self._tick(self.clock(), planner_handler.lambda_handler, measured=tick_at >= WINDOW_START)
                    self._feed_index(self.clock(), indexer_handler.lambda_handler)
                    tick_at += timedelta(minutes=1)
            if self._pending:
                self._index(indexer_handler.lambda_handler)
            self._read_page()

    def _settle(self, now: datetime, worker: Any, indexer: Any) -> datetime:
        """What happens at ``now``: the messages visible then to the worker, the records written by then to
        the indexer's batches; returns the time it leaves off at."""
        self._drain(now, worker, measured=now >= WORKER_START)
        self._feed_index(now, indexer)
        return now

    # --- the indexer ----------------------------------------------------------------------------------------
    def _in_worker_window(self, at: datetime) -> bool:
        return WORKER_START <= at < WORKER_START + timedelta(seconds=self.shape.worker_seconds)

    def _new_records(self) -> list[dict[str, Any]]:
        """The runs table's stream records written since the last call, as a Lambda stream event has them."""
        from tickwork import tables

        table = moto_table(tables.RUNS.default_name)
        shard = table.stream_shard
        fresh = shard.items[self._stream_read :]
        self._stream_read = len(shard.items)
        arn = f"{table.table_arn}/stream/{table.latest_stream_label}"
        records = []
        for item in fresh:
            record = item.to_json()
            change = dict(record["dynamodb"])
            created = change.get("ApproximateCreationDateTime")
            if isinstance(created, datetime):
                change["ApproximateCreationDateTime"] = created.timestamp()
            records.append({**record, "dynamodb": change, "eventSourceARN": arn})
        return records

    def _feed_index(self, now: datetime, handler: Any) -> None:
        """The records written by ``now`` into the mapping's batches: a batch goes to the indexer when its
        window has passed since its first record, or when it holds ``INDEX_BATCH`` records; a batch never
        spans the start of the worker's metered window."""
        window = timedelta(seconds=self.shape.index_window_s)
        opened = self._opened
        if self._pending and opened is not None:
            crossed = opened < WORKER_START <= now
            if now >= opened + window or crossed:
                self._index(handler)
        fresh = self._new_records()
        if fresh and not self._pending:
            self._opened = now
        self._pending.extend(fresh)
        while len(self._pending) >= INDEX_BATCH:
            self._index(handler, INDEX_BATCH)
        if self._pending and not window:
            self._index(handler)

    def _index(self, handler: Any, count: int | None = None) -> None:
        """One invocation of the indexer Lambda's handler with the first ``count`` pending records (all of
        them by default), metered if they were written in the worker's metered window."""
        from tickwork import tables
        from tickwork.adapters.dynamo import to_item
        from tickwork.adapters.run_index import decode_entries

        from bench._cost_meter import item_size

        batch, self._pending = self._pending[:count], self._pending[len(self._pending[:count]) :]
        opened = self._opened
        if not self._pending:
            self._opened = None
        measured = opened is not None and self._in_worker_window(opened)
        before = self.meter.tally.snapshot()
        self._written.clear()
        started = self.aws.own_thread_time()
        with captured_output() as output:
            handler(
                {"Records": batch},
                _Context("indexer", INDEXER_MEMORY_MB, 60),
            )
        own = self.aws.own_thread_time() - started
        for item in self._written:
            if tables.INDEX_ENTRIES not in item:
                self.hour_items.append(item_size(to_item(item)))
            elif measured:
                data = item[tables.INDEX_ENTRIES]
                self.chunks.append((len(decode_entries(data)), item_size(to_item(item)), len(data)))
        if not measured:
            return
        size, lines = _lines(output.getvalue())
        self.indexer.count += 1
        self.indexer.own_cpu_s += own
        self.indexer.log_bytes += size
        self.indexer.log_lines += lines
        add_tally(self.indexer.tally, self.meter.tally.minus(before))
        self.index_records += len(batch)

    def _read_page(self) -> None:
        """A first page of the tenant-wide run list (every job, any status), as ``GET /v1/runs`` reads it."""
        from tickwork.domain.run_listing import RunFilter

        before = self.meter.tally.snapshot()
        started = self.aws.own_thread_time()
        page = self.runtime.service.list_tenant_runs(self._tenant, RunFilter(), limit=PAGE, cursor=None)
        own = self.aws.own_thread_time() - started
        self.page = {
            "runs": len(page.items),
            "own_cpu_s": round(own, 6),
            **tally_dict(self.meter.tally.minus(before)),
        }

    def _next_arrival(self, now: datetime) -> datetime | None:
        """When the next delayed message of the run queue becomes visible (moto's own ``delayed_until``), a
        couple of microseconds later so that moto, reading the fake clock, sees it."""
        queue = _moto_queue(self.runtime.queue_url)
        now_ms = now.timestamp() * 1000
        pending = [m.delayed_until for m in queue._messages if m.delayed_until > now_ms]
        if not pending:
            return None
        return EPOCH + timedelta(microseconds=math.ceil(min(pending) * 1000) + 2)

    @contextmanager
    def _planner_requests_take_time(self) -> Iterator[None]:
        """The planner's requests pass its time on the fake clock, as AWS's round trips would (the cost
        model's latencies), so that its sleep until a moment's sends is what its work before them leaves,
        as on AWS, not that work's time again. Its own thread's requests pass one after another; the ones
        it makes side by side on a thread pool (the due shards' queries, a moment's sends) pass in the
        pool's rounds, each as long as its slowest item, and are noted in ``_pool_rounds``."""
        from tickwork.app import planner as planner_module

        from bench.cost import Model

        model = Model()
        latency = {"dynamodb": model.dynamodb_latency_s, "sqs": model.sqs_latency_s}
        main = threading.main_thread()
        workload = self
        self._pool_rounds.clear()

        def waited(made: Counter[str]) -> float:
            return sum(latency[service] * count for service, count in made.items())

        def passes(event_name: str, **_: Any) -> None:
            if threading.current_thread() is main:
                self.clock.advance(seconds=latency[event_name.split(".")[1]])

        class RoundsPool(ThreadPoolExecutor):
            """The planner's pool: its items run ``max_workers`` at a time, so a map of n items takes
            ceil(n / max_workers) rounds, each as long as its slowest item's requests."""

            def map(self, fn: Any, *iterables: Any, **kwargs: Any) -> Iterator[Any]:
                items = list(zip(*iterables, strict=True))
                made: list[Counter[str]] = [Counter() for _ in items]

                def run(numbered: tuple[int, tuple[Any, ...]]) -> Any:
                    index, args = numbered
                    counts = workload.meter.per_thread[threading.get_ident()]
                    before = Counter(counts)
                    try:
                        return fn(*args)
                    finally:
                        made[index] = counts - before

                results = list(super().map(run, enumerate(items), **kwargs))
                workers = self._max_workers
                for first in range(0, len(items), workers):
                    slowest = max(made[first : first + workers], key=waited)
                    workload._pool_rounds.update(slowest)
                    workload.clock.advance(seconds=waited(slowest))
                return iter(results)

        clients = (self.runtime.dynamodb, self.runtime.sqs)
        for client in clients:
            client.meta.events.register("after-call", passes, unique_id="planner-latency")
        try:
            with mock.patch.object(planner_module, "ThreadPoolExecutor", RoundsPool):
                yield
        finally:
            for client in clients:
                client.meta.events.unregister("after-call", unique_id="planner-latency")

    def _tick(self, now: datetime, handler: Any, *, measured: bool) -> None:
        self.clock.now = now
        before = self.meter.tally.snapshot()
        threads_before = {ident: Counter(counts) for ident, counts in self.meter.per_thread.items()}
        sleeps = len(self.clock.sleeps)
        cpu, aws = time.process_time(), self.aws.process_seconds
        with captured_output() as output, self._planner_requests_take_time():
            report = handler(
                {"shards": list(range(self.runtime.settings.due_shards))},
                _Context("planner", DEPLOYED.planner_memory_mb, DEPLOYED.planner_timeout_seconds),
            )
        own = (time.process_time() - cpu) - (self.aws.process_seconds - aws)
        main = threading.get_ident()
        chain = self.meter.per_thread.get(main, Counter()) - threads_before.get(main, Counter())
        chain.update(self._pool_rounds)
        slept = sum(self.clock.sleeps[sleeps:])
        if not measured:
            return
        size, lines = _lines(output.getvalue())
        tally = self.meter.tally.minus(before)
        parts = [self.planner, self.planner_idle] if not report["planned_runs"] else [self.planner]
        for part in parts:
            part.count += 1
            part.own_cpu_s += own
            part.slept_s += slept
            assert part.serial is not None
            part.serial.update(chain)
            part.log_bytes += size
            part.log_lines += lines
            add_tally(part.tally, tally)
        self.planned.append(int(report["planned_runs"]))

    def _drain(self, now: datetime, handler: Any, *, measured: bool) -> None:
        from tickwork_local.harness import Pump

        self.clock.now = now
        timed: dict[str, Any] = {}

        def invoke(event: dict[str, Any]) -> Any:
            """One invocation of the worker Lambda's handler, timed: its own CPU, its longest chain of
            requests and sleeps, and what it wrote."""
            self.clock.now = now  # the second's batches are concurrent invocations
            timed["before"] = self.meter.tally.snapshot()
            threads_before = {ident: Counter(counts) for ident, counts in self.meter.per_thread.items()}
            sleeps = len(self.clock.sleeps)
            self.thread_cpu_s = 0.0
            started = self.aws.own_thread_time()
            with captured_output() as output:
                response = handler(
                    event, _Context("worker", DEPLOYED.worker_memory_mb, DEPLOYED.worker_timeout_seconds)
                )
            timed["own"] = self.aws.own_thread_time() - started + self.thread_cpu_s
            timed["chain"], timed["chain_slept"] = self._serial_chain(threads_before, sleeps)
            timed["output"] = output.getvalue()
            return response

        # The event source mapping, through a client the meter does not watch.
        mapping = Pump(self.esm, self.runtime.queue_url, invoke, visibility_timeout=VISIBILITY_TIMEOUT)
        batches = []
        while messages := mapping.receive():
            batches.append(messages)
        if now >= WORKER_START + timedelta(seconds=self.shape.worker_seconds):
            for messages in batches:
                mapping.delete(messages)
                self.skipped += len(messages)
            return
        for messages in batches:
            response = mapping.deliver(messages)
            failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
            if failed:
                raise RuntimeError(f"{len(failed)} messages failed at {now}")
            if not measured:
                continue
            size, lines = _lines(timed["output"])
            self.worker.count += 1
            self.worker.own_cpu_s += timed["own"]
            self.worker.slept_s += timed["chain_slept"]
            assert self.worker.serial is not None
            self.worker.serial.update(timed["chain"])
            self.worker.log_bytes += size
            self.worker.log_lines += lines
            add_tally(self.worker.tally, self.meter.tally.minus(timed["before"]))
            self.runs += len(messages)
            self.deletes += 1
        if measured and batches:
            self.per_second[int(now.timestamp())] += len(batches)
            self.moments += 1
        self.clock.now = now

    def _serial_chain(
        self, threads_before: dict[int, Counter[str]], sleeps: int
    ) -> tuple[Counter[str], float]:
        """What an invocation waited for one after another: the invoking thread's requests and sleeps, and
        those of its busiest batch thread (by the cost model's latencies). Batch threads run side by side."""
        from bench.cost import Model

        model = Model()
        main = threading.get_ident()
        chains: dict[int, tuple[Counter[str], float]] = {}
        for ident, counts in self.meter.per_thread.items():
            made = counts - threads_before.get(ident, Counter())
            if made:
                chains[ident] = (made, 0.0)
        for ident, seconds in zip(self.clock.sleepers[sleeps:], self.clock.sleeps[sleeps:], strict=True):
            made, slept = chains.get(ident, (Counter(), 0.0))
            chains[ident] = (made, slept + seconds)

        def waited(chain: tuple[Counter[str], float]) -> float:
            made, slept = chain
            return made["dynamodb"] * model.dynamodb_latency_s + made["sqs"] * model.sqs_latency_s + slept

        own, own_slept = chains.pop(main, (Counter(), 0.0))
        busiest = max(chains.values(), key=waited, default=(Counter(), 0.0))
        return own + busiest[0], own_slept + busiest[1]

    def check(self) -> None:
        """The window did what it says: one planning cycle whose ticks planned the cycle's runs, the metered
        worker ran its share of them (the rest were drained), each SUCCEEDED at its first attempt."""
        from tickwork.domain.models import RunStatus

        planned, expected = self.shape.planned, self.shape.expected_runs
        planning = [count for count in self.planned if count]
        if len(self.planned) != CYCLE_TICKS or len(planning) != 1 or self.planned[0] != planned:
            raise RuntimeError(
                f"{self.shape.name}: the window's ticks planned {self.planned}, not {planned} once"
            )
        if self.runs != expected or self.runs + self.skipped != planned:
            raise RuntimeError(
                f"{self.shape.name}: {self.runs} runs metered and {self.skipped} drained, "
                f"expected {expected} of {planned}"
            )
        statuses: Counter[str] = Counter()
        for run in self.window_runs(WORKER_START + timedelta(seconds=self.shape.worker_seconds)):
            good = run.status is RunStatus.SUCCEEDED and run.attempt == 1
            statuses["ok" if good else f"{run.status.value}/{run.attempt}"] += 1
        if dict(statuses) != {"ok": expected}:
            raise RuntimeError(f"{self.shape.name}: runs in the window ended {dict(statuses)}")

    def window_runs(self, worker_end: datetime) -> list[Run]:
        """The jobs' runs scheduled in the metered window (the ticks' phase inside it), read consistently."""
        from tickwork import tables
        from tickwork.adapters.runs import run_from_item

        low = tables.run_sort_key(int((WORKER_START + TICK_PHASE).timestamp() * 1000))
        high = tables.run_sort_key(int((worker_end - TICK_PHASE).timestamp() * 1000))
        runs: list[Run] = []
        for job_id in self.job_ids:
            pages = self.peek.get_paginator("query").paginate(
                TableName=tables.RUNS.default_name,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
                ExpressionAttributeValues={
                    ":pk": {"S": tables.job_key(self._tenant, job_id)},
                    ":low": {"S": low},
                    ":high": {"S": high},
                },
                ConsistentRead=True,
            )
            runs += [run_from_item(item) for page in pages for item in page["Items"]]
        return runs

    def result(self, wall_s: float) -> dict[str, Any]:
        return {
            "period": self.shape.period,
            "jobs": self.shape.jobs,
            "history_per_job": self.shape.history,
            "runs": self.runs,
            "worker_seconds": self.shape.worker_seconds,
            "drained_unmetered": self.skipped,
            "ticks": len(self.planned),
            "planned_runs": sum(self.planned),
            "worker": self.worker.as_dict(),
            "planner": self.planner.as_dict(),
            "planner_idle": self.planner_idle.as_dict(),
            "esm": {
                "sqs.ReceiveMessage": self.worker.count,
                "sqs.DeleteMessageBatch": self.deletes,
            },
            "indexer": {
                **self.indexer.as_dict(),
                "records": self.index_records,
                "window_s": self.shape.index_window_s,
                "chunk_entries": [entries for entries, _, _ in self.chunks],
                "chunk_item_bytes": [size for _, size, _ in self.chunks],
                "chunk_compressed_bytes": [data for _, _, data in self.chunks],
                "hour_item_bytes": max(self.hour_items, default=0),
            },
            "page": self.page,
            "invocations_per_second": {
                str(k): v for k, v in sorted(Counter(self.per_second.values()).items())
            },
            "worker_moments": self.moments,
            "item_bytes": dict(sorted(self.meter.tally.item_bytes.items())),
            "wall_s": round(wall_s, 1),
        }


@contextmanager
def _batch_threads_timed(workload: Workload) -> Iterator[None]:
    """Adds the own CPU of each record the worker handles on a thread other than the invoking one (which
    the invocation's own clock already counts) to ``workload.thread_cpu_s``."""
    from tickwork.batches import JobOrderedBatchProcessor

    original = JobOrderedBatchProcessor._process_record
    main = threading.get_ident()
    lock = threading.Lock()

    def timed(self: Any, record: dict[str, Any]) -> Any:
        if threading.get_ident() == main:
            return original(self, record)
        started = workload.aws.own_thread_time()
        try:
            return original(self, record)
        finally:
            with lock:
                workload.thread_cpu_s += workload.aws.own_thread_time() - started

    with mock.patch.object(JobOrderedBatchProcessor, "_process_record", timed):
        yield


def measure(
    shape: Shape,
    *,
    progress: Callable[[str], None] | None = None,
    workload_type: type[Workload] = Workload,
    site_of: Callable[[], str | None] | None = None,
) -> dict[str, Any]:
    """Run one shape; the figures of its window. ``workload_type``: a :class:`Workload` of other jobs
    (``bench.workflow_cost``'s); ``site_of``: the meter's namer of the code making each request."""
    import boto3
    from tickwork.observability import PowertoolsMetricSink, metrics
    from tickwork_local.atomic import serialise_dynamodb
    from tickwork_local.harness import Receiver, sqs_follows

    from bench._moto import moto_runtime
    from tests.support.engine import FakeClock

    started = time.perf_counter()

    class ThreadedClock(FakeClock):
        """The fake clock, noting which thread slept: a batch's threads wait side by side."""

        def __init__(self, now: datetime):
            super().__init__(now)
            self.sleepers: list[int] = []

        def sleep(self, seconds: float) -> None:
            with self._lock:
                self.sleeps.append(seconds)
                self.sleepers.append(threading.get_ident())
                self.now += timedelta(seconds=seconds)

    clock = ThreadedClock(CREATED)
    with Receiver() as receiver, moto_runtime() as runtime, sqs_follows(clock):
        runtime.metrics = PowertoolsMetricSink()
        # The planner dates a chunk's delays from when it is sent: on the fake clock, not the wall clock
        # that moto's slowness moves (sends that took seconds would arrive early and be sent again).
        runtime.planner.timer = lambda: clock().timestamp()
        # The tick's sweep sleeps until each send's moment: on the fake clock, which the drains follow.
        runtime.planner.sleep = clock.sleep
        metrics.clear_metrics()
        peek = boto3.client("dynamodb")
        workload = workload_type(
            shape=shape,
            runtime=runtime,
            clock=clock,
            receiver=receiver,
            meter=Meter(peek, site_of),
            aws=AwsClock(),
            esm=boto3.client("sqs"),
            peek=peek,
        )
        workload.create_jobs()
        workload.seed()
        if progress:
            progress(f"{shape.name}: {shape.history * shape.jobs:,} past runs seeded")
        # The worker's batch threads write the same items at once (a fan-in's ends): moto in process does not
        # lock, DynamoDB does.
        serialise_dynamodb(runtime.dynamodb.meta.events)
        for client in (runtime.dynamodb, runtime.sqs):
            workload.meter.attach(client)
            workload.aws.wrap(client)
        with _batch_threads_timed(workload):
            workload.run()
        workload.check()
        metrics.clear_metrics()
        return workload.result(time.perf_counter() - started)


def measure_create(period: int) -> dict[str, Any]:
    """One ``POST /v1/jobs`` of a rate job through the API Gateway stand-in (the authorizer, then the API
    function), metered: the tenant and rate-limit reads, the job's writes, and its first fires' sends."""
    import os

    import boto3
    from tickwork import tables
    from tickwork.runtime import runtime as process_runtime

    from bench._moto import TOKEN, moto_runtime
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler
    from tests.support.apigw import ApiGateway

    with moto_runtime() as runtime:
        os.environ[tables.RUN_QUEUE.env_var] = runtime.settings.run_queue_url
        os.environ[tables.DEAD_RUN_QUEUE.env_var] = runtime.settings.dead_run_queue_url
        process_runtime.cache_clear()
        current = process_runtime()
        meter, aws = Meter(boto3.client("dynamodb")), AwsClock()
        for client in (current.dynamodb, current.sqs):
            meter.attach(client)
            aws.wrap(client)
        gateway = ApiGateway(api_handler.lambda_handler, authorizer_handler.lambda_handler)
        body = {
            "name": "every-minute-report",
            "schedule": {"type": "rate", "every_seconds": period},
            "target": {"type": "http", "url": "https://hooks.example.com/report", "timeout_seconds": 10},
            "payload": PAYLOAD,
        }
        started = aws.own_thread_time()
        with captured_output() as output:
            response = gateway.request("POST", "/v1/jobs", token=TOKEN, body=body)
        own = aws.own_thread_time() - started
        process_runtime.cache_clear()
        if response.status != 201:
            raise RuntimeError(f"create failed: {response.status} {response.body}")
        size, lines = _lines(output.getvalue())
        return {
            "period": period,
            "invocations": 2,
            "own_cpu_s": round(own, 6),
            "log_bytes": size,
            "log_lines": lines,
            **tally_dict(meter.tally),
        }


__all__ = ["Shape", "measure", "measure_create"]
