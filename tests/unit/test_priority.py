"""Priorities as time offsets: the order a backlog is served in, and the bound on how much longer a run
waits than it would without priorities."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from datetime import timedelta

import pytest
from tickwork.domain.priority import AGING_BOUND, PRIORITIES, Priority, message_priority, offset_ms, order_key


def test_offsets_spread_over_the_bound_high_first() -> None:
    assert [offset_ms(priority) for priority in PRIORITIES] == [0, 150_000, 300_000]
    assert offset_ms("low", timedelta(seconds=60)) == 60_000


def test_a_normal_run_carries_no_priority_in_its_message() -> None:
    assert [message_priority(priority) for priority in PRIORITIES] == ["high", None, "low"]


@dataclass(frozen=True)
class Due:
    index: int
    due_ms: int
    priority: Priority


def starts(runs: list[Due], service_ms: int, *, keyed: bool) -> dict[int, int]:
    """When each run starts on one server taking ``service_ms`` a run, always busy while a run is due:
    the due run with the lowest order key first (``keyed``), or the earliest due (no priorities)."""
    pending = sorted(runs, key=lambda run: run.due_ms)
    ready: list[tuple[int, int, int]] = []
    started: dict[int, int] = {}
    now, position = 0, 0
    while len(started) < len(runs):
        while position < len(pending) and pending[position].due_ms <= now:
            run = pending[position]
            key = order_key(run.priority, run.due_ms) if keyed else run.due_ms
            heapq.heappush(ready, (key, run.due_ms, run.index))
            position += 1
        if not ready:
            now = pending[position].due_ms
            continue
        _, _, index = heapq.heappop(ready)
        started[index] = now
        now += service_ms
    return started


def test_a_high_run_due_behind_a_backlog_of_2000_low_runs_starts_at_once() -> None:
    # Given 2,000 low runs due at 0 on a server of 10 runs a second, and a high run due at 60 s
    runs = [Due(index, 0, "low") for index in range(2000)] + [Due(2000, 60_000, "high")]

    # When served by order key
    keyed = starts(runs, 100, keyed=True)

    # Then the high run starts within a run's service of its time; without priorities it would wait 140 s
    assert keyed[2000] - 60_000 <= 100
    assert starts(runs, 100, keyed=False)[2000] - 60_000 >= 139_000
    # And every low run starts, none later than a run's service behind its place without priorities
    plain = starts(runs, 100, keyed=False)
    assert max(keyed[index] - plain[index] for index in range(2000)) <= 100


@pytest.mark.parametrize("seed", range(20))
def test_no_run_waits_longer_than_its_offset_more_than_without_priorities(seed: int) -> None:
    """A backlog served no slower than runs come due: each run's start under priorities is at most its
    offset over the high runs' (the bound for low, half of it for normal) later than without priorities."""
    rng = random.Random(seed)
    runs = [Due(index, 0, rng.choice(PRIORITIES)) for index in range(rng.randrange(100, 600))]
    # then runs come due at under the server's pace: 10 a second served, at most ~8 a second arriving
    at = 0
    for index in range(len(runs), len(runs) + 3000):
        at += rng.randrange(50, 200)
        runs.append(Due(index, at, rng.choice(PRIORITIES)))
    keyed = starts(runs, 100, keyed=True)
    plain = starts(runs, 100, keyed=False)
    for run in runs:
        # a run's service of slack: a run already started is never interrupted
        assert keyed[run.index] - plain[run.index] <= offset_ms(run.priority) + 100, run
    assert int(AGING_BOUND.total_seconds() * 1000) == offset_ms("low")
