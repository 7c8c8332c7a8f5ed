"""Unit tests for misfire decisions: ``decide_fires`` and ``plan_fires``.

Semantics under test (design.md, "Policies", and the docstrings of misfire.py):

- a fire ``f`` is late when ``now > f + grace``; a fire exactly at ``now - grace`` is on time;
- late fires: ``skip`` records them all as MISSED, ``fire_once`` runs the latest and records the rest,
  ``backfill`` runs the latest ``backfill_limit`` (oldest first) and records the rest;
- at most ``MISSED_RECORD_LIMIT`` missed fires are listed (the latest ones); ``more_missed`` says older exist;
- fires on time up to ``now + horizon`` (inclusive) all run, at most ``MAX_FIRES_PER_PASS`` per pass;
- ``next_fire_at`` is the first fire the plan does not cover, or None when the schedule is over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.misfire import (
    MAX_FIRES_PER_PASS,
    MISSED_RECORD_LIMIT,
    FirePlan,
    decide_fires,
    first_fire_anchor,
    plan_fires,
)
from tickwork.domain.models import (
    CronSchedule,
    HttpTarget,
    Job,
    MisfirePolicy,
    OnceSchedule,
    RateSchedule,
)
from tickwork.domain.schedule import AnySchedule

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
ONE_MICROSECOND = timedelta(microseconds=1)
HORIZON = timedelta(minutes=5)
MIDNIGHT = datetime(2025, 1, 1, tzinfo=UTC)
EVERY_MINUTE = CronSchedule(type="cron", expression="* * * * *")
EVERY_SECOND = CronSchedule(type="cron", expression="* * * * * *")


def minutes(first: datetime, last: datetime) -> list[datetime]:
    """Whole minutes from ``first`` to ``last`` inclusive (both whole minutes)."""
    count = (last - first) // MINUTE + 1
    return [first + k * MINUTE for k in range(count)]


def seconds(first: datetime, last: datetime) -> list[datetime]:
    count = (last - first) // SECOND + 1
    return [first + k * SECOND for k in range(count)]


def hm(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2025, 1, 1, hour, minute, second, tzinfo=UTC)


def make_job(
    schedule: AnySchedule,
    *,
    misfire_policy: MisfirePolicy = "fire_once",
    misfire_grace_seconds: int = 60,
    backfill_limit: int = 100,
    created_at: datetime = MIDNIGHT,
) -> Job:
    return Job(
        name="nightly",
        schedule=schedule,
        target=HttpTarget(type="http", url="https://example.com/hook"),
        misfire_policy=misfire_policy,
        misfire_grace_seconds=misfire_grace_seconds,
        backfill_limit=backfill_limit,
        job_id="job-1",
        tenant_id="acme",
        created_at=created_at,
        updated_at=created_at,
    )


def decide(
    schedule: AnySchedule,
    cursor: datetime,
    now: datetime = NOW,
    horizon: timedelta = HORIZON,
    *,
    policy: MisfirePolicy,
    grace: timedelta = timedelta(seconds=60),
    backfill_limit: int = 100,
    anchor: datetime | None = None,
) -> FirePlan:
    return decide_fires(
        schedule,
        cursor,
        now,
        horizon,
        policy=policy,
        grace=grace,
        backfill_limit=backfill_limit,
        anchor=anchor,
    )


# --- no cursor, nothing late --------------------------------------------------------------------------------
def test_no_cursor_plans_nothing() -> None:
    # Given a job whose schedule has no fire left (cursor None)
    job = make_job(EVERY_MINUTE)

    # When it is planned
    plan = plan_fires(job, None, NOW, HORIZON)

    # Then nothing runs, nothing is missed and the cursor stays None
    assert plan == FirePlan(run=[], missed=[], more_missed=False, next_fire_at=None)


@pytest.mark.parametrize("policy", ["skip", "fire_once", "backfill"])
def test_fires_on_time_all_run_up_to_the_horizon(policy: MisfirePolicy) -> None:
    # Given an every-minute cron whose cursor is `now`
    # When it is planned with a 5-minute horizon
    plan = decide(EVERY_MINUTE, NOW, policy=policy)

    # Then every fire from now to now + 5 min (inclusive) runs, whatever the policy, and the cursor moves on
    assert plan.run == minutes(hm(12, 0), hm(12, 5))
    assert plan.missed == []
    assert plan.more_missed is False
    assert plan.next_fire_at == hm(12, 6)


def test_a_fire_exactly_at_the_horizon_is_planned() -> None:
    # Given an every-minute cron and a horizon ending exactly on a fire
    # When it is planned
    plan = decide(EVERY_MINUTE, hm(12, 1), horizon=timedelta(minutes=3), policy="skip")

    # Then the fire at now + horizon is in the plan and the cursor is the fire after it
    assert plan.run == [hm(12, 1), hm(12, 2), hm(12, 3)]
    assert plan.next_fire_at == hm(12, 4)


def test_a_fire_one_microsecond_past_the_horizon_waits() -> None:
    # Given a horizon ending one microsecond before a fire
    # When it is planned
    plan = decide(EVERY_MINUTE, hm(12, 1), horizon=timedelta(minutes=3) - ONE_MICROSECOND, policy="skip")

    # Then that fire is left for the next pass: it becomes the cursor
    assert plan.run == [hm(12, 1), hm(12, 2)]
    assert plan.next_fire_at == hm(12, 3)


def test_a_cursor_beyond_the_horizon_plans_nothing_and_keeps_the_cursor() -> None:
    # Given a cursor an hour ahead of now
    # When it is planned
    plan = decide(EVERY_MINUTE, hm(13, 0), policy="backfill")

    # Then nothing runs and the cursor is unchanged
    assert plan == FirePlan(run=[], missed=[], more_missed=False, next_fire_at=hm(13, 0))


def test_a_cursor_between_fires_starts_at_the_next_fire() -> None:
    # Given a cursor half-way between two fires (the cursor is inclusive, not a fire itself)
    # When it is planned
    plan = decide(EVERY_MINUTE, hm(12, 0, 30), policy="skip")

    # Then the first planned fire is the next whole minute
    assert plan.run == minutes(hm(12, 1), hm(12, 5))
    assert plan.next_fire_at == hm(12, 6)


# --- the grace boundary -------------------------------------------------------------------------------------
@pytest.mark.parametrize("grace_seconds", [0, 1, 60, 3600])
@pytest.mark.parametrize(
    ("policy", "late_run", "late_missed"),
    [("skip", False, True), ("fire_once", True, False), ("backfill", True, False)],
)
def test_grace_boundary(grace_seconds: int, policy: MisfirePolicy, late_run: bool, late_missed: bool) -> None:
    # Given a one-time fire at 12:00 and a grace period
    fire_at = hm(12, 0)
    schedule = OnceSchedule(type="once", at=fire_at)
    grace = timedelta(seconds=grace_seconds)

    # When it is planned exactly at fire + grace, and one microsecond later
    on_time = decide(schedule, fire_at, now=fire_at + grace, grace=grace, policy=policy)
    late = decide(schedule, fire_at, now=fire_at + grace + ONE_MICROSECOND, grace=grace, policy=policy)

    # Then at fire + grace it is on time and runs under every policy
    assert on_time == FirePlan(run=[fire_at], missed=[], more_missed=False, next_fire_at=None)
    # And one microsecond later it is late: the policy decides
    assert late.run == ([fire_at] if late_run else [])
    assert late.missed == ([fire_at] if late_missed else [])
    assert late.more_missed is False
    assert late.next_fire_at is None


def test_grace_boundary_with_a_stream_of_fires() -> None:
    # Given an every-minute cron, 60 s grace, and now = 12:00:00: 11:59:00 is exactly now - grace
    # When it is planned from 11:50 under skip
    plan = decide(EVERY_MINUTE, hm(11, 50), now=hm(12, 0), policy="skip")

    # Then 11:59 is on time and runs, 11:58 and older are missed
    assert plan.run == minutes(hm(11, 59), hm(12, 5))
    assert plan.missed == minutes(hm(11, 50), hm(11, 58))

    # And one microsecond later, 11:59 is late too
    later = decide(EVERY_MINUTE, hm(11, 50), now=hm(12, 0) + ONE_MICROSECOND, policy="skip")
    assert later.run == minutes(hm(12, 0), hm(12, 5))
    assert later.missed == minutes(hm(11, 50), hm(11, 59))


# --- the three policies -------------------------------------------------------------------------------------
# now = 12:00:30, grace 60 s: fires before 11:59:30 are late. From a cursor at 11:50 that is 11:50 ... 11:59
# (10 late fires); on time are 12:00 ... 12:05 (the horizon ends at 12:05:30).
ON_TIME = minutes(hm(12, 0), hm(12, 5))


@pytest.mark.parametrize(
    ("policy", "backfill_limit", "run_late", "missed"),
    [
        ("skip", 100, [], minutes(hm(11, 50), hm(11, 59))),
        ("fire_once", 100, [hm(11, 59)], minutes(hm(11, 50), hm(11, 58))),
        ("backfill", 3, minutes(hm(11, 57), hm(11, 59)), minutes(hm(11, 50), hm(11, 56))),
        ("backfill", 10, minutes(hm(11, 50), hm(11, 59)), []),
        ("backfill", 100, minutes(hm(11, 50), hm(11, 59)), []),
        ("backfill", 1, [hm(11, 59)], minutes(hm(11, 50), hm(11, 58))),
    ],
)
def test_policies(
    policy: MisfirePolicy, backfill_limit: int, run_late: list[datetime], missed: list[datetime]
) -> None:
    # Given a job whose cursor is ten minutes behind (an outage)
    job = make_job(EVERY_MINUTE, misfire_policy=policy, backfill_limit=backfill_limit)

    # When it is planned at 12:00:30
    plan = plan_fires(job, hm(11, 50), hm(12, 0, 30), HORIZON)

    # Then the policy decides the late fires, oldest first, and every on-time fire runs after them
    assert plan.run == run_late + ON_TIME
    assert plan.missed == missed
    assert plan.more_missed is False
    assert plan.next_fire_at == hm(12, 6)


# --- MISSED_RECORD_LIMIT ------------------------------------------------------------------------------------
def test_missed_record_limit_is_one_hundred() -> None:
    assert MISSED_RECORD_LIMIT == 100


@pytest.mark.parametrize(
    ("policy", "backfill_limit", "late_count", "runs_late", "more_missed"),
    [
        ("skip", 100, 100, 0, False),
        ("skip", 100, 101, 0, True),
        ("fire_once", 100, 101, 1, False),
        ("fire_once", 100, 102, 1, True),
        ("backfill", 5, 105, 5, False),
        ("backfill", 5, 106, 5, True),
        ("backfill", 1000, 1100, 1000, False),
        ("backfill", 1000, 1101, 1000, True),
    ],
)
def test_missed_records_are_capped_and_flagged(
    policy: MisfirePolicy, backfill_limit: int, late_count: int, runs_late: int, more_missed: bool
) -> None:
    # Given an every-minute cron, no grace, and a cursor `late_count` minutes behind 12:00
    cursor = NOW - late_count * MINUTE
    late = minutes(cursor, NOW - MINUTE)
    assert len(late) == late_count

    # When it is planned at 12:00
    plan = decide(EVERY_MINUTE, cursor, grace=timedelta(0), policy=policy, backfill_limit=backfill_limit)

    # Then the latest `runs_late` late fires run, the latest 100 of the rest are listed as missed,
    # and more_missed says whether older ones were left out
    kept = late[len(late) - runs_late :]
    rest = late[: len(late) - runs_late]
    assert plan.run == kept + minutes(hm(12, 0), hm(12, 5))
    assert plan.missed == rest[-MISSED_RECORD_LIMIT:]
    assert len(plan.missed) == min(len(rest), MISSED_RECORD_LIMIT)
    assert plan.more_missed is more_missed
    assert plan.next_fire_at == hm(12, 6)


# --- an oracle sweep ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    run: list[datetime]
    missed: list[datetime]
    more_missed: bool
    next_fire_at: datetime


def expected_plan(
    period: timedelta,
    cursor: datetime,
    now: datetime,
    grace: timedelta,
    policy: MisfirePolicy,
    backfill_limit: int,
) -> Expected:
    """The plan for a schedule firing every ``period`` from midnight, straight from the definitions."""
    first = cursor + (-(cursor - MIDNIGHT) % period)  # the first fire >= cursor
    fires: list[datetime] = []
    fire_at = first
    while fire_at <= now + HORIZON:
        fires.append(fire_at)
        fire_at += period
    late = [f for f in fires if now > f + grace]
    on_time = [f for f in fires if not now > f + grace]
    keep = {"skip": 0, "fire_once": 1, "backfill": backfill_limit}[policy]
    run_late = late[len(late) - keep :] if keep else []
    rest = late[: len(late) - len(run_late)]
    return Expected(run_late + on_time, rest[-MISSED_RECORD_LIMIT:], len(rest) > MISSED_RECORD_LIMIT, fire_at)


GRID_SCHEDULES = [
    pytest.param(EVERY_MINUTE, MINUTE, id="cron-every-minute"),
    # 3 s: the first 5-minute look-back window holds exactly 100 fires
    pytest.param(RateSchedule(type="rate", every_seconds=3, start_at=MIDNIGHT), 3 * SECOND, id="rate-3s"),
    pytest.param(RateSchedule(type="rate", every_seconds=7, start_at=MIDNIGHT), 7 * SECOND, id="rate-7s"),
]


@pytest.mark.parametrize(("schedule", "period"), GRID_SCHEDULES)
@pytest.mark.parametrize("policy", ["skip", "fire_once", "backfill"])
@pytest.mark.parametrize("grace_seconds", [0, 30, 60, 90])
@pytest.mark.parametrize("now_offset_seconds", [0, 0.5, 59.999999])
@pytest.mark.parametrize(
    "behind_minutes", [0, 1, 2, 3, 5, 7, 10, 11, 50, 99, 100, 101, 102, 103, 111, 160, 500]
)
def test_matches_the_definition(
    schedule: AnySchedule,
    period: timedelta,
    policy: MisfirePolicy,
    grace_seconds: int,
    now_offset_seconds: float,
    behind_minutes: int,
) -> None:
    # Given a schedule on a regular grid, a cursor some minutes behind, and now a little past a whole minute
    now = NOW + timedelta(seconds=now_offset_seconds)
    cursor = NOW - behind_minutes * MINUTE
    grace = timedelta(seconds=grace_seconds)

    # When it is planned
    plan = decide(schedule, cursor, now=now, grace=grace, policy=policy, backfill_limit=2)

    # Then the plan is what the definitions give, worked out by arithmetic
    expected = expected_plan(period, cursor, now, grace, policy, backfill_limit=2)
    assert plan.run == expected.run
    assert plan.missed == expected.missed
    assert plan.more_missed is expected.more_missed
    assert plan.next_fire_at == expected.next_fire_at


@pytest.mark.parametrize(("behind_seconds", "more_missed"), [(300, False), (303, True), (600, True)])
def test_older_fires_before_the_look_back_window_are_flagged(behind_seconds: int, more_missed: bool) -> None:
    # Given a 3-second rate under skip with no grace: the latest 5 minutes hold exactly the 100 listed fires
    schedule = RateSchedule(type="rate", every_seconds=3, start_at=MIDNIGHT)
    cursor = NOW - timedelta(seconds=behind_seconds)

    # When it is planned
    plan = decide(schedule, cursor, grace=timedelta(0), policy="skip")

    # Then the 100 latest late fires are listed, and older ones (before 11:55:00) are flagged
    assert plan.missed == [NOW - timedelta(seconds=300) + k * 3 * SECOND for k in range(100)]
    assert plan.more_missed is more_missed


@pytest.mark.parametrize("policy", ["skip", "fire_once", "backfill"])
@pytest.mark.parametrize("cursor_second", range(0, 40))
def test_a_burst_of_late_fires_is_cut_to_the_latest(policy: MisfirePolicy, cursor_second: int) -> None:
    # Given a cron firing every second from 11:00:00 to 11:06:59 only (420 fires a day), planned at 12:00
    # with no grace, from a cursor inside the burst: 380 to 420 late fires, all found in one look-back window
    schedule = CronSchedule(type="cron", expression="* 0-6 11 * * *")
    cursor = hm(11, 0, cursor_second)
    late = seconds(cursor, hm(11, 6, 59))

    # When it is planned
    plan = decide(schedule, cursor, grace=timedelta(0), policy=policy, backfill_limit=2)

    # Then the policy keeps the latest late fires, the latest 100 others are listed and older ones flagged
    keep = {"skip": 0, "fire_once": 1, "backfill": 2}[policy]
    rest = late[: len(late) - keep]
    assert plan.run == late[len(late) - keep :]
    assert plan.missed == rest[-MISSED_RECORD_LIMIT:]
    assert plan.more_missed is (len(rest) > MISSED_RECORD_LIMIT)
    assert plan.more_missed is True
    assert plan.next_fire_at == datetime(2025, 1, 2, 11, 0, tzinfo=UTC)


# --- a long pause -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "run_late", "missed"),
    [
        # now 12:00:00, grace 60 s: the last late fire is 11:58:59; on time are 11:59:00 ... 12:05:00
        ("skip", [], seconds(hm(11, 57, 20), hm(11, 58, 59))),
        ("fire_once", [hm(11, 58, 59)], seconds(hm(11, 57, 19), hm(11, 58, 58))),
        # 1000 late fires run: 11:58:59 back 999 s is 11:42:20; the 100 before them are missed
        ("backfill", seconds(hm(11, 42, 20), hm(11, 58, 59)), seconds(hm(11, 40, 40), hm(11, 42, 19))),
    ],
)
@pytest.mark.parametrize(
    "schedule",
    [EVERY_SECOND, RateSchedule(type="rate", every_seconds=1, start_at=datetime(2020, 1, 1, tzinfo=UTC))],
    ids=["cron", "rate"],
)
def test_a_per_second_job_paused_for_a_year(
    schedule: AnySchedule, policy: MisfirePolicy, run_late: list[datetime], missed: list[datetime]
) -> None:
    # Given a per-second job paused for a year (31.5 million missed fires)
    job = make_job(schedule, misfire_policy=policy, backfill_limit=1000)
    cursor = NOW - timedelta(days=365)

    # When it is resumed and planned
    plan = plan_fires(job, cursor, NOW, HORIZON)

    # Then only the latest late fires are looked at: the policy's runs and 100 missed records, flagged as more
    assert plan.run == run_late + seconds(hm(11, 59, 0), hm(12, 5, 0))
    assert plan.missed == missed
    assert len(plan.missed) == MISSED_RECORD_LIMIT
    assert plan.more_missed is True
    assert plan.next_fire_at == hm(12, 5, 1)


@pytest.mark.parametrize(
    ("policy", "run", "missed"),
    [
        # the last fire is end_at, 2024-05-18T00:00:37Z; 99 s before it is 2024-05-17T23:58:58Z
        (
            "skip",
            [],
            seconds(
                datetime(2024, 5, 17, 23, 58, 58, tzinfo=UTC), datetime(2024, 5, 18, 0, 0, 37, tzinfo=UTC)
            ),
        ),
        (
            "fire_once",
            [datetime(2024, 5, 18, 0, 0, 37, tzinfo=UTC)],
            seconds(
                datetime(2024, 5, 17, 23, 58, 57, tzinfo=UTC), datetime(2024, 5, 18, 0, 0, 36, tzinfo=UTC)
            ),
        ),
        # 1000 run: end_at - 999 s = 23:43:58; the 100 before them start at 23:42:18
        (
            "backfill",
            seconds(
                datetime(2024, 5, 17, 23, 43, 58, tzinfo=UTC), datetime(2024, 5, 18, 0, 0, 37, tzinfo=UTC)
            ),
            seconds(
                datetime(2024, 5, 17, 23, 42, 18, tzinfo=UTC), datetime(2024, 5, 17, 23, 43, 57, tzinfo=UTC)
            ),
        ),
    ],
)
def test_a_per_second_job_whose_end_passed_long_ago(
    policy: MisfirePolicy, run: list[datetime], missed: list[datetime]
) -> None:
    # Given a per-second cron that ended 228 days before it is planned, from a cursor two years back
    # (a look-back window doubled from `now` first reaches end_at at 455 days: 227 days of per-second fires)
    schedule = CronSchedule(
        type="cron", expression="* * * * * *", end_at=datetime(2024, 5, 18, 0, 0, 37, tzinfo=UTC)
    )
    job = make_job(schedule, misfire_policy=policy, backfill_limit=1000)

    # When it is planned
    plan = plan_fires(job, datetime(2023, 1, 1, tzinfo=UTC), NOW, HORIZON)

    # Then only the latest fires before end_at are looked at, and the schedule is over
    assert plan.run == run
    assert plan.missed == missed
    assert plan.more_missed is True
    assert plan.next_fire_at is None


def test_a_bursty_job_paused_for_months() -> None:
    # Given a cron firing every second of January 1st only, paused from mid-2024 to July 2025
    job = make_job(CronSchedule(type="cron", expression="* * * 1 1 *"), misfire_policy="fire_once")
    now = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)

    # When it is planned
    plan = plan_fires(job, datetime(2024, 6, 1, tzinfo=UTC), now, HORIZON)

    # Then the last second of 2025-01-01 runs, the 100 seconds before it are missed, more are flagged,
    # and the cursor is next January 1st
    last = datetime(2025, 1, 1, 23, 59, 59, tzinfo=UTC)
    assert plan.run == [last]
    assert plan.missed == seconds(last - 100 * SECOND, last - SECOND)
    assert plan.more_missed is True
    assert plan.next_fire_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_a_daily_job_paused_for_ten_years() -> None:
    # Given a daily midnight cron paused for ten years
    job = make_job(CronSchedule(type="cron", expression="0 0 * * *"), misfire_policy="fire_once")
    cursor = datetime(2015, 1, 1, tzinfo=UTC)

    # When it is planned at 2025-01-01T12:00Z
    plan = plan_fires(job, cursor, NOW, HORIZON)

    # Then today's midnight runs, the 100 days before it are missed, and there were more
    today = datetime(2025, 1, 1, tzinfo=UTC)
    assert plan.run == [today]
    assert plan.missed == [today - timedelta(days=k) for k in range(100, 0, -1)]
    assert plan.more_missed is True
    assert plan.next_fire_at == datetime(2025, 1, 2, tzinfo=UTC)


# --- once schedules -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # more than the horizon ahead: not yet, the cursor stays on it
        (hm(11, 54, 59), FirePlan(run=[], missed=[], more_missed=False, next_fire_at=hm(12, 0))),
        # exactly at the horizon: planned, and the schedule is over
        (hm(11, 55), FirePlan(run=[hm(12, 0)], missed=[], more_missed=False, next_fire_at=None)),
        # due now
        (hm(12, 0), FirePlan(run=[hm(12, 0)], missed=[], more_missed=False, next_fire_at=None)),
    ],
)
def test_once_schedule_on_time(now: datetime, expected: FirePlan) -> None:
    # Given a one-time job at 12:00 whose cursor is its fire
    job = make_job(OnceSchedule(type="once", at=hm(12, 0)), misfire_policy="skip")

    # When it is planned at `now`
    # Then it waits, or runs once and leaves no cursor
    assert plan_fires(job, hm(12, 0), now, HORIZON) == expected


@pytest.mark.parametrize(
    ("policy", "run", "missed"),
    [("skip", [], [hm(12, 0)]), ("fire_once", [hm(12, 0)], []), ("backfill", [hm(12, 0)], [])],
)
def test_once_schedule_late(policy: MisfirePolicy, run: list[datetime], missed: list[datetime]) -> None:
    # Given a one-time job at 12:00 noticed a day late
    job = make_job(OnceSchedule(type="once", at=hm(12, 0)), misfire_policy=policy)

    # When it is planned
    plan = plan_fires(job, hm(12, 0), hm(12, 0) + timedelta(days=1), HORIZON)

    # Then the policy decides, and the schedule is over either way
    assert plan == FirePlan(run=run, missed=missed, more_missed=False, next_fire_at=None)


def test_once_schedule_behind_the_cursor_is_over() -> None:
    # Given a one-time job whose fire lies before the cursor (already planned)
    job = make_job(OnceSchedule(type="once", at=hm(12, 0)), misfire_policy="backfill")

    # When it is planned again
    plan = plan_fires(job, hm(12, 0) + ONE_MICROSECOND, hm(12, 0), HORIZON)

    # Then nothing is run twice
    assert plan == FirePlan(run=[], missed=[], more_missed=False, next_fire_at=None)


# --- the cursor across passes, and the end of a schedule ----------------------------------------------------
def test_consecutive_passes_cover_every_fire_exactly_once() -> None:
    # Given a 15-second rate and a planner ticking every minute with a 5-minute horizon
    job = make_job(RateSchedule(type="rate", every_seconds=15, start_at=hm(10, 0)), misfire_policy="backfill")
    cursor: datetime | None = hm(10, 0)
    planned: list[datetime] = []

    # When it runs for an hour, each pass starting from the previous pass's cursor
    for tick in range(60):
        plan = plan_fires(job, cursor, hm(10, 0) + tick * MINUTE, HORIZON)
        assert plan.missed == []
        planned.extend(plan.run)
        cursor = plan.next_fire_at

    # Then every fire up to the last horizon was planned once, in order, and the cursor is the next one
    last_horizon = hm(10, 59) + HORIZON
    step = timedelta(seconds=15)
    assert planned == [hm(10, 0) + k * step for k in range((last_horizon - hm(10, 0)) // step + 1)]
    assert cursor == last_horizon + timedelta(seconds=15)


def test_the_cursor_becomes_none_when_the_schedule_ends_inside_the_horizon() -> None:
    # Given an every-minute cron that ends at 12:02
    schedule = CronSchedule(type="cron", expression="* * * * *", end_at=hm(12, 2))

    # When it is planned at 12:00
    plan = decide(schedule, hm(12, 0), policy="fire_once")

    # Then the fires up to end_at run and there is no cursor left
    assert plan == FirePlan(
        run=[hm(12, 0), hm(12, 1), hm(12, 2)], missed=[], more_missed=False, next_fire_at=None
    )


def test_a_schedule_that_ended_while_paused_leaves_no_cursor() -> None:
    # Given an every-minute cron that ended at 11:00, planned from 10:00 at 12:00
    schedule = CronSchedule(type="cron", expression="* * * * *", end_at=hm(11, 0))

    # When it is planned under fire_once
    plan = decide(schedule, hm(10, 0), policy="fire_once")

    # Then the last fire (11:00) runs, the 60 before it are listed as missed, and the schedule is over
    assert plan.run == [hm(11, 0)]
    assert plan.missed == minutes(hm(10, 0), hm(10, 59))
    assert plan.more_missed is False
    assert plan.next_fire_at is None


def test_max_fires_per_pass_caps_the_on_time_fires() -> None:
    # Given a 1-second rate, a 600 s grace and a 900 s horizon: 1501 fires are on time or ahead
    assert MAX_FIRES_PER_PASS == 1000
    schedule = RateSchedule(type="rate", every_seconds=1, start_at=hm(0, 0))

    # When it is planned from the start of the grace window
    plan = decide(
        schedule,
        NOW - timedelta(seconds=600),
        horizon=timedelta(seconds=900),
        grace=timedelta(seconds=600),
        policy="skip",
    )

    # Then only the first 1000 run in this pass, and the cursor is the 1001st
    assert plan.run == seconds(NOW - timedelta(seconds=600), NOW + timedelta(seconds=399))
    assert plan.missed == []
    assert plan.next_fire_at == NOW + timedelta(seconds=400)


# --- rate schedules without start_at ------------------------------------------------------------------------
def test_first_fire_anchor() -> None:
    # Given jobs created at midnight with various schedules
    created = hm(0, 0)
    anchored = make_job(RateSchedule(type="rate", every_seconds=300), created_at=created)
    started = make_job(RateSchedule(type="rate", every_seconds=300, start_at=hm(1, 0)), created_at=created)
    cron_job = make_job(EVERY_MINUTE, created_at=created)
    once_job = make_job(OnceSchedule(type="once", at=hm(1, 0)), created_at=created)

    # When / Then only a rate without start_at has an anchor: one period after creation
    assert first_fire_anchor(anchored) == hm(0, 5)
    assert first_fire_anchor(started) is None
    assert first_fire_anchor(cron_job) is None
    assert first_fire_anchor(once_job) is None


def test_rate_without_start_at_first_fires_one_period_after_creation() -> None:
    # Given a 5-minute rate job with no start_at, created at 00:00:00
    job = make_job(RateSchedule(type="rate", every_seconds=300), created_at=hm(0, 0))

    # When it is planned from its creation, at its creation, with a 5-minute horizon
    plan = plan_fires(job, hm(0, 0), hm(0, 0), HORIZON)

    # Then the first fire is created_at + 5 min (not created_at itself), and the next is 5 min later
    assert plan.run == [hm(0, 5)]
    assert plan.next_fire_at == hm(0, 10)


def test_rate_without_start_at_catches_up_on_its_anchor_grid() -> None:
    # Given a 5-minute rate job created at 00:00:07, so its grid is 00:05:07, 00:10:07, ...
    job = make_job(
        RateSchedule(type="rate", every_seconds=300), created_at=hm(0, 0, 7), misfire_policy="fire_once"
    )

    # When it is planned at 01:00:00 from its first fire
    plan = plan_fires(job, hm(0, 5, 7), hm(1, 0), HORIZON)

    # Then the late fires (before 00:59:00) are 00:05:07 ... 00:55:07: fire_once runs the last and misses ten;
    # the only on-time fire up to 01:05:00 is 01:00:07, and the cursor stays on the grid
    assert plan.run == [hm(0, 55, 7), hm(1, 0, 7)]
    assert plan.missed == [hm(0, 5, 7) + k * timedelta(minutes=5) for k in range(10)]
    assert plan.next_fire_at == hm(1, 5, 7)
