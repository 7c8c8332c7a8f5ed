"""The calendar matcher against croniter, the engine's matcher before it, and on the calendar's edge cases.

The differential tests read every expression as ``check_cron_syntax`` passes it on and compare the wall times
of ``compile_cron`` with croniter's (plus tickwork's rule that ``nW`` has no fire in a month shorter than
``n`` days): the conformance vectors' expressions and a few thousand random ones from a seeded generator
that writes every accepted form, each from several starts. The edge cases' expected values are worked out
from the calendar by hand. Two differences are croniter's faults, fixed: it rounds a start with
microseconds far ahead (float timestamps), and near year 9999 it loses the fires of an either-matches
pair of day fields when one of them has none left; the differential tests keep clear of both.
"""

from __future__ import annotations

import calendar
import json
import random
from datetime import MAXYEAR, datetime
from itertools import islice
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadCronError, CroniterBadDateError, croniter
from pydantic_core import PydanticCustomError
from tickwork.domain.cron_match import CronMatcher, compile_cron
from tickwork.domain.cron_syntax import DAY_NAMES, MONTH_NAMES, check_cron_syntax
from tickwork.domain.schedule import parse_cron

VECTORS_FILE = Path(__file__).parents[1] / "conformance" / "cron_vectors.json"
FIRES = 50
RANDOM_EXPRESSIONS = 3000
STARTS = (
    datetime(2026, 1, 1),
    datetime(2024, 2, 28, 23, 59, 59, 999_999),
    datetime(2027, 12, 31, 23, 59, 30),
    datetime(2100, 2, 27, 12, 34, 56),
    datetime(1999, 12, 31, 23, 59, 59),
    datetime(2031, 6, 30, 11, 59, 59, 500_000),
    datetime(9990, 6, 15),
)
YEARS_BETWEEN_MATCHES = 400
LAST_CROSS_CHECKED_YEAR = 9000


def checked(expression: str) -> str | None:
    try:
        return check_cron_syntax(expression)
    except PydanticCustomError:
        return None


def croniter_walls(expression: str, start: datetime, count: int) -> list[datetime]:
    """The engine's wall times before the calendar matcher: croniter's, with tickwork's nW rule."""
    if start.year > LAST_CROSS_CHECKED_YEAR:
        # Read one Gregorian cycle earlier: croniter's search for one field of an either-matches pair fails
        # in year 10000 and takes the other field's fires with it.
        earlier = croniter_walls(expression, start.replace(year=start.year - 400), count)
        return [wall.replace(year=wall.year + 400) for wall in earlier if wall.year + 400 <= MAXYEAR]
    fields = expression.split(" ")
    day_of_month = fields[-3]
    nearest = int(day_of_month[:-1]) if day_of_month.endswith("W") else None
    iterator = croniter(
        expression,
        start,
        second_at_beginning=len(fields) == 6,
        max_years_between_matches=YEARS_BETWEEN_MATCHES,
    )
    walls: list[datetime] = []
    last_kept = start
    while len(walls) < count:
        try:
            wall = iterator.get_next(datetime)
        except (CroniterBadDateError, ValueError, OverflowError):  # none within 400 years, or before 10000
            break
        if nearest is None or nearest <= calendar.monthrange(wall.year, wall.month)[1]:
            walls.append(wall)
            last_kept = wall
        elif wall.year - last_kept.year > YEARS_BETWEEN_MATCHES:
            break
    return walls


def croniter_never_fires(expression: str) -> bool:
    return not croniter_walls(expression, datetime(2000, 1, 1), 1)


def matcher_walls(matcher: CronMatcher, start: datetime, count: int) -> list[datetime]:
    return list(islice(matcher.walls_after(start), count))


def assert_same_walls(expression: str, starts: tuple[datetime, ...] | list[datetime]) -> None:
    matcher = compile_cron(expression)
    if matcher is None:  # left to croniter, which must refuse it
        with pytest.raises(CroniterBadCronError):
            croniter(expression, second_at_beginning=len(expression.split(" ")) == 6)
        return
    if not matcher.fires:
        assert croniter_never_fires(expression), expression
        return
    for start in starts:
        expected = croniter_walls(expression, start, FIRES)
        assert matcher_walls(matcher, start, FIRES) == expected, (expression, start)


# --- the conformance vectors' expressions -------------------------------------------------------------------
def _vector_cases() -> list[tuple[str, list[datetime]]]:
    with VECTORS_FILE.open(encoding="utf-8") as file:
        groups = json.load(file)["groups"]
    starts: dict[str, list[datetime]] = {}
    for group in groups:
        for vector in group["vectors"]:
            expression = checked(vector["expression"])
            if expression is None:
                continue
            wall_starts = starts.setdefault(expression, [STARTS[0], STARTS[1]])
            if vector["kind"] == "next":
                start = datetime.fromisoformat(vector["start"]).astimezone(ZoneInfo(vector["timezone"]))
                wall_starts.append(start.replace(tzinfo=None, fold=0))
    return sorted(starts.items())


