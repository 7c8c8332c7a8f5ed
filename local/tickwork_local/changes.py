"""The runs table's change feed in the local stack: what DynamoDB Streams and the indexer's event source
mapping do on AWS.

Every successful write to the runs table leaves a stream-shaped record of the item it left behind (its new
image), in the order the writes took effect: the hook sits on the process's boto3 session with the
journal's, inside the lock that makes moto's writes atomic. ``index_loop`` hands the records to the indexer
Lambda's handler in batches, about once a second, and drops them only once the handler returned, as a
mapping advances its position only past a batch that succeeded.

Nothing is lost in a crash: the records not yet indexed are saved in every snapshot, and a restart makes a
record again of each run item the journal replays (the indexer writes a chunk of the same runs twice at
worst; a run's latest summary wins). moto's own stream is left off (``create_table_kwargs(stream=False)``):
it keeps every record for good.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tickwork import tables

from tickwork_local.journal import WRITES, ItemReader, written_keys

RUNS_TABLE = tables.RUNS.default_name
# As the indexer's event source mapping is set on AWS (infra/indexer.py): a batch at most this large, handed
# over once this much time has passed since the first record waiting.
BATCH_SIZE = 1000
WINDOW_SECONDS = 1.0


class ChangeFeed:
    def __init__(self, read: ItemReader, *, clock: Callable[[], float] = time.time):
        self.read = read
        self.clock = clock
        self._records: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._pending = threading.local()
        # Rising across restarts, as a stream's sequence numbers rise over time.
        self._sequence = itertools.count(time.time_ns())
        self.first_waiting: float | None = None

    # --- the hook -----------------------------------------------------------------------------------------
    def attach(self, events: Any) -> None:
        events.register("provide-client-params.dynamodb", self._remember)
        events.register_first("after-call.dynamodb", self._record)

    def _remember(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES:
            self._pending.request = (model.name, params)

    def _record(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        request = getattr(self._pending, "request", None)
        self._pending.request = None
        if request is None or model.name != request[0] or "Error" in parsed:
            return
        operation, params = request
        for table, key, kind in written_keys(operation, params):
            if table == RUNS_TABLE and kind == "write":
                self.add(key, self.read(table, key))

    # --- records ------------------------------------------------------------------------------------------
    def add(self, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        """A record of a write that left ``item`` (None: the item was deleted) at ``key``."""
        now = self.clock()
        record: dict[str, Any] = {
            "eventID": "",
            "eventName": "REMOVE" if item is None else "MODIFY",
            "eventSource": "aws:dynamodb",
            "eventVersion": "1.1",
            "dynamodb": {
                "ApproximateCreationDateTime": int(now),
                "Keys": key,
                "SequenceNumber": str(next(self._sequence)),
                "StreamViewType": tables.RUNS.stream_view,
            },
        }
        record["eventID"] = record["dynamodb"]["SequenceNumber"]
        if item is not None:
            record["dynamodb"]["NewImage"] = item
        with self._lock:
            self._records.append(record)
            if self.first_waiting is None:
                self.first_waiting = now

    def add_item(self, item: dict[str, Any]) -> None:
        """A record of a run item restored from the journal, as if written again now."""
        key = {name: item[name] for name in (tables.RUNS_PK, tables.RUNS_SK) if name in item}
        self.add(key, item)

    def restore(self, records: list[dict[str, Any]]) -> None:
        """Records saved in a snapshot, not yet indexed when it was written."""
        with self._lock:
            self._records.extendleft(reversed(records))
            if records and self.first_waiting is None:
                self.first_waiting = self.clock()

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)

    def ready(self, *, batch_size: int = BATCH_SIZE, window: float = WINDOW_SECONDS) -> list[dict[str, Any]]:
        """The next batch, once it is full or its window has passed; it stays until ``done``."""
        with self._lock:
            waited = self.first_waiting is not None and self.clock() - self.first_waiting >= window
            if not self._records or (len(self._records) < batch_size and not waited):
                return []
            return list(itertools.islice(self._records, batch_size))

    def done(self, count: int) -> None:
        with self._lock:
            for _ in range(min(count, len(self._records))):
                self._records.popleft()
            self.first_waiting = self.clock() if self._records else None


def index_loop(
    feed: ChangeFeed,
    handler: Callable[[dict[str, Any]], Any],
    stop: threading.Event,
    *,
    window: float = WINDOW_SECONDS,
) -> None:
    """Hand the feed's batches to the indexer handler until ``stop``; a batch whose handler failed is handed
    over again (the mapping's retry), never skipped."""
    while not stop.wait(min(0.1, window)):
        flush(feed, handler, window=window)


def flush(
    feed: ChangeFeed, handler: Callable[[dict[str, Any]], Any], *, window: float = WINDOW_SECONDS
) -> int:
    """Index every batch that is ready; returns how many records were indexed."""
    indexed = 0
    while batch := feed.ready(window=window):
        try:
            handler({"Records": batch})
        except Exception:
            logging.getLogger("tickwork").exception("indexing a batch of run changes failed")
            return indexed
        feed.done(len(batch))
        indexed += len(batch)
    return indexed


__all__ = ["ChangeFeed", "flush", "index_loop"]
