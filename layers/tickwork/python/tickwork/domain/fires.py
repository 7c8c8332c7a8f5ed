"""Which fires run: misfire, coalescing and backfill decisions, for the planner and for the worker.

The contract's rules, as pure functions of a schedule, the job's policies and ``now``:

- a fire is *overdue* once its time has passed without it starting. When several fires of one job are
  overdue at the same moment (after an outage, a pause or a backlog), only the latest can be on time; the
  others are missed. The latest is on time while ``now <= fire + misfire_grace``, else late;
- missed and late fires follow ``misfire_policy``: ``skip`` records them MISSED; ``fire_once`` runs the
  latest, now, and records the others; ``backfill`` runs the latest ``backfill_limit`` of them oldest first,
  one after another (a chain, paced), and records the older ones;
- fires due within the planning horizon are sent ahead, each to arrive at its time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from tickwork.domain.models import Job, MisfirePolicy, RateSchedule, scheduled_run_id
from tickwork.domain.schedule import AnySchedule, iter_candidate_fires, iter_fire_times, next_fire_time

# At most this many missed fires are recorded one by one; older ones are only counted.
MISSED_RECORD_LIMIT = 100
# At most this many fires ahead are planned for one job in one pass; the rest wait for the next pass.
MAX_FIRES_PER_PASS = 1000
_FIRST_LOOKBACK = timedelta(minutes=5)
_ONE_MICROSECOND = timedelta(microseconds=1)
_ONE_MILLISECOND = timedelta(milliseconds=1)


@dataclass(frozen=True)
class FirePlan:
    """What to do with a job's fires from its cursor up to ``now + horizon``."""

    run: list[datetime] = field(default_factory=list)
    """Fires to send, oldest first: the latest overdue fire when the policy runs it, then fires ahead."""
    chain: tuple[datetime, datetime] | None = None
    """Backfill: run every fire from the first to the last of these, oldest first, one after another."""
    missed: list[datetime] = field(default_factory=list)
    """Overdue fires to record MISSED, oldest first (at most ``MISSED_RECORD_LIMIT``)."""
    more_missed: bool = False
    """More fires were missed than ``missed`` lists."""
    excluded: list[tuple[datetime, str]] = field(default_factory=list)
    """Fires ahead that ``schedule.exclude`` excludes, to record SKIPPED with the reason, oldest first (at
    most ``MISSED_RECORD_LIMIT``)."""
    more_excluded: bool = False
    next_fire_at: datetime | None = None
    """The new cursor: the first fire this plan does not cover, or None when the schedule has no more."""
    last_fire_at: datetime | None = None
    """When ``next_fire_at`` is None: the schedule's last fire, which completes the job once it ends."""


def first_fire_anchor(job: Job) -> datetime | None:
    """The first fire of a rate schedule with no ``start_at``: one period after the job was created."""
    if isinstance(job.schedule, RateSchedule) and job.schedule.start_at is None:
        return job.created_at + timedelta(seconds=job.schedule.every_seconds)
    return None


def plan_fires(job: Job, cursor: datetime | None, now: datetime, horizon: timedelta) -> FirePlan:
    """The plan for ``job``'s fires from ``cursor`` (inclusive) to ``now + horizon`` (inclusive)."""
    if cursor is None:
        return FirePlan()
    return decide_fires(
        job.schedule,
        cursor,
        now,
        horizon,
        policy=job.misfire_policy,
        grace=timedelta(seconds=job.misfire_grace_seconds),
        backfill_limit=job.backfill_limit,
        anchor=first_fire_anchor(job),
    )


