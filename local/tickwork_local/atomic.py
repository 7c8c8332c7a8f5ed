"""DynamoDB applies each request atomically; moto (in process or as a server) does not lock, so two
conditional writes racing in threads can both pass. Serialising the process's DynamoDB calls restores the
guarantee tickwork relies on (and avoids moto's own races between threads)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_LOCK = threading.RLock()


def _acquire(**_: Any) -> None:
    _LOCK.acquire()


def _release(**_: Any) -> None:
    _LOCK.release()


@contextmanager
def holding_writes() -> Iterator[None]:
    """No DynamoDB call of another thread runs while the block does (the lock is re-entrant)."""
    with _LOCK:
        yield


def serialise_dynamodb(events: Any) -> None:
    """Register on a client's ``meta.events``, or on a botocore session's events for every client it makes."""
    events.register("before-call.dynamodb", _acquire)
    events.register("after-call.dynamodb", _release)
    events.register("after-call-error.dynamodb", _release)


QUEUE_WRITES = ("SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch")


def serialise_queue_writes(events: Any) -> None:
    """Sends and deletes under the same lock, so that the journal's compaction (a snapshot, then an empty
    journal, with the lock held) never falls between a queue's change and its journal line."""
    for operation in QUEUE_WRITES:
        events.register(f"before-call.sqs.{operation}", _acquire)
        events.register(f"after-call.sqs.{operation}", _release)
        events.register(f"after-call-error.sqs.{operation}", _release)
