"""The tenant-wide run index: run summaries in chunks, one chunk per tenant and minute for many runs at once.

The runs table keeps a partition per job, so a tenant's runs across its jobs have no order of their own. A
change feed of that table (DynamoDB Streams on AWS, the local stack's own feed) hands the indexer every run as
it is written; the indexer writes the summaries of a whole batch of changes as one chunk per tenant and minute
of scheduled time. A run written several times (RUNNING, then SUCCEEDED) is in several chunks: the summary
with the highest ``version`` (the change's sequence number, rising with each write of an item) is the run's.

Reading is a merge of chunks read newest first by ``newest_ms``, the latest scheduled time a chunk holds:
once every chunk left to read is older than a run, nothing left can change that run or come before it, so
the run can be given out. A page costs the chunks it reads, whatever the tenant's size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tickwork.domain.models import RunStatus, parse_run_id
from tickwork.domain.run_listing import Position, RunFilter
from tickwork.domain.timeutil import to_epoch_ms

MINUTE_MS = 60_000
# Summaries in one chunk at most: about 60 kB compressed at the longest run ids, far under an item's 400 kB.
MAX_CHUNK_ENTRIES = 2000


@dataclass(frozen=True)
class IndexEntry:
    """What the index knows of one run as one write left it."""

    run_id: str
    scheduled_ms: int
    status: RunStatus
    lag_ms: int | None
    version: int

    @property
    def position(self) -> Position:
        return Position(self.scheduled_ms, self.run_id)

    @property
    def job_id(self) -> str:
        key = parse_run_id(self.run_id)
        return key.job_id if key is not None else self.run_id.split(":", 1)[0]


@dataclass(frozen=True)
class IndexChunk:
    """Summaries of one tenant's runs scheduled in one minute, newest first."""

    tenant_id: str
    chunk_id: str
    entries: tuple[IndexEntry, ...]

    @property
    def newest_ms(self) -> int:
        return self.entries[0].scheduled_ms

    @property
    def minute(self) -> int:
        return self.newest_ms // MINUTE_MS


@dataclass(frozen=True)
class IndexSlice:
    """Runs read from the index, newest first, and where reading stopped short (None: nothing is left).
    Every run not read is below ``stopped_at``."""

    entries: list[IndexEntry]
    stopped_at: Position | None = None


def chunk_changes(
    changes: Iterable[tuple[str, IndexEntry]], *, max_entries: int = MAX_CHUNK_ENTRIES
) -> list[IndexChunk]:
    """The chunks of one batch of changes: per tenant and minute, each run's latest summary in the batch.
    A chunk's id comes from what it holds, so the same batch delivered again writes the same items."""
    latest: dict[tuple[str, int], dict[str, IndexEntry]] = {}
    for tenant_id, entry in changes:
        group = latest.setdefault((tenant_id, entry.scheduled_ms // MINUTE_MS), {})
        known = group.get(entry.run_id)
        if known is None or entry.version > known.version:
            group[entry.run_id] = entry
    chunks = []
    for (tenant_id, _), group in sorted(latest.items()):
        ordered = sorted(group.values(), key=lambda entry: entry.position, reverse=True)
        for start in range(0, len(ordered), max_entries):
            part = tuple(ordered[start : start + max_entries])
            chunks.append(IndexChunk(tenant_id, _chunk_id(tenant_id, part), part))
    return chunks


def _chunk_id(tenant_id: str, entries: tuple[IndexEntry, ...]) -> str:
    digest = hashlib.blake2b(tenant_id.encode(), digest_size=12)
    for entry in entries:
        digest.update(f"\n{entry.run_id}\t{entry.version}".encode())
    return digest.hexdigest()


def read_index(
    chunks: Iterable[IndexChunk],
    only: RunFilter,
    *,
    before: Position | None,
    want: int,
    budget: int,
) -> IndexSlice:
    """Up to ``want`` runs in ``only`` below ``before``, newest first, from ``chunks`` given newest first (by
    ``newest_ms``), reading at most about ``budget`` summaries. ``only.job_id`` is not looked at here."""
    if only.until is not None:
        until = Position(to_epoch_ms(only.until), "")
        before = until if before is None or until < before else before
    since_ms = to_epoch_ms(only.since) if only.since is not None else None
    unread: Iterator[IndexChunk] = iter(chunks)
    upcoming = next(unread, None)
    pending: dict[str, IndexEntry] = {}
    found: list[IndexEntry] = []
    read = 0
    while True:
        # Every chunk left holds runs scheduled at or before ``bound``: the runs after it are final.
        bound = upcoming.newest_ms if upcoming is not None else -1
        if since_ms is not None and bound < since_ms:
            bound = -1  # what is left is older than the filter reaches
        final = sorted(
            (entry for entry in pending.values() if entry.scheduled_ms > bound),
            key=lambda entry: entry.position,
            reverse=True,
        )
        for entry in final:
            del pending[entry.run_id]
            if _matches(entry, only, before, since_ms):
                found.append(entry)
                if len(found) >= want:
                    return IndexSlice(found, entry.position)
        if bound < 0:
            return IndexSlice(found)
        if read >= budget:
            return IndexSlice(found, Position(bound + 1, ""))
        assert upcoming is not None
        for entry in upcoming.entries:
            known = pending.get(entry.run_id)
            if known is None or entry.version > known.version:
                pending[entry.run_id] = entry
        read += len(upcoming.entries)
        upcoming = next(unread, None)


def chunks_below(before: Position | None, only: RunFilter) -> int | None:
    """The newest scheduled time (exclusive, epoch ms) a chunk may hold to have runs for a page below
    ``before`` within ``only``: a chunk holds one minute, so the end of ``before``'s minute."""
    bounds = []
    if before is not None:
        bounds.append(before.scheduled_ms)
    if only.until is not None:
        bounds.append(to_epoch_ms(only.until))
    if not bounds:
        return None
    return (min(bounds) // MINUTE_MS + 1) * MINUTE_MS


def _matches(entry: IndexEntry, only: RunFilter, before: Position | None, since_ms: int | None) -> bool:
    return (
        (before is None or entry.position < before)
        and (since_ms is None or entry.scheduled_ms >= since_ms)
        and (only.statuses is None or entry.status in only.statuses)
    )


__all__ = [
    "MAX_CHUNK_ENTRIES",
    "IndexChunk",
    "IndexEntry",
    "IndexSlice",
    "chunk_changes",
    "chunks_below",
    "read_index",
]
