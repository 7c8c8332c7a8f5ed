"""The local stack's write-ahead journal: every DynamoDB write and every queued fire, on disk before its call
returns.

moto keeps its tables in memory. With a data directory, the stack appends the state each successful write
left behind (the items after it, or their absence) to ``journal.jsonl`` and fsyncs the file before the
client call returns, so before the API answers. A restart loads the last snapshot and applies the journal
over it, in order; states, not operations, so applying a line twice changes nothing. Compaction writes a
new snapshot and empties the journal, while no write is in progress.

tickwork's own queues are journaled the same way: a message sent is on disk (its id, body and the time it
shows) before the send returns, so a fire the planner sent survives a crash exactly as sent, and the job's
cursor, written after the send, never runs ahead of what the queue holds. Deletes and receive counts are
appended without waiting for a sync: a delete lost in a crash only delivers its message again, which the run
item absorbs, and a lost receive only counts one less towards the dead-letter queue. So are the writes of a
tenant's API request counter, which lives for a one-second window: one lost in a crash lets that second's
requests be counted again, and every API request would otherwise wait for a second fsync.

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

from tickwork_local.atomic import QUEUE_WRITES
from tickwork_local.datadir import private_directory, private_open

JOURNAL_FILE = "journal.jsonl"
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
QUEUE_CALLS = (*QUEUE_WRITES, "ReceiveMessage")
QUEUES = frozenset(queue.default_name for queue in tables.ALL_QUEUES)
# Receipt handles remembered from receives, to name the message a delete removes; old ones are forgotten.
MAX_HANDLES = 100_000

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


def is_short_lived(table: str, key: dict[str, Any]) -> bool:
    """An API request counter: a write to it need not wait for the disk (see the module's notes)."""
    if table != tables.TENANTS.default_name:
        return False
    partition = key.get(tables.TENANTS_PK, {}).get("S", "")
    return isinstance(partition, str) and partition.startswith(tables.RATE_LIMIT_PK_PREFIX)


ItemReader = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]
MessageReader = Callable[[str, str], "dict[str, Any] | None"]


def queue_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


class Journal:
    """Appends after-images of the items each successful write touched; ``read`` gives an item as stored now
    (wire format), or None."""

    def __init__(
        self,
        directory: Path,
        read: ItemReader,
        *,
        read_message: MessageReader | None = None,
        sync: Callable[[int], None] = os.fsync,
    ):
        private_directory(directory)
        self.path = directory / JOURNAL_FILE
        self.read = read
        self.read_message = read_message
        self._handles: dict[str, tuple[str, str]] = {}  # receipt handle -> (queue, message id)
        self.sync = sync
        self.lines = 0
        self._file = os.fdopen(private_open(self.path, os.O_WRONLY | os.O_APPEND), "ab")  # 0600
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
        if self.read_message is not None:
            events.register("provide-client-params.sqs", self._remember)
            events.register_first("after-call.sqs", self._record_queue)
            events.register_last("after-call.sqs", self._await_sync)

    def _remember(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES or model.name in QUEUE_CALLS:
            self._pending.request = (model.name, params)

    def _record(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        request = getattr(self._pending, "request", None)
        self._pending.request = None
        if request is None or model.name != request[0] or "Error" in parsed:
            return
        operation, params = request
        written = [(table, key) for table, key, kind in written_keys(operation, params) if kind != "check"]
        states = [{"table": table, "key": key, "item": self.read(table, key)} for table, key in written]
        self._append(states, wait=not all(is_short_lived(table, key) for table, key in written))

    def _append(self, states: list[dict[str, Any]], *, wait: bool) -> None:
        if not states:
            return
        payload = b"".join(json.dumps(state, separators=(",", ":")).encode() + b"\n" for state in states)
        with self._lock:
            self._file.write(payload)
            self._appended += 1
            self.lines += len(states)
            if wait:
                self._pending.appended = self._appended

    def _record_queue(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        request = getattr(self._pending, "request", None)
        self._pending.request = None
        if request is None or model.name != request[0] or "Error" in parsed or self.read_message is None:
            return
        operation, params = request
        queue = queue_name(params["QueueUrl"])
        if queue not in QUEUES:
            return
        if operation in ("SendMessage", "SendMessageBatch"):
            sent = (
                [parsed["MessageId"]]
                if operation == "SendMessage"
                else [entry["MessageId"] for entry in parsed.get("Successful", [])]
            )
            states = [
                {"queue": queue, "message": self.read_message(queue, message_id)} for message_id in sent
            ]
            self._append([state for state in states if state["message"] is not None], wait=True)
        elif operation == "ReceiveMessage":
            received = parsed.get("Messages", [])
            for message in received:
                self._handles[message["ReceiptHandle"]] = (queue, message["MessageId"])
            while len(self._handles) > MAX_HANDLES:
                del self._handles[next(iter(self._handles))]
            self._append(
                [{"queue": queue, "received": message["MessageId"]} for message in received], wait=False
            )
        else:
            handles = (
                [params["ReceiptHandle"]]
                if operation == "DeleteMessage"
                else [
                    entry["ReceiptHandle"]
                    for entry in params.get("Entries", [])
                    if entry["Id"] in {done["Id"] for done in parsed.get("Successful", [])}
                ]
            )
            deleted = [self._handles.pop(handle, None) for handle in handles]
            self._append(
                [{"queue": where[0], "deleted": where[1]} for where in deleted if where is not None],
                wait=False,
            )

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
