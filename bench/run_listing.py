"""The tenant's run listing (GET /v1/runs) and health (GET /v1/stats) at 10,000 jobs and 200,000 runs, on the
local stack.

    python -m bench.run_listing --jobs 10000 --runs 200000 --trials 3 --repeats 5

The local stack runs in this process (``running_in_thread``: moto in process, the planner, 4 worker pollers,
the change feed and the indexer loop), its API on loopback HTTP. One tenant gets ``--jobs`` one-time jobs far
in the future, created through ``POST /v1/jobs``, and ``--runs`` runs written through the runs store as the
worker writes them (``runtime().runs.put(run, Expect.new())``), oldest first, spread over ``--days`` days of
scheduled times across the jobs, with a mix of statuses. The change feed hands every write to the indexer,
which writes the run index, as on AWS; timing starts once the feed is drained.

Then each query's first page (limit 100) is timed over HTTP with the tenant's token, ``--repeats`` requests
per trial, and the next 5 pages of the unfiltered listing through its cursor; GET /v1/stats too. The pages
are checked against the runs written (newest first, no run twice, each filter holds, the exact runs
expected), and ``tickwork runs list`` and ``tickwork runs watch`` are run against the same API.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import sys
import tempfile
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import machine, median, percentile, table, top_functions

TENANT = "bench"
TOKEN = "tw_bench-run-listing"  # noqa: S105 - a throwaway token of a local tenant
PAGE = 100
NEXT_PAGES = 5
GOAL_MS = 300.0
CREATE_CLIENTS = 8
# Of every 10,000 runs: the rest SUCCEEDED. RUNNING is rare: a listing of it walks the index on a budget.
MIX = (("FAILED", 500), ("DEAD", 300), ("RETRY_WAIT", 400), ("RUNNING", 1))
NEVER = "2099-01-01T00:00:00Z"
COMMAND = "python -m bench --only run_listing"
WIDTH = 105


def log(message: str) -> None:
    print(f"[run_listing] {message}", file=sys.stderr, flush=True)


# --- the stack and the API --------------------------------------------------------------------------------
@contextmanager
def local_stack(directory: str) -> Iterator[Any]:
    """The local stack in a thread of this process, on moto's state reset to nothing."""
    from moto.moto_api._internal.models import moto_api_backend
    from tickwork_local.stack import running_in_thread

    moto_api_backend.reset()
    with running_in_thread(
        environment={"TICKWORK_LOCAL_TENANTS": f"{TENANT}:{TOKEN}", "POWERTOOLS_LOG_LEVEL": "ERROR"},
        log_file=os.path.join(directory, "tickwork.log"),
        tick_seconds=1.0,
        workers=4,
    ) as stack:
        yield stack


def raise_rate_limit() -> None:
    """The tenant's API rate (50 requests/s by default) would slow the seeding: raise it before the first
    request (the gateway keeps the authorizer's answer, which carries the rate, for 300 s)."""
    from tickwork.runtime import runtime

    store = runtime().tenants
    tenant = store.get(TENANT)
    store.put(tenant.model_copy(update={"api_requests_per_second": 10_000}), token=TOKEN)


