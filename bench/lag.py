"""Trigger lag of the local stack against APScheduler 3 and huey, each in a process of its own, on the same
workloads and the same receiver.

    python -m bench.lag --jobs 100,300,1000 --repeats 3

Workload: N one-time jobs all due in the same second T. Every repeat runs each scheduler at each N (the
schedulers' order turns from one repeat to the next), each on a fresh store; the report gives every trial
and the median of the trials per scheduler and N.

- tickwork: ``tickwork local`` as users start it, in a subprocess (a fresh ``--data-dir``, a free port,
  ``--quiet``, the tenant ``bench`` from ``TICKWORK_LOCAL_TENANTS`` with its API rate raised by
  ``--tenant-setting``). The N jobs are created through ``POST /v1/jobs`` over HTTP from ``--clients``
  threads. Every fire goes through the planner, the run queue and the worker to the receiver.
- APScheduler 3 (``bench._peer_apscheduler``): a ``BackgroundScheduler`` with a SQLite
  ``SQLAlchemyJobStore`` and 20 threads, ``misfire_grace_time=None`` and ``coalesce=False``; that process
  adds the jobs itself once it runs.
- huey (``bench._peer_huey``): huey's own consumer (``huey_consumer -w 20 -k thread``) on a ``SqliteHuey``,
  and a producer process that schedules the N tasks with ``eta=T``.

The receiver is a loopback HTTP server in this process (``tests.support.engine.start_receiver``), alone in
it but for this loop. Lag = receive time - ``scheduled_for``; early fires, duplicates and lost runs are
counted. T is whole seconds ahead: ``--margin`` seconds after the creates should end at the create rate the
scheduler's previous trial measured, so the creates end before it (the trials record by how much).

The stack takes its settings from the environment it inherits (``TICKWORK_*``) and from ``--stack-env``,
``--stack-arg`` and ``--tickwork-workers``; the bench sets none of them otherwise. ``--huey-arg`` gives
huey's consumer further options (it runs on its defaults otherwise). ``--cron-seconds S``
adds a mixed cron workload (tickwork and APScheduler: huey's periodic tasks fire on minutes) over S seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from bench._common import ROOT, machine, percentile, table

TENANT = "bench"
TOKEN = "tw_bench-lag"  # noqa: S105 - a throwaway token of a local tenant
WORKERS = 4  # the in-process stack's worker pollers (local_stack, for bench.history)
SCHEDULERS = ("tickwork", "APScheduler", "huey")
PEERS = ("APScheduler", "huey")
PEER_THREADS = 20
API_REQUESTS_PER_SECOND = 10_000  # the most a tenant may have: the creates are not to wait on the limit
MARGIN_SECONDS = 5.0
CLIENTS = 4
# Creates per second assumed before a trial of the scheduler has measured its own.
FIRST_CREATE_RATES = {"tickwork": 100.0, "APScheduler": 300.0, "huey": 300.0}
# How long to wait for the last fire after its time: long enough for a slow drain, only reached when lost.
WAIT_SECONDS = 120
WAIT_PER_RUN = 0.6
STOP_SECONDS = 30
# (expression with seconds first, APScheduler's `second` field, how many jobs)
CRON_MIX = (("* * * * * *", "*", 4), ("*/5 * * * * *", "*/5", 2), ("*/15 * * * * *", "*/15", 2))
# The goals of the one-time bursts (issue 32): tickwork's median p99 at most the best peer's up to this
# many jobs and at most twice it beyond; the 1,000-run burst drained at least this fast.
SAME_AS_PEER_UP_TO = 300
DRAIN_JOBS = 1000
DRAIN_GOAL = 250.0


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
    repeat: int = 1
    slack_seconds: float = float("nan")
    """From the end of the set-up to the first fire time: how far ahead of it the jobs were all in."""
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
            "repeat": self.repeat,
            "expected": self.expected,
            "received": self.unique,
            "duplicates": self.duplicates,
            "lost": self.lost,
            "not_run": dict(self.not_run),
            "early": self.early,
            "p50_ms": _rounded(self.lag(50)),
            "p95_ms": _rounded(self.lag(95)),
            "p99_ms": _rounded(self.lag(99)),
            "max_ms": round(max(self.lags_ms)) if self.lags_ms else None,
            "setup_s": round(self.setup_seconds, 1),
            "slack_s": _rounded(self.slack_seconds, 1),
            "runs_per_s": _rounded(self.throughput, 1),
        }


def _rounded(value: float, digits: int = 0) -> float | int | None:
    if value != value:  # NaN: nothing measured
        return None
    return round(value, digits) if digits else round(value)


def _finite_median(values: Sequence[float]) -> float:
    finite = [value for value in values if value == value]
    return float(statistics.median(finite)) if finite else float("nan")


@dataclass
class Median:
    """The trials of one scheduler on one workload: medians of their figures, totals of their faults."""

    scheduler: str
    workload: str
    expected: int
    trials: int
    p50: float
    p95: float
    p99: float
    max_ms: float
    runs_per_s: float
    setup_seconds: float
    lost: int
    duplicates: int
    early: int
    not_run: int


def medians(results: Sequence[Result]) -> list[Median]:
    """One row per scheduler and workload, in the order the workloads first came and SCHEDULERS' order."""
    grouped: dict[tuple[str, str], list[Result]] = {}
    workloads: list[str] = []
    for result in results:
        grouped.setdefault((result.workload, result.scheduler), []).append(result)
        if result.workload not in workloads:
            workloads.append(result.workload)
    rows = []
    for workload in workloads:
        for scheduler in sorted(
            {name for (load, name) in grouped if load == workload},
            key=lambda name: SCHEDULERS.index(name) if name in SCHEDULERS else len(SCHEDULERS),
        ):
            trials = grouped[(workload, scheduler)]
            rows.append(
                Median(
                    scheduler=scheduler,
                    workload=workload,
                    expected=trials[0].expected,
                    trials=len(trials),
                    p50=_finite_median([trial.lag(50) for trial in trials]),
                    p95=_finite_median([trial.lag(95) for trial in trials]),
                    p99=_finite_median([trial.lag(99) for trial in trials]),
                    max_ms=_finite_median([max(trial.lags_ms, default=float("nan")) for trial in trials]),
                    runs_per_s=_finite_median([trial.throughput for trial in trials]),
                    setup_seconds=_finite_median([trial.setup_seconds for trial in trials]),
                    lost=sum(trial.lost for trial in trials),
                    duplicates=sum(trial.duplicates for trial in trials),
                    early=sum(trial.early for trial in trials),
                    not_run=sum(sum(trial.not_run.values()) for trial in trials),
                )
            )
    return rows


