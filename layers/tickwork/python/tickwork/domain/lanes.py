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
from datetime import datetime

from pydantic import Field

from tickwork.domain.models import Instant, Job, StrictModel

MAX_CONCURRENT_RUNS = 50
# A tenant's in-flight limit is split over slot items of at most this many slots each.
SLOTS_PER_SHARD = 10


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
    holders: dict[str, Holder] = Field(default_factory=dict)
    """By run id."""
    chain_until: Instant | None = None
    """A backfill chain (or a queue's backlog of a backfill job) is running fires up to this one."""
    chain_from: Instant | None = None
    """The chain's first fire: every fire from it to ``chain_until`` runs in the chain, in order (None: a
    chain recorded without it, taken to cover every fire up to ``chain_until``)."""


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
