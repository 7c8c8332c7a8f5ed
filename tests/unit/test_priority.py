"""Priorities as time offsets: the order a backlog is served in, and the bound on how much longer a run
waits than it would without priorities."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.priority import (
    AGING_BOUND,
    AHEAD_NOTE,
    AHEAD_RENEW,
    PRIORITIES,
    Priority,
    message_priority,
    needs_ahead_note,
    offset_ms,
    order_key,
    yields_to,
)


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


NOW_AT = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("priority", "waited_s", "ahead", "expected"),
    [
        ("low", 0, {"high": 5}, "high"),
        ("low", 299, {"high": 5}, "high"),
        ("low", 300, {"high": 5}, None),  # waited the whole difference: takes the slot
        ("low", 149, {"normal": 5}, "normal"),
        ("low", 150, {"normal": 5}, None),
        ("normal", 100, {"high": 5}, "high"),
        ("normal", 150, {"high": 5}, None),
        ("normal", 0, {"low": 5}, None),  # never to a lower priority
        ("high", 0, {"high": 5, "normal": 5}, None),  # nor to its own
        ("low", 0, {"high": -1}, None),  # a lapsed note
        ("low", 0, {}, None),
    ],
)
def test_a_run_leaves_a_free_slot_to_a_higher_priority_until_it_waited_their_offsets_difference(
    priority: Priority, waited_s: int, ahead: dict[Priority, int], expected: Priority | None
) -> None:
    notes = {other: NOW_AT + timedelta(seconds=seconds) for other, seconds in ahead.items()}
    assert yields_to(priority, timedelta(seconds=waited_s), notes, NOW_AT) == expected


def test_only_priorities_someone_yields_to_are_noted_and_renewed_near_their_end() -> None:
    assert not needs_ahead_note("low", {}, NOW_AT)
    assert needs_ahead_note("high", {}, NOW_AT)
    assert needs_ahead_note("normal", {"high": NOW_AT + AHEAD_NOTE}, NOW_AT)
    assert not needs_ahead_note("high", {"high": NOW_AT + AHEAD_RENEW + timedelta(seconds=1)}, NOW_AT)
    assert needs_ahead_note("high", {"high": NOW_AT + AHEAD_RENEW - timedelta(seconds=1)}, NOW_AT)
