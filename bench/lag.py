"""Trigger lag on the local stack, against APScheduler 3 on the same workloads and the same receiver.

    python -m bench.lag --jobs 100,300,1000 --cron-seconds 60

tickwork: the real local stack (``tickwork_local.stack.LocalStack``, in process: moto in process with the
local stack's changes to it, the planner ticking every second, 4 worker pollers). The one-time jobs are
written straight into the jobs table in tickwork's item format (``job_to_item``); the cron jobs are
created through the service layer (``JobService.create_job``, the code behind ``POST /v1/jobs``). Every
fire goes through the planner, the SQS run queue and the worker to a real loopback webhook receiver.

APScheduler: a ``BackgroundScheduler`` with a SQLAlchemy SQLite job store and a 20-thread pool, posting
to the same receiver; ``misfire_grace_time=None`` and ``coalesce=False`` so it runs every fire however late,
as tickwork does.

Workloads: N one-time jobs all due in the same second; then a mixed minute of cron jobs (every second,
every 5 s and every 15 s) between a start and an end time, so the expected fires are known exactly.
Lag = receive time at the webhook - ``scheduled_for``. Early fires, duplicates and lost runs are counted.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from bench._common import machine, percentile, short_path, table

TENANT = "bench"
TOKEN = "tw_bench-lag"  # noqa: S105 - a throwaway token of a local tenant
WORKERS = 4
APS_THREADS = 20
# How long to wait for the last fire after its time: the local stack drains a burst at moto's pace.
WAIT_SECONDS = 120
WAIT_PER_RUN = 0.6
# (expression with seconds first, APScheduler's `second` field, how many jobs)
CRON_MIX = (("* * * * * *", "*", 4), ("*/5 * * * * *", "*/5", 2), ("*/15 * * * * *", "*/15", 2))


# --- the receiver -----------------------------------------------------------------------------------------
@dataclass
class Arrival:
    key: str
    scheduled_for: float
    received: float
    path: str = ""


class Arrivals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[Arrival] = []
        self.generator = self._start()
        self.base_url = next(self.generator)

    def url(self, workload: str) -> str:
        """Each workload posts to its own path, so a late fire of one never counts for the next."""
        return f"{self.base_url}/{workload}"

    def _start(self) -> Iterator[str]:
        from tests.support.engine import start_receiver

        receivers = start_receiver()
        receiver = next(receivers)
        original = receiver.requests
        arrivals = self

        class Recording(list[Any]):
            def append(self, request: Any) -> None:
                body = json.loads(request.body)
                scheduled = datetime.fromisoformat(body["scheduled_for"].replace("Z", "+00:00")).timestamp()
                with arrivals.lock:
                    arrivals.items.append(Arrival(body["run_id"], scheduled, request.at, request.path))

        receiver.requests = Recording(original)
        yield receiver.base_url
        next(receivers, None)

    def close(self) -> None:
        next(self.generator, None)

    def take(self, url: str) -> list[Arrival]:
        path = url.removeprefix(self.base_url)
        with self.lock:
            items = [item for item in self.items if item.path == path]
            self.items = [item for item in self.items if item.path != path]
        return items


# --- results ----------------------------------------------------------------------------------------------
@dataclass
class Result:
    scheduler: str
    workload: str
    expected: int
    arrivals: list[Arrival]
    setup_seconds: float
    notes: str = ""
    not_run: Counter[str] = field(default_factory=Counter)
    """Fires that reached no target but are recorded with the reason (tickwork's runs table): by status."""
    lags_ms: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.lags_ms = [(arrival.received - arrival.scheduled_for) * 1000 for arrival in self.arrivals]

    @property
    def unique(self) -> int:
        return len({arrival.key for arrival in self.arrivals})

    @property
    def duplicates(self) -> int:
        return len(self.arrivals) - self.unique

    @property
    def lost(self) -> int:
        """Expected fires neither run nor recorded with a reason."""
        return self.expected - self.unique - sum(self.not_run.values())

    @property
    def early(self) -> int:
        return sum(1 for lag in self.lags_ms if lag < 0)

    @property
    def throughput(self) -> float:
        """Runs/s between the first and the last arrival."""
        if len(self.arrivals) < 2:
            return float("nan")
        times = [arrival.received for arrival in self.arrivals]
        return len(times) / max(1e-3, max(times) - min(times))

    def lag(self, q: float) -> float:
        return percentile(self.lags_ms, q) if self.lags_ms else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler,
            "workload": self.workload,
            "expected": self.expected,
            "received": self.unique,
            "duplicates": self.duplicates,
            "lost": self.lost,
            "not_run": dict(self.not_run),
            "early": self.early,
            "p50_ms": round(self.lag(50)),
            "p95_ms": round(self.lag(95)),
            "p99_ms": round(self.lag(99)),
            "max_ms": round(max(self.lags_ms)) if self.lags_ms else None,
            "setup_s": round(self.setup_seconds, 1),
            "runs_per_s": round(self.throughput, 1),
        }


