"""Schedules in words (``tickwork.domain.describe``): cron through cron-descriptor, with the time zone and
bounds; rate and one-time schedules without a library."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter
from tickwork.domain.describe import describe_schedule
from tickwork.domain.models import Schedule

SCHEDULES = TypeAdapter(Schedule)


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        (
            {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "America/New_York"},
            "At 09:00, Monday through Friday, America/New_York",
        ),
        ({"type": "cron", "expression": "@daily"}, "At 00:00, UTC"),
        ({"type": "cron", "expression": "*/15 * * * * *"}, "Every 15 seconds, UTC"),
        ({"type": "cron", "expression": "0 0 * * FRI#3"}, "At 00:00, on the third Friday of the month, UTC"),
        ({"type": "cron", "expression": "0 0 * * 5L"}, "At 00:00, on the last Friday of the month, UTC"),
        ({"type": "cron", "expression": "0 0 L * *"}, "At 00:00, on the last day of the month, UTC"),
        (
            {"type": "cron", "expression": "0 0 15W * *"},
            "At 00:00, on the weekday nearest day 15 of the month, UTC",
        ),
        (
            {
                "type": "cron",
                "expression": "30 2 * * *",
                "timezone": "Europe/Paris",
                "start_at": "2030-01-01T00:00:00Z",
                "end_at": "2031-01-01T00:00:00Z",
            },
            "At 02:30, Europe/Paris, from 2030-01-01T00:00:00Z, until 2031-01-01T00:00:00Z",
        ),
        ({"type": "rate", "every_seconds": 1}, "Every second"),
        ({"type": "rate", "every_seconds": 90}, "Every 90 seconds"),
        ({"type": "rate", "every_seconds": 300}, "Every 5 minutes"),
        ({"type": "rate", "every_seconds": 86_400}, "Every day"),
        ({"type": "once", "at": "2030-06-01T09:00:00+02:00"}, "Once, at 2030-06-01T07:00:00Z"),
    ],
)
def test_every_kind_of_schedule_is_described_in_words(schedule: dict[str, object], words: str) -> None:
    assert describe_schedule(SCHEDULES.validate_python(schedule)) == words
