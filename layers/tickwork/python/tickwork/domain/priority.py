"""Job priorities (``high``, ``normal``, ``low``) and the order a backlog of due runs is served in.

Strict levels starve the lower ones. Here a priority is a time offset instead (Inngest's way): a due run's
place in a backlog is its time plus its priority's offset, and the backlog is served in that order. A run can
then be overtaken only by runs of higher priority that became due less than the difference of the offsets
after it, so it waits at most ``AGING_BOUND`` longer than it would without priorities: a low run by
``AGING_BOUND``, a normal one by half of it, a high one never.

Each priority has a run queue of its own (normal runs keep the run queue), so the order holds across
workers: a high run never waits behind the others' backlog in a queue.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, get_args

Priority = Literal["high", "normal", "low"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
DEFAULT_PRIORITY: Priority = "normal"

AGING_BOUND = timedelta(seconds=300)
# Each priority's offset as a share of the bound: high runs first, low runs last, none by more than the bound.
_SHARE_OF_BOUND: dict[Priority, float] = {"high": 0.0, "normal": 0.5, "low": 1.0}


def offset_ms(priority: Priority, bound: timedelta = AGING_BOUND) -> int:
    """How much later than its time a run of this priority is placed in a backlog, in milliseconds."""
    return round(_SHARE_OF_BOUND[priority] * bound.total_seconds() * 1000)


def order_key(priority: Priority, due_ms: int, bound: timedelta = AGING_BOUND) -> int:
    """A due run's place in a backlog (lower first): its time, epoch ms, plus its priority's offset."""
    return due_ms + offset_ms(priority, bound)


def message_priority(priority: Priority) -> Priority | None:
    """What a run message carries: its priority, or nothing for ``normal`` (the run queue's own)."""
    return None if priority == DEFAULT_PRIORITY else priority


__all__ = [
    "AGING_BOUND",
    "DEFAULT_PRIORITY",
    "PRIORITIES",
    "Priority",
    "message_priority",
    "offset_ms",
    "order_key",
]