def decide_fires(
    schedule: AnySchedule,
    cursor: datetime,
    now: datetime,
    horizon: timedelta,
    *,
    policy: MisfirePolicy,
    grace: timedelta,
    backfill_limit: int,
    anchor: datetime | None = None,
) -> FirePlan:
    """The pure core of :func:`plan_fires`. Overdue fires are those in ``[cursor, now]``."""

    def fires_from(start: datetime) -> Iterator[datetime]:
        return iter_fire_times(schedule, start - _ONE_MICROSECOND, anchor=anchor)

    keep = backfill_limit if policy == "backfill" else 1
    overdue, more_overdue = _latest_fires_until(fires_from, cursor, now, keep + MISSED_RECORD_LIMIT)
    run: list[datetime] = []
    chain: tuple[datetime, datetime] | None = None
    kept: list[datetime] = []
    if overdue:
        latest = overdue[-1]
        if policy == "backfill":
            kept = overdue[-keep:]
        elif policy == "fire_once" or now <= latest + grace:
            kept = [latest]
    missed = overdue[: len(overdue) - len(kept)]
    more_missed = more_overdue
    if len(missed) > MISSED_RECORD_LIMIT:
        missed, more_missed = missed[-MISSED_RECORD_LIMIT:], True
    if len(kept) > 1:
        chain = (kept[0], kept[-1])
    else:
        run.extend(kept)

    # Ahead, every fire of the schedule is looked at, excluded ones too: they are recorded, and the cursor
    # stops at the first fire beyond the horizon whether it is excluded or not.
    next_fire_at: datetime | None = None
    excluded: list[tuple[datetime, str]] = []
    more_excluded = False
    ahead = iter_candidate_fires(schedule, max(cursor - _ONE_MICROSECOND, now), anchor=anchor)
    for planned, (fire_at, reason) in enumerate(ahead):
        if fire_at > now + horizon or planned >= MAX_FIRES_PER_PASS:
            next_fire_at = fire_at
            break
        if reason is None:
            run.append(fire_at)
        elif len(excluded) < MISSED_RECORD_LIMIT:
            excluded.append((fire_at, reason))
        else:
            more_excluded = True
    last_fire_at = None
    if next_fire_at is None:
        covered = [*missed, *run, *(chain or ()), *(fire_at for fire_at, _ in excluded)]
        last_fire_at = max(covered) if covered else None
    return FirePlan(
        run=run,
        chain=chain,
        missed=missed,
        more_missed=more_missed,
        excluded=excluded,
        more_excluded=more_excluded,
        next_fire_at=next_fire_at,
        last_fire_at=last_fire_at,
    )


class Arrival(StrEnum):
    """What a worker does with a scheduled fire whose message it holds."""

    RUN = "run"
    MISS_SUPERSEDED = "superseded"
    """A later fire of the job is due too: only the latest of overdue fires can be on time."""
    MISS_LATE = "late"
    """Noticed after its grace, and the policy does not run late fires."""


def on_arrival(job: Job, fire_at: datetime, now: datetime) -> Arrival:
    """The decision for fire ``fire_at`` of ``job``, taken at ``now`` (at or after the fire). The grace counts
    from when the fire was due to start: its time plus its jitter."""
    if job.misfire_policy == "backfill":
        return Arrival.RUN
    if is_superseded(job, fire_at, now):
        return Arrival.MISS_SUPERSEDED
    late = now > due_at(job, fire_at) + timedelta(seconds=job.misfire_grace_seconds)
    if late and job.misfire_policy == "skip":
        return Arrival.MISS_LATE
    return Arrival.RUN


def jitter_of(job: Job, fire_at: datetime) -> timedelta:
    """The fire's offset from its time: up to ``jitter_seconds``, in whole milliseconds, fixed by the run id
    (so every planner and worker finds the same), and always before the next fire."""
    if not job.jitter_seconds:
        return timedelta(0)
    span = jitter_span(job.schedule, fire_at, job.jitter_seconds, anchor=first_fire_anchor(job))
    span_ms = span // _ONE_MILLISECOND
    if span_ms <= 0:
        return timedelta(0)
    digest = hashlib.sha256(scheduled_run_id(job.job_id, fire_at).encode()).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (span_ms + 1))


def jitter_span(
    schedule: AnySchedule, fire_at: datetime, jitter_seconds: int, *, anchor: datetime | None
) -> timedelta:
    """The largest offset a fire may get: ``jitter_seconds``, less when the next fire comes sooner (a
    fire's jitter ends a millisecond before it)."""
    span = timedelta(seconds=jitter_seconds)
    following = next_fire_time(schedule, fire_at, anchor=anchor)
    if following is not None:
        span = min(span, following - fire_at - _ONE_MILLISECOND)
    return max(span, timedelta(0))


