"""Unit tests for the job model: validation of ``JobSpec`` and the run id helpers."""

from __future__ import annotations

import calendar
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import ValidationError
from tickwork.domain.models import (
    MAX_PAYLOAD_BYTES,
    CronSchedule,
    HttpTarget,
    Job,
    JobSpec,
    JobStatus,
    RunKey,
    job_id_of_run,
    manual_run_id,
    parse_run_id,
    payload_size,
    scheduled_run_id,
)
from tickwork.domain.timeutil import to_epoch_ms


def spec(**overrides: Any) -> dict[str, Any]:
    """A minimal valid JobSpec body, with top-level fields replaced."""
    body: dict[str, Any] = {
        "name": "daily-report",
        "schedule": {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "America/New_York"},
        "target": {"type": "http", "url": "https://example.com/hook"},
    }
    body.update(overrides)
    return body


def cron_spec(**schedule: Any) -> dict[str, Any]:
    return spec(schedule={"type": "cron", "expression": "0 9 * * *", **schedule})


def single_error(body: dict[str, Any]) -> dict[str, Any]:
    """Validate ``body`` expecting exactly one error, and return it."""
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(body)
    errors = caught.value.errors()
    assert len(errors) == 1, errors
    return dict(errors[0])


# --- a valid spec and its defaults --------------------------------------------------------------------------
def test_defaults_match_the_design() -> None:
    # Given only the required fields
    # When the spec is validated and dumped as JSON
    dumped = JobSpec.model_validate(spec()).model_dump(mode="json")

    # Then every default is the one design.md shows
    assert dumped == {
        "name": "daily-report",
        "schedule": {
            "type": "cron",
            "expression": "0 9 * * 1-5",
            "timezone": "America/New_York",
            "start_at": None,
            "end_at": None,
            "exclude": None,
            "dst": {"gap": "shift", "overlap": "once"},
        },
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {},
            "timeout_seconds": 30,
        },
        "payload": None,
        "retry": {
            "max_attempts": 5,
            "initial_delay_seconds": 2,
            "max_delay_seconds": 3600,
            "multiplier": 2.0,
            "jitter": "full",
            "max_age_seconds": 86400,
        },
        "misfire_policy": "fire_once",
        "misfire_grace_seconds": 60,
        "backfill_limit": 100,
        "overlap_policy": "skip",
        "max_concurrent_runs": None,
        "jitter_seconds": 0,
        "concurrency_key": None,
        "max_concurrency": None,
        "priority": "normal",
        "delivery": "at_least_once",
        "description": None,
        "tags": {},
    }


def test_the_design_example_is_accepted_as_is() -> None:
    # Given the full example body from design.md
    body = {
        "name": "daily-report",
        "schedule": {
            "type": "cron",
            "expression": "0 9 * * 1-5",
            "timezone": "America/New_York",
            "start_at": None,
            "end_at": None,
            "dst": {"gap": "shift", "overlap": "once"},
        },
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {},
            "timeout_seconds": 30,
        },
        "payload": {"any": "json"},
        "retry": {
            "max_attempts": 5,
            "initial_delay_seconds": 2,
            "max_delay_seconds": 3600,
            "multiplier": 2.0,
            "jitter": "full",
            "max_age_seconds": 86400,
        },
        "misfire_policy": "fire_once",
        "misfire_grace_seconds": 60,
        "backfill_limit": 100,
        "overlap_policy": "skip",
        "delivery": "at_least_once",
        "description": None,
        "tags": {},
    }

    # When it is validated from JSON
    job_spec = JobSpec.model_validate_json(json.dumps(body))

    # Then it round-trips unchanged
    # (with the fields added since, at their defaults)
    assert job_spec.model_dump(mode="json") == {
        **body,
        "schedule": {**cast(dict[str, Any], body["schedule"]), "exclude": None},
        "max_concurrent_runs": None,
        "jitter_seconds": 0,
        "concurrency_key": None,
        "max_concurrency": None,
        "priority": "normal",
    }


# --- schedules ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "timezone",
    ["UTC", "Etc/UTC", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kathmandu"],
)
def test_known_time_zones_are_accepted(timezone: str) -> None:
    assert JobSpec.model_validate(cron_spec(timezone=timezone)).schedule == CronSchedule(
        type="cron", expression="0 9 * * *", timezone=timezone
    )