def _wait_for(arrivals: Arrivals, url: str, expected: int, until: float) -> list[Arrival]:
    """Collect arrivals until ``expected`` distinct ones came or ``until`` passed; then 2 s more, for late
    duplicates."""
    collected: list[Arrival] = []
    while time.time() < until:
        collected += arrivals.take(url)
        if len({arrival.key for arrival in collected}) >= expected:
            break
        time.sleep(0.2)
    time.sleep(2)
    return collected + arrivals.take(url)


def _recorded_not_run(arrivals: list[Arrival]) -> Counter[str]:
    """Runs of the stack's runs table that reached no target, by status and reason: a fire the engine
    decided not to run (MISSED, SKIPPED, ...) is recorded, not lost. Each workload has a stack of its own,
    so every run in the table is the workload's."""
    from tickwork.adapters.runs import run_from_item
    from tickwork.runtime import runtime

    current = runtime()
    received = {arrival.key for arrival in arrivals}
    found: Counter[str] = Counter()
    for page in current.dynamodb.get_paginator("scan").paginate(TableName=current.settings.runs_table):
        for item in page["Items"]:
            if "run_id" not in item:  # a manual run's pointer item
                continue
            run = run_from_item(item)
            if run.run_id not in received:
                found[f"{run.status.value}" + (f" ({run.reason})" if run.reason else "")] += 1
    return found


def _active_jobs() -> int:
    """Jobs of the stack still ACTIVE: for one-time jobs whose run has ended, ones never completed."""
    from tickwork import tables
    from tickwork.runtime import runtime

    current = runtime()
    count = 0
    for page in current.dynamodb.get_paginator("scan").paginate(TableName=current.settings.jobs_table):
        for item in page["Items"]:
            if item[tables.JOBS_SK]["S"] == tables.JOB_SK and item["status"]["S"] == "ACTIVE":
                count += 1
    return count


