"""Cron syntax, checked field by field before any matching.

Every refusal names the field, the value and what the field allows, in one of a fixed set of messages (the
``MESSAGES`` below); nothing from the matching library reaches the user. What is accepted:

- 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; or one alias (``@daily``);
- in every field: ``*``, a value, a range ``a-b`` going upward, a step ``*/s``, ``a/s`` or ``a-b/s`` with
  ``s`` from 1 to one less than the field's number of values, and lists of these;
- month and day-of-week names of three letters (``JAN``, ``MON``), in any case; day-of-week 0 and 7 are both
  Sunday;
- ``?`` in day-of-month or day-of-week (the same as ``*``);
- day of month: ``L`` (its last day; also in a list) and ``nW`` (the weekday nearest day n, alone);
- day of week: ``n#k`` (the k-th day n of the month, k from 1 to 5, alone) and ``nL`` (the last day n of the
  month, alone; ``Ln`` is read the same).

Day of month and day of week together: plain values, ranges and steps in both match when either matches
(``0 0 1,15 * MON`` fires on the 1st, the 15th and every Monday), as in vixie cron, croniter, cron-parser
and robfig/cron. A special form in one of them (``L``, ``nW``; ``n#k``, ``nL``) with the other restricted is
refused, as Quartz refuses it: implementations read it differently (croniter and Cronos match when both do,
cron-parser when either does, croniter ignores the day of week next to ``nW``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic_core import PydanticCustomError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_ALIAS_LIST = ", ".join(ALIASES)

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

MESSAGES = {
    "field_count": "cron needs 5 fields, or 6 with seconds first; got {count}",
    "unknown_alias": "unknown alias {alias}; allowed: {aliases}",
    "reboot": "@reboot is not supported: jobs run on a schedule, not when tickwork starts;"
    " allowed: {aliases}",
    "out_of_range": "{field} value {value} is out of range; allowed: {allowed}",
    "not_a_value": "{field} value {value} is not a number or a name; allowed: {allowed}",
    "bad_step": "{field} step {step} in {item} must be a whole number from 1 to {most}",
    "downward_range": "{field} range {item} goes downward; a range must go upward (to wrap around, list both"
    " parts, as in {example})",
    "empty_item": "{field} has an empty item in {text}; items are separated by single commas",
    "question_mark": "{field} cannot be ?; ? is only for day of month or day of week",
    "not_in_list": "{field} {item} must stand alone, not in a list",
    "weekday_nearest": "day of month {item}: W needs one day before it, 1 to 31, as in 15W",
    "nth_weekday": "day of week {item}: # needs a day (0 to 7 or SUN to SAT) and an occurrence 1 to 5,"
    " as in FRI#3",
    "last_weekday": "day of week {item}: L needs a day (0 to 7 or SUN to SAT) before it, as in 5L or FRIL"
    " (the last Friday of the month)",
    "day_of_month_form": "day of month {item} is not supported; allowed: 1 to 31, L (the last day), nW (the"
    " weekday nearest day n)",
    "day_of_week_form": "day of week {item} is not supported; allowed: 0 to 7 or SUN to SAT, n#k (the k-th"
    " day n of the month), nL (the last day n of the month)",
    "special_day_with_weekday": "day of month {day} cannot go with day of week {weekday}: cron"
    " implementations disagree on what that means; put * or ? in one of the two",
    "range_step": "{field} step {step} in {item} must be a whole number from 1 to {most}, or the range"
    " fires once",
}


def _refuse(kind: str, **context: object) -> PydanticCustomError:
    error_type = "invalid_cron"
    return PydanticCustomError(error_type, MESSAGES[kind], {"aliases": _ALIAS_LIST, **context})


@dataclass(frozen=True)
class CronField:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names for low, low + 1, ... (month and day-of-week only)."""
    values: int = 0
    """How many distinct values it has (day-of-week: 7, though 7 is written for Sunday too)."""

    @property
    def allowed(self) -> str:
        numbers = f"{self.low} to {self.high}"
        return f"{numbers} or {self.names[0]} to {self.names[-1]}" if self.names else numbers

    @property
    def most_step(self) -> int:
        return (self.values or self.high - self.low + 1) - 1


SECOND = CronField("second", 0, 59)
MINUTE = CronField("minute", 0, 59)
HOUR = CronField("hour", 0, 23)
DAY_OF_MONTH = CronField("day of month", 1, 31)
MONTH = CronField("month", 1, 12, MONTH_NAMES)
DAY_OF_WEEK = CronField("day of week", 0, 7, DAY_NAMES, values=7)

FIVE_FIELDS = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)
SIX_FIELDS = (SECOND, *FIVE_FIELDS)

_STEP = re.compile(r"^(?P<base>[^/]*)/(?P<step>.*)$")
_NTH = re.compile(r"^(?P<day>[A-Za-z0-9]+)#(?P<nth>.*)$")


