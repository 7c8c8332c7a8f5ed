"""A job's lane: the one item through which its runs take turns, when its policy limits overlap.

A job with ``overlap_policy`` ``skip`` or ``queue`` runs one attempt at a time; one with ``allow`` and
``max_concurrent_runs`` runs at most that many. Each attempt that starts is a *holder* of the job's lane,
taken with one conditional write (the lane's version must be the one read), which is also the attempt's
lease and hands out its fencing token.

A holder is let go implicitly: once its run item records the end of that attempt (a fencing token at least
the holder's), or once its lease has passed. So a successful run writes the lane once (to start) and its run
item once (to end), and the next claimant, which reads the holder's run item anyway, sees it is free.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from pydantic import Field

from tickwork.domain.models import Instant, Job, StrictModel
from tickwork.domain.priority import Priority

MAX_CONCURRENT_RUNS = 50
# A tenant's in-flight limit is split over slot items of at most this many slots each.
SLOTS_PER_SHARD = 10
# A run held back by a slot limit is noted as waiting on the slot item it tried first, for this long: its
# next holds (every second or two) renew the note once half of it has passed, so a run that stops waiting
# without taking a slot (cancelled, paused, dead-lettered) drops out of the count on its own.
WAITER_LEASE = timedelta(seconds=60)
# Waiters noted per slot item at most: the item stays small to read; past it the count says "at least".
MAX_WAITERS_PER_SHARD = 50


class Holder(StrictModel):
    """One attempt in progress (or ended, until someone notices)."""

    run_id: str
    token: int = Field(ge=1)
    attempt: int = Field(ge=1)
    scheduled_for: Instant
    started_at: Instant
    lease_until: Instant
    worker_id: str


class Lane(StrictModel):
    version: int = 0
    """Bumped by every write; a claim is conditional on it, and a new holder's token is the new version."""
    moved: int = 0
    """How many times a change of the job (an edit, a pause, a cancel) or a cancel of one of its fires moved
    the lane: a claim taken ahead of its fire is called only if this is as it was when claimed."""
    holders: dict[str, Holder] = Field(default_factory=dict)
    """By run id."""
    chain_until: Instant | None = None
    """A backfill chain (or a queue's backlog of a backfill job) is running fires up to this one."""
    chain_from: Instant | None = None
    """The chain's first fire: every fire from it to ``chain_until`` runs in the chain, in order (None: a
    chain recorded without it, taken to cover every fire up to ``chain_until``)."""
    ahead: dict[Priority, Instant] = Field(default_factory=dict)
    """On a slot item only: the priorities whose runs wait for its limit, each with when its note lapses
    (:func:`tickwork.domain.priority.yields_to`). Noted without a new version."""
    waiters: dict[str, Instant] = Field(default_factory=dict)
    """On a slot item only: the runs held back by its limit that tried it first, by run id, each with the
    time its note lapses (:data:`WAITER_LEASE`). Noted and dropped without a new version: they change no
    holder."""


def capacity(job: Job) -> int | None:
    """How many attempts of the job may run at once; None when nothing limits it (no lane)."""
    if job.overlap_policy in ("skip", "queue"):
        return 1
    return job.max_concurrent_runs


def slot_shards(limit: int) -> list[int]:
    """How many slots each of a tenant's slot items holds, for an in-flight limit of ``limit``."""
    count = -(-limit // SLOTS_PER_SHARD)
    base, extra = divmod(limit, count)
    return [base + (1 if index < extra else 0) for index in range(count)]


def live_waiters(slots: Lane, now: datetime) -> set[str]:
    """The runs noted as waiting on a slot item whose note has not lapsed."""
    return {run_id for run_id, until in slots.waiters.items() if until > now}


def needs_waiter_note(slots: Lane, run_id: str, now: datetime) -> bool:
    """Whether a run held back by the slot item's limit should write its waiting note: not noted yet, or its
    note half lapsed; never when the item holds its cap of waiters (the count then says "at least")."""
    until = slots.waiters.get(run_id)
    if until is not None:
        return until - now < WAITER_LEASE / 2
    return len(live_waiters(slots, now)) < MAX_WAITERS_PER_SHARD


def ended(holder: Holder, recorded_token: int | None) -> bool:
    """The holder's attempt has ended when its run item carries a fencing token at least its own."""
    return recorded_token is not None and recorded_token >= holder.token


def live_holders(lane: Lane, recorded: Mapping[str, int | None], now: datetime) -> dict[str, Holder]:
    """Holders whose attempt is still running: not ended, lease not passed. ``recorded`` maps a holder's
    run id to the fencing token of its run item (None: no item)."""
    return {
        run_id: holder
        for run_id, holder in lane.holders.items()
        if holder.lease_until > now and not ended(holder, recorded.get(run_id))
    }


def lost_holders(lane: Lane, recorded: Mapping[str, int | None], now: datetime) -> dict[str, Holder]:
    """Holders whose lease passed before their attempt's end was recorded: the worker died (or hangs)."""
    return {
        run_id: holder
        for run_id, holder in lane.holders.items()
        if holder.lease_until <= now and not ended(holder, recorded.get(run_id))
    }