# --- tickwork on the local stack --------------------------------------------------------------------------
class OperationTimer:
    """Wall time of each AWS call by operation, and the wait for the DynamoDB lock the local stack takes
    (moto does not lock), from botocore event hooks on the process's default session."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.lock_wait: defaultdict[str, float] = defaultdict(float)

    def register_first(self, events: Any) -> None:
        events.register_first("before-parameter-build.*.*", self._start)

    def register_last(self, events: Any) -> None:
        # As specific as the lock's own hook and registered after it, so that this one runs after it; not
        # last, where the local stack's direct call to moto answers and ends the event.
        for service in ("dynamodb", "sqs"):
            events.register(f"before-call.{service}", self._sent)
            events.register_last(f"after-call.{service}", self._done)

    def _start(self, **_: Any) -> None:
        self.local.started = time.perf_counter()

    def _sent(self, **_: Any) -> None:
        self.local.sent = time.perf_counter()

    def _done(self, model: Any, **_: Any) -> None:
        now = time.perf_counter()
        name = f"{model.service_model.service_name}.{model.name}"
        started = getattr(self.local, "started", now)
        sent = getattr(self.local, "sent", now)
        with self.lock:
            self.calls[name] += 1
            self.seconds[name] += now - sent
            self.lock_wait[name] += sent - started

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.seconds.clear()
            self.lock_wait.clear()


def _profiled_stack_class() -> type:
    from tickwork_local.stack import LocalStack

    class BenchStack(LocalStack):
        """The local stack with its worker threads optionally under cProfile and AWS calls timed."""

        timer = OperationTimer()
        profiling = False
        patched = False
        patch_lock = threading.Lock()
        by_thread: ClassVar[dict[int, cProfile.Profile]] = {}

        def configure_clients(self) -> None:
            import boto3

            super().configure_clients()  # a new default session, with the DynamoDB lock's hooks
            assert boto3.DEFAULT_SESSION is not None
            self.timer.register_first(boto3.DEFAULT_SESSION.events)
            self.timer.register_last(boto3.DEFAULT_SESSION.events)

        def worker_loop(self, index: int) -> None:
            from functions.worker import handler

            with BenchStack.patch_lock:
                if not BenchStack.patched:
                    BenchStack.patched = True
                    original = handler.handle_record

                    def handle(record: Any, current: Any = None, worker: Any = None) -> str:
                        if not BenchStack.profiling:
                            return original(record, current, worker)
                        # cProfile is per thread: each worker thread has its own.
                        profile = BenchStack.by_thread.get(threading.get_ident())
                        if profile is None:
                            profile = BenchStack.by_thread[threading.get_ident()] = cProfile.Profile()
                        profile.enable()
                        try:
                            return original(record, current, worker)
                        finally:
                            profile.disable()

                    handler.handle_record = handle
            super().worker_loop(index)

    return BenchStack


@contextmanager
def local_stack() -> Iterator[Any]:
    """The local stack in a thread of this process, on empty tables and queues; the environment comes back
    as it was. moto keeps its state per process, whichever server serves it, so it is reset first: each
    workload starts with nothing of the one before."""
    from moto.moto_api._internal.models import moto_api_backend
    from tickwork_local.stack import running_in_thread

    moto_api_backend.reset()
    directory = tempfile.mkdtemp(prefix="tickwork-bench-")
    with running_in_thread(
        environment={"TICKWORK_LOCAL_TENANTS": f"{TENANT}:{TOKEN}", "POWERTOOLS_LOG_LEVEL": "ERROR"},
        stack_class=_profiled_stack_class(),
        log_file=os.path.join(directory, "tickwork.log"),
        tick_seconds=1.0,
        workers=WORKERS,
    ) as stack:
        yield stack


def _create_all(stack: Any, specs: list[dict[str, Any]]) -> float:
    """Create the jobs through the service layer from 4 threads; returns the seconds it took."""
    from concurrent.futures import ThreadPoolExecutor

    from tickwork.domain.models import JobSpec
    from tickwork.runtime import runtime

    service = runtime().service
    started = time.perf_counter()

    def create(spec: dict[str, Any]) -> None:
        service.create_job(TENANT, JobSpec.model_validate(spec), datetime.now(UTC))

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(create, specs))
    return time.perf_counter() - started


def _seed_jobs(specs: list[dict[str, Any]], due: datetime) -> float:
    """Write the jobs straight into the jobs table in tickwork's item format (``job_to_item``), 25 to a
    request, as active jobs whose next fire is ``due``; returns the seconds it took. Creating thousands
    through the API takes minutes under moto; the planner and the worker do not care how a job got in."""
    from tickwork.adapters.jobs import job_to_item
    from tickwork.domain.models import Job, JobSpec
    from tickwork.runtime import runtime
    from ulid import ULID

    current = runtime()
    now = datetime.now(UTC).replace(microsecond=0)
    started = time.perf_counter()
    batch: list[dict[str, Any]] = []
    for index, spec in enumerate(specs):
        job = Job(
            **JobSpec.model_validate(spec).model_dump(),
            job_id=str(ULID()),
            tenant_id=TENANT,
            created_at=now,
            updated_at=now,
            next_fire_at=due,
        )
        batch.append({"PutRequest": {"Item": job_to_item(job, due_shards=current.settings.due_shards)}})
        if len(batch) == 25 or index == len(specs) - 1:
            pending: dict[str, Any] = {current.settings.jobs_table: batch}
            while pending:
                pending = current.dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
            batch = []
    return time.perf_counter() - started


def tickwork_burst(stack: Any, arrivals: Arrivals, jobs: int, profile: bool = False) -> Result:
    # Enough lead for seeding (a few hundred jobs/s here) and one planner horizon (10 s locally).
    due = (datetime.now(UTC) + timedelta(seconds=15 + jobs / 100)).replace(microsecond=0)
    url = arrivals.url(f"tickwork-burst-{jobs}")
    target = {"type": "http", "url": url, "timeout_seconds": 10}
    specs = [
        {
            "name": f"burst-{jobs}-{index}",
            "schedule": {"type": "once", "at": due.isoformat()},
            "target": target,
        }
        for index in range(jobs)
    ]
    setup = _seed_jobs(specs, due)
    late = datetime.now(UTC) > due - timedelta(seconds=2)
    stack.timer.reset()
    type(stack).profiling = profile
    collected = _wait_for(arrivals, url, jobs, due.timestamp() + WAIT_SECONDS + jobs * WAIT_PER_RUN)
    type(stack).profiling = False
    active = _active_jobs()
    notes = ["seeding ran into the due time"] if late else []
    if active:
        notes.append(f"{active} jobs still ACTIVE after their run")
    note = "; ".join(notes)
    workload = f"{jobs:,} one-time jobs, same second"
    return Result("tickwork", workload, jobs, collected, setup, note, _recorded_not_run(collected))


def _cron_window(seconds: int) -> tuple[datetime, datetime]:
    start = (datetime.now(UTC) + timedelta(seconds=15)).replace(microsecond=0)
    return start, start + timedelta(seconds=seconds - 1)


def _fires_in(second: str, start: datetime, end: datetime) -> int:
    """Fires of one job of the mix (its ``second`` field) from ``start`` to ``end`` inclusive: steps are on
    the clock's seconds."""
    step = 1 if second == "*" else int(second.split("/")[1])
    seconds = int((end - start).total_seconds()) + 1
    return sum(1 for offset in range(seconds) if (start.second + offset) % 60 % step == 0)


