"""moto's SQS without work per queued message on every call.

moto reads the clock twice for every message of a queue each time it lists the visible ones, and builds all
of a queue's attributes (three counts over every message) on each send, and again for each message a receive
hands out (to read the retention period). With the planner's fires waiting in the queue as delayed messages,
a receive of 10 cost 70 ms with 1,000 of them queued, and a send 10 ms. The local stack installs:

- one clock reading per listing or count, in one pass over the messages;
- sends and receives that read the attributes they need and never build the counts;
- a waiting receive that wakes when the next delayed or in-flight message becomes visible, rather than at
  the end of its one-second wait (a fire's message reached the worker up to a second late).

What moto answers is unchanged; only the work done to answer it is, and one thing moto does not model: the
order a standard queue serves its messages in is a fair queue's (SQS fair queues: the message groups with
fewer messages in flight first), as the run queue's messages carry their tenant as ``MessageGroupId``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from itertools import zip_longest
from typing import Any

_installed = False
_no_counts = threading.local()
# The counts one call of a queue's attributes computed, by queue, for the thread that made the call.
_call_counts = threading.local()


def _now_ms() -> float:
    return time.time() * 1000.0


def _counts(queue: Any) -> tuple[int, int, int]:
    """(visible, delayed, not visible), as moto's three properties count them, from one clock reading."""
    now = _now_ms()
    visible = delayed = not_visible = 0
    for message in queue._messages:
        is_visible = now > message.visible_at
        is_delayed = now < message.delayed_until
        visible += is_visible and not is_delayed
        delayed += is_delayed
        not_visible += not is_visible
    return visible, delayed, not_visible


def _messages(queue: Any) -> list[Any]:
    now = _now_ms()
    visible = [
        message for message in queue._messages if now > message.visible_at and not now < message.delayed_until
    ]
    return visible if queue.fifo_queue else _fair(queue, visible)


def _fair(queue: Any, visible: list[Any]) -> list[Any]:
    """The visible messages in the order a fair queue serves them: SQS fair queues (standard queues whose
    messages carry a ``MessageGroupId``, the tenant here) serve the groups with fewer messages in flight
    first, so one tenant's flood does not hold another's messages behind it. Here: round robin over the
    groups, each group's messages in their own order, the groups with fewer in flight first."""
    by_group: dict[Any, list[Any]] = {}
    for message in visible:
        by_group.setdefault(message.group_id, []).append(message)
    if len(by_group) < 2:
        return visible
    in_flight = Counter(message.group_id for message in queue.pending_messages)
    groups = sorted(by_group.values(), key=lambda messages: in_flight[messages[0].group_id])
    return [message for turn in zip_longest(*groups) for message in turn if message is not None]


@contextmanager
def _without_counts() -> Any:
    previous = getattr(_no_counts, "active", False)
    _no_counts.active = True
    try:
        yield
    finally:
        _no_counts.active = previous


def install() -> None:
    """Patch moto's SQS models (idempotent); moto's answers stay the same."""
    global _installed
    if _installed:
        return
    _installed = True
    from moto.sqs import models
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    queue_class: Any = models.Queue
    backend_class: Any = models.SQSBackend
    original_attributes = queue_class.attributes.fget

    def attributes(queue: Any) -> dict[str, Any]:
        # The counts of this call are the calling thread's: the queue is shared, and threads that send at
        # once (the planner's parallel sends) must neither see nor remove each other's.
        counting: dict[int, tuple[int, int, int]] = _call_counts.__dict__.setdefault("by_queue", {})
        earlier = counting.get(id(queue))
        if getattr(_no_counts, "active", False):
            # The caller reads a setting, never a count: the counts cost a pass over every message.
            counting[id(queue)] = (0, 0, 0)
        else:
            counting[id(queue)] = _counts(queue)
        try:
            return original_attributes(queue)  # type: ignore[no-any-return]
        finally:
            if earlier is None:
                del counting[id(queue)]
            else:
                counting[id(queue)] = earlier

    def count(position: int, fallback: Any) -> property:
        def read(queue: Any) -> int:
            values = _call_counts.__dict__.get("by_queue", {}).get(id(queue))
            return int(fallback(queue) if values is None else values[position])

        return property(read)

    queue_class.approximate_number_of_messages = count(0, lambda queue: len(_messages(queue)))
    queue_class.approximate_number_of_messages_delayed = count(1, lambda queue: _counts(queue)[1])
    queue_class.approximate_number_of_messages_not_visible = count(2, lambda queue: _counts(queue)[2])
    queue_class.attributes = property(attributes)
    queue_class.messages = property(_messages)

    def wait_for_messages(queue: Any, timeout: int) -> None:
        """Wait until a message is added or the next one held back (delayed, in flight) becomes visible."""
        now = _now_ms()
        upcoming = [
            max(message.visible_at, message.delayed_until)
            for message in queue._messages
            if not (now > message.visible_at and not now < message.delayed_until)
        ]
        wait = timeout
        if upcoming:
            wait = min(timeout, max(0.0, (min(upcoming) - now) / 1000.0) + 0.002)
        with queue._messages_lock:
            queue._messages_lock.wait_for(lambda: _messages(queue), timeout=wait)

    queue_class.wait_for_messages = wait_for_messages

    def delete_message(queue: Any, receipt_handle: str) -> None:
        """moto's delete in one pass (its own builds each message's list of handles, twice)."""
        if receipt_handle in queue.deleted_messages:
            return
        kept: list[Any] = []
        found = False
        for message in queue._messages:
            if message.receipt_handle == receipt_handle or receipt_handle in message._old_receipt_handles:
                found = True
                queue.pending_messages.discard(message)
                queue.deleted_messages.update(message.all_receipt_handles)
                continue
            kept.append(message)
        if not found:
            raise ReceiptHandleIsInvalid()
        queue._messages = kept

    queue_class.delete_message = delete_message

    def retention_valid(backend: Any, queue_name: str, message: Any) -> bool:
        retention = backend.get_queue(queue_name).message_retention_period
        return bool(int(retention) + message.sent_timestamp / 1000 > time.time())

    backend_class.is_message_valid_based_on_retention_period = retention_valid

    original_send = backend_class.send_message

    def send_message(backend: Any, *args: Any, **kwargs: Any) -> Any:
        with _without_counts():
            return original_send(backend, *args, **kwargs)

    backend_class.send_message = send_message