class Api:
    def __init__(self, base_url: str):
        self.base_url = base_url

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        """(status, parsed body, milliseconds from sending to the whole body read)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the local stack's loopback http URL
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - loopback
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        elapsed = (time.perf_counter() - started) * 1000
        return status, json.loads(raw) if raw else None, elapsed

    def runs_path(self, query: dict[str, Any], cursor: str | None = None) -> str:
        params = [(name, value) for name, values in query.items() for value in _as_list(values)]
        params.append(("limit", str(PAGE)))
        if cursor is not None:
            params.append(("cursor", cursor))
        return "/v1/runs?" + urllib.parse.urlencode(params)

    def runs_page(self, query: dict[str, Any], cursor: str | None = None) -> tuple[dict[str, Any], float]:
        status, body, elapsed = self.call("GET", self.runs_path(query, cursor))
        if status != 200:
            raise RuntimeError(f"GET /v1/runs {query} answered {status}: {body}")
        return body, elapsed


def _as_list(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list | tuple) else [str(value)]


# --- seeding ----------------------------------------------------------------------------------------------
def create_jobs(api: Api, count: int) -> tuple[list[str], float]:
    """``count`` one-time jobs far in the future through POST /v1/jobs; (their ids, seconds taken)."""
    ids: list[str] = [""] * count
    failures: Counter[int] = Counter()
    done = [0]
    lock = threading.Lock()

    def client(number: int) -> None:
        for index in range(number, count, CREATE_CLIENTS):
            spec = {
                "name": f"listing-{index}",
                "schedule": {"type": "once", "at": NEVER},
                "target": {"type": "http", "url": "http://127.0.0.1:9/never"},
            }
            status, body, _ = api.call("POST", "/v1/jobs", spec)
            if status != 201:
                failures[status] += 1
                continue
            ids[index] = body["job_id"]
            with lock:
                done[0] += 1
                if done[0] % 2000 == 0:
                    log(f"{done[0]:,} jobs created")

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(CREATE_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"job creates failed: {dict(failures)}")
    return ids, time.perf_counter() - started


@dataclass(frozen=True)
class Seeded:
    run_id: str
    job_id: str
    scheduled_ms: int
    status: str


def plan_runs(job_ids: list[str], count: int, days: float, newest: datetime, seed: int = 7) -> list[Seeded]:
    """``count`` runs across the jobs, oldest first, one every ``days``/``count`` of scheduled time (with a
    jitter inside its slot, so no two share a time) up to ``newest``."""
    from tickwork.domain.models import scheduled_run_id
    from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms

    rng = random.Random(seed)  # noqa: S311 - a repeatable spread, not a secret
    span_ms = int(days * 86_400_000)
    step = span_ms / count
    start_ms = to_epoch_ms(newest) - span_ms
    statuses = [status for status, per in MIX for _ in range(per)]
    planned = []
    for index in range(count):
        scheduled_ms = start_ms + int(index * step + rng.random() * step * 0.9) // 1000 * 1000
        scheduled_ms = max(scheduled_ms, start_ms + int(index * step))  # distinct, rising
        job_id = job_ids[rng.randrange(len(job_ids))]
        pick = rng.randrange(10_000)
        status = statuses[pick] if pick < len(statuses) else "SUCCEEDED"
        run_id = scheduled_run_id(job_id, from_epoch_ms(scheduled_ms))
        planned.append(Seeded(run_id, job_id, scheduled_ms, status))
    return planned


def run_item(seeded: Seeded, now: datetime) -> Any:
    """The run as the worker leaves it in ``seeded.status``."""
    from tickwork.domain.models import Attempt, Run, RunStatus
    from tickwork.domain.timeutil import from_epoch_ms

    scheduled = from_epoch_ms(seeded.scheduled_ms)
    lag_ms = 40 + seeded.scheduled_ms % 160
    started = scheduled + timedelta(milliseconds=lag_ms)
    worker = "local-worker-0-0"
    status = RunStatus(seeded.status)
    common: dict[str, Any] = {
        "run_id": seeded.run_id,
        "job_id": seeded.job_id,
        "tenant_id": TENANT,
        "scheduled_for": scheduled,
        "status": status,
        "created_at": scheduled - timedelta(seconds=5),
        "enqueued_at": scheduled - timedelta(seconds=5),
        "started_at": started,
        "lag_ms": lag_ms,
        "fencing_token": 1,
    }

    def attempt(number: int, at: datetime, outcome: str | None, code: str | None = None) -> Attempt:
        finished = at + timedelta(milliseconds=120) if outcome else None
        return Attempt(
            attempt=number,
            started_at=at,
            finished_at=finished,
            duration_ms=120 if outcome else None,
            outcome=outcome,  # type: ignore[arg-type]
            error_code=code,
            error_message=f"target answered {code}" if code else None,
            worker_id=worker,
        )

    if status is RunStatus.SUCCEEDED:
        attempts = [attempt(1, started, "succeeded")]
    elif status is RunStatus.FAILED:
        attempts = [attempt(1, started, "permanent_error", "http_404")]
    elif status is RunStatus.DEAD:
        attempts = [
            attempt(number, started + timedelta(seconds=30 * (number - 1)), "retryable_error", "http_503")
            for number in (1, 2, 3)
        ]
    elif status is RunStatus.RETRY_WAIT:
        attempts = [attempt(1, started, "retryable_error", "http_503")]
        # Its next attempt far enough ahead that the sweeper leaves it alone while the bench runs.
        common["retry_at"] = now + timedelta(days=30)
    else:  # RUNNING: a lease held
        attempts = [attempt(1, started, None)]
        common["lease_owner"] = worker
        common["lease_expires_at"] = now + timedelta(days=30)
    ended = status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.DEAD)
    return Run(
        **common,
        attempt=len(attempts),
        attempts=attempts,
        finished_at=attempts[-1].finished_at if ended else None,
    )


def write_runs(planned: list[Seeded], now: datetime) -> float:
    """Each run through the runs store, oldest first, as the worker writes it; returns the seconds taken."""
    from tickwork.app.ports import Expect
    from tickwork.runtime import runtime

    runs = runtime().runs
    started = time.perf_counter()
    for index, seeded in enumerate(planned, 1):
        written = runs.put(run_item(seeded, now), Expect.new())
        if not written.ok:
            raise RuntimeError(f"run {seeded.run_id} was already there")
        if index % 20_000 == 0:
            elapsed = time.perf_counter() - started
            log(f"{index:,} runs written in {elapsed:.0f} s ({index / elapsed:.0f}/s)")
    return time.perf_counter() - started


def wait_for_index(stack: Any, timeout: float) -> float:
    """Until the change feed holds nothing more for the indexer; returns the seconds waited."""
    started = time.perf_counter()
    while stack.changes.pending():
        if time.perf_counter() - started > timeout:
            raise RuntimeError(
                f"{len(stack.changes.pending())} changes still not indexed after {timeout:.0f} s"
            )
        time.sleep(0.2)
    return time.perf_counter() - started


def index_items() -> Counter[str]:
    """The run index table's items: chunks and hour entries."""
    from tickwork import tables
    from tickwork.runtime import runtime

    current = runtime()
    found: Counter[str] = Counter()
    for page in current.dynamodb.get_paginator("scan").paginate(TableName=current.settings.run_index_table):
        for item in page["Items"]:
            found["chunks" if tables.INDEX_ENTRIES in item else "hours"] += 1
    return found


