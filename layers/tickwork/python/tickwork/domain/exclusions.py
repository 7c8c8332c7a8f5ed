"""``schedule.exclude``: which fires do not happen, and why.

A fire is excluded when its local date (in the exclusion's zone: the schedule's, or UTC for a rate
schedule) is a listed date, falls in a listed range or is a public holiday of a listed calendar, or when its
local minute matches a listed cron window. Holidays come from the maintained ``holidays`` package: a country
(``US``), a country and subdivision (``US-NY``, ``GB-SCT``), or a market (``NYSE``).

The rules also say from when fires may happen again (the next local midnight after an excluded date or
range, the next hour or day after a window that covers whole hours or days), so the search for the next fire
jumps over a long exclusion instead of walking through every fire in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic_core import PydanticCustomError

from tickwork.domain.cron_syntax import check_cron_syntax

if TYPE_CHECKING:
    from tickwork.domain.models import Exclusions

_HOLIDAY_LANGUAGE = "en_US"


@dataclass(frozen=True)
class Excluded:
    reason: str
    """What excluded the fire, as a run's reason shows it: ``excluded: holiday Christmas Day (US-NY)``."""
    resume_at: datetime | None = None
    """No fire before this instant is allowed either (None: this fire alone is known excluded)."""


@lru_cache(maxsize=1)
def _markets() -> frozenset[str]:
    import holidays

    return frozenset(holidays.list_supported_financial())


@lru_cache(maxsize=1)
def _countries() -> dict[str, frozenset[str]]:
    import holidays

    supported = holidays.list_supported_countries()
    return {code: frozenset(subdivisions) for code, subdivisions in supported.items()}


def check_holiday_calendar(name: str) -> str:
    """A calendar the ``holidays`` package knows: ``CC``, ``CC-SUBDIVISION`` or a market code."""
    if name in _markets():
        return name
    country, _, subdivision = name.partition("-")
    countries = _countries()
    if country not in countries:
        hint = f"; did you mean {name.upper()}?" if name.upper() != name and _known(name.upper()) else ""
        raise PydanticCustomError(
            "unknown_holiday_calendar",
            "unknown holiday calendar {name}: give an ISO country code, optionally with a subdivision (US,"
            " US-NY, GB-SCT), or a market (NYSE){hint}",
            {"name": name, "hint": hint},
        )
    if subdivision and subdivision not in countries[country]:
        allowed = ", ".join(sorted(countries[country])) or "none"
        raise PydanticCustomError(
            "unknown_holiday_subdivision",
            "{country} has no subdivision {subdivision} in the holidays calendar; allowed: {allowed}",
            {"country": country, "subdivision": subdivision, "allowed": allowed},
        )
    return name


def _known(name: str) -> bool:
    try:
        check_holiday_calendar(name)
    except PydanticCustomError:
        return False
    return True


@lru_cache(maxsize=256)
def _holidays_of(calendar: str, year: int) -> dict[date, str]:
    import holidays

    if calendar in _markets():
        found: Any = holidays.financial_holidays(calendar, years=year)
    else:
        country, _, subdivision = calendar.partition("-")
        found = holidays.country_holidays(
            country, subdiv=subdivision or None, years=year, language=_HOLIDAY_LANGUAGE
        )
    return {day: str(name) for day, name in found.items()}


def holiday_name(calendar: str, day: date) -> str | None:
    return _holidays_of(calendar, day.year).get(day)


@lru_cache(maxsize=1024)
def _window_fields(expression: str) -> tuple[str, ...]:
    return tuple(expression.split())


@dataclass(frozen=True)
class _Window:
    """A window's fields as sets of allowed values (None: any), for the plain forms and ``L`` in day of
    month; a window with another special form is matched by croniter."""

    minutes: frozenset[int] | None
    hours: frozenset[int] | None
    days: frozenset[int] | None
    last_day: bool
    months: frozenset[int] | None
    weekdays: frozenset[int] | None
    plain: bool

    def matches(self, wall: datetime) -> bool:
        if (self.minutes is not None and wall.minute not in self.minutes) or (
            self.hours is not None and wall.hour not in self.hours
        ):
            return False
        if self.months is not None and wall.month not in self.months:
            return False
        day_restricted = self.days is not None or self.last_day
        on_day = (self.days is not None and wall.day in self.days) or (
            self.last_day and (wall + timedelta(days=1)).month != wall.month
        )
        on_weekday = self.weekdays is not None and wall.isoweekday() % 7 in self.weekdays
        if day_restricted and self.weekdays is not None:
            return on_day or on_weekday  # both restricted: either matches, as cron reads it
        if day_restricted:
            return on_day
        return self.weekdays is None or on_weekday


