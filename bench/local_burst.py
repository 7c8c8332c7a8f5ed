"""N one-time jobs due in the same second on the local stack: creation throughput and trigger lag.

    python -m bench.local_burst --jobs 200

Starts `tickwork local` as a subprocess, creates the jobs over HTTP (4 client threads), and measures at a
loopback receiver when each arrives against its `scheduled_for`. Writes its figures to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "tw_bench"  # noqa: S105 - a local, throwaway token
MARKER_START = "<!-- local-burst:start -->"
MARKER_END = "<!-- local-burst:end -->"


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Arrivals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[float, str, str]] = []  # (received at, run id, scheduled_for)

    def server(self) -> ThreadingHTTPServer:
        arrivals = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received = time.time()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with arrivals.lock:
                    arrivals.items.append((received, body["run_id"], body["scheduled_for"]))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        return server


def start_local(port: int) -> subprocess.Popen[str]:
    command = [str(Path(sys.executable).with_name("tickwork")), "local", "--port", str(port), "--quiet"]
    env = {**os.environ, "TICKWORK_LOCAL_TENANTS": f"bench:{TOKEN}", "PYTHONUNBUFFERED": "1"}
    # Its output goes to a file: an unread pipe would fill up and block it.
    output = (ROOT / ".tickwork").joinpath("bench-local.out")
    output.parent.mkdir(exist_ok=True)
    process = subprocess.Popen(  # noqa: S603 - our own command
        command, stdout=output.open("w"), stderr=subprocess.STDOUT, text=True, env=env
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("tickwork local did not become healthy in 60 s")


def create(port: int, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/jobs",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.status == 201


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(jobs: int, lead_seconds: float) -> dict[str, Any]:
    arrivals = Arrivals()
    receiver = arrivals.server()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    process = start_local(port)
    try:
        due = (datetime.now(UTC) + timedelta(seconds=lead_seconds)).replace(microsecond=0)
        target = {"type": "http", "url": f"http://127.0.0.1:{receiver.server_address[1]}/burst"}
        bodies = [
            {
                "name": f"burst-{uuid.uuid4().hex[:12]}",
                "schedule": {"type": "once", "at": due.isoformat()},
                "target": target,
            }
            for _ in range(jobs)
        ]
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda body: create(port, body), bodies))
        create_seconds = time.perf_counter() - started
        if datetime.now(UTC) >= due:
            raise SystemExit("creating the jobs took longer than the lead time: raise --lead")
        deadline = due.timestamp() + 120
        while time.time() < deadline and len(arrivals.items) < jobs:
            time.sleep(0.2)
        time.sleep(2)  # late duplicates, if any, show up here
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
        receiver.shutdown()
    lags = [
        (received - datetime.fromisoformat(scheduled).timestamp()) * 1000
        for received, _, scheduled in arrivals.items
    ]
    run_ids = [run_id for _, run_id, _ in arrivals.items]
    return {
        "jobs": jobs,
        "create_seconds": round(create_seconds, 2),
        "create_per_second": round(jobs / create_seconds, 1),
        "received": len(set(run_ids)),
        "duplicates": len(run_ids) - len(set(run_ids)),
        "lost": jobs - len(set(run_ids)),
        "early": sum(1 for lag in lags if lag < 0),
        "lag_ms": {
            "p50": round(pct(lags, 50)),
            "p95": round(pct(lags, 95)),
            "p99": round(pct(lags, 99)),
            "max": round(max(lags)),
        }
        if lags
        else None,
    }


def write_report(result: dict[str, Any], command: str) -> None:
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lag = result["lag_ms"] or {}
    columns = {
        "jobs": result["jobs"],
        "created in": f"{result['create_seconds']} s",
        "creation rate": f"{result['create_per_second']} jobs/s",
        "received": result["received"],
        "lost": result["lost"],
        "duplicates": result["duplicates"],
        "early": result["early"],
        **{f"lag {name}": f"{lag.get(name)} ms" for name in ("p50", "p95", "p99", "max")},
    }
    section = "\n".join(
        [
            MARKER_START,
            "## Local stack: one-time jobs due in the same second",
            "",
            f"Command: `{command}` (run on {datetime.now(UTC):%Y-%m-%d}, a 2-core machine).",
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
            "| " + " | ".join(str(value) for value in columns.values()) + " |",
            "",
            "Lag is the receive time at a loopback webhook minus `scheduled_for`. Creation goes through the",
            "same HTTP front, authorizer and API handler as every request, with DynamoDB and SQS in moto's",
            "server: both figures are bound by moto (one process, an HTTP round trip per AWS call), not by",
            "what the AWS services allow.",
            MARKER_END,
        ]
    )
    if MARKER_START in text:
        before, rest = text.split(MARKER_START, 1)
        after = rest.split(MARKER_END, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=200, help="how many one-time jobs, all due in the same second"
    )
    parser.add_argument("--lead", type=float, default=25.0, help="seconds between the start and the due time")
    parser.add_argument("--no-write", action="store_true", help="print the figures without updating the docs")
    args = parser.parse_args()
    result = run(args.jobs, args.lead)
    print(json.dumps(result, indent=2))
    if not args.no_write:
        write_report(result, f"python -m bench.local_burst --jobs {args.jobs}")
    return 0 if result["lost"] == 0 and result["early"] == 0 and result["duplicates"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
