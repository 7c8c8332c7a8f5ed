"""A tenant's throttle on run starts (``max_runs_per_second`` with ``burst``): GCRA, with reservations.

The generic cell rate algorithm keeps one number per throttle, the *theoretical arrival time* (TAT): each
start pushes it on by one emission interval (1 / rate) from ``max(TAT, now)``. A start may happen once
``TAT - capacity * interval`` is reached, where ``capacity = burst - rate + 1``: that is at most ``burst``
starts in any one second, and ``rate`` a second over time (with ``burst == rate``, an even pace).

A run over the throttle is not refused: it *reserves* its place (the TAT moves on for it too) and waits for
its start time in the queue, so a backlog comes back a few runs at a time, in order, rather than all at
once every second; none is dropped. A throttle over ``MAX_STARTS_PER_ITEM`` starts a second is split over
several items, each with its share of the rate and the burst, so no item takes every start's write.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tickwork.domain.tenants import Tenant

# Starts one throttle item takes per second at most: a write each, well under a partition's 1,000 a second.
MAX_STARTS_PER_ITEM = 500
MICROS = 1_000_000


@dataclass(frozen=True)
class Throttle:
    """One item's share of a tenant's throttle."""

    shards: int
    interval_us: int
    """Microseconds between starts at this item's share of the rate."""
    capacity: int
    """Starts this item lets through at once after a quiet spell."""

    def start_us(self, tat_us: int, now_us: int) -> int:
        """When a start that moved the TAT to ``tat_us`` may happen: ``now_us`` or later."""
        return max(now_us, tat_us - self.capacity * self.interval_us)

    def booked_ahead(self, tat_us: int | None, now_us: int) -> int:
        """How many starts this item has reserved for later than ``now_us``: the runs it throttled that are
        still waiting. The k-th start back from the TAT was given ``TAT - k * interval - capacity *
        interval`` (or now), so those later than now number ``ceil((TAT - now) / interval) - capacity``,
        none when the TAT is within the burst (or absent: a throttle at rest)."""
        if tat_us is None or tat_us <= now_us:
            return 0
        return max(0, math.ceil((tat_us - now_us) / self.interval_us) - self.capacity)


def throttle_of(tenant: Tenant) -> Throttle | None:
    """The tenant's throttle, per item; None without ``max_runs_per_second``."""
    rate = tenant.max_runs_per_second
    if rate is None:
        return None
    burst = tenant.burst or rate
    shards = math.ceil(rate / MAX_STARTS_PER_ITEM)
    share_rate, share_burst = rate / shards, burst / shards
    return Throttle(
        shards=shards,
        interval_us=max(1, math.ceil(MICROS / share_rate)),  # rounded up: never over the rate
        capacity=max(1, math.floor(share_burst - share_rate + 1)),
    )


__all__ = ["MAX_STARTS_PER_ITEM", "Throttle", "throttle_of"]