def check_cron_syntax(expression: str) -> str:
    """The expression in the form the matcher reads (aliases expanded, spaces single, ``nL`` as ``Ln``), or
    a ``PydanticCustomError`` saying what is wrong and what is allowed."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        alias = text.lower()
        if alias == "@reboot":
            raise _refuse("reboot")
        if alias not in ALIASES:
            raise _refuse("unknown_alias", alias=text)
        return ALIASES[alias]
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise _refuse("field_count", count=len(fields))
    definitions = SIX_FIELDS if len(fields) == 6 else FIVE_FIELDS
    checked = [_check_field(field, value) for field, value in zip(definitions, fields, strict=True)]
    day, weekday = checked[-3], checked[-1]
    special_day = "L" in day or "W" in day
    special_weekday = "#" in weekday or "L" in weekday
    if (special_day and weekday not in ("*", "?")) or (special_weekday and day not in ("*", "?")):
        raise _refuse("special_day_with_weekday", day=fields[-3], weekday=fields[-1])
    return " ".join(checked)


def _check_field(field: CronField, text: str) -> str:
    items = text.split(",")
    if any(item == "" for item in items):
        raise _refuse("empty_item", field=field.name, text=text)
    alone = len(items) == 1
    return ",".join(_check_item(field, item, alone=alone) for item in items)


def _check_item(field: CronField, item: str, *, alone: bool) -> str:
    upper = item.upper()
    if upper in ("*", "?"):
        if upper == "?" and field not in (DAY_OF_MONTH, DAY_OF_WEEK):
            raise _refuse("question_mark", field=field.name)
        return upper
    if field is DAY_OF_MONTH and ("L" in upper or "W" in upper):
        return _day_of_month_form(item, upper, alone=alone)
    if field is DAY_OF_WEEK and ("#" in upper or upper.endswith("L") or upper.startswith("L")):
        return _day_of_week_form(item, upper, alone=alone)
    step_match = _STEP.match(item)
    if step_match:
        base, step_text = step_match["base"], step_match["step"]
        most = field.most_step
        if not step_text.isdigit() or not 1 <= int(step_text) <= most:
            raise _refuse("bad_step", field=field.name, step=step_text or "(none)", item=item, most=most)
        if base != "*":
            span = _check_range(field, base, item)
            if span is not None and int(step_text) > span:
                raise _refuse("range_step", field=field.name, step=step_text, item=item, most=span)
        return f"{base.upper()}/{int(step_text)}"
    _check_range(field, item, item)
    return upper


def _check_range(field: CronField, text: str, item: str) -> int | None:
    """Checks a value or a range; returns a range's span (end - start), None for a value."""
    if "-" in text:
        start_text, _, end_text = text.partition("-")
        start, end = _value(field, start_text), _value(field, end_text)
        if field is DAY_OF_WEEK and end == 0:
            end = 7  # THU-SUN: Sunday ends the week as well as starting it (croniter, croner, Cronos)
        if start > end:
            last = field.low + (field.values or field.high - field.low + 1) - 1
            example = f"{start_text}-{last},{field.low}-{end_text}"
            raise _refuse("downward_range", field=field.name, item=item, example=example)
        return end - start
    _value(field, text)
    return None


def _value(field: CronField, text: str) -> int:
    if text.isdigit():
        number = int(text)
        if not field.low <= number <= field.high:
            raise _refuse("out_of_range", field=field.name, value=text, allowed=field.allowed)
        return number
    upper = text.upper()
    if upper in field.names:
        return field.low + field.names.index(upper)
    raise _refuse("not_a_value", field=field.name, value=text or "(none)", allowed=field.allowed)


def _day_of_month_form(item: str, upper: str, *, alone: bool) -> str:
    if upper == "L":
        return "L"
    if upper.endswith("W") and upper[:-1].isdigit():
        if not alone:
            raise _refuse("not_in_list", field=DAY_OF_MONTH.name, item=item)
        if not 1 <= int(upper[:-1]) <= 31:
            raise _refuse("weekday_nearest", item=item)
        return f"{int(upper[:-1])}W"
    if upper == "W" or (upper.endswith("W") and "L" not in upper):
        raise _refuse("weekday_nearest", item=item)
    raise _refuse("day_of_month_form", item=item)


def _day_of_week_form(item: str, upper: str, *, alone: bool) -> str:
    nth = _NTH.match(upper)
    if nth:
        if not alone:
            raise _refuse("not_in_list", field=DAY_OF_WEEK.name, item=item)
        day, occurrence = nth["day"], nth["nth"]
        if not _is_day(day) or not occurrence.isdigit() or not 1 <= int(occurrence) <= 5:
            raise _refuse("nth_weekday", item=item)
        return f"{_day_number(day)}#{int(occurrence)}"
    day = upper[:-1] if upper.endswith("L") else upper[1:]
    if not day or not _is_day(day):
        raise _refuse("last_weekday" if day == "" or upper.endswith("L") else "day_of_week_form", item=item)
    if not alone:
        raise _refuse("not_in_list", field=DAY_OF_WEEK.name, item=item)
    return f"L{_day_number(day)}"


def _is_day(text: str) -> bool:
    return (text.isdigit() and 0 <= int(text) <= 7) or text in DAY_NAMES


def _day_number(text: str) -> int:
    return int(text) if text.isdigit() else DAY_NAMES.index(text)