def due_at(job: Job, fire_at: datetime) -> datetime:
    """When the scheduled fire at ``fire_at`` is due to start: its time plus its jitter."""
    return fire_at + jitter_of(job, fire_at)


def next_in_chain(job: Job, fire_at: datetime, until: datetime) -> datetime | None:
    """The backfill chain's fire after ``fire_at``, if it is still within the chain."""
    following = next_fire_time(job.schedule, fire_at, anchor=first_fire_anchor(job))
    return following if following is not None and following <= until else None


def is_superseded(job: Job, fire_at: datetime, now: datetime) -> bool:
    """A later fire of the job is due too."""
    following = next_fire_time(job.schedule, fire_at, anchor=first_fire_anchor(job))
    return following is not None and following <= now


def latest_fire_until(job: Job, fire_at: datetime, until: datetime) -> datetime:
    """The job's latest fire from ``fire_at`` (a fire) up to ``until``."""

    def fires_from(start: datetime) -> Iterator[datetime]:
        return iter_fire_times(job.schedule, start - _ONE_MICROSECOND, anchor=first_fire_anchor(job))

    return _last_fire_until(fires_from, fire_at, until) or fire_at


def previous_fire(job: Job, fire_at: datetime, *, since: datetime) -> datetime | None:
    """The schedule's fire just before ``fire_at``, if there is one at or after ``since``."""

    def fires_from(start: datetime) -> Iterator[datetime]:
        return iter_fire_times(job.schedule, start - _ONE_MICROSECOND, anchor=first_fire_anchor(job))

    return _last_fire_until(fires_from, since, fire_at - _ONE_MICROSECOND)


def is_last_fire(job: Job, fire_at: datetime) -> bool:
    """``fire_at`` is the schedule's last fire: a one-time job's, or the last before ``end_at``."""
    return next_fire_time(job.schedule, fire_at, anchor=first_fire_anchor(job)) is None


def is_fire_of(job: Job, fire_at: datetime) -> bool:
    """Whether ``fire_at`` is one of the schedule's fires (not one of a schedule since changed)."""
    return next_fire_time(job.schedule, fire_at - _ONE_MICROSECOND, anchor=first_fire_anchor(job)) == fire_at


def _latest_fires_until(
    fires_from: Callable[[datetime], Iterator[datetime]], cursor: datetime, until: datetime, wanted: int
) -> tuple[list[datetime], bool]:
    """The latest ``wanted`` fires in ``[cursor, until]``, oldest first, and whether older ones exist.

    Finds the last fire by bisection, then looks back from it in doubling windows, so a job paused for a
    year costs a few dozen steps, not a walk over every fire it missed.
    """
    if cursor > until:
        return [], False
    last = _last_fire_until(fires_from, cursor, until)
    if last is None:
        return [], False
    # Look back from the last fire, not from `until`: after a long quiet stretch (an `end_at` passed while
    # paused, a cron that fires only in bursts) a window doubled from `until` would walk every fire in it.
    end = last + _ONE_MICROSECOND
    lookback = _FIRST_LOOKBACK
    while True:
        start = max(cursor, end - lookback)
        window: list[datetime] = []
        trimmed = False
        for fire_at in fires_from(start):
            if fire_at >= end:
                break
            window.append(fire_at)
            if len(window) > 4 * wanted:
                window, trimmed = window[-wanted:], True
        if len(window) >= wanted or start == cursor:
            older_in_window = trimmed or len(window) > wanted
            older_before_window = start > cursor and next(fires_from(cursor)) < start
            return window[-wanted:], older_in_window or older_before_window
        lookback *= 2


def _last_fire_until(
    fires_from: Callable[[datetime], Iterator[datetime]], cursor: datetime, until: datetime
) -> datetime | None:
    """The latest fire in ``[cursor, until]``, or None, by bisection: a few dozen steps for any span."""
    end = until + _ONE_MICROSECOND
    low = next(fires_from(cursor), None)
    if low is None or low >= end:
        return None
    high = end  # invariant: `low` is a fire, and no fire lies in [high, end)
    while high - low > _ONE_MICROSECOND:
        middle = low + (high - low) / 2
        fire_at = next(fires_from(middle), None)
        if fire_at is not None and fire_at < high:
            low = fire_at
        else:
            high = middle
    return low