def by_workload(rows: Sequence[Median]) -> dict[str, dict[str, Median]]:
    found: dict[str, dict[str, Median]] = {}
    for row in rows:
        found.setdefault(row.workload, {})[row.scheduler] = row
    return found


def best_peer(row: Mapping[str, Median]) -> Median | None:
    """The peer with the lowest median p99 on a workload, if any peer ran it."""
    peers = [row[name] for name in PEERS if name in row and row[name].p99 == row[name].p99]
    return min(peers, key=lambda peer: peer.p99, default=None)


def due_time(now: float, jobs: int, creates_per_second: float, margin: float) -> datetime:
    """The first whole second at least ``margin`` seconds after ``jobs`` creates would end, at a quarter
    under the given rate."""
    seconds = jobs / max(1e-3, creates_per_second) * 1.25
    return datetime.fromtimestamp(math.ceil(now + seconds + margin), UTC)


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


def _burst_deadline(due: datetime, jobs: int) -> float:
    return due.timestamp() + WAIT_SECONDS + jobs * WAIT_PER_RUN


def _burst_name(jobs: int) -> str:
    return f"{jobs:,} one-time jobs, same second"


# --- processes ----------------------------------------------------------------------------------------------
@dataclass
class Options:
    jobs: list[int]
    repeats: int = 3
    cron_seconds: int = 0
    margin: float = MARGIN_SECONDS
    clients: int = CLIENTS
    tickwork_workers: int | None = None
    stack_args: list[str] = field(default_factory=list)
    stack_env: dict[str, str] = field(default_factory=dict)
    huey_args: list[str] = field(default_factory=list)
    schedulers: list[str] = field(default_factory=lambda: list(SCHEDULERS))


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a scheduler's process, with this tree's packages first on its path
    (the bench measures the tree it is in), and ``extra`` on top."""
    tree = [ROOT, os.path.join(ROOT, "layers", "tickwork", "python"), os.path.join(ROOT, "local")]
    given = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path and path not in tree]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(tree + given), "PYTHONUNBUFFERED": "1"}
    environment.update(extra or {})
    return environment


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return ""


class Peer:
    """A peer's process, spoken to as ``bench._peers`` describes: JSON lines on its stdin and stdout; its
    stderr goes to a file, quoted when it fails."""

    def __init__(self, command: list[str], environment: Mapping[str, str], log: Path):
        self.log = log
        self._log_file = log.open("w")
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter and this package's modules
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env=dict(environment),
        )

    def expect(self, key: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=STOP_SECONDS)
            raise RuntimeError(
                f"{self.process.args!r} exited with {self.process.returncode}:\n{_tail(self.log)}"
            )
        message: dict[str, Any] = json.loads(line)
        if key not in message:
            raise RuntimeError(f"{self.process.args!r} answered {message}, not {key}")
        return message

    def send(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            with suppress(BrokenPipeError):
                self.process.stdin.close()
        _stop(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log_file.close()


def _stop(process: subprocess.Popen[Any], within: float = STOP_SECONDS) -> None:
    try:
        process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def _scratch(prefix: str) -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- tickwork: `tickwork local` in a subprocess -------------------------------------------------------------
@contextmanager
def tickwork_local(options: Options, directory: Path) -> Iterator[Any]:
    """`tickwork local` in a subprocess on a fresh data directory, once it answers the tenant's token; then
    Ctrl-C."""
    from tests.e2e.conftest import start_local, stop_local

    arguments = ["--tenant-setting", f"api_requests_per_second={API_REQUESTS_PER_SECOND}"]
    if options.tickwork_workers is not None:
        arguments += ["--workers", str(options.tickwork_workers)]
    local = start_local(
        directory / "data",
        tenants=f"{TENANT}:{TOKEN}",
        environment=child_environment(options.stack_env),
        poll_seconds=0.05,
        arguments=[*arguments, *options.stack_args],
    )
    try:
        deadline = time.monotonic() + 30
        while local.call("GET", "/v1/jobs", token=TOKEN)[0] != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the local stack refused the bench's token:\n" + "".join(local.output))
            time.sleep(0.1)
        yield local
    finally:
        stop_local(local, within=STOP_SECONDS)


def create_jobs(local: Any, specs: list[dict[str, Any]], clients: int) -> float:
    """``POST /v1/jobs`` of each spec from ``clients`` threads; returns the seconds it took."""
    statuses: list[int] = []
    failures: list[BaseException] = []

    def client(number: int) -> None:
        try:
            for spec in specs[number::clients]:
                statuses.append(local.call("POST", "/v1/jobs", token=TOKEN, body=spec)[0])
        except Exception as error:  # reported below
            failures.append(error)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures or set(statuses) != {201} or len(statuses) != len(specs):
        raise RuntimeError(f"creates answered {Counter(statuses)}; failures: {failures[:3]}")
    return elapsed


def _moto(local: Any) -> Any:
    import boto3
    from tickwork_local.stack import LOCAL_REGION

    return boto3.client(
        "dynamodb",
        endpoint_url=local.moto_endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto accepts any
    )


def _recorded_not_run(client: Any, arrivals: list[Arrival]) -> Counter[str]:
    """Runs of the stack's runs table that reached no target, by status and reason: a fire the engine
    decided not to run (MISSED, SKIPPED, ...) is recorded, not lost. Each workload has a stack of its own,
    so every run in the table is the workload's."""
    from tickwork import tables
    from tickwork.adapters.runs import run_from_item

    received = {arrival.key for arrival in arrivals}
    found: Counter[str] = Counter()
    for page in client.get_paginator("scan").paginate(TableName=tables.RUNS.default_name):
        for item in page["Items"]:
            if "run_id" not in item:  # a manual run's pointer item
                continue
            run = run_from_item(item)
            if run.run_id not in received:
                found[f"{run.status.value}" + (f" ({run.reason})" if run.reason else "")] += 1
    return found