def _cron_expected(start: datetime, end: datetime) -> int:
    """Fires of the cron mix from ``start`` to ``end`` inclusive."""
    return sum(count * _fires_in(second, start, end) for _, second, count in CRON_MIX)


def tickwork_cron(stack: Any, arrivals: Arrivals, seconds: int) -> Result:
    start, end = _cron_window(seconds)
    url = arrivals.url("tickwork-cron")
    target = {"type": "http", "url": url, "timeout_seconds": 10}
    specs = [
        {
            "name": f"cron-{index}-{number}",
            "schedule": {
                "type": "cron",
                "expression": expression,
                "start_at": start.isoformat(),
                "end_at": end.isoformat(),
            },
            "target": target,
            "overlap_policy": "allow",
        }
        for index, (expression, second, count) in enumerate(CRON_MIX)
        for number in range(count)
        # a short window may hold no fire of a job, which tickwork refuses to create
        if _fires_in(second, start, end)
    ]
    setup = _create_all(stack, specs)
    stack.timer.reset()
    expected = _cron_expected(start, end)
    collected = _wait_for(arrivals, url, expected, end.timestamp() + WAIT_SECONDS + expected * WAIT_PER_RUN)
    workload = f"cron mix over {seconds} s"
    return Result("tickwork", workload, expected, collected, setup, not_run=_recorded_not_run(collected))


# --- APScheduler ------------------------------------------------------------------------------------------
_stamps = threading.local()


