"""The run index's chunks and their merge (``tickwork.domain.run_index``), and the chunk items' encoding."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.adapters.run_index import decode_entries, encode_entries, entry_from_image
from tickwork.domain.models import RunStatus
from tickwork.domain.run_index import (
    MINUTE_MS,
    IndexChunk,
    IndexEntry,
    chunk_changes,
    chunks_below,
    read_index,
)
from tickwork.domain.run_listing import Position, RunFilter

BASE_MS = 1_900_000_000_000 - 1_900_000_000_000 % MINUTE_MS
OK, DEAD, RUNNING = RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.RUNNING


def entry(job: str, second: int, status: RunStatus = OK, version: int = 1, lag: int | None = 5) -> IndexEntry:
    at = BASE_MS + second * 1000
    return IndexEntry(f"{job}:{at}", at, status, lag, version)


def newest_first(chunks: list[IndexChunk]) -> list[IndexChunk]:
    """As the table's sort key gives them: newest run first, then chunk id."""
    return sorted(chunks, key=lambda chunk: (chunk.newest_ms, chunk.chunk_id), reverse=True)


def every_page(
    chunks: list[IndexChunk], only: RunFilter, limit: int, budget: int = 10_000
) -> list[IndexEntry]:
    listed: list[IndexEntry] = []
    before = None
    while True:
        readable = [
            c
            for c in newest_first(chunks)
            if (bound := chunks_below(before, only)) is None or c.newest_ms < bound
        ]
        found = read_index(readable, only, before=before, want=limit + 1, budget=budget)
        page = found.entries[:limit]
        listed += page
        before = page[-1].position if len(found.entries) > limit else found.stopped_at
        if before is None:
            return listed


def batches_of(changes: list[tuple[str, IndexEntry]], size: int) -> list[IndexChunk]:
    chunks: list[IndexChunk] = []
    for start in range(0, len(changes), size):
        chunks += chunk_changes(changes[start : start + size])
    return chunks