# The longest the bench waits after a burst's last call for its runs to be recorded and its jobs completed.
SETTLE_SECONDS = 30


def _active_jobs(client: Any) -> int:
    """Jobs of the stack still ACTIVE: for one-time jobs whose run has ended, ones never completed."""
    from tickwork import tables

    count = 0
    for page in client.get_paginator("scan").paginate(TableName=tables.JOBS.default_name):
        for item in page["Items"]:
            if item[tables.JOBS_SK]["S"] == tables.JOB_SK and item["status"]["S"] == "ACTIVE":
                count += 1
    return count


def _slack_note(slack: float) -> list[str]:
    return ["set-up ran into the due time"] if slack < 1 else []


def tickwork_burst(
    arrivals: Arrivals, jobs: int, options: Options, rates: dict[str, float], repeat: int
) -> Result:
    with _scratch("tickwork-lag-") as directory, tickwork_local(options, directory) as local:
        due = due_time(time.time(), jobs, rates["tickwork"], options.margin)
        url = arrivals.url(f"tickwork-burst-{jobs}-{repeat}")
        target = {"type": "http", "url": url, "timeout_seconds": 10}
        specs = [
            {
                "name": f"burst-{jobs}-{index}",
                "schedule": {"type": "once", "at": due.isoformat()},
                "target": target,
            }
            for index in range(jobs)
        ]
        setup = create_jobs(local, specs, options.clients)
        slack = due.timestamp() - time.time()
        rates["tickwork"] = jobs / setup
        collected = _wait_for(arrivals, url, jobs, _burst_deadline(due, jobs))
        client = _moto(local)
        # A burst's records (and one-time jobs' completions) follow its calls: give them until they settle.
        settle_until = time.time() + SETTLE_SECONDS
        while (active := _active_jobs(client)) and time.time() < settle_until:
            time.sleep(0.5)
        not_run = _recorded_not_run(client, collected)
    notes = _slack_note(slack) + ([f"{active} jobs still ACTIVE after their run"] if active else [])
    return Result(
        "tickwork", _burst_name(jobs), jobs, collected, setup, "; ".join(notes), not_run, repeat, slack
    )


