"""A small, repeatable schemathesis fuzz of the local stack's HTTP API (``python -m bench.fuzz_api``).

It runs as its own process: the local stack points boto3 at its moto server through the environment, which
must not leak into the tests that run after it. Fixed seed, about 150 requests, loopback only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = 14  # every route of docs/openapi.json


def test_a_seeded_fuzz_run_gets_no_server_error_and_every_4xx_in_the_error_shape(tmp_path: Path) -> None:
    figures = tmp_path / "fuzz.json"
    finished = subprocess.run(
        [sys.executable, "-m", "bench.fuzz_api", "--requests", "150", "--seed", "7", "--json", str(figures)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    report = json.loads(figures.read_text())
    assert report["requests"] >= 150
    assert report["operations"] == OPERATIONS
    assert report["server_errors"] == 0
    assert report["failures"] == []
    assert report["unauthenticated"] > 0  # some requests went without the tenant's token
    statuses = {int(status) for by in report["statuses"].values() for status in by}
    assert {200, 400, 401, 404} <= statuses
    assert "| all |" in finished.stdout