@pytest.mark.parametrize(
    "timezone",
    [
        "Mars/Olympus_Mons",
        "America/New_york",
        "utc",
        "America/New_York ",
        "../../etc/passwd",
        "/usr/share/zoneinfo/UTC",
        "posixrules",
        "localtime",  # the host's zone, not an IANA name
    ],
)
def test_unknown_time_zone_is_refused(timezone: str) -> None:
    # Given a cron schedule in a zone the IANA database does not name
    # When it is validated
    error = single_error(cron_spec(timezone=timezone))

    # Then the time zone field is refused
    assert error["type"] == "unknown_timezone"
    assert error["loc"] == ("schedule", "cron", "timezone")


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("europe/paris", "Europe/Paris"),  # another case
        ("America/New_york", "America/New_York"),
        ("utc", "UTC"),
        ("America/New_York ", "America/New_York"),
        ("Europe/Pari", "Europe/Paris"),  # a close name
        ("America/New York", "America/New_York"),
        ("Tokyo", "Asia/Tokyo"),  # a city alone
        ("Mars/Olympus_Mons", None),
        ("GMT+1", None),  # not GMT+0: another offset is no suggestion
        ("localtime", None),
    ],
)
def test_an_unknown_time_zone_names_the_zone_probably_meant(given: str, meant: str | None) -> None:
    # Given a cron schedule in a zone the IANA database does not name
    # When it is validated
    error = single_error(cron_spec(timezone=given))

    # Then the message suggests the known zone closest to it, if one is close
    assert error["type"] == "unknown_timezone"
    if meant is None:
        assert "did you mean" not in error["msg"]
    else:
        assert error["msg"] == f"unknown IANA time zone '{given}': did you mean {meant}?"


@pytest.mark.parametrize(
    "expression",
    [
        "61 9 * * *",
        "0 25 * * *",
        "0 9 32 * *",
        "0 9 * 13 *",
        "0 9 * * 8",
        "*/0 * * * *",
        "a b c d e",
        "60 * * * * *",
    ],
)
def test_bad_cron_field_is_refused(expression: str) -> None:
    # Given a cron expression with a field out of range or unreadable
    # When it is validated
    error = single_error(cron_spec(expression=expression))

    # Then the expression is refused as invalid
    assert error["type"] == "invalid_cron"
    assert error["loc"] == ("schedule", "cron", "expression")


@pytest.mark.parametrize(
    ("expression", "count"), [("* * * *", 4), ("* * * * * * *", 7), ("0", 1), ("0 0", 2)]
)
def test_wrong_cron_field_count_is_refused(expression: str, count: int) -> None:
    # Given a cron expression with neither 5 nor 6 fields
    # When it is validated
    error = single_error(cron_spec(expression=expression))

    # Then it is refused, and the message says how many fields it had
    assert error["type"] == "invalid_cron"
    assert error["loc"] == ("schedule", "cron", "expression")
    assert f"got {count}" in error["msg"]


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *", "0 0 0 30 2 *"])
def test_cron_that_never_fires_is_refused(expression: str) -> None:
    # Given a well-formed expression that matches no date (Feb 30, Apr 31, ...)
    # When it is validated
    error = single_error(cron_spec(expression=expression))

    # Then it is refused as never firing
    assert error["type"] == "cron_never_fires"
    assert error["loc"] == ("schedule", "cron", "expression")


@pytest.mark.parametrize(
    "expression",
    [
        "0 9 * * 1-5",
        "*/15 * * * *",
        "30 0 9 * * *",
        "@daily",
        "@hourly",
        "0 12 L * *",
        "0 12 15W * *",
        "0 12 * * 1#2",
    ],
)
def test_valid_cron_expressions_are_accepted(expression: str) -> None:
    job_spec = JobSpec.model_validate(cron_spec(expression=expression))
    assert isinstance(job_spec.schedule, CronSchedule)
    assert job_spec.schedule.expression == expression


@pytest.mark.parametrize("kind", ["cron", "rate"])
@pytest.mark.parametrize(
    ("start_at", "end_at"),
    [
        ("2025-01-02T00:00:00Z", "2025-01-01T00:00:00Z"),
        ("2025-01-02T00:00:00Z", "2025-01-02T00:00:00Z"),
        # the same instant written in two offsets is still not later
        ("2025-01-02T00:00:00Z", "2025-01-01T19:00:00-05:00"),
    ],
)
def test_end_at_not_after_start_at_is_refused(kind: str, start_at: str, end_at: str) -> None:
    # Given a bounded schedule whose end is not later than its start
    schedule: dict[str, Any] = (
        {"type": "cron", "expression": "* * * * *"}
        if kind == "cron"
        else {"type": "rate", "every_seconds": 60}
    )
    body = spec(schedule={**schedule, "start_at": start_at, "end_at": end_at})

    # When it is validated
    error = single_error(body)

    # Then the schedule is refused
    assert error["type"] == "end_before_start"
    assert error["loc"] == ("schedule", kind)


