"""Misfire, coalescing and backfill decisions (``tickwork.domain.fires``), for the planner and the worker.

The contract (design.md, "Policies"): overdue fires coalesce: when several of one job are overdue at once,
only the latest can be on time, the others are missed; missed and late fires follow ``misfire_policy``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.fires import (
    MAX_FIRES_PER_PASS,
    MISSED_RECORD_LIMIT,
    Arrival,
    FirePlan,
    decide_fires,
    is_fire_of,
    next_in_chain,
    on_arrival,
    plan_fires,
)
from tickwork.domain.models import CronSchedule, HttpTarget, Job, MisfirePolicy, OnceSchedule, RateSchedule
from tickwork.domain.schedule import AnySchedule

NOW = datetime(2025, 1, 1, 12, 0, 30, tzinfo=UTC)
MINUTE, SECOND = timedelta(minutes=1), timedelta(seconds=1)
HORIZON = timedelta(minutes=5)
EVERY_MINUTE = CronSchedule(type="cron", expression="* * * * *")
EVERY_SECOND = CronSchedule(type="cron", expression="* * * * * *")


def hm(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2025, 1, 1, hour, minute, second, tzinfo=UTC)


def minutes(first: datetime, last: datetime) -> list[datetime]:
    return [first + k * MINUTE for k in range((last - first) // MINUTE + 1)]


def job(
    schedule: AnySchedule,
    policy: MisfirePolicy = "fire_once",
    *,
    grace: int = 60,
    backfill_limit: int = 100,
) -> Job:
    return Job(
        name="j",
        schedule=schedule,
        target=HttpTarget(type="http", url="https://example.com/hook"),
        misfire_policy=policy,
        misfire_grace_seconds=grace,
        backfill_limit=backfill_limit,
        job_id="job-1",
        tenant_id="acme",
        created_at=hm(0, 0),
        updated_at=hm(0, 0),
    )


def plan(schedule: AnySchedule, cursor: datetime, policy: MisfirePolicy, **options: int) -> FirePlan:
    return plan_fires(job(schedule, policy, **options), cursor, NOW, HORIZON)


AHEAD = minutes(hm(12, 1), hm(12, 5))  # every minute's fires in the 5-minute horizon after 12:00:30


# --- the planner ----------------------------------------------------------------------------------------
def test_nothing_overdue_plans_every_fire_in_the_horizon() -> None:
    result = plan(EVERY_MINUTE, hm(12, 1), "skip")
    assert result == FirePlan(run=AHEAD, next_fire_at=hm(12, 6))


@pytest.mark.parametrize(
    ("policy", "grace", "limit", "run_now", "chain", "missed"),
    [
        # 11 fires overdue (11:50 ... 12:00); the latest, 12:00, is 30 s old
        ("skip", 60, 100, [hm(12, 0)], None, minutes(hm(11, 50), hm(11, 59))),
        ("skip", 10, 100, [], None, minutes(hm(11, 50), hm(12, 0))),
        ("fire_once", 10, 100, [hm(12, 0)], None, minutes(hm(11, 50), hm(11, 59))),
        ("backfill", 10, 100, [], (hm(11, 50), hm(12, 0)), []),
        ("backfill", 10, 3, [], (hm(11, 58), hm(12, 0)), minutes(hm(11, 50), hm(11, 57))),
        ("backfill", 10, 1, [hm(12, 0)], None, minutes(hm(11, 50), hm(11, 59))),
    ],
)
def test_overdue_fires_coalesce_to_the_latest_under_the_policy(
    policy: MisfirePolicy,
    grace: int,
    limit: int,
    run_now: list[datetime],
    chain: tuple[datetime, datetime] | None,
    missed: list[datetime],
) -> None:
    result = plan(EVERY_MINUTE, hm(11, 50), policy, grace=grace, backfill_limit=limit)
    assert result == FirePlan(run=[*run_now, *AHEAD], chain=chain, missed=missed, next_fire_at=hm(12, 6))


def test_two_overdue_fires_within_their_grace_still_coalesce() -> None:
    # After a 30 s outage of an every-second job, 30 fires are overdue, all within the 60 s grace
    cursor = NOW - 30 * SECOND
    result = plan_fires(job(EVERY_SECOND, "skip"), cursor, NOW, 10 * SECOND)
    assert result.run[0] == NOW  # the latest overdue fire runs
    assert result.missed == [cursor + k * SECOND for k in range(30)]
    assert result.run[1:] == [NOW + k * SECOND for k in range(1, 11)]


def test_a_fire_due_exactly_now_is_on_time() -> None:
    result = plan_fires(job(EVERY_MINUTE, "skip", grace=0), hm(12, 0), hm(12, 0), HORIZON)
    assert result.run[0] == hm(12, 0)
    assert result.missed == []


def test_missed_fires_are_recorded_up_to_a_limit_and_the_rest_counted() -> None:
    result = plan_fires(job(EVERY_SECOND, "fire_once"), NOW - timedelta(hours=1), NOW, timedelta(0))
    assert result.run == [NOW]
    assert len(result.missed) == MISSED_RECORD_LIMIT
    assert result.missed[-1] == NOW - SECOND  # the latest ones are the ones listed
    assert result.more_missed


def test_a_year_long_pause_is_decided_without_walking_every_fire() -> None:
    # An every-second job: 31 million fires overdue. Bisection makes this a few dozen schedule steps.
    result = plan_fires(
        job(EVERY_SECOND, "backfill", backfill_limit=5), NOW - timedelta(days=365), NOW, 0 * SECOND
    )
    assert result.chain == (NOW - 4 * SECOND, NOW)
    assert len(result.missed) == MISSED_RECORD_LIMIT and result.more_missed


@pytest.mark.parametrize(
    ("policy", "run_now", "missed"),
    [("skip", [], [hm(11, 0)]), ("fire_once", [hm(11, 0)], []), ("backfill", [hm(11, 0)], [])],
)
def test_a_one_time_fire_that_passed_follows_the_policy_and_is_the_last(
    policy: MisfirePolicy, run_now: list[datetime], missed: list[datetime]
) -> None:
    result = plan(OnceSchedule(type="once", at=hm(11, 0)), hm(11, 0), policy)
    assert result == FirePlan(run=run_now, missed=missed, next_fire_at=None, last_fire_at=hm(11, 0))


def test_the_end_of_a_schedule_names_its_last_fire() -> None:
    ending = CronSchedule(type="cron", expression="* * * * *", end_at=hm(12, 3))
    result = plan(ending, hm(12, 1), "skip")
    assert result == FirePlan(run=minutes(hm(12, 1), hm(12, 3)), next_fire_at=None, last_fire_at=hm(12, 3))


def test_a_pass_plans_at_most_its_limit_of_fires() -> None:
    result = plan_fires(job(EVERY_SECOND, "skip"), NOW + SECOND, NOW, timedelta(hours=1))
    assert len(result.run) == MAX_FIRES_PER_PASS
    assert result.next_fire_at == NOW + (MAX_FIRES_PER_PASS + 1) * SECOND


def test_rate_jobs_without_start_count_from_their_creation() -> None:
    every_90s = job(RateSchedule(type="rate", every_seconds=90), "skip")  # created at 00:00
    result = plan_fires(every_90s, hm(12, 0), hm(12, 0), 3 * MINUTE)
    assert result.run == [hm(12, 0), hm(12, 1, 30), hm(12, 3)]


def test_no_cursor_plans_nothing() -> None:
    assert plan_fires(job(EVERY_MINUTE), None, NOW, HORIZON) == FirePlan()


def test_decide_fires_is_the_pure_core() -> None:
    result = decide_fires(
        EVERY_MINUTE, hm(12, 1), NOW, HORIZON, policy="skip", grace=MINUTE, backfill_limit=1
    )
    assert result.run == AHEAD


# --- the worker -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "now", "expected"),
    [
        ("skip", hm(12, 0, 0), Arrival.RUN),  # on time
        ("skip", hm(12, 0, 59), Arrival.RUN),  # late but within its grace, and still the latest
        ("skip", hm(12, 1, 0), Arrival.MISS_SUPERSEDED),  # 12:01 is due too
        ("fire_once", hm(12, 1, 0), Arrival.MISS_SUPERSEDED),
        ("backfill", hm(12, 5, 0), Arrival.RUN),  # backfill runs them all, in order
    ],
)
def test_a_fire_arriving_at_the_worker_coalesces_with_the_fires_due_after_it(
    policy: MisfirePolicy, now: datetime, expected: Arrival
) -> None:
    assert on_arrival(job(EVERY_MINUTE, policy), hm(12, 0), now) is expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("skip", Arrival.MISS_LATE), ("fire_once", Arrival.RUN), ("backfill", Arrival.RUN)],
)
def test_the_latest_fire_noticed_after_its_grace_follows_the_policy(
    policy: MisfirePolicy, expected: Arrival
) -> None:
    hourly = job(CronSchedule(type="cron", expression="0 * * * *"), policy, grace=60)
    assert on_arrival(hourly, hm(12, 0), hm(12, 2)) is expected


def test_a_one_time_fire_is_never_superseded() -> None:
    once = job(OnceSchedule(type="once", at=hm(12, 0)), "fire_once", grace=0)
    assert on_arrival(once, hm(12, 0), hm(18, 0)) is Arrival.RUN


def test_the_backfill_chain_walks_fires_until_its_end() -> None:
    every = job(EVERY_MINUTE, "backfill")
    assert next_in_chain(every, hm(11, 58), until=hm(12, 0)) == hm(11, 59)
    assert next_in_chain(every, hm(12, 0), until=hm(12, 0)) is None


def test_a_fire_of_another_schedule_is_recognised() -> None:
    every_five = job(CronSchedule(type="cron", expression="*/5 * * * *"))
    assert is_fire_of(every_five, hm(12, 5))
    assert not is_fire_of(every_five, hm(12, 6))
