"""The tenant-wide run list's merge and cursor (``tickwork.domain.run_listing``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.models import Run, RunStatus
from tickwork.domain.run_listing import (
    Position,
    RunFilter,
    Slice,
    decode_cursor,
    encode_cursor,
    merge,
    position_of,
)
from tickwork.errors import InvalidInput

BASE = datetime(2030, 1, 1, tzinfo=UTC)


def run(job: str, minute: int) -> Run:
    fire = BASE + timedelta(minutes=minute)
    return Run(
        run_id=f"{job}:{int(fire.timestamp() * 1000)}",
        job_id=job,
        tenant_id="acme",
        scheduled_for=fire,
        status=RunStatus.SUCCEEDED,
        created_at=fire,
    )


def read(runs: list[Run], *, before: Position | None, want: int, budget: int) -> Slice:
    """A source as the stores read one: newest first, stopping at ``want`` matches or ``budget`` items."""
    kept = (r for r in runs if before is None or position_of(r) < before)
    below = sorted(kept, key=position_of, reverse=True)
    found: list[Run] = []
    for count, candidate in enumerate(below, start=1):
        found.append(candidate)
        if (len(found) >= want or count >= budget) and count < len(below):
            return Slice(found, position_of(candidate))
    return Slice(found)


def test_slices_merge_newest_first_and_the_cursor_continues_below_the_page() -> None:
    a, b = [run("a", m) for m in (1, 4, 6)], [run("b", m) for m in (2, 3, 5)]
    page, after = merge([Slice(a[::-1]), Slice(b[::-1])], before=None, limit=4)
    assert [position_of(r).scheduled_ms for r in page] == sorted(
        (position_of(r).scheduled_ms for r in a + b), reverse=True
    )[:4]
    assert after == position_of(page[-1])
    rest, end = merge([Slice(a[::-1]), Slice(b[::-1])], before=after, limit=4)
    assert [r.run_id for r in rest] == [b[0].run_id, a[0].run_id] and end is None


def test_a_source_that_stopped_early_ends_the_page_where_it_stopped() -> None:
    # a stopped at minute 8 with more below it; b had everything: b's minute-7 run must wait for the next page
    a = Slice([run("a", 9), run("a", 8)], stopped_at=position_of(run("a", 8)))
    b = Slice([run("b", 7)])
    page, after = merge([a, b], before=None, limit=10)
    assert [r.run_id for r in page] == [run("a", 9).run_id, run("a", 8).run_id]
    assert after == position_of(run("a", 8))


@pytest.mark.parametrize("seed", range(20))
def test_paging_under_any_budget_lists_every_run_once_in_order(seed: int) -> None:
    rng = random.Random(seed)
    jobs = {job: [run(job, m) for m in rng.sample(range(200), rng.randint(0, 30))] for job in "abcde"}
    limit, budget = rng.randint(1, 7), rng.randint(1, 9)
    listed: list[Run] = []
    before: Position | None = None
    for _ in range(1000):
        want = limit + 1
        slices = [read(runs, before=before, want=want, budget=max(want, budget)) for runs in jobs.values()]
        page, before = merge(slices, before=before, limit=limit)
        assert len(page) <= limit
        listed += page
        if before is None:
            break
    everything = sorted((r for runs in jobs.values() for r in runs), key=position_of, reverse=True)
    assert [r.run_id for r in listed] == [r.run_id for r in everything]


def test_a_cursor_round_trips_and_anything_else_is_invalid_cursor() -> None:
    position = Position(1_893_456_000_000, "01J:1893456000000")
    assert decode_cursor(encode_cursor(position)) == position
    for bad in ["", "%%%", "bnVsbA", "eyJiZWZvcmUiOlsiMSIsIngiXX0", "eyJiZWZvcmUiOlsxLCJ4IiwzXX0"]:
        with pytest.raises(InvalidInput) as refused:
            decode_cursor(bad)
        assert refused.value.field == "cursor"


def test_since_must_come_before_until() -> None:
    with pytest.raises(InvalidInput) as refused:
        RunFilter(since=BASE, until=BASE)
    assert refused.value.field == "since"