# --- the queries ------------------------------------------------------------------------------------------
@dataclass
class Query:
    name: str
    params: dict[str, Any]
    expected: Callable[[Seeded], bool]
    only: Any  # the service's RunFilter


def queries(planned: list[Seeded], newest: datetime) -> list[Query]:
    from tickwork.domain.models import RunStatus
    from tickwork.domain.run_listing import RunFilter
    from tickwork.domain.timeutil import to_epoch_ms

    job_id = Counter(seeded.job_id for seeded in planned).most_common(1)[0][0]
    until = newest - timedelta(days=1)
    since = until - timedelta(hours=1)
    since_ms, until_ms = to_epoch_ms(since), to_epoch_ms(until)
    return [
        Query("unfiltered", {}, lambda run: True, RunFilter()),
        Query(
            "status=SUCCEEDED",
            {"status": "SUCCEEDED"},
            lambda run: run.status == "SUCCEEDED",
            _statuses(RunStatus.SUCCEEDED),
        ),
        Query(
            "status=DEAD (failure index)",
            {"status": "DEAD"},
            lambda run: run.status == "DEAD",
            _statuses(RunStatus.DEAD),
        ),
        Query(
            "status=RUNNING (rare: on a budget)",
            {"status": "RUNNING"},
            lambda run: run.status == "RUNNING",
            _statuses(RunStatus.RUNNING),
        ),
        Query(
            "job_id=one job", {"job_id": job_id}, lambda run: run.job_id == job_id, RunFilter(job_id=job_id)
        ),
        Query(
            "since/until: one hour a day back",
            {"since": _rfc3339(since), "until": _rfc3339(until)},
            lambda run: since_ms <= run.scheduled_ms < until_ms,
            RunFilter(since=since, until=until),
        ),
    ]


def _statuses(*statuses: Any) -> Any:
    from tickwork.domain.run_listing import RunFilter

    return RunFilter(statuses=frozenset(statuses))


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Timing:
    samples: list[list[float]] = field(default_factory=list)  # per trial

    @property
    def all(self) -> list[float]:
        return [value for trial in self.samples for value in trial]

    def trial_medians(self) -> list[float]:
        return [median(trial) for trial in self.samples]