def test_end_at_one_microsecond_after_start_at_is_accepted() -> None:
    body = spec(
        schedule={
            "type": "rate",
            "every_seconds": 60,
            "start_at": "2025-01-02T00:00:00Z",
            "end_at": "2025-01-02T00:00:00.000001Z",
        }
    )
    assert JobSpec.model_validate(body).schedule.type == "rate"


@pytest.mark.parametrize(
    ("schedule", "loc"),
    [
        ({"type": "once", "at": "2025-01-01T00:00:00"}, ("schedule", "once", "at")),
        (
            {"type": "rate", "every_seconds": 5, "start_at": "2025-01-01T00:00:00"},
            ("schedule", "rate", "start_at"),
        ),
        (
            {"type": "cron", "expression": "* * * * *", "end_at": "2025-01-01T00:00:00"},
            ("schedule", "cron", "end_at"),
        ),
    ],
)
def test_timestamp_without_offset_is_refused(schedule: dict[str, Any], loc: tuple[str, ...]) -> None:
    # Given a timestamp with no UTC offset
    # When it is validated (as a Python dict and as JSON)
    error = single_error(spec(schedule=schedule))
    with pytest.raises(ValidationError) as from_json:
        JobSpec.model_validate_json(json.dumps(spec(schedule=schedule)))

    # Then it is refused rather than guessed
    assert error["type"] == "timezone_aware"
    assert error["loc"] == loc
    assert [(item["type"], item["loc"]) for item in from_json.value.errors()] == [("timezone_aware", loc)]


def test_timestamps_with_an_offset_are_held_and_written_as_utc() -> None:
    # Given a one-time schedule written with a +09:00 offset
    job_spec = JobSpec.model_validate(spec(schedule={"type": "once", "at": "2025-01-01T09:00:00+09:00"}))

    # When it is read back
    # Then it is the same instant, in UTC, and serialized with a Z suffix
    assert job_spec.schedule.type == "once"
    assert job_spec.schedule.at == datetime(2025, 1, 1, 0, 0, tzinfo=UTC)
    assert job_spec.schedule.at.utcoffset() == timedelta(0)
    assert job_spec.model_dump(mode="json")["schedule"]["at"] == "2025-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("every_seconds", "error_type"), [(0, "greater_than_equal"), (366 * 86_400 + 1, "less_than_equal")]
)
def test_rate_period_bounds(every_seconds: int, error_type: str) -> None:
    error = single_error(spec(schedule={"type": "rate", "every_seconds": every_seconds}))
    assert error["type"] == error_type
    assert error["loc"] == ("schedule", "rate", "every_seconds")


# --- retry and policies -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("retry", "error_type", "loc"),
    [
        ({"max_attempts": 0}, "greater_than_equal", ("retry", "max_attempts")),
        ({"max_attempts": 101}, "less_than_equal", ("retry", "max_attempts")),
        ({"initial_delay_seconds": -1}, "greater_than_equal", ("retry", "initial_delay_seconds")),
        ({"initial_delay_seconds": -0.001}, "greater_than_equal", ("retry", "initial_delay_seconds")),
        ({"multiplier": 0.5}, "greater_than_equal", ("retry", "multiplier")),
        ({"jitter": "random"}, "literal_error", ("retry", "jitter")),
        ({"initial_delay_seconds": 10, "max_delay_seconds": 5}, "max_delay_below_initial", ("retry",)),
    ],
)
def test_bad_retry_policy_is_refused(retry: dict[str, Any], error_type: str, loc: tuple[str, ...]) -> None:
    # Given a retry policy with a value out of bounds
    # When it is validated
    error = single_error(spec(retry=retry))

    # Then the field is refused
    assert error["type"] == error_type
    assert error["loc"] == loc


@pytest.mark.parametrize("max_attempts", [1, 100])
def test_max_attempts_bounds_are_accepted(max_attempts: int) -> None:
    assert (
        JobSpec.model_validate(spec(retry={"max_attempts": max_attempts})).retry.max_attempts == max_attempts
    )


