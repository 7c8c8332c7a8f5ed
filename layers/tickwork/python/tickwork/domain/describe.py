"""Schedules in words, for people: "At 09:00, Monday through Friday, America/New_York".

Cron expressions are described by the maintained ``cron-descriptor`` package (imported on first use: it
costs about 20 ms, and most invocations never describe anything); rate and one-time schedules need no
library.
"""

from __future__ import annotations

from functools import lru_cache

from tickwork.domain.cron_syntax import ALIASES
from tickwork.domain.models import CronSchedule, Exclusions, OnceSchedule, RateSchedule
from tickwork.domain.timeutil import to_rfc3339

_UNITS = ((86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second"))


def describe_schedule(schedule: OnceSchedule | CronSchedule | RateSchedule) -> str:
    if isinstance(schedule, OnceSchedule):
        return f"Once, at {to_rfc3339(schedule.at)}"
    if isinstance(schedule, RateSchedule):
        words = f"Every {_duration(schedule.every_seconds)}"
    else:
        words = f"{describe_cron(schedule.expression)}, {schedule.timezone}"
    if schedule.start_at is not None:
        words += f", from {to_rfc3339(schedule.start_at)}"
    if schedule.end_at is not None:
        words += f", until {to_rfc3339(schedule.end_at)}"
    if schedule.exclude is not None:
        words += _describe_exclusions(schedule.exclude)
    return words


def _describe_exclusions(exclude: Exclusions) -> str:
    """ ", except on US-NY holidays, 2026-12-24 and 2026-12-27 to 2027-01-01, not at: every minute, between
    12:00 and 13:59"."""
    days = [f"{calendar} holidays" for calendar in exclude.holidays]
    days += [day.isoformat() for day in exclude.dates]
    days += [f"{r.start.isoformat()} to {r.end.isoformat()}" for r in exclude.date_ranges]
    words = ""
    if days:
        listed = days[0] if len(days) == 1 else ", ".join(days[:-1]) + " and " + days[-1]
        words += f", except on {listed}"
    for window in exclude.windows:
        described = describe_cron(window)
        words += f", not at: {described[:1].lower()}{described[1:]}"
    if words and exclude.timezone:
        words += f" ({exclude.timezone})"
    return words


@lru_cache(maxsize=1024)
def describe_cron(expression: str) -> str:
    """The expression as the user wrote it (an alias by what it stands for), in words."""
    from cron_descriptor import CasingTypeEnum, Options, get_description  # type: ignore[import-untyped]

    text = " ".join(expression.split())
    options = Options()
    options.use_24hour_time_format = True
    options.casing_type = CasingTypeEnum.Sentence
    try:
        return str(get_description(ALIASES.get(text.lower(), text), options))
    except Exception:  # a form the describer does not know: say the expression itself
        return f"Cron {text}"


def _duration(seconds: int) -> str:
    for size, unit in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"  # unreachable: every whole number of seconds divides by 1