def newest_first(planned: list[Seeded]) -> list[Seeded]:
    return sorted(planned, key=lambda run: (run.scheduled_ms, run.run_id), reverse=True)


def check_pages(
    name: str, pages: list[dict[str, Any]], expected: list[Seeded], problems: list[str], *, whole: bool
) -> int:
    """The pages read in order against the runs expected, newest first: same runs, same order, none twice;
    ``whole``: the pages must hold every expected run and end without a cursor. Returns the runs seen."""
    from tickwork.domain.timeutil import to_epoch_ms

    seen = [item for page in pages for item in page["items"]]
    ids = [item["run_id"] for item in seen]
    if len(ids) != len(set(ids)):
        problems.append(f"{name}: {len(ids) - len(set(ids))} runs listed twice")
    keys = [(to_epoch_ms(datetime.fromisoformat(item["scheduled_for"])), item["run_id"]) for item in seen]
    if keys != sorted(keys, reverse=True):
        problems.append(f"{name}: not newest first")
    want = [run.run_id for run in expected[: len(ids)]] if not whole else [run.run_id for run in expected]
    if ids != want:
        missing = len(set(want) - set(ids))
        extra = len(set(ids) - set(want))
        problems.append(
            f"{name}: {len(ids)} runs listed, {missing} expected ones missing, {extra} unexpected"
        )
    if (
        not whole
        and len(ids) < min(len(expected), PAGE * len(pages))
        and pages[-1].get("next_cursor") is None
    ):
        problems.append(f"{name}: ended after {len(ids)} runs of {len(expected)}")
    if whole and pages[-1].get("next_cursor") is not None:
        problems.append(f"{name}: a cursor after the last run")
    return len(ids)


@dataclass
class Figures:
    jobs: int
    runs: int
    days: float
    trials: int
    repeats: int
    create_seconds: float
    write_seconds: float
    index_wait_seconds: float
    index: Counter[str]
    statuses: Counter[str]
    first_pages: dict[str, Timing]
    first_counts: dict[str, int]
    next_pages: Timing
    stats: Timing
    stats_body: dict[str, Any]
    stats_expected: int
    running_walk: tuple[int, int, float]  # pages, runs found, seconds
    problems: list[str]
    cli_lines: list[str]
    profiles: list[Profiled]


def time_queries(
    api: Api, planned: list[Seeded], newest: datetime, trials: int, repeats: int
) -> dict[str, Any]:
    ordered = newest_first(planned)
    problems: list[str] = []
    found = queries(planned, newest)
    first = {query.name: Timing() for query in found}
    counts: dict[str, int] = {}
    following = Timing()
    stats = Timing()
    for trial in range(trials):
        for query in found:
            samples = []
            for repeat in range(repeats):
                body, elapsed = api.runs_page(query.params)
                samples.append(elapsed)
                if trial == 0 and repeat == 0:
                    expected = [run for run in ordered if query.expected(run)]
                    counts[query.name] = len(body["items"])
                    if query.params.get("status") != "RUNNING":  # walked whole below
                        check_pages(query.name, [body], expected, problems, whole=False)
            first[query.name].samples.append(samples)
        samples = []
        for repeat in range(repeats):
            body, _ = api.runs_page({})
            pages = [body]
            for _ in range(NEXT_PAGES):
                if body.get("next_cursor") is None:
                    break
                body, elapsed = api.runs_page({}, body["next_cursor"])
                pages.append(body)
                samples.append(elapsed)
            if trial == 0 and repeat == 0:
                check_pages(f"unfiltered, {NEXT_PAGES + 1} pages", pages, ordered, problems, whole=False)
        following.samples.append(samples)
        samples = []
        for _ in range(repeats):
            status, body, elapsed = api.call("GET", "/v1/stats")
            if status != 200:
                raise RuntimeError(f"GET /v1/stats answered {status}: {body}")
            samples.append(elapsed)
        stats.samples.append(samples)
        stats_expected = expected_in_last_hour(planned)
        latest = median(first["unfiltered"].samples[-1])
        log(f"trial {trial + 1}: unfiltered first page median {latest:.0f} ms")
    return {
        "problems": problems,
        "first_pages": first,
        "first_counts": counts,
        "next_pages": following,
        "stats": stats,
        "stats_body": body,
        "stats_expected": stats_expected,
    }


