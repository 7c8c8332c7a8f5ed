"""Wall-clock matching of the cron expressions ``check_cron_syntax`` accepts, walking the calendar.

``compile_cron`` reads an expression as croniter reads it (the engine's matcher before this one, whose
wall times stay the reference), and ``CronMatcher.walls_after`` yields its naive wall times. Rather than
stepping field by field from one candidate time to the next, it visits only the allowed months, takes each
month's matching days from a table computed once per shape of month (its length and the weekday of its
first day: 28 shapes in all), and the times of day from sorted tuples; a schedule whose fires are decades
apart costs one table lookup per allowed month in between.

croniter's readings kept here, beyond plain cron:

- a range whose ends are equal (``5-5``, ``JAN-JAN``, ``7-SUN``) is the whole field;
- day of week 7 is Sunday (0), in ranges too: ``THU-SUN`` is Thursday to Sunday, and ``7/2`` is Sunday,
  Tuesday, Thursday and Saturday;
- day of month and day of week match when either does only while both are restricted; a field listing every
  value counts as unrestricted when the other field's text has a ``*`` (``0 0 1-31 * */2`` is every other
  weekday, ``0 0 1-31 * MON`` every day);
- ``nW`` (tickwork's rule on top of croniter's): no fire in a month shorter than ``n`` days.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, date, datetime

from tickwork.domain.cron_syntax import DAY_NAMES, MONTH_NAMES

# The Gregorian calendar repeats every 400 years: an expression with no match in one cycle has none at all.
_CYCLE_START = 2000
_CYCLE_YEARS = 400


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: tuple[str, ...] = ()


_SECOND = _Bounds(0, 59)
_MINUTE = _Bounds(0, 59)
_HOUR = _Bounds(0, 23)
_DAY_OF_MONTH = _Bounds(1, 31)
_MONTH = _Bounds(1, 12, MONTH_NAMES)
_DAY_OF_WEEK = _Bounds(0, 6, DAY_NAMES)


class _Unsupported(ValueError):
    """A form croniter refuses or this reader does not know; the caller keeps croniter for it."""


@dataclass(frozen=True)
class _DayRule:
    """Which days of a month match, from the day-of-month and day-of-week fields."""

    days_of_month: frozenset[int]
    last_day_of_month: bool
    nearest_weekday_to: int | None
    days_of_week: frozenset[int]
    """Cron numbering: 0 is Sunday."""
    nth_weekday: tuple[int, int] | None
    last_weekday: int | None
    day_of_month_restricted: bool
    day_of_week_restricted: bool

    def days(self, length: int, first_weekday: int) -> tuple[int, ...]:
        """The matching days of a month of ``length`` days whose first day has weekday ``first_weekday``."""
        if self.nearest_weekday_to is not None:
            return _nearest_weekday(self.nearest_weekday_to, length, first_weekday)
        if self.nth_weekday is not None:
            weekday, occurrence = self.nth_weekday
            day = 1 + (weekday - first_weekday) % 7 + 7 * (occurrence - 1)
            return (day,) if day <= length else ()
        if self.last_weekday is not None:
            last_day_weekday = (first_weekday + length - 1) % 7
            return (length - (last_day_weekday - self.last_weekday) % 7,)
        by_month = {
            day
            for day in range(1, length + 1)
            if day in self.days_of_month or (self.last_day_of_month and day == length)
        }
        by_week = {day for day in range(1, length + 1) if (first_weekday + day - 1) % 7 in self.days_of_week}
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return tuple(sorted(by_month | by_week))
        if self.day_of_month_restricted:
            return tuple(sorted(by_month))
        if self.day_of_week_restricted:
            return tuple(sorted(by_week))
        return tuple(range(1, length + 1))


def _nearest_weekday(day: int, length: int, first_weekday: int) -> tuple[int, ...]:
    """Monday to Friday nearest ``day``, never leaving the month (croniter's reading)."""
    if day > length:
        return ()
    weekday = (first_weekday + day - 1) % 7
    if weekday == 6:  # Saturday: the Friday before, or the Monday after when the 1st is a Saturday
        return (day - 1 if day > 1 else day + 2,)
    if weekday == 0:  # Sunday: the Monday after, or the Friday before when the last day is a Sunday
        return (day + 1 if day < length else day - 2,)
    return (day,)


class CronMatcher:
    """The wall times of one expression, compiled once; immutable apart from its cache of month tables."""

    def __init__(
        self,
        seconds: tuple[int, ...],
        minutes: tuple[int, ...],
        hours: tuple[int, ...],
        months: tuple[int, ...],
        day_rule: _DayRule,
    ) -> None:
        self.seconds = seconds
        self.minutes = minutes
        self.hours = hours
        self.months = months
        self.day_rule = day_rule
        self._days_by_shape: dict[tuple[int, int], tuple[int, ...]] = {}
        self.fires = any(
            self.days_in(year, month)
            for year in range(_CYCLE_START, _CYCLE_START + _CYCLE_YEARS)
            for month in months
        )
        """False when no wall time matches in a 400-year cycle: the expression never fires."""

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of a month, ascending."""
        length = 29 if month == 2 and calendar.isleap(year) else _MONTH_LENGTHS[month]
        shape = (length, (date(year, month, 1).weekday() + 1) % 7)
        days = self._days_by_shape.get(shape)
        if days is None:
            days = self._days_by_shape[shape] = self.day_rule.days(*shape)
        return days

    def walls_after(self, start: datetime) -> Iterator[datetime]:
        """Matching wall times strictly after ``start``, ascending, up to the end of year 9999; naive, as
        ``start`` is: the schedule maps them to real instants in its zone."""
        if not self.fires:
            return
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        start_month = (start.year, start.month)
        start_day = (start.year, start.month, start.day)
        for year in range(start.year, MAXYEAR + 1):
            first_month = bisect_left(self.months, start.month) if year == start.year else 0
            for month in self.months[first_month:]:
                days = self.days_in(year, month)
                if (year, month) == start_month:
                    days = days[bisect_left(days, start.day) :]
                for day in days:
                    if (year, month, day) == start_day:
                        yield from self._times_after(start)
                        continue
                    for hour in hours:
                        for minute in minutes:
                            for second in seconds:
                                yield datetime(year, month, day, hour, minute, second)  # noqa: DTZ001

    def _times_after(self, start: datetime) -> Iterator[datetime]:
        """The matching times of ``start``'s own day that come after it."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        year, month, day = start.year, start.month, start.day
        for hour in hours[bisect_left(hours, start.hour) :]:
            later_hour = hour > start.hour
            for minute in minutes if later_hour else minutes[bisect_left(minutes, start.minute) :]:
                later_minute = later_hour or minute > start.minute
                for second in seconds if later_minute else seconds[bisect_right(seconds, start.second) :]:
                    yield datetime(year, month, day, hour, minute, second)  # noqa: DTZ001


_MONTH_LENGTHS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def compile_cron(expression: str) -> CronMatcher | None:
    """The matcher of an expression in the form ``check_cron_syntax`` returns, or None for a form croniter
    refuses (``?`` in a list) or that this reader does not know: those are left to croniter."""
    fields = expression.split(" ")
    if len(fields) == 5:
        fields.insert(0, "0")
    if len(fields) != 6:
        return None
    second, minute, hour, day_of_month, month, day_of_week = fields
    try:
        return CronMatcher(
            seconds=_every_or(_values(second, _SECOND), _SECOND),
            minutes=_every_or(_values(minute, _MINUTE), _MINUTE),
            hours=_every_or(_values(hour, _HOUR), _HOUR),
            months=_every_or(_values(month, _MONTH), _MONTH),
            day_rule=_day_rule(day_of_month, day_of_week),
        )
    except _Unsupported:
        return None


def _every_or(values: frozenset[int] | None, bounds: _Bounds) -> tuple[int, ...]:
    return tuple(sorted(values)) if values is not None else tuple(range(bounds.low, bounds.high + 1))


def _day_rule(day_of_month: str, day_of_week: str) -> _DayRule:
    items = day_of_month.split(",")
    if "?" in items and len(items) > 1:
        raise _Unsupported(day_of_month)  # croniter refuses it
    nearest = None
    last_day = "L" in items
    days: frozenset[int] | None
    if len(items) == 1 and items[0].endswith("W"):
        nearest = _number(items[0][:-1], _DAY_OF_MONTH)
        days = frozenset({nearest})
    else:
        plain = ",".join(item for item in items if item != "L")
        days = _values(plain, _DAY_OF_MONTH) if plain else frozenset()

    nth = last_weekday = None
    weekdays: frozenset[int] | None
    if "#" in day_of_week:
        weekday, _, occurrence = day_of_week.partition("#")
        nth = (_number(weekday, _DAY_OF_WEEK), _number(occurrence, _Bounds(1, 5)))
        weekdays = frozenset({nth[0]})
    elif day_of_week.startswith("L"):
        last_weekday = _number(day_of_week[1:], _DAY_OF_WEEK)
        weekdays = frozenset({last_weekday})
    else:
        weekdays = _values(day_of_week, _DAY_OF_WEEK)

    special_day = last_day or nearest is not None
    special_weekday = nth is not None or last_weekday is not None
    if (special_day and weekdays is not None) or (special_weekday and days is not None):
        raise _Unsupported(f"{day_of_month} {day_of_week}")  # check_cron_syntax refuses these
    # A field listing every value is unrestricted when the other field's text has a `*` (L counts as one of
    # the days of the month there).
    if days is not None and len(days) + last_day == _size(_DAY_OF_MONTH) and "*" in day_of_week:
        days = None
    if weekdays is not None and len(weekdays) == _size(_DAY_OF_WEEK) and "*" in day_of_month:
        weekdays = None
    return _DayRule(
        days_of_month=days or frozenset(),
        last_day_of_month=last_day,
        nearest_weekday_to=nearest,
        days_of_week=weekdays or frozenset(),
        nth_weekday=nth,
        last_weekday=last_weekday,
        day_of_month_restricted=days is not None,
        day_of_week_restricted=weekdays is not None,
    )


def _values(text: str, bounds: _Bounds) -> frozenset[int] | None:
    """The values a field lists, or None when it is unrestricted (``*``, ``?``, or ``*`` in a list)."""
    items = text.split(",")
    if "?" in items and len(items) > 1:
        raise _Unsupported(text)
    if "*" in items or "?" in items:
        return None
    values: set[int] = set()
    for item in items:
        values.update(_item_values(item, bounds))
    return frozenset(values)


def _size(bounds: _Bounds) -> int:
    return bounds.high - bounds.low + 1


def _item_values(item: str, bounds: _Bounds) -> list[int]:
    base, _, step_text = item.partition("/")
    step = _number(step_text, _Bounds(1, _size(bounds) - 1)) if step_text else 1
    if base == "*":
        return list(range(bounds.low, bounds.high + 1, step))
    start_text, dash, end_text = base.partition("-")
    start = _number(start_text, bounds)
    if not dash:
        return list(range(start, bounds.high + 1, step)) if step_text else [start]
    end = _number(end_text, bounds)
    if start == end:  # an equal range is the whole field
        return list(range(bounds.low, bounds.high + 1, step))
    if start > end:
        if bounds is not _DAY_OF_WEEK or end != 0:
            raise _Unsupported(item)
        return [value % 7 for value in range(start, 8, step)]  # a week range ending on Sunday, as 7
    return list(range(start, end + 1, step))


def _number(text: str, bounds: _Bounds) -> int:
    if text.isdigit():
        value = int(text)
        if bounds is _DAY_OF_WEEK and value == 7:
            return 0
        if bounds.low <= value <= bounds.high:
            return value
    elif text in bounds.names:
        return bounds.low + bounds.names.index(text)
    raise _Unsupported(text)