@pytest.mark.parametrize(
    ("field", "value", "error_type"),
    [
        ("misfire_grace_seconds", -1, "greater_than_equal"),
        ("backfill_limit", 0, "greater_than_equal"),
        ("backfill_limit", 1001, "less_than_equal"),
        ("misfire_policy", "replay", "literal_error"),
        ("overlap_policy", "replace", "literal_error"),
        ("delivery", "exactly_once", "literal_error"),
    ],
)
def test_bad_policy_fields_are_refused(field: str, value: Any, error_type: str) -> None:
    error = single_error(spec(**{field: value}))
    assert error["type"] == error_type
    assert error["loc"] == (field,)


# --- unknown fields -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (spec(colour="red"), ("colour",)),
        (spec(retry={"max_attempts": 3, "max_attempt": 4}), ("retry", "max_attempt")),
        (
            spec(schedule={"type": "cron", "expression": "* * * * *", "time_zone": "UTC"}),
            ("schedule", "cron", "time_zone"),
        ),
        (
            spec(schedule={"type": "cron", "expression": "* * * * *", "dst": {"gap": "skip", "fold": "all"}}),
            ("schedule", "cron", "dst", "fold"),
        ),
        (
            spec(target={"type": "http", "url": "https://example.com", "verb": "GET"}),
            ("target", "http", "verb"),
        ),
        (
            spec(schedule={"type": "once", "at": "2025-01-01T00:00:00Z", "every_seconds": 5}),
            ("schedule", "once", "every_seconds"),
        ),
    ],
)
def test_unknown_fields_are_refused(body: dict[str, Any], loc: tuple[str, ...]) -> None:
    # Given a body with a field the model does not know (a typo must never silently become a default)
    # When it is validated
    error = single_error(body)

    # Then that field is refused, wherever it is
    assert error["type"] == "extra_forbidden"
    assert error["loc"] == loc


# --- payload size -------------------------------------------------------------------------------------------
def test_max_payload_is_256_kib() -> None:
    assert MAX_PAYLOAD_BYTES == 256 * 1024 == 262_144


@pytest.mark.parametrize(
    ("payload", "size"),
    [
        # a JSON string: two quotes plus the characters
        ("x" * 262_142, 262_144),
        ("x" * 262_143, 262_145),
        # compact separators: {"a":"..."} is 8 bytes plus the value (with ", " and ": " it would be one more)
        ({"a": "x" * 262_136}, 262_144),
        ({"a": "x" * 262_137}, 262_145),
        # UTF-8, not \\u escapes: é is 2 bytes
        ("é" * 131_071, 262_144),
        ("é" * 131_071 + "x", 262_145),
        # a 4-byte character
        ("😀" * 65_535 + "xx", 262_144),
        ("😀" * 65_535 + "xxx", 262_145),
        # a list of numbers: [1,1,...,1] with n ones is 2n + 1 bytes
        ([1] * 131_071, 262_143),
        ([1] * 131_071 + [10], 262_146),
    ],
)
def test_payload_size_limit(payload: Any, size: int) -> None:
    # Given a payload whose compact UTF-8 JSON is `size` bytes (counted by hand above)
    assert payload_size(payload) == size

    if size <= MAX_PAYLOAD_BYTES:
        # When it is validated, Then a payload up to 256 KiB is accepted unchanged
        assert JobSpec.model_validate(spec(payload=payload)).payload == payload
    else:
        # When it is validated, Then one byte more is refused
        error = single_error(spec(payload=payload))
        assert error["type"] == "payload_too_large"
        assert error["loc"] == ("payload",)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", '{"x":NaN}'])
def test_non_json_numbers_in_the_payload_are_refused(token: str) -> None:
    # Given a request body whose payload holds a number JSON does not have
    body = json.dumps(spec())[:-1] + ',"payload":' + token + "}"

    # When it is validated
    # Then it is refused (a client must not get back, or a target receive, something else than it sent)
    with pytest.raises(ValidationError):
        JobSpec.model_validate_json(body)