def _cron_window(seconds: int, margin: float) -> tuple[datetime, datetime]:
    start = due_time(time.time(), len(CRON_MIX) * 4, FIRST_CREATE_RATES["tickwork"], margin)
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


def _cron_name(seconds: int) -> str:
    return f"cron mix over {seconds} s"


def tickwork_cron(arrivals: Arrivals, seconds: int, options: Options, repeat: int) -> Result:
    with _scratch("tickwork-lag-") as directory, tickwork_local(options, directory) as local:
        start, end = _cron_window(seconds, options.margin)
        url = arrivals.url(f"tickwork-cron-{repeat}")
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
        setup = create_jobs(local, specs, options.clients)
        slack = start.timestamp() - time.time()
        expected = _cron_expected(start, end)
        deadline = end.timestamp() + WAIT_SECONDS + expected * WAIT_PER_RUN
        collected = _wait_for(arrivals, url, expected, deadline)
        not_run = _recorded_not_run(_moto(local), collected)
    return Result(
        "tickwork", _cron_name(seconds), expected, collected, setup, "; ".join(_slack_note(slack)), not_run,
        repeat, slack,
    )  # fmt: skip


# --- the peers ----------------------------------------------------------------------------------------------
@contextmanager
def _peer(command: list[str], environment: Mapping[str, str], log: Path) -> Iterator[Peer]:
    peer = Peer(command, environment, log)
    try:
        peer.expect("ready")
        yield peer
    finally:
        peer.close()


def _send_workload(peer: Peer, workload: Mapping[str, Any]) -> float:
    peer.send(workload)
    return float(peer.expect("setup_seconds")["setup_seconds"])


def aps_burst(
    arrivals: Arrivals, jobs: int, options: Options, rates: dict[str, float], repeat: int
) -> Result:
    command = [sys.executable, "-m", "bench._peer_apscheduler", "--data-dir"]
    with (
        _scratch("apscheduler-lag-") as directory,
        _peer([*command, str(directory)], child_environment(), directory / "peer.log") as peer,
    ):
        due = due_time(time.time(), jobs, rates["APScheduler"], options.margin)
        url = arrivals.url(f"aps-burst-{jobs}-{repeat}")
        setup = _send_workload(peer, {"mode": "burst", "url": url, "jobs": jobs, "at": due.isoformat()})
        slack = due.timestamp() - time.time()
        rates["APScheduler"] = jobs / max(1e-3, setup)
        collected = _wait_for(arrivals, url, jobs, _burst_deadline(due, jobs))
    notes = "; ".join(_slack_note(slack))
    return Result(
        "APScheduler", _burst_name(jobs), jobs, collected, setup, notes, repeat=repeat, slack_seconds=slack
    )


