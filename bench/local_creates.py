"""Create throughput of `tickwork local --data-dir` through its HTTP API.

    python -m bench.local_creates --creates 300 --clients 4 --trials 3

Each trial starts the local stack as a subprocess on a fresh data directory (so every accepted write goes
through the journal: on disk before the API answers), has ``--clients`` threads create one-time jobs far in
the future, ``--creates`` in all, and stops it. Prints creates per second for each trial and their median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.e2e.conftest import start_local, stop_local

TENANTS = "acme:tw_e2e_acme"
COMMAND = "python -m bench.local_creates --creates 300 --clients 4 --trials 3"
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


def trial(creates: int, clients: int) -> float:
    local = start_local(Path(tempfile.mkdtemp(prefix="tickwork-creates-")) / "data", tenants=TENANTS)
    raise_rate_limit(local.moto_endpoint)
    statuses: list[int] = []

    def client(number: int) -> None:
        for index in range(creates // clients):
            status, _ = local.call(
                "POST",
                "/v1/jobs",
                body={
                    "name": f"create-{number}-{index}",
                    "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
                    "target": {"type": "http", "url": "http://127.0.0.1:9/never"},
                },
            )
            statuses.append(status)

    try:
        started = time.perf_counter()
        threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        stop_local(local)
    if set(statuses) != {201}:
        raise RuntimeError(f"creates answered {sorted(set(statuses))}")
    return len(statuses) / elapsed


def section(rates: list[float] | None = None) -> str:
    """The benchmarks.md section: this tree's trials next to the tree before the journal."""
    rates = rates if rates is not None else [trial(300, 4) for _ in range(3)]
    now, before = statistics.median(rates), statistics.median(BEFORE_JOURNAL)
    return "\n".join(
        [
            "## Local stack: create throughput with the journal",
            "",
            f"Command: `{COMMAND}` (the local stack as a subprocess on a fresh `--data-dir`, 4 clients",
            "creating one-time jobs through the HTTP API).",
            "",
            "| tree | creates/s per trial | median |",
            "|---|---|---|",
            "| this tree: every write on disk (group commit) before the API answers | "
            + ", ".join(f"{rate:.1f}" for rate in rates)
            + f" | {now:.1f} |",
            "| before the journal (`1e949ab`: tables saved only on a clean stop; SIGKILL lost every job), "
            "same command, quoted | "
            + ", ".join(f"{rate:.1f}" for rate in BEFORE_JOURNAL)
            + f" | {before:.1f} |",
            "",
            f"Ratio {now / before:.2f}x. Since the journal: moto in process rather than over HTTP, no",
            "whole-table copy per transaction or whole-table sort per query",
            "(`tickwork_local/moto_dynamodb.py`),",
            "group commit (one fsync for every write appended before it), and the authorizer's answer kept",
            "per token as API Gateway's cache does. Not yet met: 200 creates/s with 10,000 jobs registered.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    rates = [trial(args.creates, args.clients) for _ in range(args.trials)]
    print(section(rates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
