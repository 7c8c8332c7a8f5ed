"""Shared pieces of the benchmarks: AWS call counting, CPU accounting that leaves AWS calls out, percentiles
and markdown tables."""

from __future__ import annotations

import cProfile
import math
import os
import platform
import pstats
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), inclusive method; the only value of a single-value list."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    return (
        f"{os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


class CallCounter:
    """Counts AWS requests by ``service.Operation`` with botocore event hooks, the items each DynamoDB
    request writes or reads by table (a transaction's items twice, as DynamoDB bills them), and the
    ScannedCount of queries. moto's own ConsumedCapacity figures ignore item sizes, so capacity units are
    computed from these counts and measured item sizes (:meth:`capacity_units`)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.scanned: Counter[str] = Counter()
        self.writes: defaultdict[str, float] = defaultdict(float)
        self.reads: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("provide-client-params.*.*", self._params)
        events.register("after-call.dynamodb.*", self._after_dynamodb)

    def reset(self) -> None:
        with self._lock:
            for counter in (self.calls, self.scanned, self.writes, self.reads):
                counter.clear()

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        with self._lock:
            self.calls[f"{service}.{model.name}"] += 1
            if service != "dynamodb":
                return
            table = params.get("TableName", "")
            if model.name in ("PutItem", "UpdateItem", "DeleteItem"):
                self.writes[table] += 1
            elif model.name == "GetItem":
                self.reads[table] += 1 if params.get("ConsistentRead") else 0.5
            elif model.name == "TransactWriteItems":
                for entry in params.get("TransactItems", []):
                    action = next(iter(entry.values()))
                    self.writes[action["TableName"]] += 2
            elif model.name == "BatchWriteItem":
                for name, requests in params.get("RequestItems", {}).items():
                    self.writes[name] += len(requests)

    def _after_dynamodb(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if "ScannedCount" in parsed:
            with self._lock:
                self.scanned[model.name] += int(parsed["ScannedCount"])

    def total(self, prefix: str = "") -> int:
        return sum(count for name, count in self.calls.items() if name.startswith(prefix))

    def capacity_units(self, item_bytes: dict[str, int]) -> tuple[float, float]:
        """(WRU, RRU) of the counted requests, each table's items taken at ``item_bytes[table]``."""
        write = sum(
            weight * max(1, math.ceil(item_bytes.get(t, 0) / 1024)) for t, weight in self.writes.items()
        )
        read = sum(
            weight * max(1, math.ceil(item_bytes.get(t, 0) / 4096)) for t, weight in self.reads.items()
        )
        return float(write), float(read)


class AwsClock:
    """Wraps clients' ``_make_api_call`` to keep the CPU spent inside AWS calls (botocore, and moto when it
    runs in process) apart: :meth:`own_thread_time` is a per-thread CPU clock that stands still during
    them, used as cProfile's timer, and :attr:`process_seconds` adds them up across threads."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.process_seconds = 0.0

    def wrap(self, client: Any) -> None:
        original: Callable[..., Any] = client._make_api_call
        clock = self

        def timed(operation: str, params: dict[str, Any]) -> Any:
            local = clock._local
            if getattr(local, "frozen", None) is not None:  # a call inside a call: already frozen
                return original(operation, params)
            started = time.thread_time()
            local.frozen = started - getattr(local, "excluded", 0.0)
            try:
                return original(operation, params)
            finally:
                spent = time.thread_time() - started
                local.excluded = getattr(local, "excluded", 0.0) + spent
                local.frozen = None
                with clock._lock:
                    clock.process_seconds += spent

        client._make_api_call = timed

    def own_thread_time(self) -> float:
        frozen: float | None = getattr(self._local, "frozen", None)
        if frozen is not None:
            return frozen
        return time.thread_time() - getattr(self._local, "excluded", 0.0)


@contextmanager
def own_cpu_profile(clock: AwsClock) -> Iterator[cProfile.Profile]:
    """cProfile of the calling thread with AWS calls costing nothing."""
    profile = cProfile.Profile(clock.own_thread_time)
    profile.enable()
    try:
        yield profile
    finally:
        profile.disable()


def short_path(filename: str) -> str:
    for marker in ("site-packages/", "python/tickwork/", "/functions/", "/lib/python"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return ("tickwork/" + tail) if marker == "python/tickwork/" else tail
    return filename


def top_functions(profile: cProfile.Profile, count: int, *, divide_by: int = 1) -> list[tuple[str, str, str]]:
    """(function, own ms per unit, cumulative ms per unit) of the ``count`` functions with most own time."""
    stats = pstats.Stats(profile)
    entries = stats.stats  # type: ignore[attr-defined]
    ranked = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:count]
    rows = []
    for (filename, line, name), (_, _, own, cumulative, _) in ranked:
        where = f"{short_path(filename)}:{line}" if line else filename
        rows.append(
            (f"`{name}` ({where})", f"{own * 1000 / divide_by:.3f}", f"{cumulative * 1000 / divide_by:.3f}")
        )
    return rows


def profile_total(profile: cProfile.Profile) -> float:
    stats = pstats.Stats(profile)
    return float(stats.total_tt)  # type: ignore[attr-defined]
