"""Flow control made visible: per tenant and per concurrency key, the runs running, waiting for a slot and
throttled, counted from the items the limits are enforced on (slot items, throttle times), never from runs.

- *running*: live holders of the limit's slot items (lease not passed);
- *waiting*: runs held back by the limit, as noted on its slot items
  (:data:`~tickwork.domain.lanes.WAITER_LEASE`);
- *throttled*: starts the tenant's throttle reserved for later than now
  (:meth:`~tickwork.domain.throttle.Throttle.booked_ahead`).

The concurrency keys a tenant's jobs name are kept on its item as ``"<max_concurrency>:<key>"`` strings, at
most :data:`MAX_KEYS_KEPT` of them, so the counts read a bounded number of items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from tickwork.domain.lanes import Lane, live_waiters

# (key, limit) pairs kept per tenant: the stats read each key's slot items, and the tenant's item stays small.
MAX_KEYS_KEPT = 100


def key_entry(key: str, max_concurrency: int) -> str:
    """The string kept for a key and the limit a job names for it (the limit first: a key may hold ``:``)."""
    return f"{max_concurrency}:{key}"


def keys_of(entries: Iterable[str]) -> dict[str, int]:
    """Each key with the largest limit named for it: the slot items of a smaller limit are among its own."""
    keys: dict[str, int] = {}
    for entry in entries:
        limit, _, key = entry.partition(":")
        if limit.isdigit() and key:
            keys[key] = max(keys.get(key, 0), int(limit))
    return keys


@dataclass(frozen=True)
class SlotCounts:
    """A limit's slot items, counted: its live holders, and the runs noted as waiting for it."""

    running: int = 0
    waiting: int = 0
    waiting_capped: bool = False
    """An item holds its cap of waiting notes: more runs may wait than ``waiting`` counts."""


def count_slots(items: Iterable[Lane], now: datetime, *, cap: int) -> SlotCounts:
    """The counts of a limit's slot items as read. A run noted as waiting that holds a slot meanwhile (a
    note written just after its take, by a duplicate delivery) counts as running only."""
    holding: set[str] = set()
    waiting: set[str] = set()
    capped = False
    for slots in items:
        holding |= {run_id for run_id, holder in slots.holders.items() if holder.lease_until > now}
        noted = live_waiters(slots, now)
        capped = capped or len(noted) >= cap
        waiting |= noted
    return SlotCounts(running=len(holding), waiting=len(waiting - holding), waiting_capped=capped)


@dataclass(frozen=True)
class KeyFlow:
    key: str
    max_concurrency: int
    running: int
    waiting: int
    waiting_capped: bool = False


@dataclass(frozen=True)
class TenantFlow:
    """A tenant's flow control as it stands: its limits, and the runs each holds."""

    max_concurrent_runs: int | None
    max_runs_per_second: int | None
    burst: int | None
    disabled: bool
    running: int
    """Live holders of the tenant's in-flight slots with ``max_concurrent_runs``; without it, the RUNNING
    runs of the stats' sample (``running_from`` says which)."""
    waiting: int
    """Runs held back by the tenant's in-flight limit or by one of its concurrency keys."""
    waiting_capped: bool
    throttled: int
    running_from: Literal["in_flight_slots", "sampled_runs"] = "in_flight_slots"
    keys: list[KeyFlow] = field(default_factory=list)

    def counted_from_sample(self, running: int) -> TenantFlow:
        """The flow of a tenant without an in-flight limit, its running count taken from sampled runs."""
        return replace(self, running=running, running_from="sampled_runs")


def sum_waiting(own: SlotCounts, keys: Mapping[str, KeyFlow]) -> tuple[int, bool]:
    """The tenant's waiting runs: its in-flight limit's, and every key's (a held run is noted on one limit
    at a time, the one that held it)."""
    waiting = own.waiting + sum(key.waiting for key in keys.values())
    return waiting, own.waiting_capped or any(key.waiting_capped for key in keys.values())


__all__ = [
    "MAX_KEYS_KEPT",
    "KeyFlow",
    "SlotCounts",
    "TenantFlow",
    "count_slots",
    "key_entry",
    "keys_of",
    "sum_waiting",
]