# --- names --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "Z", "0", "daily-report", "a.b_c-D9", "x" * 128, "..."])
def test_valid_names_are_accepted(name: str) -> None:
    assert JobSpec.model_validate(spec(name=name)).name == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 129,
        "daily report",
        "a/b",
        "a:b",
        "naïve",
        "job\n",
        "\njob",
        "tab\there",
        "semi;colon",
        "a+b",
    ],
)
def test_names_outside_the_pattern_are_refused(name: str) -> None:
    # Given a name outside [A-Za-z0-9._-]{1,128}
    # When it is validated
    error = single_error(spec(name=name))

    # Then the name is refused
    assert error["type"] == "string_pattern_mismatch"
    assert error["loc"] == ("name",)


# --- target headers -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header",
    [
        "X-Tickwork-Foo",
        "x-tickwork-run-id",
        "X-TICKWORK-SIGNATURE",
        "X-Tickwork-Fencing-Token",
        "Authorization",
        "authorization",
        "Idempotency-Key",
        "Host",
        "Content-Length",
    ],
)
def test_reserved_headers_are_refused(header: str) -> None:
    # Given an http target that tries to set a header tickwork owns
    body = spec(target={"type": "http", "url": "https://example.com/hook", "headers": {header: "value"}})

    # When it is validated
    error = single_error(body)

    # Then the headers are refused
    assert error["type"] == "reserved_header"
    assert error["loc"] == ("target", "http", "headers")


@pytest.mark.parametrize("header", ["X-Custom", "X-Tickworks", "X-Api-Key", "Content-Type"])
def test_other_headers_are_accepted(header: str) -> None:
    body = spec(target={"type": "http", "url": "https://example.com/hook", "headers": {header: "value"}})
    target = JobSpec.model_validate(body).target
    assert isinstance(target, HttpTarget)
    assert target.headers == {header: "value"}


# --- jobs ---------------------------------------------------------------------------------------------------
def test_job_carries_its_spec_and_state() -> None:
    # Given a stored job built from a spec
    job_spec = JobSpec.model_validate(spec(payload={"k": [1, 2]}))
    created = datetime(2025, 1, 1, tzinfo=UTC)
    job = Job(
        **job_spec.model_dump(), job_id="job-1", tenant_id="acme", created_at=created, updated_at=created
    )

    # When its spec is taken back out
    # Then it equals the original, and the state has its defaults
    assert job.spec() == job_spec
    assert job.status is JobStatus.ACTIVE
    assert job.version == 1
    assert job.next_fire_at is None
    assert job.pause is None


# --- run ids ------------------------------------------------------------------------------------------------
def test_scheduled_run_id_is_job_id_and_epoch_milliseconds() -> None:
    # Given a fire at 2025-03-09T03:00:00-04:00 = 07:00Z: 20156 days after the epoch, plus 7 hours
    fire_at = datetime.fromisoformat("2025-03-09T03:00:00-04:00")
    epoch_ms = (20_156 * 86_400 + 7 * 3600) * 1000
    assert epoch_ms == calendar.timegm((2025, 3, 9, 7, 0, 0)) * 1000 == 1_741_503_600_000

    # When its run id is made
    # Then it is "<job_id>:<epoch ms>"
    assert scheduled_run_id("job-1", fire_at) == "job-1:1741503600000"


def test_scheduled_run_id_is_deterministic() -> None:
    # Given the same instant written three ways, and neighbouring instants
    instant = datetime(2025, 3, 9, 7, 0, tzinfo=UTC)
    same = [
        instant,
        datetime.fromisoformat("2025-03-09T03:00:00-04:00"),
        datetime.fromisoformat("2025-03-09T16:30:00+09:30"),
    ]

    # When run ids are made
    # Then the same instant gives the same id, and a different millisecond or job a different one
    assert {scheduled_run_id("job-1", value) for value in same} == {"job-1:1741503600000"}
    assert scheduled_run_id("job-1", instant + timedelta(microseconds=999)) == "job-1:1741503600000"
    assert scheduled_run_id("job-1", instant + timedelta(milliseconds=1)) == "job-1:1741503600001"
    assert scheduled_run_id("job-1", instant - timedelta(microseconds=1)) == "job-1:1741503599999"
    assert scheduled_run_id("job-2", instant) == "job-2:1741503600000"
    assert job_id_of_run(scheduled_run_id("job-1", instant)) == "job-1"


def test_scheduled_run_id_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="offset"):
        scheduled_run_id("job-1", datetime(2025, 1, 1))


