"""Shared pieces of the benchmarks: CPU accounting that leaves AWS calls out, profiles, percentiles and
markdown tables. Requests and capacity units are counted by ``bench._cost_meter``."""

from __future__ import annotations

import cProfile
import os
import platform
import pstats
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
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


# --- generated blocks of a document -----------------------------------------------------------------------
def block_markers(prefix: str, name: str) -> tuple[str, str]:
    return f"<!-- {prefix}:{name}:start -->", f"<!-- {prefix}:{name}:end -->"


def read_blocks(text: str, prefix: str, names: Iterable[str]) -> dict[str, str]:
    """The generated blocks found in ``text``, by name."""
    found = {}
    for name in names:
        start, end = block_markers(prefix, name)
        match = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
        if match:
            found[name] = match.group(1)
    return found


def write_blocks(path: Path, prefix: str, blocks: Mapping[str, str]) -> None:
    """Replace each generated block of the document at ``path``; its markers must be there already."""
    text = path.read_text()
    for name, body in blocks.items():
        start, end = block_markers(prefix, name)
        if start not in text:
            raise SystemExit(f"{path} has no {start} marker")
        head, rest = text.split(start, 1)
        tail = rest.split(end, 1)[1]
        text = f"{head}{start}\n{body}\n{end}{tail}"
    path.write_text(text)