def aps_cron(arrivals: Arrivals, seconds: int, options: Options, repeat: int) -> Result:
    command = [sys.executable, "-m", "bench._peer_apscheduler", "--data-dir"]
    with (
        _scratch("apscheduler-lag-") as directory,
        _peer([*command, str(directory)], child_environment(), directory / "peer.log") as peer,
    ):
        start, end = _cron_window(seconds, options.margin)
        url = arrivals.url(f"aps-cron-{repeat}")
        mix = [[second, count] for _, second, count in CRON_MIX]
        workload = {
            "mode": "cron",
            "url": url,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "mix": mix,
        }
        setup = _send_workload(peer, workload)
        slack = start.timestamp() - time.time()
        expected = _cron_expected(start, end)
        collected = _wait_for(
            arrivals, url, expected, end.timestamp() + WAIT_SECONDS + expected * WAIT_PER_RUN
        )
    notes = "; ".join(_slack_note(slack))
    return Result(
        "APScheduler",
        _cron_name(seconds),
        expected,
        collected,
        setup,
        notes,
        repeat=repeat,
        slack_seconds=slack,
    )


HUEY_COMMAND = (
    "-m",
    "huey.bin.huey_consumer",
    "bench._peer_huey.huey",
    "-w",
    str(PEER_THREADS),
    "-k",
    "thread",
)


@contextmanager
def huey_consumer(
    environment: Mapping[str, str], log: Path, arguments: Sequence[str] = ()
) -> Iterator[subprocess.Popen[Any]]:
    """huey's consumer in a subprocess, once it says it started; then SIGTERM (huey's stop)."""
    with log.open("w") as output:
        process = subprocess.Popen(  # noqa: S603 - this interpreter and huey's module
            [sys.executable, *HUEY_COMMAND, *arguments],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(environment),
        )
        try:
            deadline = time.monotonic() + 30
            while "consumer started" not in log.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"huey's consumer did not start:\n{_tail(log)}")
                time.sleep(0.05)
            yield process
        finally:
            process.terminate()
            _stop(process)


def huey_burst(
    arrivals: Arrivals, jobs: int, options: Options, rates: dict[str, float], repeat: int
) -> Result:
    from bench._peer_huey import DB_VARIABLE

    with _scratch("huey-lag-") as directory:
        environment = child_environment({DB_VARIABLE: str(directory / "huey.db")})
        with huey_consumer(environment, directory / "consumer.log", options.huey_args):
            with _peer(
                [sys.executable, "-m", "bench._peer_huey"], environment, directory / "producer.log"
            ) as producer:
                due = due_time(time.time(), jobs, rates["huey"], options.margin)
                url = arrivals.url(f"huey-burst-{jobs}-{repeat}")
                workload = {"mode": "burst", "url": url, "jobs": jobs, "at": due.isoformat()}
                setup = _send_workload(producer, workload)
            slack = due.timestamp() - time.time()
            rates["huey"] = jobs / max(1e-3, setup)
            collected = _wait_for(arrivals, url, jobs, _burst_deadline(due, jobs))
    notes = "; ".join(_slack_note(slack))
    return Result(
        "huey", _burst_name(jobs), jobs, collected, setup, notes, repeat=repeat, slack_seconds=slack
    )


BurstRunner = Callable[[Arrivals, int, Options, dict[str, float], int], Result]
BURSTS: dict[str, BurstRunner] = {"tickwork": tickwork_burst, "APScheduler": aps_burst, "huey": huey_burst}
CronRunner = Callable[[Arrivals, int, Options, int], Result]
CRONS: dict[str, CronRunner] = {"tickwork": tickwork_cron, "APScheduler": aps_cron}


def turned(names: Sequence[str], by: int) -> list[str]:
    """``names`` started ``by`` places on: each repeat runs the schedulers in another order."""
    shift = by % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def run(options: Options, progress: IO[str] | None = sys.stderr) -> list[Result]:
    arrivals = Arrivals()
    rates = dict(FIRST_CREATE_RATES)
    results: list[Result] = []

    def record(result: Result) -> None:
        results.append(result)
        if progress is not None:
            print(json.dumps(result.summary()), file=progress, flush=True)

    try:
        for repeat in range(1, options.repeats + 1):
            for jobs in options.jobs:
                for scheduler in turned(options.schedulers, repeat - 1):
                    record(BURSTS[scheduler](arrivals, jobs, options, rates, repeat))
            if options.cron_seconds:
                for scheduler in turned([name for name in options.schedulers if name in CRONS], repeat - 1):
                    record(CRONS[scheduler](arrivals, options.cron_seconds, options, repeat))
    finally:
        arrivals.close()
    return results


# --- the in-process stack, for bench.history ----------------------------------------------------------------
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
        log_file=os.path.join(directory, "tickwork.log"),
        tick_seconds=1.0,
        workers=WORKERS,
    ) as stack:
        yield stack


