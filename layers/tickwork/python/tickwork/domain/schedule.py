"""The schedule engine: pure functions from a schedule and an instant to fire times.

Cron expressions are matched against the *local wall clock* (``cron_match`` on naive datetimes; croniter
for a stored expression that today's syntax check refuses), and each wall time is then mapped to real
instants in the schedule's zone with zoneinfo. That mapping is where the DST policies apply:

- a wall time inside a spring-forward gap has no instant: ``dst.gap`` shifts it to the end of the gap or
  skips it;
- a wall time inside a fall-back overlap has two instants: ``dst.overlap`` keeps the first or both;
- an expression whose hour field is a wildcard or a step fires at every real instant that matches, so its
  gap times are dropped and both copies of a repeated hour fire.

This works for any zone zoneinfo knows, including 30-minute shifts and days with no local midnight.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import islice
from typing import Literal
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter
from pydantic_core import PydanticCustomError

from tickwork.domain.cron_match import CronMatcher, compile_cron
from tickwork.domain.cron_syntax import ALIASES, check_cron_syntax
from tickwork.domain.exclusions import ExclusionRules, exclusion_rules
from tickwork.domain.models import LATEST_INSTANT, CronSchedule, OnceSchedule, RateSchedule
from tickwork.domain.timeutil import to_utc

AnySchedule = OnceSchedule | CronSchedule | RateSchedule
DstNote = Literal["shifted", "repeated"]

# The Gregorian calendar repeats every 400 years: an expression with no match in 400 years has none at all
# (Feb 30 and the like), and one with a match finds it (the fifth Monday of February: 2044, then 2072).
_MAX_YEARS_BETWEEN_MATCHES = 400
_ONE_MICROSECOND = timedelta(microseconds=1)
# Past this many excluded fires in a row (a per-second schedule inside a long minute-by-minute window) the
# schedule is taken to have no fire left: the search must end. A create is refused if its first fire is
# beyond it.
MAX_EXCLUDED_IN_A_ROW = 100_000
# A gap longer than this is a zone moving across the date line or correcting its clock (Pacific/Apia
# skipped 30 December 2011; Kiritimati 31 December 1994), not daylight saving: its wall times are skipped,
# never shifted to the end of the gap (as vixie cron treats jumps of more than 3 hours).
_LONGEST_DST_GAP = timedelta(hours=3)


@dataclass(frozen=True)
class ParsedCron:
    expression: str
    seconds_first: bool
    hour_is_instant: bool
    """The hour field is ``*`` or a step: fire at every real matching instant, ignoring ``dst``."""
    nearest_weekday_to: int | None = None
    """The n of a day of month ``nW``: croniter moves it into months that lack day n (30W in February);
    those months have no such fire."""
    matcher: CronMatcher | None = field(default=None, compare=False, repr=False)
    """The calendar matcher; None for an expression left to croniter (one today's syntax check refuses)."""

    def matches(self, wall: datetime) -> bool:
        return self.nearest_weekday_to is None or self.nearest_weekday_to <= _days_in_month(wall)


def _days_in_month(wall: datetime) -> int:
    following = (wall.replace(day=28) + timedelta(days=4)).replace(day=1)
    return (following - timedelta(days=1)).day


@lru_cache(maxsize=4096)
def parse_cron(expression: str) -> ParsedCron:
    """Parse and check an expression once; the planner calls this for every due job."""
    matcher: CronMatcher | None = None
    try:
        expanded = check_cron_syntax(expression)
        matcher = compile_cron(expanded)
    except PydanticCustomError:
        # A stored job accepted before a syntax rule was tightened is read as it was then (croniter's
        # reading); anything new is checked by ``check_cron_expression`` first.
        text = " ".join(expression.split())
        expanded = ALIASES.get(text.lower(), text)
        if len(expanded.split(" ")) not in (5, 6):
            raise
    fields = expanded.split(" ")
    seconds_first = len(fields) == 6
    hour = fields[2] if seconds_first else fields[1]
    day = fields[3] if seconds_first else fields[2]
    nearest = int(day[:-1]) if day.endswith("W") and day[:-1].isdigit() and int(day[:-1]) > 28 else None
    parsed = ParsedCron(expanded, seconds_first, hour == "*" or "/" in hour, nearest, matcher)
    if matcher is not None:
        if not matcher.fires:
            raise PydanticCustomError("cron_never_fires", "cron expression never fires")
        return parsed
    try:
        probe = croniter(
            expanded,
            datetime(2000, 1, 1),  # noqa: DTZ001 - croniter runs on naive local wall-clock times
            second_at_beginning=seconds_first,
            max_years_between_matches=_MAX_YEARS_BETWEEN_MATCHES,
        )
        if _first_match(parsed, probe) is None:
            raise CroniterBadDateError("no match in 400 years")
    except CroniterBadDateError as error:
        raise PydanticCustomError("cron_never_fires", "cron expression never fires") from error
    except (CroniterBadCronError, CroniterError, ValueError, KeyError, IndexError) as error:
        # The syntax was checked above; a refusal here is a combination the matcher cannot take.
        raise PydanticCustomError(
            "invalid_cron", "cron expression {expression} cannot be matched", {"expression": expanded}
        ) from error
    return parsed


def _first_match(parsed: ParsedCron, iterator: croniter) -> datetime | None:
    """The iterator's next wall time that the expression really matches, or None if there is none within
    a Gregorian cycle of the first one croniter offers."""
    first: datetime | None = None
    while True:
        wall = iterator.get_next(datetime)
        if parsed.matches(wall):
            return wall
        first = first or wall
        if wall.year - first.year > _MAX_YEARS_BETWEEN_MATCHES:
            return None


def check_cron_expression(expression: str) -> str:
    """The syntax checks of a new expression, then the matcher's (an expression that never fires)."""
    check_cron_syntax(expression)
    parse_cron(expression)
    return expression


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    # Debian-like hosts list /usr/share/zoneinfo/localtime (a link to /etc/localtime): the host's zone, not an
    # IANA name, so a schedule in it would follow whatever machine runs it.
    return frozenset(available_timezones()) - {"localtime"}


@lru_cache(maxsize=1024)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def check_timezone(name: str) -> str:
    if name not in _known_zones():
        suggestion = suggest_timezone(name)
        if suggestion is None:
            raise PydanticCustomError("unknown_timezone", "unknown IANA time zone '{name}'", {"name": name})
        raise PydanticCustomError(
            "unknown_timezone",
            "unknown IANA time zone '{name}': did you mean {suggestion}?",
            {"name": name, "suggestion": suggestion},
        )
    return name


@lru_cache(maxsize=256)
def suggest_timezone(name: str) -> str | None:
    """The known zone ``name`` most likely meant: the same name in other case (``europe/paris``), else the
    closest name (``Europe/Pari``, ``America/New York``), else the zone of that city (``Tokyo``)."""
    by_lower = {zone.lower(): zone for zone in sorted(_known_zones())}
    wanted = name.strip().lower().replace(" ", "_")
    if wanted in by_lower:
        return by_lower[wanted]
    # A zone whose digits differ is another offset (GMT+1 is not GMT+0): never suggested.
    digits = [char for char in wanted if char.isdigit()]
    close = [
        zone
        for zone in difflib.get_close_matches(wanted, by_lower, n=3, cutoff=0.8)
        if [char for char in zone if char.isdigit()] == digits
    ]
    if close:
        return by_lower[close[0]]
    if "/" not in wanted and not digits:
        cities = sorted(
            (zone for lowered, zone in by_lower.items() if lowered.rsplit("/", 1)[-1] == wanted),
            key=lambda zone: (zone.count("/"), zone),
        )
        if cities:
            return cities[0]
    return None


class _IteratorCache(threading.local):
    """One croniter per expression and thread, for expressions left to croniter: building one costs ~6x
    more than reusing it."""

    def __init__(self) -> None:
        self.iterators: dict[str, croniter] = {}

    def acquire(self, parsed: ParsedCron, start: datetime) -> croniter:
        """Take the cached iterator out while in use, so two live generators never share one."""
        iterator = self.iterators.pop(parsed.expression, None)
        if iterator is None:
            iterator = croniter(
                parsed.expression,
                start,
                second_at_beginning=parsed.seconds_first,
                max_years_between_matches=_MAX_YEARS_BETWEEN_MATCHES,
            )
        else:
            iterator.set_current(start, force=True)
        return iterator

    def release(self, parsed: ParsedCron, iterator: croniter) -> None:
        if len(self.iterators) >= 4096:
            self.iterators.clear()
        self.iterators[parsed.expression] = iterator


_iterators = _IteratorCache()


# --- public API -------------------------------------------------------------------------------------------
def iter_fire_times(
    schedule: AnySchedule, after: datetime, *, anchor: datetime | None = None
) -> Iterator[datetime]:
    """Fire times strictly after ``after``, ascending, as UTC datetimes, within ``start_at``/``end_at`` and
    before ``LATEST_INSTANT`` (the end of what a timestamp may name), less the fires ``schedule.exclude``
    excludes.

    ``anchor`` is the first fire of a rate schedule that has no ``start_at``.
    """
    rules = _exclusion_rules(schedule)
    if rules is None:
        yield from _iter_nominal(schedule, after, anchor)
        return
    after = to_utc(after)
    excluded_in_a_row = 0
    while True:
        jumped = False
        for fire_at in _iter_nominal(schedule, after, anchor):
            excluded = rules.check(fire_at)
            if excluded is None:
                excluded_in_a_row = 0
                yield fire_at
                continue
            excluded_in_a_row += 1
            if excluded_in_a_row > MAX_EXCLUDED_IN_A_ROW:
                return
            if excluded.resume_at is not None and excluded.resume_at > fire_at + _ONE_MICROSECOND:
                # A whole excluded day or hour: go on from its end rather than through each of its fires.
                after, jumped = excluded.resume_at - _ONE_MICROSECOND, True
                break
        if not jumped:
            return


def iter_candidate_fires(
    schedule: AnySchedule, after: datetime, *, anchor: datetime | None = None
) -> Iterator[tuple[datetime, str | None]]:
    """Every fire time of the schedule after ``after`` with the reason it is excluded (None: it fires). For
    the planner, which records excluded fires as SKIPPED, and for preview."""
    rules = _exclusion_rules(schedule)
    for fire_at in _iter_nominal(schedule, after, anchor):
        excluded = rules.check(fire_at) if rules is not None else None
        yield fire_at, excluded.reason if excluded is not None else None


def exclusion_of(schedule: AnySchedule, fire_at: datetime) -> str | None:
    """Why ``schedule.exclude`` excludes the fire at ``fire_at``, or None."""
    rules = _exclusion_rules(schedule)
    excluded = rules.check(fire_at) if rules is not None else None
    return excluded.reason if excluded is not None else None


def dst_note(schedule: AnySchedule, fire_at: datetime) -> DstNote | None:
    """How daylight saving time changed a cron fire: ``shifted`` (its local time was skipped by a
    spring-forward gap, so it fires at the end of the gap) or ``repeated`` (its local time occurs twice at
    fall-back and it fires at both)."""
    if not isinstance(schedule, CronSchedule):
        return None
    parsed = parse_cron(schedule.expression)
    tz = zone(schedule.timezone)
    local = to_utc(fire_at).astimezone(tz)
    wall = local.replace(tzinfo=None, fold=0)
    if not _wall_matches(parsed, wall):
        return "shifted"
    if _overlap_length(wall, tz) and (parsed.hour_is_instant or schedule.dst.overlap == "all"):
        return "repeated"
    return None


def _wall_matches(parsed: ParsedCron, wall: datetime) -> bool:
    """Whether the expression names this local wall time."""
    if parsed.matcher is not None:
        return next(parsed.matcher.walls_after(wall - _ONE_MICROSECOND), None) == wall
    return bool(croniter.match(parsed.expression, wall, second_at_beginning=parsed.seconds_first))


def _exclusion_rules(schedule: AnySchedule) -> ExclusionRules | None:
    if isinstance(schedule, OnceSchedule) or schedule.exclude is None:
        return None
    zone_name = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    return exclusion_rules(schedule.exclude, zone_name)


def _iter_nominal(schedule: AnySchedule, after: datetime, anchor: datetime | None) -> Iterator[datetime]:
    """Fire times as the schedule's fields give them, before exclusions."""
    after = to_utc(after)
    if isinstance(schedule, OnceSchedule):
        if schedule.at > after:
            yield schedule.at
        return
    if schedule.start_at is not None and schedule.start_at > after:
        after = schedule.start_at - _ONE_MICROSECOND
    source = (
        _iter_cron(schedule, after)
        if isinstance(schedule, CronSchedule)
        else _iter_rate(schedule, after, anchor)
    )
    for fire_at in source:
        if (schedule.end_at is not None and fire_at > schedule.end_at) or fire_at >= LATEST_INSTANT:
            return
        yield fire_at


def next_fire_times(
    schedule: AnySchedule, after: datetime, count: int, *, anchor: datetime | None = None
) -> list[datetime]:
    return list(islice(iter_fire_times(schedule, after, anchor=anchor), count))


def next_fire_time(
    schedule: AnySchedule, after: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    return next(iter_fire_times(schedule, after, anchor=anchor), None)


def fire_times_between(
    schedule: AnySchedule,
    start: datetime,
    end: datetime,
    *,
    anchor: datetime | None = None,
    limit: int | None = None,
) -> list[datetime]:
    """Fire times ``t`` with ``start <= t < end``, at most ``limit`` of them."""
    end = to_utc(end)
    fires: list[datetime] = []
    for fire_at in iter_fire_times(schedule, to_utc(start) - _ONE_MICROSECOND, anchor=anchor):
        if fire_at >= end or (limit is not None and len(fires) >= limit):
            break
        fires.append(fire_at)
    return fires


# --- rate -------------------------------------------------------------------------------------------------
def _iter_rate(schedule: RateSchedule, after: datetime, anchor: datetime | None) -> Iterator[datetime]:
    first = schedule.start_at or anchor
    if first is None:
        raise ValueError("a rate schedule without start_at needs an anchor")
    first = to_utc(first)
    step = timedelta(seconds=schedule.every_seconds)
    index = 0 if after < first else (after - first) // step + 1
    while True:
        try:
            fire_at = first + index * step
        except OverflowError:  # past year 9999: no fire can be represented, so none is left
            return
        yield fire_at
        index += 1


# --- cron -------------------------------------------------------------------------------------------------
def _iter_cron(schedule: CronSchedule, after: datetime) -> Iterator[datetime]:
    parsed = parse_cron(schedule.expression)
    tz = zone(schedule.timezone)
    keep_gap = not parsed.hour_is_instant and schedule.dst.gap == "shift"
    keep_second_copy = parsed.hour_is_instant or schedule.dst.overlap == "all"

    try:
        local_after = after.astimezone(tz)
    except OverflowError:  # the zone's wall clock is already past year 9999: no fire is left
        return
    wall = local_after.replace(tzinfo=None, fold=0)
    if local_after.fold == 0:
        overlap = _overlap_length(wall, tz)
        if overlap:
            # `after` is in the first copy of a repeated hour: second-copy instants of earlier wall times
            # still lie ahead, so start matching from the beginning of the repeated span.
            wall -= overlap
    if parsed.matcher is not None:
        walls = parsed.matcher.walls_after(wall)
        yield from _match(walls, tz, after, keep_gap=keep_gap, keep_second_copy=keep_second_copy)
        return
    iterator = _iterators.acquire(parsed, wall)
    try:
        walls = _croniter_walls(parsed, iterator)
        yield from _match(walls, tz, after, keep_gap=keep_gap, keep_second_copy=keep_second_copy)
    finally:
        _iterators.release(parsed, iterator)


def _croniter_walls(parsed: ParsedCron, iterator: croniter) -> Iterator[datetime]:
    while True:
        try:
            wall = _first_match(parsed, iterator)
        except (CroniterBadDateError, OverflowError, ValueError):
            # No match within the years croniter searches, or none before the end of year 9999 (croniter
            # raises ValueError or OverflowError): the schedule has no fire left.
            return
        if wall is None:
            return
        yield wall


def _match(
    walls: Iterator[datetime],
    tz: ZoneInfo,
    after: datetime,
    *,
    keep_gap: bool,
    keep_second_copy: bool,
) -> Iterator[datetime]:
    last: datetime | None = None
    second_copies: list[datetime] = []
    for wall in walls:
        try:
            first, second, in_gap = _instants(wall, tz)
        except (OverflowError, ValueError):
            # A wall time near the end of year 9999 that its zone cannot convert: no fire is left.
            break
        if second is None and second_copies:
            # The repeated span is over: its second copies all come before this wall time.
            for instant in second_copies:
                if instant > after and (last is None or instant > last):
                    last = instant
                    yield instant
            second_copies.clear()
        if in_gap and (not keep_gap or _gap_length(wall, tz) > _LONGEST_DST_GAP):
            continue
        if second is not None and keep_second_copy:
            second_copies.append(second)
        if first > after and (last is None or first > last):
            last = first
            yield first
    yield from (instant for instant in second_copies if instant > after and (last is None or instant > last))


def _instants(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime | None, bool]:
    """The real instants of a wall time: (first, second copy or None, wall time falls in a gap)."""
    early = wall.replace(tzinfo=tz, fold=0)
    late = wall.replace(tzinfo=tz, fold=1)
    early_offset, late_offset = early.utcoffset(), late.utcoffset()
    early_utc = early.astimezone(UTC)
    if early_offset == late_offset:
        return early_utc, None, False
    if early_utc.astimezone(tz).replace(tzinfo=None) == wall:
        return early_utc, late.astimezone(UTC), False
    # In a gap zoneinfo's fold=1 reading lies before the transition and fold=0 after it.
    return _transition_instant(late.astimezone(UTC), early_utc, tz), None, True


@lru_cache(maxsize=1024)
def _transition_instant(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The first instant after a spring-forward gap, found by bisection on whole seconds."""
    target = after.astimezone(tz).utcoffset()
    low, high = before, after
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle <= low:
            break
        if middle.astimezone(tz).utcoffset() == target:
            high = middle
        else:
            low = middle
    return high


def _gap_length(wall: datetime, tz: ZoneInfo) -> timedelta:
    """How much wall-clock time a spring-forward gap skips, for a wall time that falls in one."""
    before = wall.replace(tzinfo=tz, fold=1).utcoffset()
    after = wall.replace(tzinfo=tz, fold=0).utcoffset()
    if before is None or after is None:
        return timedelta(0)
    return abs(after - before)


def _overlap_length(wall: datetime, tz: ZoneInfo) -> timedelta:
    """How long a repeated span is, when ``wall`` falls in one; zero otherwise."""
    early = wall.replace(tzinfo=tz, fold=0)
    late = wall.replace(tzinfo=tz, fold=1)
    early_offset, late_offset = early.utcoffset(), late.utcoffset()
    if early_offset is None or late_offset is None or early_offset <= late_offset:
        return timedelta(0)
    return early_offset - late_offset