def fire(url: str, key: str, scheduled_for: str | None = None) -> None:
    """The APScheduler job: post what tickwork's webhook envelope carries."""
    if scheduled_for is None:  # a cron fire: the run time comes from the executor (see StampingPool)
        run_time: datetime = _stamps.pending.pop(0)
        scheduled_for = run_time.astimezone(UTC).isoformat()
        key = f"{key}@{scheduled_for}"
    body = json.dumps({"run_id": key, "scheduled_for": scheduled_for}).encode()
    request = urllib.request.Request(  # noqa: S310 - the loopback receiver's http URL
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback receiver
        response.read()


def _stamping_pool(threads: int) -> Any:
    """APScheduler's thread pool, telling each cron call which run time it is for."""
    from apscheduler.executors.base import run_job  # type: ignore[import-untyped]
    from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]

    def run_with_times(job: Any, alias: str, run_times: list[datetime], logger_name: str) -> Any:
        _stamps.pending = list(run_times)
        return run_job(job, alias, run_times, logger_name)

    class StampingPool(ThreadPoolExecutor):  # type: ignore[misc]
        def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
            def callback(future: Any) -> None:
                error = future.exception()
                if error:
                    self._run_job_error(job.id, error, error.__traceback__)
                else:
                    self._run_job_success(job.id, future.result())

            future = self._pool.submit(run_with_times, job, job._jobstore_alias, run_times, self._logger.name)
            future.add_done_callback(callback)

    return StampingPool(threads)


@contextmanager
def apscheduler() -> Iterator[Any]:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore  # type: ignore[import-untyped]
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

    directory = tempfile.mkdtemp(prefix="apscheduler-bench-")
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{directory}/jobs.sqlite")},
        executors={"default": _stamping_pool(APS_THREADS)},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1000},
        timezone="UTC",
    )
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=True)


def aps_burst(arrivals: Arrivals, jobs: int) -> Result:
    from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]

    with apscheduler() as scheduler:
        due = (datetime.now(UTC) + timedelta(seconds=8 + jobs / 200)).replace(microsecond=0)
        started = time.perf_counter()
        url = arrivals.url(f"aps-burst-{jobs}")
        for index in range(jobs):
            key = f"aps-burst-{jobs}-{index}"
            scheduler.add_job(fire, DateTrigger(run_date=due), args=(url, key, due.isoformat()), id=key)
        setup = time.perf_counter() - started
        collected = _wait_for(arrivals, url, jobs, due.timestamp() + WAIT_SECONDS + jobs * WAIT_PER_RUN)
    return Result("APScheduler", f"{jobs:,} one-time jobs, same second", jobs, collected, setup)


def aps_cron(arrivals: Arrivals, seconds: int) -> Result:
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]

    with apscheduler() as scheduler:
        start, end = _cron_window(seconds)
        started = time.perf_counter()
        url = arrivals.url("aps-cron")
        for index, (_, second, count) in enumerate(CRON_MIX):
            for number in range(count):
                key = f"aps-cron-{index}-{number}"
                trigger = CronTrigger(second=second, start_date=start, end_date=end, timezone="UTC")
                scheduler.add_job(fire, trigger, args=(url, key), id=key)
        setup = time.perf_counter() - started
        expected = _cron_expected(start, end)
        collected = _wait_for(
            arrivals, url, expected, end.timestamp() + WAIT_SECONDS + expected * WAIT_PER_RUN
        )
    return Result("APScheduler", f"cron mix over {seconds} s", expected, collected, setup)


# --- report -----------------------------------------------------------------------------------------------
@dataclass
class LagRun:
    results: list[Result]
    operations: dict[str, tuple[int, float, float]]  # name -> (calls, mean ms in call, mean ms lock wait)
    profile_rows: list[tuple[str, str, str]]
    profiled_runs: int