def walk_running(
    api: Api, planned: list[Seeded], problems: list[str], max_pages: int = 1000
) -> tuple[int, int, float]:
    """Every page of status=RUNNING through its cursor: (pages, runs, seconds)."""
    expected = [run for run in newest_first(planned) if run.status == "RUNNING"]
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    started = time.perf_counter()
    while len(pages) < max_pages:
        body, _ = api.runs_page({"status": "RUNNING"}, cursor)
        pages.append(body)
        cursor = body.get("next_cursor")
        if cursor is None:
            break
    seconds = time.perf_counter() - started
    runs = check_pages("status=RUNNING, every page", pages, expected, problems, whole=True)
    return len(pages), runs, seconds


def expected_in_last_hour(planned: list[Seeded]) -> int:
    from tickwork.domain.timeutil import to_epoch_ms

    since = to_epoch_ms(datetime.now(UTC) - timedelta(hours=1))
    return sum(1 for run in planned if run.scheduled_ms >= since)


def check_cli(api: Api, newest: datetime, problems: list[str]) -> list[str]:
    """`tickwork runs list` and `tickwork runs watch` against the stack's API; the lines they printed."""
    from tickwork_local.cli.app import app
    from typer.testing import CliRunner

    prefix = ["--api-url", api.base_url, "--token", TOKEN]
    body, _ = api.runs_page({})
    first = [item["run_id"] for item in body["items"]]
    runner = CliRunner()
    listed = runner.invoke(
        app, [*prefix, "runs", "list", "--limit", str(PAGE), "-o", "json"], prog_name="tickwork"
    )
    lines = []
    if listed.exit_code != 0:
        problems.append(f"tickwork runs list exited {listed.exit_code}: {listed.stderr[-300:]}")
    else:
        ids = [run["run_id"] for run in json.loads(listed.stdout)["items"]]
        if ids != first:
            problems.append(f"tickwork runs list printed {len(ids)} runs, not the API's first page")
        lines.append(f"`tickwork runs list --limit {PAGE} -o json`: {len(ids)} runs, the API's first page")
    table_out = runner.invoke(app, [*prefix, "runs", "list", "--limit", "3"], prog_name="tickwork")
    if table_out.exit_code != 0 or first[0] not in table_out.stdout:
        problems.append(f"tickwork runs list (table) exited {table_out.exit_code} without the newest run")
    else:
        lines.append("`tickwork runs list --limit 3`: the newest run first, as a table")
    since = _rfc3339(newest - timedelta(minutes=10))
    watched = runner.invoke(
        app, [*prefix, "runs", "watch", "--since", since, "--count", "3", "-o", "json"], prog_name="tickwork"
    )
    if watched.exit_code != 0:
        problems.append(f"tickwork runs watch exited {watched.exit_code}: {watched.stderr[-300:]}")
    else:
        events = [json.loads(line) for line in watched.stdout.splitlines() if line.strip()]
        if len(events) != 3:
            problems.append(f"tickwork runs watch printed {len(events)} runs, not 3")
        watch = "`tickwork runs watch --since <10 min before the newest run> --count 3 -o json`"
        lines.append(f"{watch}: {len(events)} runs")
    return lines


@dataclass
class Profiled:
    name: str
    ms: float  # median wall time of the unprofiled calls
    calls: Counter[str]  # DynamoDB calls of one
    rows: list[tuple[str, str, str]]


def profile_call(name: str, call: Callable[[], Any], repeats: int) -> Profiled:
    """One request's service call in this thread, without HTTP or the gateway: its median wall time over
    ``repeats`` calls, the DynamoDB calls of one, and a cProfile of one."""
    from tickwork.runtime import runtime

    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        durations.append((time.perf_counter() - started) * 1000)
    calls: Counter[str] = Counter()
    client: Any = runtime().dynamodb
    original = client._make_api_call

    def counted(operation: str, params: dict[str, Any]) -> Any:
        calls[operation] += 1
        return original(operation, params)

    client._make_api_call = counted
    profile = cProfile.Profile()
    try:
        profile.enable()
        call()
        profile.disable()
    finally:
        del client._make_api_call
    return Profiled(name, median(durations), calls, top_functions(profile, 10))


