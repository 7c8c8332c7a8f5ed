"""What the peer schedulers of ``bench.lag`` share, each in a process of its own: the fire they make (a POST
of what tickwork's webhook envelope carries) and the few lines they exchange with the bench.

The bench starts a peer's process and reads ``{"ready": true}`` once its scheduler runs; it then writes one
JSON line, the workload, and reads ``{"setup_seconds": ...}`` once the peer has added it (as a user's code
would: the peer's own calls, in its own process). Closing the peer's stdin stops it.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from typing import Any


def post(url: str, key: str, scheduled_for: str) -> None:
    """One fire: ``run_id`` and ``scheduled_for``, as tickwork's webhook body has them."""
    body = json.dumps({"run_id": key, "scheduled_for": scheduled_for}).encode()
    request = urllib.request.Request(  # noqa: S310 - the loopback receiver's http URL
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback receiver
        response.read()


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read_workload() -> dict[str, Any] | None:
    """The workload the bench sends, or None when it closed the pipe first."""
    line = sys.stdin.readline()
    if not line.strip():
        return None
    workload: dict[str, Any] = json.loads(line)
    return workload


def wait_for_close() -> None:
    """Block until the bench closes stdin."""
    while sys.stdin.readline():
        pass
