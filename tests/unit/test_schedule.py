"""Unit tests for the schedule engine: ``next_fire_times``, ``fire_times_between`` and ``iter_fire_times``.

Every expected instant below was worked out by hand from the zone's rules (each DST premise is also checked
against zoneinfo in ``test_zone_premise``), never copied from the code under test. Expected values are
written with fixed UTC offsets, so comparing them with the engine's UTC results compares instants.
"""

from __future__ import annotations

import calendar
import threading
from collections.abc import Generator, Iterator
from datetime import UTC, date, datetime, timedelta
from itertools import islice, pairwise
from typing import Literal
from zoneinfo import ZoneInfo

import pytest
from tickwork.domain.models import CronSchedule, DstPolicy, OnceSchedule, RateSchedule
from tickwork.domain.schedule import (
    AnySchedule,
    fire_times_between,
    iter_fire_times,
    next_fire_time,
    next_fire_times,
)

Gap = Literal["shift", "skip"]
Overlap = Literal["once", "all"]
ONE_MICROSECOND = timedelta(microseconds=1)


def at(text: str) -> datetime:
    """An instant from an RFC 3339 string that carries its own UTC offset."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() is not None, "expected values must carry an offset"
    return value


def ats(*texts: str) -> list[datetime]:
    return [at(text) for text in texts]


def cron(
    expression: str,
    timezone: str = "UTC",
    *,
    gap: Gap = "shift",
    overlap: Overlap = "once",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> CronSchedule:
    return CronSchedule(
        type="cron",
        expression=expression,
        timezone=timezone,
        dst=DstPolicy(gap=gap, overlap=overlap),
        start_at=start_at,
        end_at=end_at,
    )


def rate(
    every_seconds: int, *, start_at: datetime | None = None, end_at: datetime | None = None
) -> RateSchedule:
    return RateSchedule(type="rate", every_seconds=every_seconds, start_at=start_at, end_at=end_at)


def assert_utc(fires: list[datetime]) -> None:
    for fire_at in fires:
        assert fire_at.tzinfo is not None
        assert fire_at.utcoffset() == timedelta(0)


def assert_strictly_increasing(fires: list[datetime]) -> None:
    assert all(earlier < later for earlier, later in pairwise(fires)), fires


def real_offsets(zone_name: str, wall: datetime) -> list[timedelta]:
    """The UTC offsets of the real instants whose local clock in ``zone_name`` reads ``wall``.

    Empty in a spring-forward gap, two offsets in a repeated fall-back span. Uses zoneinfo alone.
    """
    tz = ZoneInfo(zone_name)
    offsets: list[timedelta] = []
    for fold in (0, 1):
        local = wall.replace(tzinfo=tz, fold=fold)
        if local.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
            offset = local.utcoffset()
            assert offset is not None
            if offset not in offsets:
                offsets.append(offset)
    return sorted(offsets, reverse=True)


def hours(value: float) -> timedelta:
    return timedelta(hours=value)


# --- the DST premises every table below relies on -----------------------------------------------------------
@pytest.mark.parametrize(
    ("zone_name", "wall", "expected_offsets"),
    [
        # America/New_York: 02:00 EST -> 03:00 EDT on 2025-03-09; 02:00 EDT -> 01:00 EST on 2025-11-02.
        ("America/New_York", datetime(2025, 3, 9, 2, 30), []),
        ("America/New_York", datetime(2025, 3, 9, 3, 0), [hours(-4)]),
        ("America/New_York", datetime(2025, 11, 2, 1, 30), [hours(-4), hours(-5)]),
        # Australia/Lord_Howe: 02:00 +10:30 -> 02:30 +11 on 2025-10-05;
        # 02:00 +11 -> 01:30 +10:30 on 2025-04-06.
        ("Australia/Lord_Howe", datetime(2025, 10, 5, 1, 59), [hours(10.5)]),
        ("Australia/Lord_Howe", datetime(2025, 10, 5, 2, 0), []),
        ("Australia/Lord_Howe", datetime(2025, 10, 5, 2, 15), []),
        ("Australia/Lord_Howe", datetime(2025, 10, 5, 2, 30), [hours(11)]),
        ("Australia/Lord_Howe", datetime(2025, 4, 6, 1, 15), [hours(11)]),
        ("Australia/Lord_Howe", datetime(2025, 4, 6, 1, 45), [hours(11), hours(10.5)]),
        ("Australia/Lord_Howe", datetime(2025, 4, 6, 2, 0), [hours(10.5)]),
        # America/Santiago: 24:00 -04 -> 01:00 -03 on 2025-09-07 (no local midnight that day);
        # 24:00 -03 -> 23:00 -04 on 2025-04-05 (the 23:00 hour repeats).
        ("America/Santiago", datetime(2025, 9, 7, 0, 0), []),
        ("America/Santiago", datetime(2025, 9, 7, 0, 59), []),
        ("America/Santiago", datetime(2025, 9, 7, 1, 0), [hours(-3)]),
        ("America/Santiago", datetime(2025, 4, 5, 23, 30), [hours(-3), hours(-4)]),
        ("America/Santiago", datetime(2025, 4, 6, 0, 0), [hours(-4)]),
        # Australia/Sydney: 02:00 +10 -> 03:00 +11 on 2025-10-05; 03:00 +11 -> 02:00 +10 on 2025-04-06.
        ("Australia/Sydney", datetime(2025, 10, 5, 2, 30), []),
        ("Australia/Sydney", datetime(2025, 4, 6, 2, 30), [hours(11), hours(10)]),
        # Europe/London: 01:00 GMT -> 02:00 BST on 2025-03-30; 02:00 BST -> 01:00 GMT on 2025-10-26.
        ("Europe/London", datetime(2025, 3, 30, 1, 30), []),
        ("Europe/London", datetime(2025, 10, 26, 1, 30), [hours(1), hours(0)]),
        ("Europe/London", datetime(2025, 10, 26, 2, 0), [hours(0)]),
        # Pacific/Apia skipped 2011-12-30 entirely (-10 -> +14 at local midnight).
        ("Pacific/Apia", datetime(2011, 12, 30, 12, 0), []),
    ],
)
def test_zone_premise(zone_name: str, wall: datetime, expected_offsets: list[timedelta]) -> None:
    # Given a wall-clock time in a zone, When zoneinfo maps it to real instants,
    # Then it is in a gap (none), a repeated span (two) or ordinary (one), as the tables below assume.
    assert real_offsets(zone_name, wall) == expected_offsets


# --- America/New_York: the reference vectors ----------------------------------------------------------------
NEW_YORK_VECTORS = [
    pytest.param(
        "30 2 * * *",
        "shift",
        "once",
        "2025-03-08T12:00:00-05:00",
        ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"],
        id="gap-shift",
    ),
    pytest.param(
        "30 2 * * *",
        "skip",
        "once",
        "2025-03-08T12:00:00-05:00",
        ["2025-03-10T02:30:00-04:00", "2025-03-11T02:30:00-04:00"],
        id="gap-skip",
    ),
    pytest.param(
        "30 1 * * *",
        "shift",
        "once",
        "2025-11-01T12:00:00-04:00",
        ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"],
        id="overlap-once",
    ),
    pytest.param(
        "30 1 * * *",
        "shift",
        "all",
        "2025-11-01T12:00:00-04:00",
        ["2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"],
        id="overlap-all",
    ),
    pytest.param(
        "*/30 * * * *",
        "shift",
        "once",
        "2025-11-02T00:45:00-04:00",
        [
            "2025-11-02T01:00:00-04:00",
            "2025-11-02T01:30:00-04:00",
            "2025-11-02T01:00:00-05:00",
            "2025-11-02T01:30:00-05:00",
        ],
        id="step-hour-fires-both-copies",
    ),
    pytest.param(
        "0 * * * *",
        "shift",
        "once",
        "2025-03-09T00:30:00-05:00",
        ["2025-03-09T01:00:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-09T04:00:00-04:00"],
        id="wildcard-hour-drops-gap",
    ),
    pytest.param(
        "0 9 * * *",
        "shift",
        "once",
        "2025-03-08T12:00:00-05:00",
        ["2025-03-09T09:00:00-04:00", "2025-03-10T09:00:00-04:00"],
        id="keeps-wall-clock",
    ),
]


@pytest.mark.parametrize(("expression", "gap", "overlap", "after", "expected"), NEW_YORK_VECTORS)
def test_new_york_reference_vectors(
    expression: str, gap: Gap, overlap: Overlap, after: str, expected: list[str]
) -> None:
    # Given a New York cron schedule with the vector's DST policy
    schedule = cron(expression, "America/New_York", gap=gap, overlap=overlap)

    # When the next fire times after the vector's instant are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then they are exactly the vector's instants, in UTC
    assert fires == ats(*expected)
    assert_utc(fires)


# --- other zones with real DST transitions ------------------------------------------------------------------
OTHER_ZONE_VECTORS = [
    # Australia/Lord_Howe: a 30-minute shift.
    # Gap 02:00-02:30 on 2025-10-05, repeated 01:30-02:00 on 2025-04-06.
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "shift",
        "once",
        "2025-10-04T12:00:00+10:30",
        ["2025-10-05T02:30:00+11:00", "2025-10-06T02:15:00+11:00"],
        id="lord-howe-gap-shift",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "0 2 * * *",
        "shift",
        "once",
        "2025-10-04T12:00:00+10:30",
        ["2025-10-05T02:30:00+11:00", "2025-10-06T02:00:00+11:00"],
        id="lord-howe-gap-start-shift",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "skip",
        "once",
        "2025-10-04T12:00:00+10:30",
        ["2025-10-06T02:15:00+11:00", "2025-10-07T02:15:00+11:00"],
        id="lord-howe-gap-skip",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "30 2 * * *",
        "skip",
        "once",
        "2025-10-04T12:00:00+10:30",
        ["2025-10-05T02:30:00+11:00", "2025-10-06T02:30:00+11:00"],
        id="lord-howe-gap-end-is-real-even-with-skip",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "59 1 * * *",
        "skip",
        "once",
        "2025-10-04T12:00:00+10:30",
        ["2025-10-05T01:59:00+10:30", "2025-10-06T01:59:00+11:00"],
        id="lord-howe-just-before-gap",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "shift",
        "once",
        "2025-10-05T01:40:00+10:30",
        ["2025-10-05T01:45:00+10:30", "2025-10-05T02:30:00+11:00", "2025-10-05T02:45:00+11:00"],
        id="lord-howe-step-hour-across-gap",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "shift",
        "once",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T01:45:00+11:00", "2025-04-07T01:45:00+10:30"],
        id="lord-howe-overlap-once",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "shift",
        "all",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T01:45:00+11:00", "2025-04-06T01:45:00+10:30", "2025-04-07T01:45:00+10:30"],
        id="lord-howe-overlap-all",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "15 1 * * *",
        "shift",
        "all",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T01:15:00+11:00", "2025-04-07T01:15:00+10:30"],
        id="lord-howe-before-half-hour-overlap-fires-once-even-with-all",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "0 2 * * *",
        "shift",
        "all",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T02:00:00+10:30", "2025-04-07T02:00:00+10:30"],
        id="lord-howe-after-overlap-fires-once-even-with-all",
    ),
    pytest.param(
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "shift",
        "once",
        "2025-04-06T01:20:00+11:00",
        [
            "2025-04-06T01:30:00+11:00",
            "2025-04-06T01:45:00+11:00",
            "2025-04-06T01:30:00+10:30",
            "2025-04-06T01:45:00+10:30",
            "2025-04-06T02:00:00+10:30",
        ],
        id="lord-howe-step-hour-both-copies",
    ),
    # America/Santiago: no local midnight on 2025-09-07; the 23:00 hour repeats on 2025-04-05.
    pytest.param(
        "America/Santiago",
        "0 0 * * *",
        "shift",
        "once",
        "2025-09-06T12:00:00-04:00",
        ["2025-09-07T01:00:00-03:00", "2025-09-08T00:00:00-03:00"],
        id="santiago-midnight-shift",
    ),
    pytest.param(
        "America/Santiago",
        "@daily",
        "shift",
        "once",
        "2025-09-06T12:00:00-04:00",
        ["2025-09-07T01:00:00-03:00", "2025-09-08T00:00:00-03:00"],
        id="santiago-daily-alias-shift",
    ),
    pytest.param(
        "America/Santiago",
        "0 0 * * *",
        "skip",
        "once",
        "2025-09-06T12:00:00-04:00",
        ["2025-09-08T00:00:00-03:00", "2025-09-09T00:00:00-03:00"],
        id="santiago-midnight-skip",
    ),
    pytest.param(
        "America/Santiago",
        "@daily",
        "skip",
        "once",
        "2025-09-06T12:00:00-04:00",
        ["2025-09-08T00:00:00-03:00", "2025-09-09T00:00:00-03:00"],
        id="santiago-daily-alias-skip",
    ),
    pytest.param(
        "America/Santiago",
        "@hourly",
        "shift",
        "once",
        "2025-09-06T22:30:00-04:00",
        ["2025-09-06T23:00:00-04:00", "2025-09-07T01:00:00-03:00", "2025-09-07T02:00:00-03:00"],
        id="santiago-hourly-alias-drops-missing-midnight",
    ),
    pytest.param(
        "America/Santiago",
        "30 23 * * *",
        "shift",
        "once",
        "2025-04-05T12:00:00-03:00",
        ["2025-04-05T23:30:00-03:00", "2025-04-06T23:30:00-04:00"],
        id="santiago-overlap-once",
    ),
    pytest.param(
        "America/Santiago",
        "30 23 * * *",
        "shift",
        "all",
        "2025-04-05T12:00:00-03:00",
        ["2025-04-05T23:30:00-03:00", "2025-04-05T23:30:00-04:00", "2025-04-06T23:30:00-04:00"],
        id="santiago-overlap-all",
    ),
    pytest.param(
        "America/Santiago",
        "@daily",
        "shift",
        "all",
        "2025-04-05T12:00:00-03:00",
        ["2025-04-06T00:00:00-04:00", "2025-04-07T00:00:00-04:00"],
        id="santiago-daily-after-fall-back-once",
    ),
    # Australia/Sydney (southern hemisphere):
    # gap 02:00-03:00 on 2025-10-05, repeated 02:00-03:00 on 2025-04-06.
    pytest.param(
        "Australia/Sydney",
        "30 2 * * *",
        "shift",
        "once",
        "2025-10-04T12:00:00+10:00",
        ["2025-10-05T03:00:00+11:00", "2025-10-06T02:30:00+11:00"],
        id="sydney-gap-shift",
    ),
    pytest.param(
        "Australia/Sydney",
        "30 2 * * *",
        "skip",
        "once",
        "2025-10-04T12:00:00+10:00",
        ["2025-10-06T02:30:00+11:00", "2025-10-07T02:30:00+11:00"],
        id="sydney-gap-skip",
    ),
    pytest.param(
        "Australia/Sydney",
        "30 2 * * *",
        "shift",
        "once",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T02:30:00+11:00", "2025-04-07T02:30:00+10:00"],
        id="sydney-overlap-once",
    ),
    pytest.param(
        "Australia/Sydney",
        "30 2 * * *",
        "shift",
        "all",
        "2025-04-05T12:00:00+11:00",
        ["2025-04-06T02:30:00+11:00", "2025-04-06T02:30:00+10:00", "2025-04-07T02:30:00+10:00"],
        id="sydney-overlap-all",
    ),
    pytest.param(
        "Australia/Sydney",
        "0 * * * *",
        "shift",
        "once",
        "2025-04-06T01:30:00+11:00",
        ["2025-04-06T02:00:00+11:00", "2025-04-06T02:00:00+10:00", "2025-04-06T03:00:00+10:00"],
        id="sydney-hourly-both-copies",
    ),
    # Europe/London: gap 01:00-02:00 on 2025-03-30, repeated 01:00-02:00 on 2025-10-26.
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "shift",
        "once",
        "2025-03-29T12:00:00+00:00",
        ["2025-03-30T02:00:00+01:00", "2025-03-31T01:30:00+01:00"],
        id="london-gap-shift",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "skip",
        "once",
        "2025-03-29T12:00:00+00:00",
        ["2025-03-31T01:30:00+01:00", "2025-04-01T01:30:00+01:00"],
        id="london-gap-skip",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "shift",
        "once",
        "2025-10-25T12:00:00+01:00",
        ["2025-10-26T01:30:00+01:00", "2025-10-27T01:30:00+00:00"],
        id="london-overlap-once",
    ),
    pytest.param(
        "Europe/London",
        "30 1 * * *",
        "shift",
        "all",
        "2025-10-25T12:00:00+01:00",
        ["2025-10-26T01:30:00+01:00", "2025-10-26T01:30:00+00:00", "2025-10-27T01:30:00+00:00"],
        id="london-overlap-all",
    ),
    pytest.param(
        "Europe/London",
        "*/30 * * * *",
        "shift",
        "once",
        "2025-10-26T00:45:00+01:00",
        [
            "2025-10-26T01:00:00+01:00",
            "2025-10-26T01:30:00+01:00",
            "2025-10-26T01:00:00+00:00",
            "2025-10-26T01:30:00+00:00",
            "2025-10-26T02:00:00+00:00",
        ],
        id="london-step-hour-both-copies",
    ),
    # Pacific/Apia: the whole of 2011-12-30 never happened locally. A gap of a day is a move across the date
    # line, not daylight saving: even under `shift` its wall times are skipped, as vixie cron and cron-parser
    # skip jumps of more than 3 hours.
    pytest.param(
        "Pacific/Apia",
        "0 12 * * *",
        "shift",
        "once",
        "2011-12-29T00:00:00-10:00",
        ["2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00"],
        id="apia-missing-day-shift",
    ),
    pytest.param(
        "Pacific/Apia",
        "0 12 * * *",
        "skip",
        "once",
        "2011-12-29T00:00:00-10:00",
        ["2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00"],
        id="apia-missing-day-skip",
    ),
]


@pytest.mark.parametrize(
    ("zone_name", "expression", "gap", "overlap", "after", "expected"), OTHER_ZONE_VECTORS
)
def test_dst_vectors_in_other_zones(
    zone_name: str, expression: str, gap: Gap, overlap: Overlap, after: str, expected: list[str]
) -> None:
    # Given a cron schedule in a zone with a DST transition near `after`
    schedule = cron(expression, zone_name, gap=gap, overlap=overlap)

    # When the next fire times are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then they are the instants worked out from the zone's rules and the DST policy
    assert fires == ats(*expected)
    assert_utc(fires)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # a step hour (*/1) fires at every real matching instant: both copies of 01:30 despite overlap=once
        (
            "30 */1 * * *",
            "2025-11-02T00:45:00-04:00",
            ["2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-02T02:30:00-05:00"],
        ),
        # ... and 02:30 does not exist on the spring day, so it is dropped, not shifted, despite gap=shift
        (
            "30 */1 * * *",
            "2025-03-09T00:45:00-05:00",
            ["2025-03-09T01:30:00-05:00", "2025-03-09T03:30:00-04:00", "2025-03-09T04:30:00-04:00"],
        ),
        (
            "30 * * * *",
            "2025-03-09T00:45:00-05:00",
            ["2025-03-09T01:30:00-05:00", "2025-03-09T03:30:00-04:00"],
        ),
        # a ranged step (hours 1 and 3) is a step too
        (
            "0 1-3/2 * * *",
            "2025-11-02T00:00:00-04:00",
            ["2025-11-02T01:00:00-04:00", "2025-11-02T01:00:00-05:00", "2025-11-02T03:00:00-05:00"],
        ),
        (
            "0 1-3/2 * * *",
            "2025-03-09T00:00:00-05:00",
            ["2025-03-09T01:00:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-10T01:00:00-04:00"],
        ),
        # the same with seconds first
        (
            "0 30 */1 * * *",
            "2025-11-02T00:45:00-04:00",
            ["2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-02T02:30:00-05:00"],
        ),
        # a plain range is neither a wildcard nor a step: it is a list of fixed times, so the policy applies
        (
            "30 0-23 * * *",
            "2025-11-02T00:45:00-04:00",
            ["2025-11-02T01:30:00-04:00", "2025-11-02T02:30:00-05:00"],
        ),
        (
            "30 0-23 * * *",
            "2025-03-09T00:45:00-05:00",
            ["2025-03-09T01:30:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-09T03:30:00-04:00"],
        ),
    ],
)
def test_wildcard_or_step_hours_ignore_the_dst_policy(
    expression: str, after: str, expected: list[str]
) -> None:
    # Given a New York expression with the default policy (gap=shift, overlap=once)
    schedule = cron(expression, "America/New_York")

    # When the next fires around a transition are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then a wildcard or step hour fires at every real matching instant; a fixed hour follows the policy
    assert fires == ats(*expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # 02:00 and 02:30 both fall in the gap: both shift to 03:00, which must fire once only.
        (
            "0,30 2 * * *",
            ["2025-03-09T03:00:00-04:00", "2025-03-10T02:00:00-04:00", "2025-03-10T02:30:00-04:00"],
        ),
        # 02:00 shifts onto the real 03:00 fire: again one fire, not two.
        (
            "0 2,3 * * *",
            ["2025-03-09T03:00:00-04:00", "2025-03-10T02:00:00-04:00", "2025-03-10T03:00:00-04:00"],
        ),
    ],
)
def test_gap_times_shifted_onto_the_same_instant_fire_once(expression: str, expected: list[str]) -> None:
    # Given a fixed-hour expression with several wall times in (or at the end of) New York's spring gap
    schedule = cron(expression, "America/New_York")

    # When the fires from the day before are listed
    fires = next_fire_times(schedule, at("2025-03-08T12:00:00-05:00"), 3)

    # Then the shifted times collapse into one fire at the end of the gap
    assert fires == ats(*expected)


# --- `after` inside a repeated hour: no fire missed, none repeated ------------------------------------------
@pytest.mark.parametrize(
    ("zone_name", "expression", "overlap", "after", "expected"),
    [
        # New York, every 30 minutes, from inside the first copy of 01:xx
        (
            "America/New_York",
            "*/30 * * * *",
            "once",
            "2025-11-02T01:10:00-04:00",
            [
                "2025-11-02T01:30:00-04:00",
                "2025-11-02T01:00:00-05:00",
                "2025-11-02T01:30:00-05:00",
                "2025-11-02T02:00:00-05:00",
            ],
        ),
        # ... exactly on the first copy's 01:30 (after is exclusive)
        (
            "America/New_York",
            "*/30 * * * *",
            "once",
            "2025-11-02T01:30:00-04:00",
            ["2025-11-02T01:00:00-05:00", "2025-11-02T01:30:00-05:00", "2025-11-02T02:00:00-05:00"],
        ),
        # ... from inside the second copy
        (
            "America/New_York",
            "*/30 * * * *",
            "once",
            "2025-11-02T01:10:00-05:00",
            ["2025-11-02T01:30:00-05:00", "2025-11-02T02:00:00-05:00", "2025-11-02T02:30:00-05:00"],
        ),
        # A fixed time with overlap=all, from both copies, before and after the matching minute
        (
            "America/New_York",
            "30 1 * * *",
            "all",
            "2025-11-02T01:10:00-04:00",
            ["2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "all",
            "2025-11-02T01:40:00-04:00",
            ["2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "all",
            "2025-11-02T01:10:00-05:00",
            ["2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "all",
            "2025-11-02T01:40:00-05:00",
            ["2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"],
        ),
        # A fixed time with overlap=once: the second copy is never a fire, wherever `after` is
        (
            "America/New_York",
            "30 1 * * *",
            "once",
            "2025-11-02T01:10:00-04:00",
            ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "once",
            "2025-11-02T01:40:00-04:00",
            ["2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            "once",
            "2025-11-02T01:10:00-05:00",
            ["2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"],
        ),
        # Lord Howe's 30-minute repeated span, from each copy
        (
            "Australia/Lord_Howe",
            "*/10 * * * *",
            "once",
            "2025-04-06T01:35:00+11:00",
            [
                "2025-04-06T01:40:00+11:00",
                "2025-04-06T01:50:00+11:00",
                "2025-04-06T01:30:00+10:30",
                "2025-04-06T01:40:00+10:30",
                "2025-04-06T01:50:00+10:30",
                "2025-04-06T02:00:00+10:30",
            ],
        ),
        (
            "Australia/Lord_Howe",
            "*/10 * * * *",
            "once",
            "2025-04-06T01:35:00+10:30",
            ["2025-04-06T01:40:00+10:30", "2025-04-06T01:50:00+10:30", "2025-04-06T02:00:00+10:30"],
        ),
        # Santiago's repeated 23:00 hour, from the second copy
        (
            "America/Santiago",
            "30 23 * * *",
            "all",
            "2025-04-05T23:10:00-04:00",
            ["2025-04-05T23:30:00-04:00", "2025-04-06T23:30:00-04:00"],
        ),
    ],
)
def test_after_inside_a_repeated_span(
    zone_name: str, expression: str, overlap: Overlap, after: str, expected: list[str]
) -> None:
    # Given `after` inside the first or the second copy of a repeated span
    schedule = cron(expression, zone_name, overlap=overlap)

    # When the next fire times are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then no fire still ahead is missed and none already behind comes back
    assert fires == ats(*expected)


TRANSITION_SCHEDULES = [
    pytest.param(
        zone_name, expression, gap, overlap, start, id=f"{zone_name}-{expression}-{gap}-{overlap}-{start}"
    )
    for zone_name, starts in [
        ("America/New_York", ["2025-03-08T20:00:00-05:00", "2025-11-01T20:00:00-04:00"]),
        ("Australia/Lord_Howe", ["2025-04-05T20:00:00+11:00", "2025-10-04T20:00:00+10:30"]),
        ("America/Santiago", ["2025-04-05T18:00:00-03:00", "2025-09-06T18:00:00-04:00"]),
        ("Australia/Sydney", ["2025-04-05T20:00:00+11:00", "2025-10-04T20:00:00+10:00"]),
        ("Europe/London", ["2025-03-29T20:00:00+00:00", "2025-10-25T20:00:00+01:00"]),
    ]
    for start in starts
    for expression in ["*/10 * * * *", "0,30 0-3,23 * * *", "0 */2 * * *", "30 15 */3 * * *", "@hourly"]
    for gap, overlap in [("shift", "once"), ("skip", "all")]
]


@pytest.mark.parametrize(("zone_name", "expression", "gap", "overlap", "start"), TRANSITION_SCHEDULES)
def test_resuming_from_any_instant_neither_misses_nor_repeats(
    zone_name: str, expression: str, gap: Gap, overlap: Overlap, start: str
) -> None:
    # Given the fires of a schedule across a DST transition, listed in one pass
    schedule = cron(expression, zone_name, gap=gap, overlap=overlap)
    fires = next_fire_times(schedule, at(start), 80)
    assert len(fires) == 80
    assert_strictly_increasing(fires)
    assert_utc(fires)

    # When the engine is restarted from each fire, just after it and just before the next one
    # Then it resumes with exactly the next fire of the single pass
    for current, following in pairwise(fires):
        assert next_fire_time(schedule, current) == following
        assert next_fire_time(schedule, current + ONE_MICROSECOND) == following
        assert next_fire_time(schedule, following - ONE_MICROSECOND) == following
        assert next_fire_time(schedule, current + (following - current) / 2) == following


@pytest.mark.parametrize(
    ("zone_name", "start"),
    [
        ("America/New_York", "2025-03-09T04:00:00+00:00"),
        ("America/New_York", "2025-11-02T03:00:00+00:00"),
        ("Australia/Lord_Howe", "2025-04-05T12:00:00+00:00"),
        ("Australia/Lord_Howe", "2025-10-04T12:00:00+00:00"),
        ("America/Santiago", "2025-04-06T00:00:00+00:00"),
        ("America/Santiago", "2025-09-07T01:00:00+00:00"),
        ("Australia/Sydney", "2025-04-05T13:00:00+00:00"),
        ("Australia/Sydney", "2025-10-04T13:00:00+00:00"),
        ("Europe/London", "2025-03-29T22:00:00+00:00"),
        ("Europe/London", "2025-10-25T22:00:00+00:00"),
    ],
)
@pytest.mark.parametrize("step", [5, 15, 30])
def test_step_minutes_fire_at_every_real_matching_instant(zone_name: str, start: str, step: int) -> None:
    # Given a step expression with a wildcard hour, and an 8-hour window around a DST transition
    schedule = cron(f"*/{step} * * * *", zone_name)
    begin = at(start)
    end = begin + timedelta(hours=8)

    # When the fires in the window are listed
    fires = fire_times_between(schedule, begin, end)

    # Then they are exactly the real minutes whose local clock shows a multiple of `step`
    # (an oracle that walks every UTC minute and reads the local clock with zoneinfo)
    tz = ZoneInfo(zone_name)
    minutes = (begin + timedelta(minutes=k) for k in range(8 * 60))
    expected = [instant for instant in minutes if instant.astimezone(tz).minute % step == 0]
    assert fires == expected


# --- cron syntax --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # 6 fields: seconds first
        (
            "30 0 9 * * *",
            "2025-01-01T00:00:00+00:00",
            ["2025-01-01T09:00:30+00:00", "2025-01-02T09:00:30+00:00"],
        ),
        (
            "*/20 * * * * *",
            "2025-01-01T00:00:00+00:00",
            ["2025-01-01T00:00:20+00:00", "2025-01-01T00:00:40+00:00", "2025-01-01T00:01:00+00:00"],
        ),
        # a fractional `after` is passed over to the next whole matching second
        (
            "* * * * * *",
            "2025-01-01T09:00:00.500000+00:00",
            ["2025-01-01T09:00:01+00:00", "2025-01-01T09:00:02+00:00"],
        ),
        (
            "* * * * * *",
            "2024-12-31T23:59:59.999999+00:00",
            ["2025-01-01T00:00:00+00:00", "2025-01-01T00:00:01+00:00"],
        ),
        (
            "* * * * *",
            "2025-01-01T09:00:59.999999+00:00",
            ["2025-01-01T09:01:00+00:00", "2025-01-01T09:02:00+00:00"],
        ),
        # L: the last day of the month (2025 is not a leap year, 2028 is)
        (
            "0 12 L * *",
            "2025-01-01T00:00:00+00:00",
            [
                "2025-01-31T12:00:00+00:00",
                "2025-02-28T12:00:00+00:00",
                "2025-03-31T12:00:00+00:00",
                "2025-04-30T12:00:00+00:00",
            ],
        ),
        ("0 12 L 2 *", "2027-03-01T00:00:00+00:00", ["2028-02-29T12:00:00+00:00"]),
        # W: the weekday nearest the 15th (Feb 15 and Mar 15, 2025 are Saturdays; Jun 15 is a Sunday)
        (
            "0 12 15W * *",
            "2025-01-01T00:00:00+00:00",
            [
                "2025-01-15T12:00:00+00:00",
                "2025-02-14T12:00:00+00:00",
                "2025-03-14T12:00:00+00:00",
                "2025-04-15T12:00:00+00:00",
                "2025-05-15T12:00:00+00:00",
                "2025-06-16T12:00:00+00:00",
            ],
        ),
        # 1W never leaves the month: Feb 1 and Mar 1, 2025 are Saturdays, so the Monday after
        (
            "0 12 1W * *",
            "2025-01-15T00:00:00+00:00",
            ["2025-02-03T12:00:00+00:00", "2025-03-03T12:00:00+00:00"],
        ),
        # #: the second Monday of the month
        (
            "0 12 * * 1#2",
            "2025-01-01T00:00:00+00:00",
            [
                "2025-01-13T12:00:00+00:00",
                "2025-02-10T12:00:00+00:00",
                "2025-03-10T12:00:00+00:00",
                "2025-04-14T12:00:00+00:00",
            ],
        ),
        # L in the weekday field: the last Friday of the month
        (
            "0 12 * * L5",
            "2025-01-01T00:00:00+00:00",
            [
                "2025-01-31T12:00:00+00:00",
                "2025-02-28T12:00:00+00:00",
                "2025-03-28T12:00:00+00:00",
                "2025-04-25T12:00:00+00:00",
            ],
        ),
        # aliases
        (
            "@daily",
            "2025-01-01T06:00:00+00:00",
            ["2025-01-02T00:00:00+00:00", "2025-01-03T00:00:00+00:00"],
        ),
        (
            "@DAILY",
            "2025-01-01T06:00:00+00:00",
            ["2025-01-02T00:00:00+00:00", "2025-01-03T00:00:00+00:00"],
        ),
        (
            "@midnight",
            "2025-01-01T00:00:00+00:00",
            ["2025-01-02T00:00:00+00:00", "2025-01-03T00:00:00+00:00"],
        ),
        (
            "@hourly",
            "2025-01-01T00:30:00+00:00",
            ["2025-01-01T01:00:00+00:00", "2025-01-01T02:00:00+00:00", "2025-01-01T03:00:00+00:00"],
        ),
        # 2025-01-05 is the first Sunday of 2025
        ("@weekly", "2025-01-01T00:00:00+00:00", ["2025-01-05T00:00:00+00:00", "2025-01-12T00:00:00+00:00"]),
        ("@monthly", "2025-01-01T00:00:00+00:00", ["2025-02-01T00:00:00+00:00", "2025-03-01T00:00:00+00:00"]),
        ("@yearly", "2025-01-01T00:00:00+00:00", ["2026-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"]),
        ("@annually", "2025-06-01T00:00:00+00:00", ["2026-01-01T00:00:00+00:00"]),
        # extra white space is tolerated
        ("  0   9 * * 1-5 ", "2025-01-03T10:00:00+00:00", ["2025-01-06T09:00:00+00:00"]),
    ],
)
def test_cron_syntax(expression: str, after: str, expected: list[str]) -> None:
    # Given a UTC cron schedule using one of croniter's syntaxes
    schedule = cron(expression)

    # When the next fire times are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then they are the instants the syntax means
    assert fires == ats(*expected)


def test_special_day_syntax_agrees_with_the_calendar() -> None:
    # Given L, W, # and L<weekday> expressions over a whole year
    after = at("2024-12-31T23:59:59+00:00")
    year = 2025

    # When a year of fires is listed for each
    last_day = next_fire_times(cron("0 0 L * *"), after, 12)
    nearest_weekday_15 = next_fire_times(cron("0 0 15W * *"), after, 12)
    second_monday = next_fire_times(cron("0 0 * * 1#2"), after, 12)
    last_friday = next_fire_times(cron("0 0 * * L5"), after, 12)

    # Then each matches what the calendar module says, month by month
    for month in range(1, 13):
        weeks = calendar.monthcalendar(year, month)
        days_in_month = calendar.monthrange(year, month)[1]
        mondays = [week[calendar.MONDAY] for week in weeks if week[calendar.MONDAY]]
        fridays = [week[calendar.FRIDAY] for week in weeks if week[calendar.FRIDAY]]
        fifteenth = date(year, month, 15)
        nearest = {5: fifteenth - timedelta(days=1), 6: fifteenth + timedelta(days=1)}.get(
            fifteenth.weekday(), fifteenth
        )
        assert last_day[month - 1].date() == date(year, month, days_in_month)
        assert nearest_weekday_15[month - 1].date() == nearest
        assert second_monday[month - 1].date() == date(year, month, mondays[1])
        assert last_friday[month - 1].date() == date(year, month, fridays[-1])


@pytest.mark.parametrize(
    ("expression", "gap", "overlap", "after", "expected"),
    [
        # seconds-first fixed time in the spring gap: shifted to the end of the gap (seconds not kept)
        (
            "15 30 2 * * *",
            "shift",
            "once",
            "2025-03-08T12:00:00-05:00",
            ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:15-04:00"],
        ),
        (
            "15 30 2 * * *",
            "skip",
            "once",
            "2025-03-08T12:00:00-05:00",
            ["2025-03-10T02:30:15-04:00"],
        ),
        # seconds-first fixed time in the repeated hour
        (
            "15 30 1 * * *",
            "shift",
            "all",
            "2025-11-01T12:00:00-04:00",
            ["2025-11-02T01:30:15-04:00", "2025-11-02T01:30:15-05:00", "2025-11-03T01:30:15-05:00"],
        ),
        (
            "15 30 1 * * *",
            "shift",
            "once",
            "2025-11-01T12:00:00-04:00",
            ["2025-11-02T01:30:15-04:00", "2025-11-03T01:30:15-05:00"],
        ),
        # seconds-first with a step hour: every real instant, both copies
        (
            "0 */30 * * * *",
            "shift",
            "once",
            "2025-11-02T00:45:00-04:00",
            [
                "2025-11-02T01:00:00-04:00",
                "2025-11-02T01:30:00-04:00",
                "2025-11-02T01:00:00-05:00",
                "2025-11-02T01:30:00-05:00",
            ],
        ),
    ],
)
def test_six_field_cron_follows_the_dst_policy(
    expression: str, gap: Gap, overlap: Overlap, after: str, expected: list[str]
) -> None:
    # Given a 6-field (seconds first) New York expression around a transition
    schedule = cron(expression, "America/New_York", gap=gap, overlap=overlap)

    # When the next fires are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then the seconds field is honoured and the DST policy applies as for 5 fields
    assert fires == ats(*expected)


# --- start_at / end_at --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("start_at", "end_at", "after", "expected"),
    [
        # both bounds inclusive
        (
            "2025-01-01T09:00:00+00:00",
            "2025-01-01T12:00:00+00:00",
            "2024-06-01T00:00:00+00:00",
            [
                "2025-01-01T09:00:00+00:00",
                "2025-01-01T10:00:00+00:00",
                "2025-01-01T11:00:00+00:00",
                "2025-01-01T12:00:00+00:00",
            ],
        ),
        # a microsecond inside each bound excludes the fire on it
        (
            "2025-01-01T09:00:00.000001+00:00",
            "2025-01-01T11:59:59.999999+00:00",
            "2024-06-01T00:00:00+00:00",
            ["2025-01-01T10:00:00+00:00", "2025-01-01T11:00:00+00:00"],
        ),
        # `after` exactly at start_at is still exclusive
        (
            "2025-01-01T09:00:00+00:00",
            "2025-01-01T12:00:00+00:00",
            "2025-01-01T09:00:00+00:00",
            ["2025-01-01T10:00:00+00:00", "2025-01-01T11:00:00+00:00", "2025-01-01T12:00:00+00:00"],
        ),
        # `after` past end_at: nothing
        ("2025-01-01T09:00:00+00:00", "2025-01-01T12:00:00+00:00", "2025-01-01T12:00:00+00:00", []),
        # bounds given in another offset mean the same instants
        (
            "2025-01-01T04:00:00-05:00",
            "2025-01-01T07:00:00-05:00",
            "2024-06-01T00:00:00+00:00",
            [
                "2025-01-01T09:00:00+00:00",
                "2025-01-01T10:00:00+00:00",
                "2025-01-01T11:00:00+00:00",
                "2025-01-01T12:00:00+00:00",
            ],
        ),
    ],
)
def test_cron_bounds_are_inclusive(start_at: str, end_at: str, after: str, expected: list[str]) -> None:
    # Given an hourly cron bounded by start_at and end_at
    schedule = cron("0 * * * *", start_at=at(start_at), end_at=at(end_at))

    # When all fires after `after` are listed (the iterator must end by itself)
    fires = list(iter_fire_times(schedule, at(after)))

    # Then only fires inside [start_at, end_at] come out
    assert fires == ats(*expected)


def test_rate_bounds_are_inclusive() -> None:
    # Given a 90-second rate from 00:00 to 00:04:30 (a multiple of the period)
    schedule = rate(90, start_at=at("2025-01-01T00:00:00+00:00"), end_at=at("2025-01-01T00:04:30+00:00"))

    # When all its fires are listed
    fires = list(iter_fire_times(schedule, at("2024-01-01T00:00:00+00:00")))

    # Then both ends are fires
    assert fires == ats(
        "2025-01-01T00:00:00+00:00",
        "2025-01-01T00:01:30+00:00",
        "2025-01-01T00:03:00+00:00",
        "2025-01-01T00:04:30+00:00",
    )


# --- rate ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (
            "2024-12-31T00:00:00+00:00",
            ["2025-01-01T00:00:00+00:00", "2025-01-01T00:01:30+00:00", "2025-01-01T00:03:00+00:00"],
        ),
        (
            "2024-12-31T23:59:59.999999+00:00",
            ["2025-01-01T00:00:00+00:00", "2025-01-01T00:01:30+00:00"],
        ),
        ("2025-01-01T00:00:00+00:00", ["2025-01-01T00:01:30+00:00", "2025-01-01T00:03:00+00:00"]),
        ("2025-01-01T00:02:59.999+00:00", ["2025-01-01T00:03:00+00:00", "2025-01-01T00:04:30+00:00"]),
        ("2025-01-01T00:03:00+00:00", ["2025-01-01T00:04:30+00:00"]),
        # 1,000,000 s after start (11 d 13:46:40) is 11111.1 periods in; the next fire is period 11112,
        # 1,000,080 s after start.
        ("2025-01-12T13:46:40+00:00", ["2025-01-12T13:48:00+00:00", "2025-01-12T13:49:30+00:00"]),
    ],
)
def test_rate_is_anchored_at_start_at(after: str, expected: list[str]) -> None:
    # Given a 90-second rate starting at 2025-01-01T00:00Z
    schedule = rate(90, start_at=at("2025-01-01T00:00:00+00:00"))

    # When the next fires after `after` are asked for
    fires = next_fire_times(schedule, at(after), len(expected))

    # Then they lie on the grid start_at + k * 90 s
    assert fires == ats(*expected)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2025-01-01T00:00:00+00:00", ["2025-01-01T00:00:10+00:00", "2025-01-01T00:01:10+00:00"]),
        ("2025-01-01T00:05:00+00:00", ["2025-01-01T00:05:10+00:00", "2025-01-01T00:06:10+00:00"]),
        ("2025-01-01T00:05:10+00:00", ["2025-01-01T00:06:10+00:00"]),
    ],
)
def test_rate_without_start_at_is_anchored_at_the_given_anchor(after: str, expected: list[str]) -> None:
    # Given a 60-second rate with no start_at, anchored at 00:00:10Z (given in another offset)
    schedule = rate(60)
    anchor = at("2024-12-31T19:00:10-05:00")

    # When the next fires are asked for
    fires = next_fire_times(schedule, at(after), len(expected), anchor=anchor)

    # Then they lie on the anchor's grid, in UTC
    assert fires == ats(*expected)
    assert_utc(fires)


def test_start_at_wins_over_anchor() -> None:
    # Given a rate with a start_at and a different anchor
    schedule = rate(60, start_at=at("2025-01-01T00:00:00+00:00"))

    # When fires are asked for with the anchor
    fires = next_fire_times(
        schedule, at("2024-01-01T00:00:00+00:00"), 2, anchor=at("2025-01-01T00:00:30+00:00")
    )

    # Then start_at decides the grid
    assert fires == ats("2025-01-01T00:00:00+00:00", "2025-01-01T00:01:00+00:00")


def test_rate_without_start_at_or_anchor_is_refused() -> None:
    # Given a rate with neither start_at nor anchor
    schedule = rate(60)

    # When / Then asking for fires is a programming error
    with pytest.raises(ValueError, match="anchor"):
        next_fire_times(schedule, at("2025-01-01T00:00:00+00:00"), 1)


# --- once ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2025-01-01T11:59:59.999999+00:00", ["2025-01-01T12:00:00+00:00"]),
        ("2025-01-01T04:59:59-07:00", ["2025-01-01T12:00:00+00:00"]),
        ("2025-01-01T12:00:00+00:00", []),
        ("2025-01-01T13:00:00+01:00", []),
        ("2025-01-01T12:00:00.000001+00:00", []),
    ],
)
def test_once_fires_once_strictly_after(after: str, expected: list[str]) -> None:
    # Given a one-time schedule at 12:00Z
    schedule = OnceSchedule(type="once", at=at("2025-01-01T12:00:00+00:00"))

    # When up to five fires are asked for
    fires = next_fire_times(schedule, at(after), 5)

    # Then there is exactly one fire if `at` is strictly after `after`, else none
    assert fires == ats(*expected)
    assert next_fire_time(schedule, at(after)) == (at(expected[0]) if expected else None)


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2025-01-01T12:00:00+00:00", "2025-01-01T12:00:00.000001+00:00", ["2025-01-01T12:00:00+00:00"]),
        ("2025-01-01T00:00:00+00:00", "2025-01-01T12:00:00+00:00", []),
        ("2025-01-01T12:00:00.000001+00:00", "2025-01-02T00:00:00+00:00", []),
    ],
)
def test_once_between_is_half_open(start: str, end: str, expected: list[str]) -> None:
    # Given a one-time schedule at 12:00Z
    schedule = OnceSchedule(type="once", at=at("2025-01-01T12:00:00+00:00"))

    # When the fires in [start, end) are asked for
    fires = fire_times_between(schedule, at(start), at(end))

    # Then `at` counts only if start <= at < end
    assert fires == ats(*expected)


# --- fire_times_between -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schedule", "start", "end", "limit", "anchor", "expected"),
    [
        pytest.param(
            cron("*/15 * * * *"),
            "2025-01-01T10:00:00+00:00",
            "2025-01-01T11:00:00+00:00",
            None,
            None,
            [
                "2025-01-01T10:00:00+00:00",
                "2025-01-01T10:15:00+00:00",
                "2025-01-01T10:30:00+00:00",
                "2025-01-01T10:45:00+00:00",
            ],
            id="start-inclusive-end-exclusive",
        ),
        pytest.param(
            cron("*/15 * * * *"),
            "2025-01-01T10:00:00+00:00",
            "2025-01-01T11:00:00+00:00",
            2,
            None,
            ["2025-01-01T10:00:00+00:00", "2025-01-01T10:15:00+00:00"],
            id="limit",
        ),
        pytest.param(
            cron("*/15 * * * *"),
            "2025-01-01T10:00:00+00:00",
            "2025-01-01T11:00:00+00:00",
            0,
            None,
            [],
            id="limit-zero",
        ),
        pytest.param(
            cron("*/15 * * * *"),
            "2025-01-01T10:00:00+00:00",
            "2025-01-01T10:00:00+00:00",
            None,
            None,
            [],
            id="empty-range",
        ),
        pytest.param(
            cron("*/30 * * * *", "America/New_York"),
            "2025-11-02T05:00:00+00:00",
            "2025-11-02T07:00:00+00:00",
            None,
            None,
            [
                "2025-11-02T01:00:00-04:00",
                "2025-11-02T01:30:00-04:00",
                "2025-11-02T01:00:00-05:00",
                "2025-11-02T01:30:00-05:00",
            ],
            id="across-fall-back",
        ),
        pytest.param(
            rate(60),
            "2025-01-01T00:00:10+00:00",
            "2025-01-01T00:03:10+00:00",
            None,
            "2025-01-01T00:00:10+00:00",
            ["2025-01-01T00:00:10+00:00", "2025-01-01T00:01:10+00:00", "2025-01-01T00:02:10+00:00"],
            id="rate-with-anchor",
        ),
    ],
)
def test_fire_times_between(
    schedule: AnySchedule, start: str, end: str, limit: int | None, anchor: str | None, expected: list[str]
) -> None:
    # Given a schedule and a range [start, end)
    # When the fires in the range are asked for
    fires = fire_times_between(
        schedule, at(start), at(end), limit=limit, anchor=at(anchor) if anchor is not None else None
    )

    # Then exactly the fires in the half-open range come out, at most `limit` of them
    assert fires == ats(*expected)


# --- general properties -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "schedule",
    [
        cron("*/7 * * * *", "America/New_York"),
        cron("30 1 * * *", "America/New_York", overlap="all"),
        cron("0,30 2 * * *", "Australia/Lord_Howe"),
        cron("0 0 * * *", "America/Santiago"),
        cron("@hourly", "Australia/Sydney"),
        cron("*/45 * * * * *", "Europe/London"),
        rate(3600 * 25, start_at=at("2025-01-01T00:00:00+00:00")),
    ],
    ids=["ny-step", "ny-overlap-all", "lord-howe", "santiago", "sydney-hourly", "london-seconds", "rate"],
)
def test_output_is_strictly_increasing_utc(schedule: AnySchedule) -> None:
    # Given a schedule, When a long run of fires is listed from a point before a transition
    fires = next_fire_times(schedule, at("2025-03-01T00:00:00+00:00"), 500)

    # Then it is strictly increasing, in UTC, and all after the start
    assert len(fires) == 500
    assert_strictly_increasing(fires)
    assert_utc(fires)
    assert fires[0] > at("2025-03-01T00:00:00+00:00")


def test_naive_after_is_refused() -> None:
    # Given an `after` with no offset
    naive = datetime(2025, 1, 1, 12, 0)

    # When / Then the engine refuses to guess its zone
    with pytest.raises(ValueError, match="offset"):
        next_fire_times(cron("* * * * *"), naive, 1)


def test_iter_fire_times_is_lazy_and_unbounded() -> None:
    # Given an every-second cron
    schedule = cron("* * * * * *")

    # When ten thousand fires are drawn from the iterator
    fires = list(islice(iter_fire_times(schedule, at("2025-01-01T00:00:00+00:00")), 10_000))

    # Then they are consecutive seconds
    assert fires[0] == at("2025-01-01T00:00:01+00:00")
    assert fires[-1] == at("2025-01-01T02:46:40+00:00")
    assert all(later - earlier == timedelta(seconds=1) for earlier, later in pairwise(fires))


# --- the thread-local croniter cache ------------------------------------------------------------------------
def _hourly_utc(first: str, count: int) -> list[datetime]:
    start = at(first)
    return [start + timedelta(hours=k) for k in range(count)]


def test_interleaved_generators_of_one_expression_are_independent() -> None:
    # Given two live generators of the same expression, started far apart, in one thread
    schedule = cron("0 * * * *")
    early = iter_fire_times(schedule, at("2025-01-01T00:00:00+00:00"))
    late = iter_fire_times(schedule, at("2030-06-01T12:30:00+00:00"))

    # When they are advanced alternately, with one-shot calls for the same expression in between
    from_early: list[datetime] = []
    from_late: list[datetime] = []
    between: list[list[datetime]] = []
    for _ in range(6):
        from_early.append(next(early))
        from_late.append(next(late))
        between.append(next_fire_times(schedule, at("2040-02-29T23:59:00+00:00"), 2))

    # Then each produces its own sequence, unaffected by the other
    assert from_early == _hourly_utc("2025-01-01T01:00:00+00:00", 6)
    assert from_late == _hourly_utc("2030-06-01T13:00:00+00:00", 6)
    assert between == [ats("2040-03-01T00:00:00+00:00", "2040-03-01T01:00:00+00:00")] * 6


def test_interleaved_generators_with_different_dst_policies_are_independent() -> None:
    # Given the same New York expression with overlap=all and overlap=once, both live at once
    every_copy = iter_fire_times(
        cron("30 1 * * *", "America/New_York", overlap="all"), at("2025-11-01T12:00:00-04:00")
    )
    first_copy = iter_fire_times(cron("30 1 * * *", "America/New_York"), at("2025-11-01T12:00:00-04:00"))

    # When they are advanced alternately
    from_all: list[datetime] = []
    from_once: list[datetime] = []
    for _ in range(3):
        from_once.append(next(first_copy))
        from_all.append(next(every_copy))

    # Then each follows its own policy
    assert from_all == ats(
        "2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00", "2025-11-03T01:30:00-05:00"
    )
    assert from_once == ats(
        "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"
    )


def test_a_closed_generator_does_not_disturb_a_live_one() -> None:
    # Given a live generator and a second one of the same expression that is closed early
    schedule = cron("*/10 * * * *")
    live = iter_fire_times(schedule, at("2025-01-01T00:00:00+00:00"))
    assert next(live) == at("2025-01-01T00:10:00+00:00")
    closed = iter_fire_times(schedule, at("2026-01-01T00:00:00+00:00"))
    assert isinstance(closed, Generator)
    assert next(closed) == at("2026-01-01T00:10:00+00:00")
    closed.close()

    # When a third generator reuses the cached iterator, and the live one carries on
    reused = next_fire_times(schedule, at("2027-01-01T00:05:00+00:00"), 2)
    rest = [next(live), next(live)]

    # Then every result is its own
    assert reused == ats("2027-01-01T00:10:00+00:00", "2027-01-01T00:20:00+00:00")
    assert rest == ats("2025-01-01T00:20:00+00:00", "2025-01-01T00:30:00+00:00")


def test_generators_in_several_threads_are_independent() -> None:
    # Given several threads, each interleaving two generators of one shared expression
    schedule = cron("0 * * * *")
    results: dict[int, tuple[list[datetime], list[datetime]]] = {}
    barrier = threading.Barrier(4)

    def work(index: int) -> None:
        first: Iterator[datetime] = iter_fire_times(schedule, at(f"202{index}-01-01T00:00:00+00:00"))
        second: Iterator[datetime] = iter_fire_times(schedule, at(f"203{index}-01-01T00:00:00+00:00"))
        barrier.wait()
        ones: list[datetime] = []
        twos: list[datetime] = []
        for _ in range(50):
            ones.append(next(first))
            twos.append(next(second))
        results[index] = (ones, twos)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]

    # When they all run at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every generator produced its own hourly sequence
    for index in range(4):
        ones, twos = results[index]
        assert ones == _hourly_utc(f"202{index}-01-01T01:00:00+00:00", 50)
        assert twos == _hourly_utc(f"203{index}-01-01T01:00:00+00:00", 50)


@pytest.mark.parametrize(
    ("zone_name", "skipped_noon", "after", "expected"),
    [
        # Apia moved across the date line: 29 December 2011 at -10:00 was followed by 31 December at +14:00.
        (
            "Pacific/Apia",
            datetime(2011, 12, 30, 12),
            datetime(2011, 12, 28, tzinfo=UTC),
            ["2011-12-28T22:00:00+00:00", "2011-12-29T22:00:00+00:00", "2011-12-30T22:00:00+00:00"],
        ),
        # Kiritimati did the same at the end of 1994: 30 December at -10:00, then 1 January 1995 at +14:00.
        (
            "Pacific/Kiritimati",
            datetime(1994, 12, 31, 12),
            datetime(1994, 12, 29, tzinfo=UTC),
            ["1994-12-29T22:00:00+00:00", "1994-12-30T22:00:00+00:00", "1994-12-31T22:00:00+00:00"],
        ),
    ],
)
def test_a_skipped_calendar_day_has_no_fire_and_is_not_shifted_like_a_dst_gap(
    zone_name: str, skipped_noon: datetime, after: datetime, expected: list[str]
) -> None:
    tz = ZoneInfo(zone_name)
    # The premise: that noon never happened on the zone's wall clock.
    assert skipped_noon.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) != skipped_noon
    schedule = CronSchedule(type="cron", expression="0 12 * * *", timezone=zone_name)
    # The default gap policy (shift) would have fired at the first instant after the gap: not here.
    assert [fire.isoformat() for fire in next_fire_times(schedule, after, 3)] == expected
