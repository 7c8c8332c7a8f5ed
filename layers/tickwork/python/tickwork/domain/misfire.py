"""Misfire decisions: given a job's planning cursor and ``now``, which fires run and which are MISSED."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwork.domain.models import Job, MisfirePolicy, RateSchedule
from tickwork.domain.schedule import AnySchedule, iter_fire_times

# At most this many missed fires are recorded one by one; older ones are only counted as "more".
MISSED_RECORD_LIMIT = 100
# At most this many on-time fires are planned for one job in one pass; the rest wait for the next pass.
MAX_FIRES_PER_PASS = 1000
_FIRST_LOOKBACK = timedelta(minutes=5)
_ONE_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class FirePlan:
    """What to do with the fires between a job's cursor and ``now + horizon``."""

    run: list[datetime] = field(default_factory=list)
    """Fires to run, oldest first: late fires the policy keeps, then fires on time or ahead."""
    missed: list[datetime] = field(default_factory=list)
    """Late fires to record as MISSED, oldest first (at most ``MISSED_RECORD_LIMIT``)."""
    more_missed: bool = False
    """More late fires were missed than are listed in ``missed``."""
    next_fire_at: datetime | None = None
    """The new cursor: the first fire not covered by this plan, or None when the schedule is over."""


def first_fire_anchor(job: Job) -> datetime | None:
    """The first fire of a rate schedule with no ``start_at``: one period after the job was created."""
    if isinstance(job.schedule, RateSchedule) and job.schedule.start_at is None:
        return job.created_at + timedelta(seconds=job.schedule.every_seconds)
    return None


def plan_fires(job: Job, cursor: datetime | None, now: datetime, horizon: timedelta) -> FirePlan:
    """Plan the fires from ``cursor`` (inclusive) to ``now + horizon`` (inclusive) under the job's policy."""
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
    """The pure core of :func:`plan_fires`.

    A fire ``f`` is late when ``now > f + grace``. Late fires follow the policy: ``skip`` records them all as
    MISSED, ``fire_once`` runs the latest and records the rest, ``backfill`` runs the latest
    ``backfill_limit`` of them oldest first and records the rest. Fires on time or within the horizon all run.
    """
    late_before = now - grace
    fires_from: Callable[[datetime], Iterator[datetime]] = lambda start: iter_fire_times(  # noqa: E731
        schedule, start - timedelta(microseconds=1), anchor=anchor
    )
    keep = {"skip": 0, "fire_once": 1, "backfill": backfill_limit}[policy]
    late, more_late = _latest_late_fires(fires_from, cursor, late_before, keep + MISSED_RECORD_LIMIT)
    run_late = late[len(late) - keep :] if keep else []
    missed = late[: len(late) - len(run_late)]

    run = list(run_late)
    next_fire_at: datetime | None = None
    for planned, fire_at in enumerate(fires_from(max(cursor, late_before))):
        if fire_at > now + horizon or planned >= MAX_FIRES_PER_PASS:
            next_fire_at = fire_at
            break
        run.append(fire_at)
    return FirePlan(run=run, missed=missed, more_missed=more_late, next_fire_at=next_fire_at)


def _latest_late_fires(
    fires_from: Callable[[datetime], Iterator[datetime]], cursor: datetime, late_before: datetime, wanted: int
) -> tuple[list[datetime], bool]:
    """The latest ``wanted`` fires in ``[cursor, late_before)``, oldest first, and whether older ones exist.

    Finds the last late fire by bisection, then looks back from it in doubling windows, so a job paused for a
    year costs a few dozen steps, not a walk over every fire it missed.
    """
    if cursor >= late_before:
        return [], False
    last = _last_fire_before(fires_from, cursor, late_before)
    if last is None:
        return [], False
    # Look back from the last late fire, not from `late_before`: after a long quiet stretch (an `end_at`
    # passed while paused, a cron that fires only in bursts) a window doubled from `late_before` would reach
    # as far before that fire as the quiet stretch is long, and walk every fire in it.
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


def _last_fire_before(
    fires_from: Callable[[datetime], Iterator[datetime]], cursor: datetime, end: datetime
) -> datetime | None:
    """The latest fire in ``[cursor, end)``, or None, by bisection: a few dozen steps for any span."""
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