def oldest_visible_ms(queue_name: str) -> float | None:
    """Since when (epoch ms) the queue's longest-visible message has been visible to a receive, or None when
    it has none visible: one clock reading, one pass, no receive (nothing is hidden or counted)."""
    now = _now_ms()
    since = [
        max(message.sent_timestamp or 0, message.delayed_until, message.visible_at)
        for message in list(_queue(queue_name)._messages)
        if now > message.visible_at and not now < message.delayed_until
    ]
    return min(since, default=None)


# --- the journal's view of a queue -----------------------------------------------------------------------
def _queue(name: str) -> Any:
    import os

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return sqs_backends[DEFAULT_ACCOUNT_ID][region].get_queue(name)


def _state(message: Any) -> dict[str, Any]:
    return {
        "id": message.id,
        "body": message.body,
        "sent": message.sent_timestamp,
        "shows_at": message.delayed_until,
        "receives": message.approximate_receive_count,
        "group_id": message.group_id,
        "deduplication_id": message.deduplication_id,
    }


def stored_message(queue_name: str, message_id: str) -> dict[str, Any] | None:
    """A message as moto holds it now, or None; a message just sent is found at the queue's end."""
    for message in reversed(_queue(queue_name)._messages):
        if message.id == message_id:
            return _state(message)
    return None


def stored_messages(queue_name: str) -> list[dict[str, Any]]:
    return [_state(message) for message in _queue(queue_name)._messages]


class QueueLoader:
    """Puts messages back into moto's queues as a snapshot and a journal leave them: a message in flight
    when the stack stopped shows again at once, as after its visibility timeout; one still delayed shows
    at its time; each keeps its receive count, so the dead-letter rule counts on."""

    def __init__(self) -> None:
        self.queues: dict[str, dict[str, Any]] = {}

    def _messages(self, queue_name: str) -> dict[str, Any]:
        if queue_name not in self.queues:
            self.queues[queue_name] = {message.id: message for message in _queue(queue_name)._messages}
        return self.queues[queue_name]

    def put(self, queue_name: str, state: dict[str, Any]) -> None:
        from moto.sqs.models import Message

        message = Message(state["id"], state["body"])
        message.sent_timestamp = state["sent"]
        message.delayed_until = state["shows_at"]
        message.approximate_receive_count = state["receives"]
        message.group_id = state.get("group_id")
        message.deduplication_id = state.get("deduplication_id")
        self._messages(queue_name)[state["id"]] = message

    def drop(self, queue_name: str, message_id: str) -> None:
        self._messages(queue_name).pop(message_id, None)

    def received(self, queue_name: str, message_id: str) -> None:
        message = self._messages(queue_name).get(message_id)
        if message is not None:
            message.approximate_receive_count += 1

    def finish(self) -> None:
        for queue_name, messages in self.queues.items():
            queue = _queue(queue_name)
            with queue._messages_lock:
                queue._messages = list(messages.values())
                queue._pending_messages = set()
                queue._messages_lock.notify_all()