# --- report -----------------------------------------------------------------------------------------------
def _ms(value: float) -> str:
    return "n/a" if value != value else f"{value:,.0f}"


def _ratio(ours: float, theirs: float) -> str:
    if theirs <= 0 or ours != ours or theirs != theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"


def _goal_lines(rows: Sequence[Median]) -> list[str]:
    """The goals of issue 32 on the medians: per burst, tickwork's p99 at most the best peer's up to
    SAME_AS_PEER_UP_TO jobs and at most twice it beyond; the DRAIN_JOBS burst drained at DRAIN_GOAL runs/s
    or more; no early, duplicate or lost fire of tickwork in any trial."""
    lines = []
    table_ = by_workload(rows)
    for workload, row in table_.items():
        if "one-time" not in workload or "tickwork" not in row:
            continue
        peer = best_peer(row)
        if peer is None:
            continue
        ours = row["tickwork"]
        allowed = 1 if ours.expected <= SAME_AS_PEER_UP_TO else 2
        verdict = "met" if ours.p99 <= allowed * peer.p99 else "not met"
        lines.append(
            f"- Goal at {workload}: tickwork's p99 at most {'' if allowed == 1 else 'twice '}the best peer's"
            f" ({peer.scheduler}, {allowed * peer.p99:,.0f} ms): {verdict} ({_ms(ours.p99)} ms)."
        )
    drain = next(
        (row for row in rows if row.scheduler == "tickwork" and row.workload == _burst_name(DRAIN_JOBS)), None
    )
    if drain is not None:
        verdict = "met" if drain.runs_per_s >= DRAIN_GOAL else "not met"
        lines.append(
            f"- Goal: the {DRAIN_JOBS:,}-run burst drained at {DRAIN_GOAL:.0f} runs/s or more (first to last"
            f" arrival): {verdict} ({drain.runs_per_s:,.1f} runs/s)."
        )
    mine = [row for row in rows if row.scheduler == "tickwork"]
    if mine:
        early, duplicates, lost = (
            sum(getattr(row, name) for row in mine) for name in ("early", "duplicates", "lost")
        )
        verdict = "met" if early == duplicates == lost == 0 else "not met"
        lines.append(
            f"- Goal: no early, duplicate or lost fire of tickwork in any trial: {verdict} ({early} early,"
            f" {duplicates} duplicates, {lost} lost)."
        )
    return lines


def _recorded_notes(results: Sequence[Result]) -> list[str]:
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
        notes.append(
            "- One-time jobs still ACTIVE after their run ended: "
            + ", ".join(f"{result.workload} (repeat {result.repeat}): {result.notes}" for result in stuck)
            + "."
        )
    late = [result for result in results if "ran into the due time" in result.notes]
    if late:
        notes.append(
            "- Trials whose set-up ended less than a second before the due time (their first fires may be"
            " late for it): "
            + ", ".join(f"{result.scheduler} {result.workload} (repeat {result.repeat})" for result in late)
            + "."
        )
    return notes


def _stack_settings(options: Options) -> str:
    given = {
        name: value
        for name, value in {**os.environ, **options.stack_env}.items()
        if name.startswith("TICKWORK_") and name != "TICKWORK_LOCAL_TENANTS"
    }
    parts = [f"`{name}={value}`" for name, value in sorted(given.items())]
    if options.tickwork_workers is not None:
        parts.append(f"`--workers {options.tickwork_workers}`")
    parts += [f"`{argument}`" for argument in options.stack_args]
    return ", ".join(parts) if parts else "none (the local stack's defaults)"


TRIAL_HEADER = ("repeat", "scheduler", "workload", "expected", "received", "recorded, not run", "lost",
                "duplicates", "early", "p50 ms", "p95 ms", "p99 ms", "max ms", "runs/s", "set-up s",
                "ahead s")  # fmt: skip
MEDIAN_HEADER = ("scheduler", "workload", "trials", "p50 ms", "p95 ms", "p99 ms", "max ms", "runs/s",
                 "set-up s", "lost / duplicates / early", "recorded, not run")  # fmt: skip
RATIO_HEADER = ("workload", "tickwork p99 ms", *(f"{name} p99 ms" for name in PEERS), "best peer",
                "p99 ratio", "p50 ratio")  # fmt: skip