def test_manual_run_id_with_a_key_is_deterministic() -> None:
    # Given an idempotency key
    key = "client-key-42"

    # When manual run ids are made from it, twice, and from other keys and jobs
    first = manual_run_id("job-1", key)
    again = manual_run_id("job-1", key)

    # Then the same key and job give the same id, of the documented shape, without the raw key in it
    assert first == again
    assert re.fullmatch(r"job-1:m:[0-9a-f]{32}", first)
    assert key not in first
    # (the suffix is the first 32 hex digits of the key's SHA-256, so ids stay stable across deployments)
    assert first == "job-1:m:" + hashlib.sha256(key.encode()).hexdigest()[:32]
    assert manual_run_id("job-1", "client-key-43") != first
    assert manual_run_id("job-2", key) == "job-2:m:" + first.split(":m:")[1]
    assert job_id_of_run(first) == "job-1"


@pytest.mark.parametrize("key", [None, ""])
def test_manual_run_id_without_a_key_is_unique(key: str | None) -> None:
    # Given no idempotency key
    # When manual run ids are made many times
    ids = {manual_run_id("job-1", key) for _ in range(200)}

    # Then each is new, and all have the documented shape
    assert len(ids) == 200
    assert all(re.fullmatch(r"job-1:m:[0-9a-f]{32}", run_id) for run_id in ids)


# --- max_concurrent_runs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [1, 50])
def test_max_concurrent_runs_bounds_overlap_allow(limit: int) -> None:
    job = JobSpec.model_validate(spec(overlap_policy="allow", max_concurrent_runs=limit))
    assert job.max_concurrent_runs == limit


@pytest.mark.parametrize("limit", [0, 51])
def test_max_concurrent_runs_out_of_range_is_refused(limit: int) -> None:
    error = single_error(spec(overlap_policy="allow", max_concurrent_runs=limit))
    assert error["loc"] == ("max_concurrent_runs",)


@pytest.mark.parametrize("policy", ["skip", "queue"])
def test_max_concurrent_runs_needs_overlap_allow(policy: str) -> None:
    error = single_error(spec(overlap_policy=policy, max_concurrent_runs=2))
    assert error["type"] == "max_concurrent_runs_needs_allow"
    assert "allow" in error["msg"]


# --- run ids ----------------------------------------------------------------------------------------------
def test_run_ids_name_their_job_and_fire_or_trigger() -> None:
    fire = datetime(2026, 1, 1, tzinfo=UTC)
    scheduled = parse_run_id(scheduled_run_id("01JOB", fire))
    manual = parse_run_id(manual_run_id("01JOB", "key-1"))
    assert scheduled == RunKey("01JOB", to_epoch_ms(fire), None)
    assert manual is not None and (manual.job_id, manual.fire_ms, manual.is_manual) == ("01JOB", None, True)


@pytest.mark.parametrize(
    "run_id", ["", "01JOB", "01JOB:", "01JOB:m:xyz", "01JOB:12a", "a b:1", "x" * 65 + ":1"]
)
def test_other_strings_are_not_run_ids(run_id: str) -> None:
    assert parse_run_id(run_id) is None


# --- concurrency keys ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"concurrency_key": "db"}, "concurrency_key_with_max_concurrency"),
        ({"max_concurrency": 2}, "concurrency_key_with_max_concurrency"),
        ({"concurrency_key": "db", "max_concurrency": 0}, "greater_than_equal"),
        ({"concurrency_key": "db", "max_concurrency": 1001}, "less_than_equal"),
        ({"concurrency_key": "k" * 129, "max_concurrency": 2}, "string_too_long"),
        ({"concurrency_key": "", "max_concurrency": 2}, "string_too_short"),
    ],
)
def test_a_concurrency_key_out_of_bounds_is_refused(fields: dict[str, Any], code: str) -> None:
    body = {
        "name": "keyed",
        "schedule": {"type": "rate", "every_seconds": 60},
        "target": {"type": "http", "url": "https://hooks.example.com/x"},
        **fields,
    }
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate(body)
    assert code in {error["type"] for error in refused.value.errors()}


def test_a_concurrency_key_at_its_limits_is_accepted() -> None:
    body = {
        "name": "keyed",
        "schedule": {"type": "rate", "every_seconds": 60},
        "target": {"type": "http", "url": "https://hooks.example.com/x"},
    }
    for key, limit in (("k" * 128, 1000), ("k", 1)):
        spec = JobSpec.model_validate({**body, "concurrency_key": key, "max_concurrency": limit})
        assert (spec.concurrency_key, spec.max_concurrency) == (key, limit)
