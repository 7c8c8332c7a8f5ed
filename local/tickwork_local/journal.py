"""The local stack's write-ahead journal: every DynamoDB write, on disk before its call returns.

moto keeps its tables in memory. With a data directory, the stack appends the state each successful write
left behind (the items after it, or their absence) to ``journal.jsonl`` and fsyncs the file before the
client call returns, so before the API answers. A restart loads the last snapshot and applies the journal
over it, in order; states, not operations, so applying a line twice changes nothing. Compaction writes a
new snapshot and empties the journal, while no write is in progress.

The hooks sit on the process's boto3 session, like the lock that makes moto's writes atomic
(``tickwork_local.atomic``). A write's states are appended inside that lock, so the journal's order is the
order the writes took effect; the fsync waits until the lock is released, and one fsync covers every write
appended before it (group commit), so writers in several threads share their syncs. The code under test is
the same as on AWS: only the session's event hooks are local.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tickwork import tables

JOURNAL_FILE = "journal.jsonl"
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")

_BY_NAME = {definition.default_name: definition for definition in tables.ALL_TABLES}


def key_names(table: str) -> list[str]:
    definition = _BY_NAME[table]
    return [a.name for a in (definition.partition_key, definition.sort_key) if a is not None]


def written_keys(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(table, key, kind) of every item a write request touches; kind is ``check`` for a transaction's
    condition checks, which write nothing."""

    def key_of(table: str, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in key_names(table)}

    if operation == "PutItem":
        return [(params["TableName"], key_of(params["TableName"], params["Item"]), "write")]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["TableName"], params["Key"], "write")]
    if operation == "TransactWriteItems":
        found = []
        for entry in params["TransactItems"]:
            ((kind, body),) = entry.items()
            key = body["Key"] if "Key" in body else key_of(body["TableName"], body["Item"])
            found.append((body["TableName"], key, "check" if kind == "ConditionCheck" else "write"))
        return found
    if operation == "BatchWriteItem":
        found = []
        for table, requests in params["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    found.append((table, key_of(table, request["PutRequest"]["Item"]), "write"))
                else:
                    found.append((table, request["DeleteRequest"]["Key"], "write"))
        return found
    return []


ItemReader = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]


class Journal:
    """Appends after-images of the items each successful write touched; ``read`` gives an item as stored now
    (wire format), or None."""

    def __init__(self, directory: Path, read: ItemReader, *, sync: Callable[[int], None] = os.fsync):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / JOURNAL_FILE
        self.read = read
        self.sync = sync
        self.lines = 0
        self._file = self.path.open("ab")
        self._pending = threading.local()
        self._lock = threading.Lock()  # the file and the count of appended writes
        self._appended = 0
        self._synced = 0
        self._syncing = False
        self._synced_changed = threading.Condition()

    def attach(self, events: Any) -> None:
        """Register on a botocore session's events. The append is the first after-call hook, so it runs while
        the atomicity lock is still held; the wait for the fsync is the last, after the lock's release."""
        events.register("provide-client-params.dynamodb", self._remember)
        events.register_first("after-call.dynamodb", self._record)
        events.register_last("after-call.dynamodb", self._await_sync)

    def _remember(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES:
            self._pending.request = (model.name, params)

    def _record(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        request = getattr(self._pending, "request", None)
        self._pending.request = None
        if request is None or model.name != request[0] or "Error" in parsed:
            return
        operation, params = request
        states = [
            {"table": table, "key": key, "item": self.read(table, key)}
            for table, key, kind in written_keys(operation, params)
            if kind != "check"
        ]
        if not states:
            return
        payload = b"".join(json.dumps(state, separators=(",", ":")).encode() + b"\n" for state in states)
        with self._lock:
            self._file.write(payload)
            self._appended += 1
            self.lines += len(states)
            self._pending.appended = self._appended

    def _await_sync(self, **_: Any) -> None:
        """Return once this thread's last write is on disk: one thread syncs for everyone waiting."""
        mine = getattr(self._pending, "appended", 0)
        self._pending.appended = 0
        if mine:
            self.wait_synced(mine)

    def wait_synced(self, appended: int) -> None:
        with self._synced_changed:
            while self._synced < appended:
                if self._syncing:
                    self._synced_changed.wait()
                    continue
                self._syncing = True
                self._synced_changed.release()
                try:
                    with self._lock:
                        self._file.flush()
                        covered = self._appended
                    self.sync(self._file.fileno())
                finally:
                    self._synced_changed.acquire()
                    self._syncing = False
                    self._synced_changed.notify_all()
                self._synced = max(self._synced, covered)

    def truncate(self) -> None:
        """Empty the journal (after a snapshot holds everything in it)."""
        with self._lock:
            self._file.truncate(0)
            self._file.flush()
            self.sync(self._file.fileno())
            self.lines = 0
            covered = self._appended
        with self._synced_changed:
            self._synced = max(self._synced, covered)
            self._synced_changed.notify_all()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def replay(directory: Path) -> Iterator[dict[str, Any]]:
    """The journal's states in order. A last line cut short by a crash mid-write is left out: its write had
    not returned, so nobody was told it happened."""
    path = directory / JOURNAL_FILE
    if not path.exists():
        return
    with path.open("rb") as lines:
        for line in lines:
            if not line.endswith(b"\n"):
                return
            try:
                yield json.loads(line)
            except ValueError:
                return