@lru_cache(maxsize=1024)
def _compiled_window(window: str) -> _Window:
    expression = check_cron_syntax(window)  # in croniter's own spelling (``5L`` as ``L5``)
    parsed = croniter(expression)
    day_field, weekday_field = expression.upper().split()[2:5:2]
    plain = not parsed.nth_weekday_of_month and "W" not in day_field and "L" not in weekday_field
    fields: list[frozenset[int] | None] = []
    for position, values in enumerate(parsed.expanded):
        numbers = [int(value) for value in values if str(value).isdigit()]
        if "*" in values:
            fields.append(None)
        elif position == 4:
            fields.append(frozenset(number % 7 for number in numbers))  # 7 is Sunday too
        else:
            fields.append(frozenset(numbers))
    minutes, hours, days, months, weekdays = fields
    last_day = "l" in parsed.expanded[2]
    if last_day and days is not None and not (days - {0}):
        days = None  # "L" alone
    return _Window(minutes, hours, days, last_day, months, weekdays, plain)


@lru_cache(maxsize=8192)
def _in_window(expression: str, minute: datetime) -> bool:
    """Whether the window matches a local wall-clock minute (cached: a schedule firing every second asks for
    each minute sixty times)."""
    window = _compiled_window(expression)
    if window.plain:
        return window.matches(minute)
    return bool(croniter.match(check_cron_syntax(expression), minute))


class ExclusionRules:
    """Compiled ``schedule.exclude`` rules in one zone."""

    def __init__(self, exclusions: Exclusions, zone: ZoneInfo):
        self.zone = zone
        self.dates = frozenset(exclusions.dates)
        self.ranges = tuple((r.start, r.end) for r in exclusions.date_ranges)
        self.windows = exclusions.windows
        self.calendars = exclusions.holidays

    def check(self, fire_at: datetime) -> Excluded | None:
        """Why the fire at ``fire_at`` (an aware instant) is excluded, or None when it is not."""
        local = fire_at.astimezone(self.zone)
        day = local.date()
        if day in self.dates:
            return Excluded(f"excluded: date {day.isoformat()}", self._day_start(day + timedelta(days=1)))
        for start, end in self.ranges:
            if start <= day <= end:
                return Excluded(
                    f"excluded: dates {start.isoformat()} to {end.isoformat()}",
                    self._day_start(end + timedelta(days=1)),
                )
        for calendar in self.calendars:
            name = holiday_name(calendar, day)
            if name is not None:
                return Excluded(
                    f"excluded: holiday {name} ({calendar})", self._day_start(day + timedelta(days=1))
                )
        wall = local.replace(tzinfo=None)
        minute = wall.replace(second=0, microsecond=0, fold=0)
        for window in self.windows:
            if _in_window(window, minute):
                return Excluded(f"excluded: window {window}", self._window_end(window, wall))
        return None

    def _day_start(self, day: date) -> datetime | None:
        """The first instant of a local day (in a gap at midnight, the end of the gap)."""
        try:
            return datetime.combine(day, time(0), tzinfo=self.zone).astimezone(UTC)
        except OverflowError:  # past year 9999
            return None

    def _window_end(self, window: str, wall: datetime) -> datetime | None:
        """A window whose minute field is ``*`` covers the whole hour; with ``*`` hours too, the whole day."""
        minute, hour = _window_fields(window)[:2]
        if minute != "*":
            return None
        if hour == "*":
            return self._day_start(wall.date() + timedelta(days=1))
        try:
            following = wall.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            return following.replace(tzinfo=self.zone).astimezone(UTC)
        except OverflowError:
            return None


@lru_cache(maxsize=1024)
def exclusion_rules(exclusions: Exclusions, zone_name: str) -> ExclusionRules:
    return ExclusionRules(exclusions, ZoneInfo(exclusions.timezone or zone_name))