def run(jobs: list[int], cron_seconds: int) -> LagRun:
    arrivals = Arrivals()
    results: list[Result] = []
    operations: dict[str, tuple[int, float, float]] = {}
    profile_rows: list[tuple[str, str, str]] = []
    profiled_runs = 0
    try:
        # A fresh stack for each workload: each starts with nothing of the one before.
        for index, count in enumerate(jobs):
            with local_stack() as stack:
                profile = index == 0
                result = tickwork_burst(stack, arrivals, count, profile=profile)
                results.append(result)
                if profile:
                    profiled_runs = result.unique
                    profile_rows = _worker_profile(list(stack.by_thread.values()), profiled_runs)
                if count == max(jobs):
                    timer = stack.timer
                    operations = {
                        name: (
                            calls,
                            timer.seconds[name] * 1000 / calls,
                            timer.lock_wait[name] * 1000 / calls,
                        )
                        for name, calls in sorted(timer.calls.items())
                    }
        with local_stack() as stack:
            results.append(tickwork_cron(stack, arrivals, cron_seconds))
        for count in jobs:
            results.append(aps_burst(arrivals, count))
        results.append(aps_cron(arrivals, cron_seconds))
    finally:
        arrivals.close()
    return LagRun(results, operations, profile_rows, profiled_runs)


def _worker_profile(profiles: list[cProfile.Profile], runs: int) -> list[tuple[str, str, str]]:
    """The worker threads' functions with the most cumulative wall time, per run."""
    stats: pstats.Stats | None = None
    for profile in profiles:
        try:
            stats = pstats.Stats(profile) if stats is None else stats.add(profile)
        except TypeError:  # a profile that never ran
            continue
    if stats is None or runs == 0:
        return []
    entries = stats.stats  # type: ignore[attr-defined]
    wanted: Callable[[str, str], bool] = lambda filename, name: (  # noqa: E731
        "tickwork" in filename
        or "functions/worker" in filename
        or name in ("_make_api_call", "_acquire", "urlopen", "sleep")
    )
    ranked = sorted(
        ((key, value) for key, value in entries.items() if wanted(key[0], key[2])),
        key=lambda item: item[1][3],
        reverse=True,
    )[:12]
    return [
        (
            f"`{name}` ({short_path(filename)}:{line})",
            f"{value[3] * 1000 / runs:.1f}",
            f"{value[3] / max(1e-9, ranked[0][1][3]) * 100:.0f}%",
        )
        for (filename, line, name), value in ranked
    ]


def _recorded_notes(results: list[Result]) -> list[str]:
    """Reading notes on the fires recorded without a run and on one-time jobs left ACTIVE, when any."""
    notes = []
    recorded: Counter[str] = Counter()
    for result in results:
        recorded.update(result.not_run)
    if recorded:
        notes += [
            "- Fires recorded without a run (from the runs table, so not lost): "
            + ", ".join(f"{count} {what}" for what, count in sorted(recorded.items()))
            + ".",
            "  A MISSED (misfire) fire is one the planner found overdue together with a later fire of",
            "  the same job (a late tick, on a loaded machine): overdue fires coalesce into the latest, and",
            "  under `fire_once` the older ones are recorded MISSED, as the contract has it. APScheduler,",
            "  with `coalesce=False`, runs them all.",
        ]
    stuck = [result for result in results if "still ACTIVE" in result.notes]
    if stuck:
        notes += [
            "- One-time jobs still ACTIVE after their run ended ("
            + ", ".join(f"{result.workload}: {result.notes}" for result in stuck)
            + "): the worker completes",
            "  a one-time job only when the job it reads already names its last fire, which the planner",
            "  writes with the cursor after sending the fire. When the run ends before that write (here",
            "  the planner's sends and cursor writes for a large tick take longer than the runs), the job",
            "  is never completed and keeps its place in the tenant's job count.",
        ]
    return notes


def _goal_lines(by_workload: dict[str, dict[str, Result]]) -> list[str]:
    """The trigger-lag goal, per burst: tickwork's p99 at most APScheduler's up to 300 jobs, at most twice
    it beyond."""
    lines = []
    for workload, pair in by_workload.items():
        if "one-time" not in workload or not {"tickwork", "APScheduler"} <= set(pair):
            continue
        ours, theirs = pair["tickwork"], pair["APScheduler"]
        allowed = 1 if ours.expected <= 300 else 2
        verdict = "met" if ours.lag(99) <= allowed * theirs.lag(99) else "not met"
        lines.append(
            f"- Goal at {workload}: tickwork's p99 at most {'' if allowed == 1 else 'twice '}APScheduler's"
            f" ({allowed * theirs.lag(99):,.0f} ms): {verdict} ({ours.lag(99):,.0f} ms)."
        )
    return lines


