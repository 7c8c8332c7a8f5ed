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


def trial(creates: int, clients: int) -> float:
    local = start_local(Path(tempfile.mkdtemp(prefix="tickwork-creates-")) / "data", tenants=TENANTS)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    rates = [trial(args.creates, args.clients) for _ in range(args.trials)]
    print("creates/s per trial:", ", ".join(f"{rate:.1f}" for rate in rates))
    print(f"median: {statistics.median(rates):.1f} creates/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