def markdown(results: Sequence[Result], command: str, options: Options) -> str:
    trial_rows = []
    for result in results:
        trial_rows.append(
            (
                result.repeat,
                result.scheduler,
                result.workload + (f" ({result.notes})" if result.notes else ""),
                result.expected,
                result.unique,
                ", ".join(f"{count} {what}" for what, count in sorted(result.not_run.items())) or 0,
                result.lost,
                result.duplicates,
                result.early,
                _ms(result.lag(50)),
                _ms(result.lag(95)),
                _ms(result.lag(99)),
                _ms(max(result.lags_ms, default=float("nan"))),
                f"{result.throughput:,.1f}",
                f"{result.setup_seconds:.1f}",
                f"{result.slack_seconds:.1f}",
            )
        )
    rows = medians(results)
    median_rows = [
        (
            row.scheduler,
            row.workload,
            row.trials,
            _ms(row.p50),
            _ms(row.p95),
            _ms(row.p99),
            _ms(row.max_ms),
            f"{row.runs_per_s:,.1f}",
            f"{row.setup_seconds:.1f}",
            f"{row.lost} / {row.duplicates} / {row.early}",
            row.not_run,
        )
        for row in rows
    ]
    ratio_rows = []
    for workload, row in by_workload(rows).items():
        peer = best_peer(row)
        if "tickwork" not in row or peer is None:
            continue
        ours = row["tickwork"]
        ratio_rows.append(
            (
                workload,
                _ms(ours.p99),
                *(_ms(row[name].p99) if name in row else "-" for name in PEERS),
                peer.scheduler,
                _ratio(ours.p99, peer.p99),
                _ratio(ours.p50, peer.p50),
            )
        )
    faults = {
        scheduler: sum(
            result.lost + result.duplicates + result.early
            for result in results
            if result.scheduler == scheduler
        )
        for scheduler in SCHEDULERS
    }
    repeats = max((result.repeat for result in results), default=0)
    return "\n".join(
        [
            "## Trigger lag: local stack against APScheduler and huey",
            "",
            f"Command: `{command}`",
            "",
            "Each scheduler runs in a process of its own, on a fresh store for every trial; "
            + (f"{repeats} repeats, each" if repeats != 1 else "one repeat,"),
            "running every scheduler at every N (their order turning from one repeat to the next). The",
            "workload: N one-time jobs all due in the same second T. The receiver is a loopback webhook",
            "server in the bench's process, which does nothing else meanwhile. Lag = receive time -",
            "`scheduled_for`.",
            "",
            "- tickwork: `tickwork local` as users start it (a fresh `--data-dir`, so every write is on",
            "  disk before it is answered; the tenant's API rate raised with `--tenant-setting`). The jobs",
            f"  are created through `POST /v1/jobs` over HTTP from {options.clients} client threads. Every",
            "  fire goes through the planner, the run queue and the worker to the receiver. Settings",
            f"  given to the stack: {_stack_settings(options)}.",
            "- APScheduler 3: a `BackgroundScheduler` with a SQLite `SQLAlchemyJobStore` and",
            f"  {PEER_THREADS} threads, `misfire_grace_time=None` and `coalesce=False` (every fire runs",
            "  however late, as in tickwork); its process adds the jobs (`add_job`, a `DateTrigger`) once",
            "  it runs.",
            f"- huey {_huey_version()}: its consumer (`huey_consumer -w {PEER_THREADS} -k thread`) on a",
            "  `SqliteHuey`, with its defaults, and a producer process that schedules the tasks",
            "  (`task.schedule(eta=T)`). huey's scheduler moves due tasks to the queue once a second",
            "  (`--scheduler-interval`: 1 s by default, and its finest), on a beat of its own, not the",
            "  clock's seconds: its lag has up to a second of that beat in it. Idle workers poll the queue",
            "  less and less often (0.1 s at first, 1.15 times longer each empty poll, up to 10 s), as",
            "  they do by default. Consumer options given besides: "
            + (", ".join(f"`{argument}`" for argument in options.huey_args) or "none")
            + ".",
            "",
            f"T is whole seconds ahead: {options.margin:g} s after the creates should end at a quarter under",
            "the create rate the scheduler's previous trial measured; `ahead s` is how long before T the",
            "last create was answered (under a second: the trial is named below). Set-up = the time to",
            "create the jobs. Runs/s is the rate between the first and the last arrival.",
            "",
            "Medians of the trials (lost / duplicates / early: totals over the trials):",
            "",
            table(MEDIAN_HEADER, median_rows),
            "",
            "tickwork against the best peer (the lowest median p99; above 1 means tickwork is later):",
            "",
            table(RATIO_HEADER, ratio_rows),
            "",
            "### Reading the figures",
            "",
            *_goal_lines(rows),
            "- Lost, duplicate and early fires in all trials: "
            + ", ".join(f"{name} {count}" for name, count in faults.items())
            + ".",
            *_recorded_notes(results),
            "- APScheduler and huey fire from memory and a SQLite row, with no lease, no run record, no",
            "  retry state and no history: they have far less to do per fire. tickwork's local stack keeps",
            "  DynamoDB and SQS in moto, in the stack's one process, so its figures are moto's pace as well",
            "  as its own.",
            "- How tickwork keeps up: the local stack times a fire's message to arrive 2 s before it",
            "  (`send_lead_ms`), and its worker reads the job, the lane and the run on arrival and claims",
            "  the lane then; at T it reads the lanes of the claims due together (up to 30 to a request),",
            "  its runs call four at a time, and the calls go before the records. Before this, every read",
            "  and the claim came after T, and the hundredth run of 100 waited for 99 runs' four requests",
            "  each: the same command gave tickwork p99 536 / 1,407 / 5,398 ms at N = 100 / 300 / 1,000,",
            "  184 runs/s",
            "  (docs/architecture.md, Firing at the instant).",
            "",
            "Every trial:",
            "",
            table(TRIAL_HEADER, trial_rows),
            "",
        ]
    )


