"""``schedule.exclude`` and ``jitter_seconds``, as pure functions: validation, which fires are excluded and
why, the jumps over long exclusions, preview's DST notes, and each fire's jitter.

Holiday dates are facts of the calendar (Thanksgiving 2026 is Thursday 26 November; Christmas is 25
December), checked where they matter against the ``holidays`` package itself.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import islice, pairwise, takewhile
from typing import Any
from zoneinfo import ZoneInfo

import holidays
import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from tickwork.domain.cron_syntax import check_cron_syntax
from tickwork.domain.describe import describe_schedule
from tickwork.domain.exclusions import _in_window
from tickwork.domain.fires import decide_fires, jitter_of, jitter_span
from tickwork.domain.models import CronSchedule, Job, JobSpec, RateSchedule
from tickwork.domain.schedule import (
    dst_note,
    exclusion_of,
    iter_candidate_fires,
    iter_fire_times,
    next_fire_time,
    next_fire_times,
)

NEW_YORK = ZoneInfo("America/New_York")
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def cron(expression: str, timezone: str = "UTC", **extra: Any) -> CronSchedule:
    return CronSchedule.model_validate(
        {"type": "cron", "expression": expression, "timezone": timezone, **extra}
    )


def errors_of(schedule: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"name": "x", "schedule": schedule, "target": {"type": "http", "url": "https://example.com/h"}}
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(body)
    return [dict(error) for error in caught.value.errors()]


# --- validation -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("exclude", "where", "says"),
    [
        ({"holidays": ["XX"]}, ("holidays", 0), "unknown holiday calendar XX"),
        ({"holidays": "us-ny"}, ("holidays", 0), "did you mean US-NY?"),
        ({"holidays": ["US-ZZ"]}, ("holidays", 0), "US has no subdivision ZZ"),
        ({"dates": [20261225]}, ("dates", 0), "YYYY-MM-DD"),
        ({"dates": ["2026-12-25T00:00:00Z"]}, ("dates", 0), "YYYY-MM-DD"),
        ({"dates": ["2026-13-01"]}, ("dates", 0), "month"),
        ({"date_ranges": [{"start": "2026-12-31", "end": "2026-12-24"}]}, ("date_ranges", 0), "end"),
        ({"windows": ["0 0 12-13 * * *"]}, ("windows", 0), "5 cron fields"),
        ({"windows": ["* 25 * * *"]}, ("windows", 0), "hour value 25 is out of range"),
        ({"timezone": "Mars/Olympus"}, ("timezone",), "unknown IANA time zone"),
        ({"weekends": True}, ("weekends",), "Extra inputs"),
    ],
)
def test_each_bad_exclusion_is_refused_naming_its_field(
    exclude: dict[str, Any], where: tuple[Any, ...], says: str
) -> None:
    (error,) = errors_of({"type": "cron", "expression": "0 9 * * *", "exclude": exclude})
    assert error["loc"] == ("schedule", "cron", "exclude", *where)
    assert says in error["msg"]


def test_a_one_time_schedule_takes_no_exclusions() -> None:
    (error,) = errors_of({"type": "once", "at": "2027-01-01T00:00:00Z", "exclude": {"dates": ["2027-01-01"]}})
    assert error["loc"] == ("schedule", "once", "exclude")


def test_a_single_calendar_is_read_as_a_list_of_one() -> None:
    schedule = cron("0 9 * * *", exclude={"holidays": "US-NY"})
    assert schedule.exclude is not None and schedule.exclude.holidays == ("US-NY",)


def test_markets_and_subdivisions_are_calendars() -> None:
    schedule = cron("0 9 * * *", exclude={"holidays": ["NYSE", "GB-SCT", "DE"]})
    assert schedule.exclude is not None and len(schedule.exclude.holidays) == 3


# --- which fires are excluded, and why ---------------------------------------------------------------------
def test_a_weekday_job_skips_new_york_holidays_and_says_which() -> None:
    schedule = cron("0 9 * * 1-5", "America/New_York", exclude={"holidays": "US-NY"})
    plain = cron("0 9 * * 1-5", "America/New_York")
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2027, 1, 10, tzinfo=UTC)
    fires = list(takewhile(lambda fire: fire < end, iter_fire_times(schedule, start)))
    every = list(takewhile(lambda fire: fire < end, iter_fire_times(plain, start)))
    calendar = holidays.country_holidays("US", subdiv="NY", years=[2026, 2027])
    assert fires == [f for f in every if f.astimezone(NEW_YORK).date() not in calendar]
    local_days = {f.astimezone(NEW_YORK).date() for f in fires}
    assert date(2026, 11, 26) not in local_days  # Thanksgiving
    assert date(2026, 12, 25) not in local_days
    assert date(2026, 11, 27) in local_days  # the day after is a working day
    thanksgiving = datetime(2026, 11, 26, 9, tzinfo=NEW_YORK)
    assert exclusion_of(schedule, thanksgiving) == "excluded: holiday Thanksgiving Day (US-NY)"


def test_dates_ranges_and_windows_each_give_their_reason() -> None:
    schedule = cron(
        "0 */6 * * *",
        exclude={
            "dates": ["2026-12-01"],
            "date_ranges": [{"start": "2026-12-03", "end": "2026-12-04"}],
            "windows": ["* 12 * * *"],
        },
    )
    reasons = dict(islice(iter_candidate_fires(schedule, datetime(2026, 11, 30, 23, tzinfo=UTC)), 24))
    assert reasons[datetime(2026, 12, 1, 6, tzinfo=UTC)] == "excluded: date 2026-12-01"
    assert reasons[datetime(2026, 12, 4, 18, tzinfo=UTC)] == "excluded: dates 2026-12-03 to 2026-12-04"
    assert reasons[datetime(2026, 12, 2, 12, tzinfo=UTC)] == "excluded: window * 12 * * *"
    assert reasons[datetime(2026, 12, 2, 6, tzinfo=UTC)] is None
    assert reasons[datetime(2026, 12, 5, 0, tzinfo=UTC)] is None


def test_dates_follow_the_schedules_zone_or_the_exclusions_own() -> None:
    # 2026-12-24 in Tokyo ends at 15:00 UTC; in UTC it runs to midnight.
    tokyo = cron("0 * * * *", "Asia/Tokyo", exclude={"dates": ["2026-12-24"]})
    utc_dates = cron("0 * * * *", "Asia/Tokyo", exclude={"dates": ["2026-12-24"], "timezone": "UTC"})
    assert next_fire_time(tokyo, datetime(2026, 12, 24, 3, tzinfo=UTC)) == datetime(
        2026, 12, 24, 15, tzinfo=UTC
    )
    assert next_fire_time(utc_dates, datetime(2026, 12, 24, 3, tzinfo=UTC)) == datetime(
        2026, 12, 25, tzinfo=UTC
    )


def test_a_rate_schedule_excludes_by_utc_date_and_jumps_over_a_long_range() -> None:
    schedule = RateSchedule.model_validate(
        {
            "type": "rate",
            "every_seconds": 1,
            "start_at": "2026-12-01T00:00:00Z",
            "exclude": {"date_ranges": [{"start": "2026-12-02", "end": "2026-12-30"}]},
        }
    )
    after = datetime(2026, 12, 1, 23, 59, 58, tzinfo=UTC)
    # 2.5 million excluded seconds in the range: found by jumping to its end, not by walking them
    assert next_fire_times(schedule, after, 3) == [
        datetime(2026, 12, 1, 23, 59, 59, tzinfo=UTC),
        datetime(2026, 12, 31, tzinfo=UTC),
        datetime(2026, 12, 31, 0, 0, 1, tzinfo=UTC),
    ]


def test_a_window_of_whole_hours_is_jumped_across_a_dst_change() -> None:
    # Every second but 01:00-01:59 local; 1 November 2026 in New York repeats 01:00-01:59.
    schedule = cron("* * * * * *", "America/New_York", exclude={"windows": ["* 1 * * *"]})
    after = datetime(2026, 11, 1, 0, 59, 59, tzinfo=NEW_YORK)
    fires = next_fire_times(schedule, after, 2)
    assert fires == [
        datetime(2026, 11, 1, 2, 0, 0, tzinfo=NEW_YORK),
        datetime(2026, 11, 1, 2, 0, 1, tzinfo=NEW_YORK),
    ]
    # Two hours of real time passed: both copies of the repeated hour were excluded
    assert fires[0] - after == timedelta(hours=2, seconds=1)


def test_excluding_every_fire_ends_the_schedule_rather_than_searching_forever() -> None:
    christmas = cron("0 9 25 12 *", exclude={"windows": ["* * 25 12 *"]})
    assert next_fire_time(christmas, T0) is None
    assert next(iter_candidate_fires(christmas, T0))[1] == "excluded: window * * 25 12 *"
    # A fire every second, every day excluded: the search gives up after MAX_EXCLUDED_IN_A_ROW days
    everything = RateSchedule.model_validate(
        {
            "type": "rate",
            "every_seconds": 1,
            "start_at": "2026-01-01T00:00:00Z",
            "exclude": {"windows": ["* * * * *"]},
        }
    )
    assert next_fire_time(everything, T0) is None


def test_holidays_are_known_as_far_as_the_holidays_package_knows_them() -> None:
    # Christmas is a holiday every year the package covers; past its last year no day is a holiday.
    schedule = cron("0 9 25 12 *", exclude={"holidays": "US"})
    following = next_fire_time(schedule, T0)
    assert following is not None
    assert not holidays.country_holidays("US", years=following.year)
    assert holidays.country_holidays("US", years=following.year - 1).get(date(following.year - 1, 12, 25))


@pytest.mark.parametrize(
    "window",
    ["* * 25 12 *", "* 1 * * *", "0-29 * * * *", "* * L * *", "* * 1,L * *", "* * * * 0,6", "* * * * 7",
     "* * 1,15 * 1", "*/15 9-17 * * MON-FRI", "* * ? 2 *", "* * 15W * *", "* * * * 5#3", "* * * * 5L"],
)  # fmt: skip
def test_windows_match_the_minutes_croniter_matches(window: str) -> None:
    start = datetime(2026, 1, 1)
    spelled = check_cron_syntax(window)  # croniter reads 5L as L5
    for step in range(0, 2 * 366 * 24 * 60, 97):  # two years, every 97th minute
        minute = start + timedelta(minutes=step)
        assert _in_window(window, minute) == croniter.match(spelled, minute), minute


SCHEDULES = st.sampled_from(
    [
        ("*/7 * * * *", "UTC"),
        ("0 */3 * * *", "America/New_York"),
        ("30 1 * * *", "America/New_York"),
        ("*/20 * * * * *", "Australia/Lord_Howe"),
        ("0 0 * * 1-5", "Europe/London"),
        ("15 2 * * *", "Europe/Berlin"),
    ]
)
WINDOWS = st.sampled_from(
    ["* 1 * * *", "* * * * 0,6", "0-29 * * * *", "* 2-3 * 11 *", "* * 1 * *", "5 * * * *"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule=SCHEDULES,
    windows=st.lists(WINDOWS, max_size=2),
    day_offsets=st.lists(st.integers(0, 40), max_size=3),
    calendars=st.lists(st.sampled_from(["US-NY", "GB", "NYSE", "AU-NSW"]), max_size=1),
    start=st.integers(0, 60 * 24 * 20),
)
def test_the_jumps_over_excluded_fires_find_exactly_the_fires_a_walk_finds(
    schedule: tuple[str, str], windows: list[str], day_offsets: list[int], calendars: list[str], start: int
) -> None:
    expression, zone = schedule
    dates = [(date(2026, 10, 20) + timedelta(days=d)).isoformat() for d in day_offsets]
    excluding = cron(
        expression,
        zone,
        dst={"overlap": "all"},
        exclude={"windows": windows, "dates": dates, "holidays": calendars},
    )
    after = datetime(2026, 10, 20, tzinfo=UTC) + timedelta(minutes=start)
    walked = [fire for fire, reason in islice(iter_candidate_fires(excluding, after), 1500) if reason is None]
    jumped = next_fire_times(excluding, after, len(walked))
    assert jumped == walked[: len(jumped)]
    assert len(jumped) == len(walked)


# --- planning ---------------------------------------------------------------------------------------------
def test_a_plan_records_the_excluded_fires_ahead_and_runs_the_rest() -> None:
    schedule = cron("*/10 * * * * *", exclude={"windows": ["1 * * * *"]})
    now = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
    plan = decide_fires(
        schedule,
        now,
        now,
        timedelta(seconds=60),
        policy="fire_once",
        grace=timedelta(seconds=60),
        backfill_limit=1,
    )
    assert plan.run == [now, now + timedelta(seconds=10), now + timedelta(seconds=20)]
    assert plan.excluded == [
        (datetime(2026, 12, 1, 10, 1, s, tzinfo=UTC), "excluded: window 1 * * * *") for s in (0, 10, 20, 30)
    ]
    # The cursor stops at the first fire past the horizon, excluded or not: the next pass records it
    assert plan.next_fire_at == datetime(2026, 12, 1, 10, 1, 40, tzinfo=UTC)


def test_an_excluded_last_fire_is_the_last_fire_the_plan_covers() -> None:
    schedule = cron("0 * * * *", end_at="2026-12-01T03:00:00Z", exclude={"windows": ["* 3 * * *"]})
    now = datetime(2026, 12, 1, 1, 30, tzinfo=UTC)
    plan = decide_fires(
        schedule,
        now,
        now,
        timedelta(hours=2),
        policy="fire_once",
        grace=timedelta(seconds=60),
        backfill_limit=1,
    )
    assert plan.run == [datetime(2026, 12, 1, 2, tzinfo=UTC)]
    assert plan.excluded == [(datetime(2026, 12, 1, 3, tzinfo=UTC), "excluded: window * 3 * * *")]
    assert plan.next_fire_at is None
    assert plan.last_fire_at == datetime(2026, 12, 1, 3, tzinfo=UTC)


# --- preview's DST notes ----------------------------------------------------------------------------------
def test_dst_notes_mark_shifted_and_repeated_fires_only() -> None:
    gap = cron("30 2 * * *", "America/New_York")
    shifted = datetime(2026, 3, 8, 3, 0, tzinfo=NEW_YORK)  # 02:30 does not exist that day
    assert next_fire_time(gap, datetime(2026, 3, 7, 12, tzinfo=UTC)) == shifted
    assert dst_note(gap, shifted) == "shifted"
    assert dst_note(gap, datetime(2026, 3, 9, 2, 30, tzinfo=NEW_YORK)) is None
    both = cron("30 1 * * *", "America/New_York", dst={"overlap": "all"})
    first, second = next_fire_times(both, datetime(2026, 11, 1, 4, tzinfo=UTC), 2)
    assert second - first == timedelta(hours=1)
    assert dst_note(both, first) == dst_note(both, second) == "repeated"
    once = cron("30 1 * * *", "America/New_York")
    assert dst_note(once, next_fire_time(once, datetime(2026, 11, 1, 4, tzinfo=UTC)) or T0) is None
    assert dst_note(RateSchedule(type="rate", every_seconds=60, start_at=T0), T0) is None


def test_descriptions_say_what_is_excluded() -> None:
    schedule = cron(
        "0 9 * * 1-5",
        "America/New_York",
        exclude={"holidays": "US-NY", "dates": ["2026-12-24"], "windows": ["* 12-13 * * *"]},
    )
    assert describe_schedule(schedule) == (
        "At 09:00, Monday through Friday, America/New_York, except on US-NY holidays and 2026-12-24,"
        " not at: every minute, between 12:00 and 13:59"
    )


# --- jitter -----------------------------------------------------------------------------------------------
def job_with(schedule: dict[str, Any], jitter: int, job_id: str = "01JOBJITTER0000000000000000") -> Job:
    return Job.model_validate(
        {
            "name": "j",
            "schedule": schedule,
            "target": {"type": "http", "url": "https://example.com/h"},
            "jitter_seconds": jitter,
            "job_id": job_id,
            "tenant_id": "acme",
            "created_at": T0,
            "updated_at": T0,
        }
    )


def test_jitter_is_fixed_per_fire_spread_and_within_its_bound() -> None:
    job = job_with({"type": "cron", "expression": "0 * * * *"}, jitter=600)
    fires = next_fire_times(job.schedule, T0, 200)
    offsets = [jitter_of(job, fire) for fire in fires]
    assert offsets == [jitter_of(job, fire) for fire in fires]  # the same every time it is asked
    assert all(timedelta(0) <= offset <= timedelta(seconds=600) for offset in offsets)
    assert len(set(offsets)) > 190  # spread, not one offset for all
    assert max(offsets) > timedelta(seconds=500) and min(offsets) < timedelta(seconds=100)
    other = job_with(
        {"type": "cron", "expression": "0 * * * *"}, jitter=600, job_id="01JOBJITTER0000000000000001"
    )
    assert [jitter_of(other, fire) for fire in fires] != offsets  # each job its own spread


def test_jitter_never_reaches_the_next_fire() -> None:
    job = job_with({"type": "cron", "expression": "* * * * *"}, jitter=3600)
    fires = next_fire_times(job.schedule, T0, 300)
    for fire, following in pairwise(fires):
        assert fire <= fire + jitter_of(job, fire) < following
    assert max(jitter_of(job, fire) for fire in fires) > timedelta(seconds=50)
    assert jitter_span(job.schedule, fires[0], 3600, anchor=None) == timedelta(seconds=59, milliseconds=999)


def test_no_jitter_is_no_offset_and_a_last_fire_takes_the_full_spread() -> None:
    assert jitter_of(job_with({"type": "cron", "expression": "* * * * *"}, jitter=0), T0) == timedelta(0)
    once = job_with({"type": "once", "at": "2026-12-01T00:00:00Z"}, jitter=30)
    fire = datetime(2026, 12, 1, tzinfo=UTC)
    assert jitter_span(once.schedule, fire, 30, anchor=None) == timedelta(seconds=30)
    assert timedelta(0) <= jitter_of(once, fire) <= timedelta(seconds=30)
