"""Cron syntax is checked field by field: each refusal names the field, the value and what is allowed, in one
of a fixed set of messages; what is accepted reaches the matcher in one form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from pydantic_core import PydanticCustomError
from tickwork.adapters.jobs import job_from_item, job_to_item
from tickwork.domain.cron_syntax import MESSAGES, check_cron_syntax
from tickwork.domain.models import CronSchedule, Job, JobSpec
from tickwork.domain.schedule import next_fire_time

REFUSED = [
    # (expression, exact message)
    ("* * * *", "cron needs 5 fields, or 6 with seconds first; got 4"),
    (
        "@yearl",
        "unknown alias @yearl; allowed: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
    ),
    (
        "@reboot",
        "@reboot is not supported: jobs run on a schedule, not when tickwork starts; allowed: @yearly,"
        " @annually, @monthly, @weekly, @daily, @midnight, @hourly",
    ),
    ("60 * * * *", "minute value 60 is out of range; allowed: 0 to 59"),
    ("* 25 * * *", "hour value 25 is out of range; allowed: 0 to 23"),
    ("0 0 0 * *", "day of month value 0 is out of range; allowed: 1 to 31"),
    ("0 0 32 * *", "day of month value 32 is out of range; allowed: 1 to 31"),
    ("0 0 * 13 *", "month value 13 is out of range; allowed: 1 to 12 or JAN to DEC"),
    ("0 0 * * 8", "day of week value 8 is out of range; allowed: 0 to 7 or SUN to SAT"),
    ("60 0 0 * * *", "second value 60 is out of range; allowed: 0 to 59"),
    ("0 0 * * SUNDAY", "day of week value SUNDAY is not a number or a name; allowed: 0 to 7 or SUN to SAT"),
    ("0 0 * JANUARY *", "month value JANUARY is not a number or a name; allowed: 1 to 12 or JAN to DEC"),
    ("a b c d e", "minute value a is not a number or a name; allowed: 0 to 59"),
    ("*/60 * * * *", "minute step 60 in */60 must be a whole number from 1 to 59"),
    ("*/61 * * * *", "minute step 61 in */61 must be a whole number from 1 to 59"),
    ("0/120 * * * *", "minute step 120 in 0/120 must be a whole number from 1 to 59"),
    ("*/0 * * * *", "minute step 0 in */0 must be a whole number from 1 to 59"),
    ("0 */24 * * *", "hour step 24 in */24 must be a whole number from 1 to 23"),
    ("0 0 1 1/13 *", "month step 13 in 1/13 must be a whole number from 1 to 11"),
    ("0 0 * * */7", "day of week step 7 in */7 must be a whole number from 1 to 6"),
    ("*/x * * * *", "minute step x in */x must be a whole number from 1 to 59"),
    (
        "0 0 1 9-8/3 *",
        "month range 9-8/3 goes downward; a range must go upward (to wrap around, list both parts, as in"
        " 9-12,1-8)",
    ),
    (
        "0 0 * * 5-2",
        "day of week range 5-2 goes downward; a range must go upward (to wrap around, list both parts, as in"
        " 5-6,0-2)",
    ),
    ("0 0 1,,2 * *", "day of month has an empty item in 1,,2; items are separated by single commas"),
    ("0 0 1, * *", "day of month has an empty item in 1,; items are separated by single commas"),
    ("? * * * *", "minute cannot be ?; ? is only for day of month or day of week"),
    ("0 0 * * 1,5#3", "day of week 5#3 must stand alone, not in a list"),
    ("0 0 3W,15 * *", "day of month 3W must stand alone, not in a list"),
    ("0 0 32W * *", "day of month 32W: W needs one day before it, 1 to 31, as in 15W"),
    ("0 0 W * *", "day of month W: W needs one day before it, 1 to 31, as in 15W"),
    (
        "0 0 * * 1#6",
        "day of week 1#6: # needs a day (0 to 7 or SUN to SAT) and an occurrence 1 to 5, as in FRI#3",
    ),
    (
        "0 0 * * FRIDAY#1",
        "day of week FRIDAY#1: # needs a day (0 to 7 or SUN to SAT) and an occurrence 1 to 5, as in FRI#3",
    ),
    (
        "0 0 * * L",
        "day of week L: L needs a day (0 to 7 or SUN to SAT) before it, as in 5L or FRIL (the last Friday"
        " of the month)",
    ),
    (
        "0 0 5L * *",
        "day of month 5L is not supported; allowed: 1 to 31, L (the last day), nW (the weekday nearest"
        " day n)",
    ),
    (
        "0 0 LW * *",
        "day of month LW is not supported; allowed: 1 to 31, L (the last day), nW (the weekday nearest"
        " day n)",
    ),
    (
        "0 0 L-2 * *",
        "day of month L-2 is not supported; allowed: 1 to 31, L (the last day), nW (the weekday nearest"
        " day n)",
    ),
    (
        "0 0 * * LW",
        "day of week LW is not supported; allowed: 0 to 7 or SUN to SAT, n#k (the k-th day n of the month),"
        " nL (the last day n of the month)",
    ),
    ("0 0 * * 1,5L", "day of week 5L must stand alone, not in a list"),
    (
        "0 0 15W * 1",
        "day of month 15W cannot go with day of week 1: cron implementations disagree on what that means;"
        " put * or ? in one of the two",
    ),
    (
        "0 0 L * FRI",
        "day of month L cannot go with day of week FRI: cron implementations disagree on what that means;"
        " put * or ? in one of the two",
    ),
    (
        "0 0 1-7 * 1#1",
        "day of month 1-7 cannot go with day of week 1#1: cron implementations disagree on what that means;"
        " put * or ? in one of the two",
    ),
    (
        "0 0 16,18 * 3#3",
        "day of month 16,18 cannot go with day of week 3#3: cron implementations disagree on what that"
        " means; put * or ? in one of the two",
    ),
    (
        "0 0 1 * 5L",
        "day of month 1 cannot go with day of week 5L: cron implementations disagree on what that means;"
        " put * or ? in one of the two",
    ),
    (
        "* * 4-6/3 * *",
        "day of month step 3 in 4-6/3 must be a whole number from 1 to 2, or the range fires once",
    ),
]


@pytest.mark.parametrize(("expression", "message"), REFUSED, ids=[case[0] for case in REFUSED])
def test_each_refusal_names_the_field_the_value_and_what_is_allowed(expression: str, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        CronSchedule.model_validate({"type": "cron", "expression": expression})
    [error] = refused.value.errors()
    assert error["type"] == "invalid_cron"
    assert error["loc"] == ("expression",)
    assert error["msg"] == message


def test_every_message_of_the_set_is_exercised() -> None:
    used = set()
    for expression, _ in REFUSED:
        try:
            check_cron_syntax(expression)
        except PydanticCustomError as error:
            used.add(error.message_template)
    assert used == set(MESSAGES.values())


@pytest.mark.parametrize(
    ("expression", "read_as"),
    [
        ("@daily", "0 0 * * *"),
        ("  0   9 *  * MON-FRI ", "0 9 * * MON-FRI"),
        ("0 0 * jan,Jul *", "0 0 * JAN,JUL *"),
        ("0 0 ? * 1", "0 0 ? * 1"),
        ("0 0 L * *", "0 0 L * *"),
        ("0 0 L,15 * *", "0 0 L,15 * *"),
        ("0 0 15w * *", "0 0 15W * *"),
        ("0 0 * * 5L", "0 0 * * L5"),
        ("0 0 * * FRIL", "0 0 * * L5"),
        ("0 0 * * L5", "0 0 * * L5"),
        ("0 0 * * fri#3", "0 0 * * 5#3"),
        ("0 0 * * 0-7", "0 0 * * 0-7"),
        ("*/59 */23 */30 */11 */6", "*/59 */23 */30 */11 */6"),
        ("0 1-59/6 * * * *", "0 1-59/6 * * * *"),
        ("0 0 1 1-12/3 *", "0 0 1 1-12/3 *"),
    ],
)
def test_accepted_forms_reach_the_matcher_in_one_form(expression: str, read_as: str) -> None:
    assert check_cron_syntax(expression) == read_as
    CronSchedule.model_validate({"type": "cron", "expression": expression})


@pytest.mark.parametrize("expression", ["*/60 * * * *", "0 0 1 9-8/3 *", "0 0 * * 5-2"])
def test_a_job_stored_before_the_syntax_was_tightened_still_reads_and_fires(expression: str) -> None:
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    spec = JobSpec.model_validate(
        {
            "name": "old",
            "schedule": {"type": "cron", "expression": "0 0 * * *"},
            "target": {"type": "http", "url": "https://example.com/hook"},
        }
    )
    job = Job(**spec.model_dump(), job_id="j1", tenant_id="acme", created_at=now, updated_at=now)
    # As stored by a release that accepted the expression: written without today's checks.
    old_schedule = CronSchedule.model_construct(type="cron", expression=expression, timezone="UTC")
    stored = job_to_item(job.model_copy(update={"schedule": old_schedule}), due_shards=1)
    with pytest.raises(ValidationError):
        CronSchedule.model_validate({"type": "cron", "expression": expression})  # refused if new
    read = job_from_item(stored)
    assert isinstance(read.schedule, CronSchedule)
    assert read.schedule.expression == expression
    assert next_fire_time(read.schedule, now) is not None


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # The fifth Monday of February: only in a leap year whose February starts on a Monday.
        ("0 0 * 2 1#5", datetime(2026, 1, 1, tzinfo=UTC), datetime(2044, 2, 29, tzinfo=UTC)),
        ("0 0 * 2 1#5", datetime(2044, 3, 1, tzinfo=UTC), datetime(2072, 2, 29, tzinfo=UTC)),
        # Across 2100, which is not a leap year: 2072, then 2112 (40 years).
        ("0 0 * 2 1#5", datetime(2072, 3, 1, tzinfo=UTC), datetime(2112, 2, 29, tzinfo=UTC)),
        # 31W never leaves its month: April, June, September and November have no 31st.
        ("0 0 31W * *", datetime(2026, 3, 31, 1, tzinfo=UTC), datetime(2026, 5, 29, tzinfo=UTC)),
        # 30W fires in no February, 29W only in a leap one (2028-02-29 is a Tuesday).
        ("0 0 29W 2 *", datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 2, 29, tzinfo=UTC)),
        # A week range may end on Sunday, written 0 or SUN: Thursday to Sunday.
        ("0 0 * * THU-SUN", datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 8, tzinfo=UTC)),
        ("0 0 * * 4-0", datetime(2026, 1, 8, 1, tzinfo=UTC), datetime(2026, 1, 9, tzinfo=UTC)),
        ("0 0 * * 4-0", datetime(2026, 1, 11, 1, tzinfo=UTC), datetime(2026, 1, 15, tzinfo=UTC)),
        # Plain values in both day fields match when either does: the 1st, or a Monday.
        ("0 0 1 * 1", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC)),
    ],
)
def test_rare_and_special_day_schedules_fire_when_they_really_do(
    expression: str, after: datetime, expected: datetime
) -> None:
    schedule = CronSchedule.model_validate({"type": "cron", "expression": expression})
    assert next_fire_time(schedule, after) == expected


@pytest.mark.parametrize("expression", ["0 0 30W 2 *", "0 0 31W 4,6,9,11 *", "0 0 31 4 *", "0 0 31 2 *"])
def test_a_special_day_schedule_that_can_never_fire_is_refused(expression: str) -> None:
    with pytest.raises(ValidationError) as refused:
        CronSchedule.model_validate({"type": "cron", "expression": expression})
    [error] = refused.value.errors()
    assert error["type"] == "cron_never_fires"
