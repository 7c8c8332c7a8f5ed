"""The indexer: a batch of run changes (from the runs table's change feed) into the tenant-wide run index, one
chunk per tenant and minute of scheduled time for the whole batch (``tickwork.domain.run_index``)."""

from __future__ import annotations

from collections.abc import Iterable

from tickwork.app.ports import Metrics, RunIndex
from tickwork.domain.run_index import IndexEntry, chunk_changes


class Indexer:
    def __init__(self, *, index: RunIndex, metrics: Metrics):
        self.index = index
        self.metrics = metrics

    def index_changes(self, changes: Iterable[tuple[str, IndexEntry]]) -> int:
        """Write the chunks of one batch; returns how many. The same batch again writes the same chunks."""
        chunks = chunk_changes(changes)
        if chunks:
            self.index.write(chunks)
        self.metrics.count("RunIndexChunks", len(chunks))
        return len(chunks)