def profile_requests(found: list[Query], first_pages: dict[str, Timing], stats: Timing) -> list[Profiled]:
    """The unfiltered first page, and each request whose median over HTTP is over the goal."""
    from tickwork.runtime import runtime

    service = runtime().service
    profiled = []
    for query in found:
        slow = median(first_pages[query.name].all) > GOAL_MS
        if query.name == "unfiltered" or slow:

            def page(only: Any = query.only) -> Any:
                return service.list_tenant_runs(TENANT, only, limit=PAGE, cursor=None)

            profiled.append(profile_call(f"the first page, {query.name},", page, 1 if slow else 5))
    if median(stats.all) > GOAL_MS:
        profiled.append(profile_call("GET /v1/stats", lambda: service.stats(TENANT, datetime.now(UTC)), 1))
    return profiled


# --- the whole run ----------------------------------------------------------------------------------------
def run(
    jobs: int = 10_000, runs: int = 200_000, days: float = 3.0, trials: int = 3, repeats: int = 5
) -> Figures:
    directory = tempfile.mkdtemp(prefix="tickwork-run-listing-")
    with local_stack(directory) as stack:
        raise_rate_limit()
        api = Api(f"http://127.0.0.1:{stack.port}")
        log(f"creating {jobs:,} jobs through POST /v1/jobs")
        job_ids, create_seconds = create_jobs(api, jobs)
        log(f"{jobs:,} jobs in {create_seconds:.0f} s; writing {runs:,} runs")
        now = datetime.now(UTC)
        newest = (now - timedelta(minutes=2)).replace(microsecond=0)
        planned = plan_runs(job_ids, runs, days, newest)
        write_seconds = write_runs(planned, now)
        index_wait = wait_for_index(stack, timeout=600)
        log(f"runs written in {write_seconds:.0f} s, index drained {index_wait:.1f} s later")
        index = index_items()
        timed = time_queries(api, planned, newest, trials, repeats)
        problems: list[str] = timed["problems"]
        running_walk = walk_running(api, planned, problems)
        stats_body = timed["stats_body"]
        if sum(stats_body["runs"].values()) != stats_body["sampled_runs"]:
            problems.append("GET /v1/stats: runs by status do not add up to the runs sampled")
        cli_lines = check_cli(api, newest, problems)
        profiles = profile_requests(queries(planned, newest), timed["first_pages"], timed["stats"])
    return Figures(
        jobs=jobs,
        runs=runs,
        days=days,
        trials=trials,
        repeats=repeats,
        create_seconds=create_seconds,
        write_seconds=write_seconds,
        index_wait_seconds=index_wait,
        index=index,
        statuses=Counter(seeded.status for seeded in planned),
        first_pages=timed["first_pages"],
        first_counts=timed["first_counts"],
        next_pages=timed["next_pages"],
        stats=timed["stats"],
        stats_body=stats_body,
        stats_expected=timed["stats_expected"],
        running_walk=running_walk,
        problems=problems,
        cli_lines=cli_lines,
        profiles=profiles,
    )


def _row(name: str, timing: Timing, count: str) -> tuple[str, ...]:
    return (
        name,
        count,
        ", ".join(f"{value:.0f}" for value in timing.trial_medians()),
        f"{median(timing.all):.0f}",
        f"{percentile(timing.all, 95):.0f}",
    )


