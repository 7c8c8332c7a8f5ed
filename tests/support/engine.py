"""For driving the execution engine under moto on a fake clock: the clock, recording metrics, and the
loopback webhook receiver of ``tickwork_local.harness`` (where moto and the run queue's pump come from too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from tickwork_local.atomic import serialise_dynamodb
from tickwork_local.harness import Received, Receiver

__all__ = [
    "FakeClock",
    "Received",
    "Receiver",
    "RecordingMetrics",
    "WorkerDied",
    "make_requests_atomic",
    "start_receiver",
]


class WorkerDied(BaseException):
    """A worker process killed mid-run: not an Exception, so nothing in the worker catches it."""


class FakeClock:
    """Time that moves only when a test (or a worker's wait) moves it."""

    def __init__(self, now: datetime):
        self.now = now
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += timedelta(seconds=seconds)

    def advance(self, **delta: float) -> datetime:
        with self._lock:
            self.now += timedelta(**delta)
            return self.now


class RecordingMetrics:
    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.timings: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def count(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + value

    def milliseconds(self, name: str, value: float) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append(value)


def start_receiver() -> Iterator[Receiver]:
    """The loopback receiver for the length of a fixture: ``yield from start_receiver()``."""
    with Receiver() as receiver:
        yield receiver


def make_requests_atomic(client: Any) -> None:
    """moto in process does not lock; see ``tickwork_local.atomic``."""
    serialise_dynamodb(client.meta.events)
