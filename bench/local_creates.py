"""Create throughput and start-up of `tickwork local --data-dir`, on an empty data directory and on one
that already holds ``--registered`` jobs.

    python -m bench.local_creates --creates 300 --clients 4 --trials 3 --registered 10000

Each trial starts the local stack as a subprocess (so every accepted write goes through the journal: on disk
before the API answers), has ``--clients`` threads create one-time jobs far in the future through the HTTP
API, ``--creates`` in all, and stops it. First on a fresh data directory; then on a copy of one prepared
once with ``--registered`` jobs (created through the same API, then the stack stopped), where the time from
starting the process to the first healthy answer is measured too. Prints every trial and the medians.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.conftest import start_local, stop_local

TENANTS = "acme:tw_e2e_acme"
COMMAND = "python -m bench.local_creates --creates 300 --clients 4 --trials 3 --registered 10000"
FRESH_COMMAND = "python -m bench.local_creates --creates 300 --clients 4 --trials 3"
# The same command on the tree before the journal (1e949ab: tables saved only on a clean stop, so SIGKILL
# lost every job), on this machine on 2026-11-26: 23.5, 22.5 and 22.8 creates/s.
BEFORE_JOURNAL = (23.5, 22.5, 22.8)


def raise_rate_limit(endpoint: str) -> None:
    """The tenant's API rate (50 requests/s by default) would cap the figure: raise it to the most a tenant
    may have, through the stack's moto endpoint, before any request (the gateway keeps the authorizer's
    answer, which carries the rate, for 300 s)."""
    import boto3
    from tickwork import tables
    from tickwork.adapters.tenants import DynamoTenantStore

    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto accepts any
    )
    store = DynamoTenantStore(client, table=tables.TENANTS.default_name)
    tenant_id, token = TENANTS.split(":")
    tenant = store.get(tenant_id)
    store.put(tenant.model_copy(update={"api_requests_per_second": 10_000}), token=token)


@dataclass
class Trial:
    creates_per_second: float
    startup_seconds: float  # from starting the process to the first healthy answer
    ready_seconds: float  # as the banner has it: from the stack's start (imports done) to ready


def _ready_seconds(output: list[str]) -> float:
    for line in output:
        match = re.search(r"is ready at \S+ \(in ([0-9.]+) s\)", line)
        if match:
            return float(match.group(1))
    return float("nan")


def _create(local: Any, creates: int, clients: int, prefix: str, schedules: list[dict[str, Any]]) -> float:
    """``creates`` jobs from ``clients`` threads; returns creates per second."""
    statuses: list[int] = []

    def client(number: int) -> None:
        for index in range(number, creates, clients):
            status, _ = local.call(
                "POST",
                "/v1/jobs",
                body={
                    "name": f"{prefix}-{index}",
                    "schedule": schedules[index % len(schedules)],
                    "target": {"type": "http", "url": "http://127.0.0.1:9/never"},
                },
            )
            statuses.append(status)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if set(statuses) != {201}:
        raise RuntimeError(f"creates answered {sorted(set(statuses))}")
    return len(statuses) / elapsed


ONE_TIME = [{"type": "once", "at": "2099-01-01T00:00:00Z"}]
# Jobs that stay registered without firing during the bench: yearly ones in several time zones, one-time
# ones far ahead.
REGISTERED = [
    {"type": "cron", "expression": "0 3 1 1 *", "timezone": "Europe/Paris"},
    {"type": "cron", "expression": "30 9 2 1 *", "timezone": "America/New_York"},
    {"type": "cron", "expression": "15 0 3 1 *", "timezone": "Asia/Tokyo"},
    {"type": "once", "at": "2099-06-01T12:00:00Z"},
]


def prepare(registered: int, clients: int) -> Path:
    """A data directory holding ``registered`` jobs, created through the API and saved by a clean stop."""
    data_dir = Path(tempfile.mkdtemp(prefix="tickwork-registered-")) / "data"
    local = start_local(data_dir, tenants=TENANTS)
    try:
        raise_rate_limit(local.moto_endpoint)
        _create(local, registered, clients, "registered", REGISTERED)
    finally:
        stop_local(local, within=60)
    return data_dir


def trial(creates: int, clients: int, template: Path | None = None) -> Trial:
    data_dir = Path(tempfile.mkdtemp(prefix="tickwork-creates-")) / "data"
    if template is not None:
        shutil.copytree(template, data_dir)
    started = time.perf_counter()
    local = start_local(data_dir, tenants=TENANTS, poll_seconds=0.01)
    startup = time.perf_counter() - started
    try:
        raise_rate_limit(local.moto_endpoint)
        rate = _create(local, creates, clients, "create", ONE_TIME)
    finally:
        stop_local(local, within=60)
    return Trial(rate, startup, _ready_seconds(local.output))


@dataclass
class Figures:
    fresh: list[Trial]
    registered: list[Trial]
    registered_jobs: int


def run(creates: int = 300, clients: int = 4, trials: int = 3, registered: int = 10_000) -> Figures:
    fresh = [trial(creates, clients) for _ in range(trials)]
    template = prepare(registered, max(clients, 8))
    try:
        loaded = [trial(creates, clients, template) for _ in range(trials)]
    finally:
        shutil.rmtree(template.parent, ignore_errors=True)
    return Figures(fresh, loaded, registered)


def _row(label: str, values: list[float], unit: str = "") -> str:
    return (
        f"| {label} | "
        + ", ".join(f"{value:.2f}{unit}" if value < 10 else f"{value:.1f}{unit}" for value in values)
        + f" | {statistics.median(values):.2f}{unit} |"
    )


def section(figures: Figures | None = None) -> str:
    """The benchmarks.md section: this tree's trials next to the tree before the journal."""
    figures = figures if figures is not None else run()
    fresh = [t.creates_per_second for t in figures.fresh]
    loaded = [t.creates_per_second for t in figures.registered]
    startup = [t.startup_seconds for t in figures.registered]
    ready = [t.ready_seconds for t in figures.registered]
    empty_startup = [t.startup_seconds for t in figures.fresh]
    now, before = statistics.median(fresh), statistics.median(BEFORE_JOURNAL)
    jobs = f"{figures.registered_jobs:,}"
    create_goal = "met" if statistics.median(loaded) >= 200 else "not met"
    startup_goal = "met" if statistics.median(startup) < 2 else "not met"
    return "\n".join(
        [
            "## Local stack: create throughput and start-up with the journal",
            "",
            f"Command: `{COMMAND}`: the local stack as a subprocess, 4 clients creating one-time jobs",
            "through the HTTP API, every write on disk (group commit) before the API answers. First on a",
            f"fresh `--data-dir`, then on copies of one that holds {jobs} jobs (created through the API,",
            "then a clean stop). Start-up is from starting the process to its first healthy answer",
            "(Python's imports included); the banner's figure starts once the imports are done.",
            "",
            "| measure | per trial | median |",
            "|---|---|---|",
            _row("creates/s, fresh data directory", fresh),
            _row(f"creates/s, {jobs} jobs registered", loaded),
            _row("start-up to healthy, fresh data directory", empty_startup, " s"),
            _row(f"start-up to healthy, {jobs} jobs on disk", startup, " s"),
            _row(f"banner's ready time, {jobs} jobs on disk", ready, " s"),
            "| creates/s before the journal (`1e949ab`: tables saved only on a clean stop; SIGKILL lost "
            f"every job), `{FRESH_COMMAND}`, quoted | "
            + ", ".join(f"{rate:.1f}" for rate in BEFORE_JOURNAL)
            + f" | {before:.1f} |",
            "",
            f"Fresh directory against the tree before the journal: {now / before:.2f}x. Goals: 200 creates/s",
            f"with {jobs} jobs registered: {create_goal}; start-up under 2 s with {jobs} jobs on disk:",
            f"{startup_goal}.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--registered", type=int, default=10_000)
    args = parser.parse_args(argv)
    figures = run(args.creates, args.clients, args.trials, args.registered)
    for name, trials in (("fresh", figures.fresh), ("registered", figures.registered)):
        for number, one in enumerate(trials, 1):
            print(f"{name} trial {number}: {one}")
    print(section(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