def _huey_version() -> str:
    try:
        from importlib.metadata import version

        return version("huey")
    except Exception:  # only a label
        return ""


def section(jobs: tuple[int, ...] = (100, 300, 1000), repeats: int = 3, cron_seconds: int = 0) -> str:
    options = Options(list(jobs), repeats=repeats, cron_seconds=cron_seconds)
    command = f"python -m bench.lag --jobs {','.join(map(str, jobs))} --repeats {repeats}"
    if cron_seconds:
        command += f" --cron-seconds {cron_seconds}"
    return markdown(run(options), command, options)


def _setting(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", default="100,300,1000", help="burst sizes, comma-separated (e.g. 100,1000)")
    parser.add_argument("--repeats", type=int, default=3, help="trials of each scheduler at each size")
    parser.add_argument(
        "--cron-seconds", type=int, default=0, help="also run the cron mix over this many seconds (0: not)"
    )
    parser.add_argument(
        "--margin", type=float, default=MARGIN_SECONDS, help="seconds between the creates' expected end and T"
    )
    parser.add_argument(
        "--schedulers",
        default=",".join(SCHEDULERS),
        help=f"which to run, comma-separated (default {','.join(SCHEDULERS)}; the goals need a peer)",
    )
    parser.add_argument("--clients", type=int, default=CLIENTS, help="threads creating tickwork's jobs")
    parser.add_argument("--tickwork-workers", type=int, help="`tickwork local --workers`")
    parser.add_argument(
        "--stack-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a further argument of `tickwork local` (repeatable; --stack-arg=--tick-seconds=0.5)",
    )
    parser.add_argument(
        "--huey-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a further argument of huey's consumer (repeatable; --huey-arg=--max-delay=0.1)",
    )
    parser.add_argument(
        "--stack-env",
        action="append",
        default=[],
        type=_setting,
        metavar="NAME=VALUE",
        help="an environment variable of the stack's process (repeatable); TICKWORK_* of this one pass too",
    )
    args = parser.parse_args(argv)
    schedulers = [name.strip() for name in args.schedulers.split(",") if name.strip()]
    unknown = sorted(set(schedulers) - set(SCHEDULERS))
    if unknown:
        parser.error(f"unknown scheduler(s) {', '.join(unknown)}: choose from {', '.join(SCHEDULERS)}")
    options = Options(
        jobs=[int(value) for value in args.jobs.split(",")],
        repeats=args.repeats,
        cron_seconds=args.cron_seconds,
        margin=args.margin,
        clients=args.clients,
        tickwork_workers=args.tickwork_workers,
        stack_args=list(args.stack_arg),
        stack_env=dict(args.stack_env),
        huey_args=list(args.huey_arg),
        schedulers=schedulers,
    )
    results = run(options)
    print(f"machine: {machine()}\n")
    command = " ".join(["python -m bench.lag", *(sys.argv[1:] if argv is None else argv)])
    print(markdown(results, command, options))
    clean = all(result.lost == 0 and result.early == 0 and result.duplicates == 0 for result in results)
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