def test_a_batch_is_one_chunk_per_tenant_and_minute_newest_first() -> None:
    changes = [("acme", entry(f"j{i}", i * 20)) for i in range(7)] + [("globex", entry("g", 10))]
    chunks = chunk_changes(changes)
    assert [(c.tenant_id, c.minute, len(c.entries)) for c in chunks] == [
        ("acme", BASE_MS // MINUTE_MS, 3),
        ("acme", BASE_MS // MINUTE_MS + 1, 3),
        ("acme", BASE_MS // MINUTE_MS + 2, 1),
        ("globex", BASE_MS // MINUTE_MS, 1),
    ]
    for chunk in chunks:
        assert [e.position for e in chunk.entries] == sorted(
            (e.position for e in chunk.entries), reverse=True
        )


def test_a_run_written_twice_in_a_batch_keeps_its_latest_write_and_ids_are_stable() -> None:
    changes = [("acme", entry("a", 1, RUNNING, version=1)), ("acme", entry("a", 1, OK, version=2))]
    (chunk,) = chunk_changes(changes)
    assert [(e.status, e.version) for e in chunk.entries] == [(OK, 2)]
    assert chunk_changes(list(reversed(changes)))[0].entries == chunk.entries
    assert chunk_changes(changes)[0].chunk_id == chunk.chunk_id  # the same batch again: the same item
    assert chunk_changes(changes[:1])[0].chunk_id != chunk.chunk_id


def test_a_large_batch_is_split_into_chunks_of_bounded_size() -> None:
    changes = [("acme", entry(f"j{i}", 0)) for i in range(25)]
    chunks = chunk_changes(changes, max_entries=10)
    assert [len(c.entries) for c in chunks] == [10, 10, 5]
    assert len({c.chunk_id for c in chunks}) == 3


@pytest.mark.parametrize("batch", [1, 7, 1000])
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_pages_list_each_run_once_newest_first_with_its_latest_status(batch: int, limit: int) -> None:
    """Runs written RUNNING then ended, in batches of any size: every run once, in order, as last written."""
    rng = random.Random(batch * 100 + limit)
    changes: list[tuple[str, IndexEntry]] = []
    final: dict[str, IndexEntry] = {}
    version = 0
    for index in range(60):
        second = rng.randrange(0, 300)
        for status in (RUNNING, rng.choice([OK, DEAD])):
            version += 1
            written = entry(f"j{index}", second, status, version)
            changes.append(("acme", written))
            final[written.run_id] = written
    rng.shuffle(changes)  # different runs' writes interleave in any order; one run's versions still rise
    chunks = batches_of(changes, batch)
    listed = every_page(chunks, RunFilter(), limit)
    assert listed == sorted(final.values(), key=lambda e: e.position, reverse=True)
    dead = every_page(chunks, RunFilter(statuses=frozenset({DEAD})), limit)
    assert dead == [e for e in listed if e.status is DEAD]


def test_since_and_until_bound_the_list() -> None:
    changes = [("acme", entry(f"j{i}", i * 30)) for i in range(20)]  # every 30 s over 10 minutes
    chunks = chunk_changes(changes)
    since = datetime.fromtimestamp((BASE_MS + 120_000) / 1000, UTC)
    only = RunFilter(since=since, until=since + timedelta(minutes=3))
    listed = every_page(chunks, only, 2)
    assert [e.scheduled_ms for e in listed] == [BASE_MS + s * 1000 for s in (270, 240, 210, 180, 150, 120)]


def test_a_page_reads_what_it_needs_and_a_budget_leaves_a_cursor_that_goes_on() -> None:
    changes = [("acme", entry(f"j{i}", i)) for i in range(600)]  # ten minutes of one run a second
    chunks = newest_first(chunk_changes(changes))
    read = []

    def counted() -> object:
        for chunk in chunks:
            read.append(chunk)
            yield chunk

    page = read_index(counted(), RunFilter(), before=None, want=11, budget=10_000)  # type: ignore[arg-type]
    assert len(page.entries) == 11 and len(read) == 2  # the newest minute, and the next to know it is older
    rare = RunFilter(statuses=frozenset({RUNNING}))
    # Two minutes read (120 summaries) pass the budget: what is above the third minute's newest run is done
    stopped = read_index(chunks, rare, before=None, want=11, budget=100)
    assert stopped.entries == [] and stopped.stopped_at == Position(BASE_MS + 479_001, "")
    assert every_page(chunks, rare, 10, budget=100) == []


def test_chunks_below_ends_with_the_cursors_minute() -> None:
    before = Position(BASE_MS + 61_500, "x")
    assert chunks_below(before, RunFilter()) == BASE_MS + 120_000
    assert chunks_below(None, RunFilter()) is None
    until = datetime.fromtimestamp((BASE_MS + 10_000) / 1000, UTC)
    assert chunks_below(before, RunFilter(until=until)) == BASE_MS + 60_000


def test_entries_survive_encoding() -> None:
    entries = (entry("01JOB", 3, OK, 12, lag=None), entry("01JOB:m:abc", 2, DEAD, 11, lag=40))
    assert decode_entries(encode_entries(entries)) == entries


def test_a_run_items_image_is_a_summary_and_other_items_are_none() -> None:
    image = {
        "pk": {"S": "acme/01JOB"},
        "sk": {"S": f"{BASE_MS:013d}"},
        "run_id": {"S": f"01JOB:{BASE_MS}"},
        "tenant_id": {"S": "acme"},
        "status": {"S": "SUCCEEDED"},
        "lag_ms": {"N": "42"},
    }
    assert entry_from_image(image, 7) == ("acme", IndexEntry(f"01JOB:{BASE_MS}", BASE_MS, OK, 42, 7))
    pointer = {"pk": {"S": "acme/01JOB"}, "sk": {"S": "m#abc"}, "run_sk": {"S": "123"}}
    assert entry_from_image(pointer, 8) is None
    assert entry_from_image({**image, "status": {"S": "NOT_A_STATUS"}}, 9) is None