def markdown(figures: Figures, command: str = COMMAND) -> str:
    header = ("request", "runs on the page", "median ms per trial", "median ms", "p95 ms")
    rows = [
        _row(f"first page, {name}", timing, str(figures.first_counts.get(name, "")))
        for name, timing in figures.first_pages.items()
    ]
    rows.append(_row(f"pages 2 to {NEXT_PAGES + 1}, unfiltered (cursor)", figures.next_pages, str(PAGE)))
    rows.append(_row("GET /v1/stats", figures.stats, f"{figures.stats_body['sampled_runs']} sampled"))
    first = median(figures.first_pages["unfiltered"].all)
    verdict = "met" if first < GOAL_MS else "not met"
    pages, found, seconds = figures.running_walk
    mix = ", ".join(f"{status} {count:,}" for status, count in sorted(figures.statuses.items()))
    checks = "All passed." if not figures.problems else "**Failed**: " + "; ".join(figures.problems) + "."
    creates = figures.jobs / max(figures.create_seconds, 1e-9)
    writes = figures.runs / max(figures.write_seconds, 1e-9)
    setup = (
        "The local stack in process (moto in process, the planner ticking every second, 4 worker pollers,"
        " the runs table's change feed and the indexer loop), its API on loopback HTTP. One tenant:"
        f" {figures.jobs:,} one-time jobs far in the future created through `POST /v1/jobs`"
        f" ({figures.create_seconds:.0f} s, {creates:.0f} creates/s from {CREATE_CLIENTS} clients), and"
        f" {figures.runs:,} runs written through the runs store as the worker writes them"
        " (`runtime().runs.put(run, Expect.new())`, one write per run, oldest first), spread over"
        f" {figures.days:g} days of scheduled times across the jobs: {mix}. The change feed handed every"
        f" write to the indexer, as DynamoDB Streams does on AWS: {figures.write_seconds:.0f} s of writes"
        f" ({writes:.0f} runs/s, the indexer running alongside), the feed drained"
        f" {figures.index_wait_seconds:.1f} s after the last one; the run index then held"
        f" {figures.index['chunks']:,} chunks over {figures.index['hours']:,} hours."
    )
    method = (
        f"Each request over HTTP with the tenant's token, limit {PAGE}; {figures.repeats} requests of each"
        f" per trial, {figures.trials} trials; the p95 is over all of them. Pages 2 to {NEXT_PAGES + 1}"
        " follow the unfiltered listing's cursor from a fresh first page each time."
    )
    goal = (
        f"Goal: the first page under {GOAL_MS:.0f} ms on the local stack, unfiltered: {verdict}"
        f" ({first:.0f} ms median)."
    )
    checked = (
        "Checks against the runs written: each first page holds exactly the newest runs its filter selects,"
        f" newest first; the unfiltered listing's first {NEXT_PAGES + 1} pages are the"
        f" {PAGE * (NEXT_PAGES + 1)} newest runs, none twice; status=RUNNING read to its end ({pages} pages,"
        f" {found} runs of {figures.statuses.get('RUNNING', 0)}, {seconds:.1f} s: each page reads the index"
        " on a budget and may come back short, with a cursor); GET /v1/stats adds up"
        f" ({figures.stats_body['sampled_runs']} runs sampled in the last hour, {figures.stats_expected}"
        f" written there). {checks}"
    )
    cli = (
        "The CLI against the same API: "
        + "; ".join(figures.cli_lines)
        + ". The console's All runs page and its health page read the same two routes."
    )
    return "\n".join(
        [
            f"## Run listing at {figures.jobs:,} jobs and {figures.runs:,} runs",
            "",
            f"Command: `{command}`",
            "",
            *(
                line
                for paragraph in (setup, method)
                for line in (*textwrap.wrap(paragraph, WIDTH, break_on_hyphens=False), "")
            ),
            table(header, rows),
            "",
            *(
                line
                for paragraph in (goal, checked, cli)
                for line in (*textwrap.wrap(paragraph, WIDTH, break_on_hyphens=False), "")
            ),
            *(line for profiled in figures.profiles for line in _profile_lines(profiled)),
        ]
    )


def _profile_lines(profiled: Profiled) -> list[str]:
    calls = ", ".join(f"{name} {count:,}" for name, count in sorted(profiled.calls.items()))
    text = (
        f"Where the time of {profiled.name} goes: its service call alone in this process (no HTTP, no"
        f" gateway) took {profiled.ms:,.0f} ms; its DynamoDB calls: {calls}. cProfile of one call, the"
        " functions with the most own time (moto runs in process, so its work is here too):"
    )
    return [
        *textwrap.wrap(text, WIDTH, break_on_hyphens=False),
        "",
        table(("function", "own ms", "cumulative ms"), profiled.rows),
        "",
    ]


def section() -> str:
    return markdown(run())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    figures = run(args.jobs, args.runs, args.days, args.trials, args.repeats)
    print(f"machine: {machine()}\n")
    print(markdown(figures, " ".join(["python -m bench.run_listing", *sys.argv[1:]])))
    return 0 if not figures.problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
