"""Job priorities (``high``, ``normal``, ``low``) and the order a backlog of due runs is served in.

Strict levels starve the lower ones. Here a priority is a time offset instead (Inngest's way): a due run's
place in a backlog is its time plus its priority's offset, and the backlog is served in that order. A run can
then be overtaken only by runs of higher priority that became due less than the difference of the offsets
after it, so it waits at most ``AGING_BOUND`` longer than it would without priorities: a low run by
``AGING_BOUND``, a normal one by half of it, a high one never.

Each priority has a run queue of its own (normal runs keep the run queue), so the order holds across
workers: a high run never waits behind the others' backlog in a queue. Runs waiting for a slot of a full
limit (a tenant's ``max_concurrent_runs``, a concurrency key's ``max_concurrency``) follow the same offsets:
a waiting run notes its priority on the limit's items, and a run of lower priority leaves a freed slot to it
until it has itself waited the difference of their offsets (:func:`yields_to`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
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


# A run held by a full limit notes its priority on the limit's items for this long, renewed when less than
# ``AHEAD_RENEW`` is left: longer than the runs' wait between looks (1 or 2 s), so a note lasts while its
# runs keep coming back, and lapses soon after the last one took its slot or stopped waiting.
AHEAD_NOTE = timedelta(seconds=5)
AHEAD_RENEW = timedelta(seconds=3)


def yields_to(
    priority: Priority, waited: timedelta, ahead: Mapping[Priority, datetime], now: datetime
) -> Priority | None:
    """The higher priority a run leaves a free slot of a limit to: one whose runs are noted as waiting for
    the limit (``ahead``: each priority's note, until when), while this run has waited less than the
    difference of their offsets. Past it the run takes the slot, so none waits more than the bound longer
    than it would without priorities. None: the run may take the slot."""
    for other, until in ahead.items():
        gap = offset_ms(priority) - offset_ms(other)
        if until > now and gap > 0 and waited < timedelta(milliseconds=gap):
            return other
    return None


def needs_ahead_note(priority: Priority, ahead: Mapping[Priority, datetime], now: datetime) -> bool:
    """Whether a run of ``priority`` held by a full limit should (re)write its priority's note: not for the
    lowest priority (no one yields to it), nor while the note has more than ``AHEAD_RENEW`` left."""
    if offset_ms(priority) == max(offset_ms(other) for other in PRIORITIES):
        return False
    until = ahead.get(priority)
    return until is None or until - now < AHEAD_RENEW


def message_priority(priority: Priority) -> Priority | None:
    """What a run message carries: its priority, or nothing for ``normal`` (the run queue's own)."""
    return None if priority == DEFAULT_PRIORITY else priority


__all__ = [
    "AGING_BOUND",
    "AHEAD_NOTE",
    "AHEAD_RENEW",
    "DEFAULT_PRIORITY",
    "PRIORITIES",
    "Priority",
    "message_priority",
    "needs_ahead_note",
    "offset_ms",
    "order_key",
    "yields_to",
]