def _ratio(ours: float, theirs: float) -> str:
    if theirs <= 0 or ours != ours or theirs != theirs:
        return "n/a"
    return f"{ours / theirs:.1f}x"


def markdown(lag: LagRun, command: str) -> str:
    header = ("scheduler", "workload", "expected", "received", "recorded, not run", "lost", "duplicates",
              "early", "p50 ms", "p95 ms", "p99 ms", "max ms", "runs/s", "set-up s")  # fmt: skip
    rows = []
    for result in lag.results:
        summary = result.summary()
        rows.append(
            (
                summary["scheduler"],
                summary["workload"] + (f" ({result.notes})" if result.notes else ""),
                summary["expected"],
                summary["received"],
                ", ".join(f"{count} {what}" for what, count in sorted(result.not_run.items())) or 0,
                summary["lost"],
                summary["duplicates"],
                summary["early"],
                summary["p50_ms"],
                summary["p95_ms"],
                summary["p99_ms"],
                summary["max_ms"],
                summary["runs_per_s"],
                summary["setup_s"],
            )
        )
    by_workload: dict[str, dict[str, Result]] = {}
    for result in lag.results:
        by_workload.setdefault(result.workload, {})[result.scheduler] = result
    ratio_rows = [
        (
            workload,
            _ratio(pair["tickwork"].lag(50), pair["APScheduler"].lag(50)),
            _ratio(pair["tickwork"].lag(99), pair["APScheduler"].lag(99)),
        )
        for workload, pair in by_workload.items()
        if {"tickwork", "APScheduler"} <= set(pair)
    ]
    operation_rows = [
        (name, calls, f"{mean:.1f}", f"{wait:.1f}") for name, (calls, mean, wait) in lag.operations.items()
    ]
    dynamo = [
        (calls, mean) for name, (calls, mean, _) in lag.operations.items() if name.startswith("dynamodb.")
    ]
    dynamo_calls = sum(calls for calls, _ in dynamo)
    dynamo_ms = sum(calls * mean for calls, mean in dynamo) / max(1, dynamo_calls)
    largest = max(
        (
            result
            for result in lag.results
            if result.scheduler == "tickwork" and "one-time" in result.workload
        ),
        key=lambda result: result.expected,
        default=None,
    )
    faults = {
        scheduler: sum(
            result.lost + result.duplicates + result.early
            for result in lag.results
            if result.scheduler == scheduler
        )
        for scheduler in ("tickwork", "APScheduler")
    }
    reading = [
        "### Reading the figures",
        "",
        *_goal_lines(by_workload),
        f"- Lost, duplicate and early fires in all workloads: tickwork {faults['tickwork']}, APScheduler",
        f"  {faults['APScheduler']}.",
        "- tickwork's lag here is the local stack's throughput, and that is moto's: "
        + (
            f"the {largest.expected:,}-run burst drained at {largest.throughput:.1f} runs/s, with "
            f"{dynamo_calls / max(1, largest.unique):.1f} DynamoDB calls per run across the whole stack "
            "(planner ticks included). "
            if largest is not None
            else ""
        )
        + "The worker's own part of a one-time run is 5 DynamoDB",
        "  requests and of a recurring one 4 (worker CPU section); each is a call into moto in this",
        "  process (its serialised request handed to moto's handler, no HTTP emulation), under the lock",
        f"  that stands in for DynamoDB's atomicity: {dynamo_ms:.1f} ms per DynamoDB call on average here,",
        "  lock wait apart. tickwork's own CPU per run is about 2 ms (worker CPU section). All of it shares",
        "  one interpreter lock with the receiver and the planner. On AWS a DynamoDB call takes",
        "  single-digit milliseconds and workers scale out; capacity.md models that.",
        "- The one transaction of a one-time run is its job's completion (the job item and the tenant's job",
        "  count); in the local stack a transaction copies only the items it touches. Each tickwork",
        "  workload starts on a fresh stack. The cron jobs let their runs overlap (`overlap_policy: allow`),",
        "  so their runs have no lane: a query of the job and two writes of the run item, and no",
        "  transaction but at each job's last fire (before its `end_at`), which completes the job.",
        *_recorded_notes(lag.results),
        "- APScheduler fires from memory and a SQLite row, with no lease, no run record, no retry state and",
        "  no history: it has far less to do per fire, and nothing survives a crash mid-run. The comparison",
        "  shows the price of durable, exactly-once-started runs on a laptop against moto, not on AWS.",
        "",
    ]
    return "\n".join(
        [
            "## Trigger lag: local stack against APScheduler",
            "",
            f"Command: `{command}`",
            "",
            "tickwork runs as the local stack in process: moto in process, the planner ticking",
            f"every second with a 10 s horizon, {WORKERS} worker pollers. The one-time jobs are written",
            "straight into the jobs table in tickwork's item format (`job_to_item`, 25 to a",
            "`BatchWriteItem`): creating thousands through the API takes minutes under moto. The cron jobs",
            "are created through the service layer (`JobService.create_job`, the code behind",
            "`POST /v1/jobs`). Every fire goes through the planner, the SQS run queue and the worker to a",
            "real loopback webhook receiver.",
            "APScheduler 3 runs a `BackgroundScheduler` with a SQLite `SQLAlchemyJobStore` and",
            f"{APS_THREADS} threads, posting to the same receiver, with `misfire_grace_time=None` and",
            "`coalesce=False` so it runs every fire however late. Lag = receive time - `scheduled_for`.",
            "Set-up = time to create the jobs. The cron mix is 4 jobs every second, 2 every 5 s and 2 every",
            "15 s, between a start and an end time, so the expected fires are known exactly. Runs/s is the",
            "rate between the first and the last arrival.",
            "",
            table(header, rows),
            "",
            "Ratios, tickwork / APScheduler (above 1 means tickwork is later):",
            "",
            table(("workload", "p50", "p99"), ratio_rows),
            "",
            *reading,
            "### Where the local stack's time goes",
            "",
            "AWS calls of the whole stack (planner, workers,",
            "sweeper) during the largest burst, from botocore",
            "event hooks: mean wall time inside the call (into moto, in the same process) and mean wait for",
            "the lock that serialises DynamoDB calls (moto does not lock).",
            "",
            table(("operation", "calls", "mean ms in call", "mean ms waiting for the lock"), operation_rows),
            "",
            f"cProfile of the {WORKERS} worker threads during",
            f"the first burst ({lag.profiled_runs} runs), wall",
            "time per run, the worker's own functions and the calls they wait on:",
            "",
            table(("function", "cumulative ms/run", "share of the top entry"), lag.profile_rows),
            "",
        ]
    )


def section(jobs: tuple[int, ...] = (100, 300, 1000), cron_seconds: int = 60) -> str:
    command = f"python -m bench.lag --jobs {','.join(map(str, jobs))} --cron-seconds {cron_seconds}"
    return markdown(run(list(jobs), cron_seconds), command)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", default="100,300,1000", help="burst sizes, comma-separated (e.g. 100,1000,5000)"
    )
    parser.add_argument("--cron-seconds", type=int, default=60, help="length of the cron mix")
    args = parser.parse_args()
    lag = run([int(value) for value in args.jobs.split(",")], args.cron_seconds)
    print(f"machine: {machine()}\n")
    print(markdown(lag, " ".join(["python -m bench.lag", *sys.argv[1:]])))
    for result in lag.results:
        print(json.dumps(result.summary()))
    clean = all(result.lost == 0 and result.early == 0 and result.duplicates == 0 for result in lag.results)
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