VECTOR_CASES = _vector_cases()


def test_the_vectors_give_enough_expressions() -> None:
    assert len(VECTOR_CASES) >= 300


@pytest.mark.parametrize(("expression", "starts"), VECTOR_CASES, ids=[case[0] for case in VECTOR_CASES])
def test_vector_expressions_match_as_croniter_does(expression: str, starts: list[datetime]) -> None:
    assert_same_walls(expression, starts)


# --- random expressions -------------------------------------------------------------------------------------
class ExpressionWriter:
    """Writes cron expressions in every form the syntax accepts (and some it refuses), from a seed."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def expression(self) -> str:
        pick = self.random.random()
        if pick < 0.02:
            return self.random.choice(["@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@midnight"])
        day_of_month, day_of_week = self.days()
        fields = [
            self.field(0, 59),
            self.field(0, 23),
            day_of_month,
            self.field(1, 12, MONTH_NAMES),
            day_of_week,
        ]
        if pick < 0.3:
            fields.insert(0, self.field(0, 59))
        return " ".join(fields)

    def days(self) -> tuple[str, str]:
        pick = self.random.random()
        unrestricted = self.random.choice(["*", "?"])
        if pick < 0.08:
            return self.random.choice(["L", f"L,{self.item(1, 31)}", f"{self.item(1, 31)},L"]), unrestricted
        if pick < 0.16:
            return (
                f"{self.random.choice([1, 2, 15, 28, 29, 30, 31, self.random.randint(1, 31)])}W",
                unrestricted,
            )
        if pick < 0.24:
            day = self.weekday()
            return unrestricted, f"{day}#{self.random.randint(1, 5)}"
        if pick < 0.3:
            day = self.weekday()
            return unrestricted, self.random.choice([f"{day}L", f"L{day}"])
        return self.field(1, 31, allow_question=True), self.field(0, 7, DAY_NAMES, allow_question=True)

    def weekday(self) -> str:
        day = self.random.randint(0, 7)
        return DAY_NAMES[day % 7] if self.random.random() < 0.3 else str(day)

    def field(self, low: int, high: int, names: tuple[str, ...] = (), *, allow_question: bool = False) -> str:
        pick = self.random.random()
        if pick < 0.25:
            return "?" if allow_question and self.random.random() < 0.3 else "*"
        count = 1 if pick < 0.75 else self.random.randint(2, 4)
        items = [self.item(low, high, names) for _ in range(count)]
        if count > 1 and self.random.random() < 0.05:
            items[0] = "?" if allow_question and self.random.random() < 0.3 else "*"  # croniter refuses ?
        return ",".join(items)

    def item(self, low: int, high: int, names: tuple[str, ...] = ()) -> str:
        pick = self.random.random()
        start = self.random.randint(low, high)
        end = self.random.randint(start, high)
        if high == 7 and self.random.random() < 0.2:
            end = self.random.choice([0, 7])  # a week range ending on Sunday
        span = (high - low) if high != 7 else 6
        step = self.random.randint(1, max(1, span))
        if pick < 0.35:
            return self.value(start, names, low)
        if pick < 0.55:
            if self.random.random() < 0.1:
                end = start  # an equal range
            return f"{self.value(start, names, low)}-{self.value(end, names, low)}"
        if pick < 0.7:
            return f"*/{step}"
        if pick < 0.85:
            if self.random.random() < 0.2:
                start = high  # a start at the field's end
            return f"{self.value(start, names, low)}/{step}"
        range_step = self.random.randint(1, max(1, (end or 7) - start))
        return f"{self.value(start, names, low)}-{self.value(end, names, low)}/{range_step}"

    def value(self, number: int, names: tuple[str, ...], low: int) -> str:
        if names and self.random.random() < 0.4:
            name = names[(number - low) % len(names)]
            return self.random.choice([name, name.lower(), name.title()])
        return str(number)


def _random_cases() -> list[str]:
    writer = ExpressionWriter(seed=20261126)
    found: dict[str, None] = {}
    while len(found) < RANDOM_EXPRESSIONS:
        expression = checked(writer.expression())
        if expression is not None:
            found[expression] = None
    return list(found)


RANDOM_CASES = _random_cases()
CHUNK = 100


def test_the_writer_covers_every_form() -> None:
    def fields(expression: str) -> list[str]:
        return (["0"] if len(expression.split(" ")) == 5 else []) + expression.split(" ")

    def items(position: int) -> set[str]:
        return {item for expression in RANDOM_CASES for item in fields(expression)[position].split(",")}

    seconds, minutes, _, days, months, weekdays = (items(position) for position in range(6))
    assert any(len(expression.split(" ")) == 6 for expression in RANDOM_CASES)
    assert {"*", "?", "L"} <= days
    assert any(item.endswith("W") for item in days)
    assert {"*", "?"} <= weekdays
    assert any("#" in item for item in weekdays)
    assert any(item.startswith("L") for item in weekdays)
    assert any(item.endswith(("-0", "-7", "-SUN")) for item in weekdays)
    assert {"JAN", "MON"} <= {
        part for item in months | weekdays for part in item.replace("/", "-").split("-")
    }
    assert any(item.partition("/")[0] == "59" and "/" in item for item in minutes | seconds)
    assert any(len(set(item.partition("/")[0].split("-"))) == 1 and "-" in item for item in minutes)
    assert any(
        "," in field and "*" in field.split(",")
        for expression in RANDOM_CASES
        for field in fields(expression)
    )


@pytest.mark.parametrize("chunk", range(0, RANDOM_EXPRESSIONS, CHUNK))
def test_random_expressions_match_as_croniter_does(chunk: int) -> None:
    picker = random.Random(chunk)
    for expression in RANDOM_CASES[chunk : chunk + CHUNK]:
        assert_same_walls(expression, picker.sample(STARTS, 3))


def test_a_question_mark_in_a_list_is_left_to_croniter() -> None:
    # croniter refuses it; the engine keeps croniter's refusal by not compiling it.
    assert compile_cron(check_cron_syntax("0 0 ?,1 * *")) is None
    assert compile_cron(check_cron_syntax("0 0 * * ?,MON")) is None


# --- edge cases of the calendar -----------------------------------------------------------------------------
def walls(expression: str, start: datetime, count: int = 10) -> list[datetime]:
    matcher = compile_cron(check_cron_syntax(expression))
    assert matcher is not None
    return matcher_walls(matcher, start, count)


def days(*texts: str) -> list[datetime]:
    return [datetime.fromisoformat(text) for text in texts]


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        # 2100 is not a leap year (divisible by 100, not by 400); 2000 was.
        ("0 0 29 2 *", datetime(2096, 3, 1), days("2104-02-29", "2108-02-29")),
        ("0 0 29 2 *", datetime(1999, 1, 1), days("2000-02-29", "2004-02-29")),
        (
            "0 0 L 2 *",
            datetime(2099, 3, 1),
            days("2100-02-28", "2101-02-28", "2102-02-28", "2103-02-28", "2104-02-29"),
        ),
        ("0 0 L * *", datetime(2024, 1, 31), days("2024-02-29", "2024-03-31", "2024-04-30")),
        ("0 0 L,15 * *", datetime(2025, 2, 1), days("2025-02-15", "2025-02-28", "2025-03-15", "2025-03-31")),
        # 1W: 1 Feb and 1 Mar 2025 are Saturdays (Monday the 3rd), 1 Jun 2025 a Sunday (Monday the 2nd).
        (
            "0 0 1W * *",
            datetime(2025, 1, 31),
            days("2025-02-03", "2025-03-03", "2025-04-01", "2025-05-01", "2025-06-02"),
        ),
        # 31W: 31 May 2025 is a Saturday (Friday 30th), 31 Aug a Sunday (Friday 29th); none in 30-day months.
        (
            "0 0 31W * *",
            datetime(2025, 5, 1),
            days("2025-05-30", "2025-07-31", "2025-08-29", "2025-10-31", "2025-12-31"),
        ),
        # 30W: none in February; 30 Mar 2025 is a Sunday (Monday 31st); 30 Nov 2025 a Sunday and the last
        # day (Friday 28th).
        ("0 0 30W * *", datetime(2025, 1, 1), days("2025-01-30", "2025-03-31", "2025-04-30")),
        ("0 0 30W 11 *", datetime(2025, 1, 1), days("2025-11-28")),
        ("0 0 29W 2 *", datetime(2025, 1, 1), days("2028-02-29", "2032-02-27")),
        # The fifth Friday of 2025: January, May and August have one; February to April, June, July none.
        ("0 0 * * 5#5", datetime(2025, 1, 1), days("2025-01-31", "2025-05-30", "2025-08-29")),
        ("0 0 * 2 MON#5", datetime(2026, 1, 1), days("2044-02-29", "2072-02-29", "2112-02-29")),
        ("0 0 * 2 L1", datetime(2025, 1, 1), days("2025-02-24", "2026-02-23", "2027-02-22", "2028-02-28")),
        ("0 0 * * 7#1", datetime(2025, 1, 1), days("2025-01-05", "2025-02-02")),
        # Day 1 and 15, and every Monday: either field matches.
        (
            "0 0 1,15 * MON",
            datetime(2025, 1, 1),
            days("2025-01-06", "2025-01-13", "2025-01-15", "2025-01-20"),
        ),
    ],
)
def test_the_calendar_edges(expression: str, start: datetime, expected: list[datetime]) -> None:
    assert walls(expression, start, len(expected)) == expected


def test_the_seconds_field_comes_first_and_a_start_with_microseconds_is_passed_strictly() -> None:
    start = datetime(2025, 1, 1, 9, 30, 19, 999_999)
    assert walls("*/20 30 9 * * *", start, 4) == [
        datetime(2025, 1, 1, 9, 30, 20),
        datetime(2025, 1, 1, 9, 30, 40),
        datetime(2025, 1, 2, 9, 30),
        datetime(2025, 1, 2, 9, 30, 20),
    ]
    assert walls("0 * * * *", datetime(2025, 1, 1, 9, 0), 1) == [datetime(2025, 1, 1, 10, 0)]


def test_the_walls_end_with_year_9999() -> None:
    assert walls("0 0 31 12 *", datetime(9998, 6, 1)) == days("9998-12-31", "9999-12-31")
    assert walls("* * * * * *", datetime(9999, 12, 31, 23, 59, 58)) == [datetime(9999, 12, 31, 23, 59, 59)]
    assert walls("0 0 29 2 *", datetime(9996, 3, 1)) == []


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31W 2 *", "0 0 30,31 2 *"])
def test_an_expression_with_no_match_in_a_gregorian_cycle_never_fires(expression: str) -> None:
    matcher = compile_cron(check_cron_syntax(expression))
    assert matcher is not None
    assert not matcher.fires
    assert list(matcher.walls_after(datetime(2000, 1, 1))) == []


def test_croniter_readings_are_kept() -> None:
    start = datetime(2024, 12, 31, 23, 59)
    # An equal range is the whole field.
    assert walls("5-5 0 1 1 *", start, 2) == [datetime(2025, 1, 1, 0, 0), datetime(2025, 1, 1, 0, 1)]
    # Every day of the month, next to a day of week with a `*`: only that day of week (Sun, Tue, Thu, Sat).
    assert walls("0 0 1-31 * */2", start, 3) == days("2025-01-02", "2025-01-04", "2025-01-05")
    # ... and next to one without: either matches, so every day.
    assert walls("0 0 1-31 * MON", start, 3) == days("2025-01-01", "2025-01-02", "2025-01-03")
    # Day of week 7/2 starts from Sunday (0); THU-SUN ends on Sunday.
    assert walls("0 0 * * 7/2", start, 3) == days("2025-01-02", "2025-01-04", "2025-01-05")
    assert walls("0 0 * * THU-SUN", start, 5) == days(
        "2025-01-02", "2025-01-03", "2025-01-04", "2025-01-05", "2025-01-09"
    )


def test_a_start_one_microsecond_before_a_fire_far_ahead_keeps_that_fire() -> None:
    # croniter carries its start as a float timestamp, too coarse for a microsecond after about year 2300;
    # from 00:59:59.999999 in year 5000 it skipped 01:00. The calendar matcher reads the start exactly.
    start = datetime(5000, 1, 1, 0, 59, 59, 999_999)
    assert walls("0 * * * *", start, 1) == [datetime(5000, 1, 1, 1, 0)]


def test_near_year_9999_one_day_field_with_no_match_left_does_not_hide_the_other() -> None:
    # No 31 February; 1 February 9999 is a Monday (9999-12-31, 333 days later, is a Friday).
    assert walls("0 0 31 2 MON", datetime(9999, 1, 1)) == days(
        "9999-02-01", "9999-02-08", "9999-02-15", "9999-02-22"
    )


def test_the_engine_reads_checked_expressions_with_the_matcher_and_older_ones_with_croniter() -> None:
    assert parse_cron("0 9 * * 1-5").matcher is not None
    assert parse_cron("*/60 * * * *").matcher is None  # refused today, read as croniter reads it
    with pytest.raises(PydanticCustomError) as refused:
        parse_cron("0 0 ?,1 * *")  # croniter refuses it, as before
    assert refused.value.type == "invalid_cron"
    with pytest.raises(PydanticCustomError) as never:
        parse_cron("0 0 31W 2 *")
    assert never.value.type == "cron_never_fires"
