"""Property tests over the job model: whatever a client sends, tickwork refuses it with a validation error and
stores nothing, or accepts it and stores a job that round-trips, re-validates and has a computable next fire.

The strategies mix valid parts with edge cases and garbage: cron strings built field by field (``L``, ``W``,
``#``, steps, ranges, names, junk), rates of 0, negative or huge seconds, timestamps without an offset, far
in the past or future, at year 9999, at +14:00 and -12:00, leap seconds; time zones valid, unknown,
path-like, empty and very long; payloads nested, deep, unicode, NaN and Infinity, near 256 KiB; target
headers with CR/LF, non-ASCII text, reserved names and huge values.

Three layers are driven with the same strategies: ``JobSpec.model_validate`` alone, the service's create
path under moto, and the HTTP API through the API Gateway stand-in. Runs are derandomized and use no example
database, so CI sees the same examples every time.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from tickwork import tables
from tickwork.domain.fires import first_fire_anchor
from tickwork.domain.models import NAME_PATTERN, Job, JobSpec, RateSchedule
from tickwork.domain.schedule import next_fire_time
from tickwork.errors import InvalidInput
from tickwork.runtime import runtime
from tickwork_local.harness import moto_aws

from tests.conftest import TOKENS, create_tables, item_counts, seed_tenant
from tests.support.apigw import ApiGateway

NOW = datetime.now(UTC).replace(microsecond=0)
ERROR_FIELDS = {"code", "message", "field"}


def profile(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


# --- schedules --------------------------------------------------------------------------------------------
CRON_SPECIALS = [
    "L",
    "LW",
    "15W",
    "W",
    "1W",
    "31W",
    "5L",
    "L-3",
    "1#3",
    "5#5",
    "7#1",
    "0#0",
    "MON-FRI",
    "mon,wed",
    "JAN",
    "JAN-DEC/2",
    "SUN#2",
    "FRI#L",
    "?",
    "*/0",
    "*/-1",
    "1-",
    "-5",
    "5-1",
    "1,,2",
    "*/99999999999999",
    "60",
    "24",
    "32",
    "13",
    "8",
    "0-59/15",
    "1-31/2",
    "H",
    "\u0661",
    "\x00",
    "*,*",
    "L,15",
]
CRON_ALIASES = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@reboot",
    "@every 5m",
    "@DAILY",
    "@",
]
VALID_CRONS = [
    "0 9 * * 1-5",
    "*/5 * * * *",
    "0 0 L * *",
    "0 12 15W * *",
    "0 8 * * 1#2",
    "30 2 * * *",
    "*/10 * * * * *",
    "0 30 1 * * 0",
    "0 0 1 1 *",
    "0 0 29 2 *",
    "@daily",
    "@hourly",
]


def cron_field(high: int) -> st.SearchStrategy[str]:
    number = st.integers(-2, high + 3)
    return st.one_of(
        st.just("*"),
        number.map(str),
        st.tuples(number, number).map(lambda pair: f"{pair[0]}-{pair[1]}"),
        st.tuples(st.sampled_from(["*", "0", "1-10"]), st.integers(-1, high + 3)).map(
            lambda pair: f"{pair[0]}/{pair[1]}"
        ),
        st.lists(number, min_size=1, max_size=4).map(lambda items: ",".join(map(str, items))),
        st.sampled_from(CRON_SPECIALS),
        st.text(alphabet="0123456789*/,-#LW?abcXYZ é", min_size=1, max_size=6),
    )


FIVE_FIELDS = [cron_field(59), cron_field(23), cron_field(31), cron_field(12), cron_field(7)]
cron_expressions = st.one_of(
    st.sampled_from(VALID_CRONS),
    st.tuples(*FIVE_FIELDS).map(" ".join),
    st.tuples(cron_field(59), *FIVE_FIELDS).map(" ".join),
    st.lists(cron_field(60), min_size=0, max_size=8).map(" ".join),
    st.tuples(*FIVE_FIELDS, st.sampled_from(["  ", "\t", "\n", " "])).map(
        lambda parts: parts[-1].join(parts[:-1])
    ),
    st.sampled_from(CRON_ALIASES),
    st.text(max_size=40),
    st.just("x" * 300),
)

VALID_ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Pacific/Kiritimati",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kathmandu",
    "Etc/GMT+12",
    "Etc/GMT-14",
]
BAD_ZONES = [
    "",
    " ",
    "../etc/passwd",
    "/etc/passwd",
    "../../../../etc/shadow",
    "localtime",
    "Europe/../UTC",
    "utc ",
    "Mars/Olympus_Mons",
    "Europe/Paris\x00",
    "A" * 64,
    "A" * 65,
    "Z" * 10_000,
    "+02:00",
    "Europe\\Paris",
    "%s%s%n",
    "${jndi:ldap://x}",
]
timezones = st.one_of(
    st.sampled_from(VALID_ZONES),
    st.sampled_from(VALID_ZONES),
    st.sampled_from(BAD_ZONES),
    st.text(max_size=80),
)

EDGE_INSTANTS = [
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59+14:00",
    "9999-12-31T23:59:59-12:00",
    "9999-12-29T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "1970-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "2016-12-31T23:59:60Z",
    "2030-02-30T00:00:00Z",
    "2030-01-01T24:00:00Z",
    "2030-01-01T00:00:00+24:00",
    "2030-01-01T00:00:00+14:00",
    "2030-01-01T00:00:00-12:00",
    "2030-01-01",
    "2030-01-01T00:00:00",
    "2030-01-01T00:00:00.123456789Z",
    "now",
    "",
    "tomorrow",
    "2030-13-01T00:00:00Z",
    "+002030-01-01T00:00:00Z",
]


def offset_text(minutes: int) -> str:
    if minutes == 0:
        return "Z"
    sign = "+" if minutes > 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


offsets = st.one_of(
    st.sampled_from([0, 14 * 60, -12 * 60, 5 * 60 + 45, -(3 * 60 + 30)]), st.integers(-1439, 1439)
)


def wall_clock() -> datetime:
    # Read when an example is drawn, not at import: the API reads the wall clock, and in the whole suite this
    # module's tests run minutes after it is imported, when a fire "two minutes from NOW" is in the past.
    return datetime.now(UTC).replace(microsecond=0)


# Near now, so some one-time jobs are accepted: from a day back to ten years ahead, in any offset.
near_now = st.tuples(st.integers(-86_400, 10 * 365 * 86_400), offsets).map(
    lambda pair: (
        (wall_clock() + timedelta(seconds=pair[0]))
        .astimezone(timezone(timedelta(minutes=pair[1])))
        .isoformat()
    )
)
anywhen = st.tuples(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    offsets,
).map(lambda pair: pair[0].isoformat() + offset_text(pair[1]))
naive = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).map(datetime.isoformat)
instants = st.one_of(
    near_now,
    near_now,
    anywhen,
    naive,
    st.sampled_from(EDGE_INSTANTS),
    st.integers(-(10**13), 10**13),
    st.floats(),
    st.text(max_size=30),
)

seconds: st.SearchStrategy[Any] = st.one_of(
    st.integers(-1000, 100_000),
    st.sampled_from([0, -1, 1, 366 * 86_400, 366 * 86_400 + 1, 2**31, 2**63, -(2**63), 10**30]),
    st.floats(),
    st.sampled_from(["60", "1e3", "", True, None, [], {}]),
)
dst_policies = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"gap": st.sampled_from(["shift", "skip"]), "overlap": st.sampled_from(["once", "all"])}
    ),
    st.dictionaries(
        st.sampled_from(["gap", "overlap", "mode"]), st.one_of(st.text(max_size=8), st.integers())
    ),
    st.text(max_size=5),
)
bounds = {"start_at": instants, "end_at": instants}
once_schedules = st.fixed_dictionaries({"type": st.just("once"), "at": instants})
cron_schedules = st.fixed_dictionaries(
    {"type": st.just("cron"), "expression": cron_expressions},
    optional={"timezone": timezones, "dst": dst_policies, **bounds},
)
rate_schedules = st.fixed_dictionaries({"type": st.just("rate"), "every_seconds": seconds}, optional=bounds)
json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
garbage = st.one_of(
    json_leaves,
    st.lists(json_leaves, max_size=3),
    st.dictionaries(st.text(max_size=10), json_leaves, max_size=4),
)
schedules = st.one_of(
    once_schedules,
    cron_schedules,
    cron_schedules,
    rate_schedules,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["hourly", "ONCE", "", "cron "])},
        optional={"at": instants, "expression": cron_expressions},
    ),
    garbage,
)


# --- payloads ---------------------------------------------------------------------------------------------
UNICODE_SAMPLES = [
    "\U0001f600\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "e\u0301\u0301\u0301",
    "\x00",
    "\ud800",
    "\u202e\u2066",
    "\ufeff",
    "\uffff",
    "\U0010ffff",
]


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


json_values = st.recursive(
    st.one_of(json_leaves, st.sampled_from(UNICODE_SAMPLES), st.floats(allow_nan=True, allow_infinity=True)),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
payloads = st.one_of(
    json_values,
    # Deeper than the JSON decoder's recursion limit is a known server error: see test_fuzz_regressions.
    st.integers(1, 400).map(nested),
    # Around the limit: 262,144 bytes of compact UTF-8 JSON, characters of 1 to 4 bytes.
    st.tuples(st.integers(-4, 4), st.sampled_from(["x", "\u00e9", "\u20ac", "\U0001f600"])).map(
        lambda pair: {"s": pair[1] * ((262_144 - 8) // len(pair[1].encode()) + pair[0])}
    ),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), {"n": float("nan")}, 10**400, -(10**20)]),
)


# --- targets ----------------------------------------------------------------------------------------------
HEADER_NAMES = [
    "X-Api-Key",
    "Accept",
    "X-Tickwork-Run-Id",
    "x-tickwork-anything",
    "Idempotency-Key",
    "IDEMPOTENCY-KEY",
    "Authorization",
    "Host",
    "Content-Length",
    "Content-Type",
    "X-\u00c9t\u00e9",
    "X A",
    "X-A\r\nInjected",
    "",
    "X:Y",
    "x" * 129,
]
HEADER_VALUES = [
    "v",
    "a\r\nInjected: 1",
    "\n",
    "\r",
    "caf\u00e9",
    "\U0001f600",
    "x" * 4096,
    "x" * 4097,
    "\t",
    "a\x00b",
    "",
    " spaced ",
    "\u202eevil",
]
headers = st.one_of(
    st.dictionaries(
        st.one_of(st.sampled_from(HEADER_NAMES), st.text(max_size=12)),
        st.one_of(st.sampled_from(HEADER_VALUES), st.text(max_size=20)),
        max_size=4,
    ),
    st.integers(49, 52).map(lambda count: {f"X-H{index}": "v" for index in range(count)}),
    garbage,
)
URLS = [
    "https://hooks.example.com/run",
    "http://hooks.example.com:8080/a?b=c",
    "http://127.0.0.1:9/x",
    "http://[::1]/x",
    "http://169.254.169.254/latest",
    "http://localhost/x",
    "http://0x7f000001/",
    "ftp://example.com/x",
    "https://user:pw@example.com/",
    "https://example.com:99999/",
    "https:///x",
    "https://ex\u00e4mple.com/\U0001f600",
    "https://" + "a" * 2048 + ".com",
    "",
    "javascript:alert(1)",
]
http_targets = st.fixed_dictionaries(
    {
        "type": st.just("http"),
        "url": st.one_of(st.sampled_from(URLS[:2]), st.sampled_from(URLS), st.text(max_size=30)),
    },
    optional={
        "method": st.sampled_from(["POST", "PUT", "PATCH", "GET", "post", ""]),
        "headers": headers,
        "timeout_seconds": st.one_of(st.integers(-5, 1000), st.sampled_from([10**12, 1.5, "30"])),
    },
)
aws_targets = st.sampled_from(
    [
        {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"},
        {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"},
        {"type": "eventbridge", "event_bus_name": "default", "detail_type": "tick"},
        {
            "type": "stepfunctions",
            "state_machine_arn": "arn:aws:states:eu-west-1:123456789012:stateMachine:m",
        },
        {"type": "sqs", "queue_url": "file:///etc/passwd"},
        {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:../../x"},
    ]
)
targets = st.one_of(http_targets, http_targets, aws_targets, garbage)

# --- whole jobs -------------------------------------------------------------------------------------------
names = st.one_of(
    st.from_regex(NAME_PATTERN, fullmatch=True),
    st.sampled_from(["", "n" * 129, "daily report", "a/b", "\u00e9t\u00e9", "x\x00", "-", "."]),
    st.text(max_size=10),
)
retries = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "max_attempts": st.integers(-1, 102),
            "initial_delay_seconds": st.one_of(st.floats(), st.integers(-1, 10**6)),
            "max_delay_seconds": st.one_of(st.floats(), st.integers(-1, 10**7)),
            "multiplier": st.floats(),
            "jitter": st.sampled_from(["full", "equal", "none", "some"]),
            "max_age_seconds": st.integers(-1, 10**7),
        },
    ),
    garbage,
)
valid_schedules = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("once"),
            "at": st.tuples(st.integers(120, 10 * 365 * 86_400), offsets).map(
                lambda pair: (
                    (wall_clock() + timedelta(seconds=pair[0]))
                    .astimezone(timezone(timedelta(minutes=pair[1])))
                    .isoformat()
                )
            ),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("cron"), "expression": st.sampled_from(VALID_CRONS)},
        optional={"timezone": st.sampled_from(VALID_ZONES)},
    ),
    st.fixed_dictionaries({"type": st.just("rate"), "every_seconds": st.integers(1, 366 * 86_400)}),
)
valid_targets = st.fixed_dictionaries(
    # The third is on loopback: valid to the model, refused by the service outside local mode.
    {"type": st.just("http"), "url": st.sampled_from(URLS[:3])},
    optional={
        "headers": st.dictionaries(
            st.sampled_from(["X-Api-Key", "Accept"]), st.text(alphabet="abc -~", max_size=10)
        )
    },
)
job_bodies = st.fixed_dictionaries(
    {
        "name": st.one_of(st.from_regex(NAME_PATTERN, fullmatch=True), names),
        "schedule": st.one_of(valid_schedules, valid_schedules, schedules),
        "target": st.one_of(valid_targets, valid_targets, targets),
    },
    optional={
        "payload": payloads,
        "retry": retries,
        "misfire_policy": st.sampled_from(["skip", "fire_once", "backfill", "fire_all", ""]),
        "misfire_grace_seconds": st.one_of(st.integers(-1, 10**6), st.floats()),
        "backfill_limit": st.integers(-1, 1001),
        "overlap_policy": st.sampled_from(["allow", "skip", "queue", "replace"]),
        "delivery": st.sampled_from(["at_least_once", "at_most_once", "exactly_once"]),
        "description": st.one_of(
            st.none(), st.text(max_size=40), st.just("d" * 1025), st.sampled_from(UNICODE_SAMPLES)
        ),
        "tags": st.one_of(
            st.dictionaries(
                st.text(max_size=10),
                st.one_of(st.text(max_size=10), st.sampled_from(UNICODE_SAMPLES)),
                max_size=4,
            ),
            st.integers(49, 52).map(lambda count: {f"t{index}": "v" for index in range(count)}),
            garbage,
        ),
    },
)
finite_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from([sample for sample in UNICODE_SAMPLES if sample != "\ud800"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
clean_text = st.one_of(
    st.text(max_size=30), st.sampled_from([sample for sample in UNICODE_SAMPLES if sample != "\ud800"])
)
# Valid jobs with nasty but legal contents: these are the ones whose storage must round-trip.
clean_bodies = st.fixed_dictionaries(
    {
        "name": st.from_regex(NAME_PATTERN, fullmatch=True),
        "schedule": valid_schedules,
        "target": valid_targets,
    },
    optional={
        "payload": st.one_of(finite_json, st.integers(1, 60).map(nested), payloads),
        "description": st.one_of(st.none(), clean_text),
        "tags": st.dictionaries(st.text(min_size=1, max_size=10), clean_text, max_size=4),
        "misfire_policy": st.sampled_from(["skip", "fire_once", "backfill"]),
        "overlap_policy": st.sampled_from(["allow", "skip", "queue"]),
        "delivery": st.sampled_from(["at_least_once", "at_most_once"]),
    },
)
# Now and then an unknown field, which must be refused however valid the rest is.
job_bodies = st.one_of(
    clean_bodies,
    job_bodies,
    job_bodies,
    st.tuples(job_bodies, garbage).map(lambda pair: {**pair[0], "urgency": pair[1]}),
)

_unique = itertools.count()


def unique_name(body: dict[str, Any]) -> dict[str, Any]:
    """The same body with a fresh name when its name is valid, so accepted jobs never collide."""
    name = body.get("name")
    if isinstance(name, str) and re.fullmatch(NAME_PATTERN, name):
        return {**body, "name": f"{name[:100]}-{next(_unique)}"}
    return body


def check_round_trip(spec: JobSpec) -> None:
    """An accepted spec survives JSON both ways unchanged, and its next fire computes."""
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
    assert JobSpec.model_validate(json.loads(spec.model_dump_json())) == spec
    anchor = (
        NOW + timedelta(seconds=spec.schedule.every_seconds)
        if isinstance(spec.schedule, RateSchedule)
        else None
    )
    next_fire_time(spec.schedule, NOW, anchor=anchor)


# --- the properties ---------------------------------------------------------------------------------------
MODEL_OUTCOMES: Counter[str] = Counter()


@profile(1500)
@given(body=job_bodies)
def test_the_model_accepts_only_jobs_that_round_trip_and_refuses_the_rest_with_a_validation_error(
    body: dict[str, Any],
) -> None:
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as refused:
        errors = refused.errors()
        assert errors and all(isinstance(error["msg"], str) and error["msg"] for error in errors)
        MODEL_OUTCOMES["refused"] += 1
        return
    MODEL_OUTCOMES["accepted"] += 1
    check_round_trip(spec)


def test_the_model_property_saw_both_outcomes() -> None:
    # Runs after the property above (file order): a strategy that only ever produced refusals would prove
    # nothing about accepted jobs.
    print(f"model: {dict(MODEL_OUTCOMES)}")
    assert MODEL_OUTCOMES["accepted"] >= 150, MODEL_OUTCOMES
    assert MODEL_OUTCOMES["refused"] >= 150, MODEL_OUTCOMES


def counts(client: Any) -> dict[str, int]:
    """``item_counts`` without reading the items back, and over every page: accepted jobs hold payloads of
    up to 256 KiB, and a scan stops each page at 1 MB."""
    found = {}
    for definition in tables.ALL_TABLES:
        pages = client.get_paginator("scan").paginate(TableName=definition.default_name, Select="COUNT")
        found[definition.logical_name] = sum(page["Count"] for page in pages)
    return found


def forget_jobs(client: Any) -> None:
    """Delete every job and run, so the tables stay small across examples (each checks its own counts)."""
    for definition in (tables.JOBS, tables.RUNS):
        key_names = [key["AttributeName"] for key in definition.create_table_kwargs()["KeySchema"]]
        projection = ", ".join(f"#k{index}" for index in range(len(key_names)))
        names = {f"#k{index}": name for index, name in enumerate(key_names)}
        pages = client.get_paginator("scan").paginate(
            TableName=definition.default_name, ProjectionExpression=projection, ExpressionAttributeNames=names
        )
        for page in pages:
            for item in page["Items"]:
                client.delete_item(TableName=definition.default_name, Key=item)


@contextmanager
def moto_tables() -> Iterator[Any]:
    """Fresh tables and two tenants for one property run (its examples share them; each checks its own
    before/after item counts), and the process runtime rebuilt around it."""
    import boto3

    runtime.cache_clear()
    try:
        with moto_aws():
            client = boto3.client("dynamodb", region_name="eu-west-1")
            create_tables(client)
            for tenant_id, token in TOKENS.items():
                seed_tenant(client, tenant_id, token, api_requests_per_second=10_000)
            assert counts(client) == item_counts(client)
            yield client
    finally:
        runtime.cache_clear()


def test_the_service_stores_only_valid_jobs_and_nothing_for_refused_ones() -> None:
    outcomes: Counter[str] = Counter()
    with moto_tables() as client:
        service = runtime().service

        @profile(200)
        @given(body=job_bodies)
        def create(body: dict[str, Any]) -> None:
            before = counts(client)
            try:
                spec = JobSpec.model_validate(unique_name(body))
            except ValidationError:
                outcomes["refused by the model"] += 1
                return
            refusal: InvalidInput | None = None
            try:
                details = service.create_job("acme", spec, NOW)
            except InvalidInput as refused:
                refusal = refused
            if refusal is not None:
                assert refusal.message and refusal.code
                assert counts(client) == before, refusal
                outcomes["refused by the service"] += 1
                return
            outcomes["accepted"] += 1
            stored = runtime().jobs.get("acme", details.job.job_id)
            assert stored.spec() == spec
            assert Job.model_validate_json(stored.model_dump_json()) == stored
            check_round_trip(stored.spec())
            upcoming = next_fire_time(stored.schedule, NOW, anchor=first_fire_anchor(stored))
            assert upcoming == details.next_fire_at
            after = counts(client)
            assert after["jobs"] == before["jobs"] + 2  # the job and its name lock
            forget_jobs(client)

        create()
    print(f"service create path: {dict(outcomes)}")
    assert outcomes["accepted"] >= 30, outcomes
    assert outcomes["refused by the model"] >= 30, outcomes
    assert outcomes["refused by the service"] >= 10, outcomes


def test_the_api_answers_201_or_a_4xx_in_the_error_shape_and_stores_nothing_when_it_refuses() -> None:
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler

    statuses: Counter[int] = Counter()
    with moto_tables() as client:
        api = ApiGateway(api_handler.lambda_handler, authorizer_handler.lambda_handler)

        @profile(150)
        @given(body=job_bodies)
        def create(body: dict[str, Any]) -> None:
            before = counts(client)
            # Python's json writes NaN and Infinity, which the API must refuse as not JSON.
            response = api.request(
                "POST", "/v1/jobs", token=TOKENS["acme"], raw_body=json.dumps(unique_name(body))
            )
            statuses[response.status] += 1
            if response.status == 201:
                job_id = response.body["job_id"]
                again = api.request("GET", f"/v1/jobs/{job_id}", token=TOKENS["acme"])
                assert again.status == 200
                assert {key: again.body[key] for key in JobSpec.model_fields} == {
                    key: response.body[key] for key in JobSpec.model_fields
                }
                forget_jobs(client)
                return
            assert 400 <= response.status < 500, (response.status, response.body)
            error = response.body["error"]
            assert set(error) >= ERROR_FIELDS, error
            assert isinstance(error["code"], str) and error["code"]
            assert isinstance(error["message"], str) and error["message"]
            assert error["field"] is None or isinstance(error["field"], str)
            assert counts(client) == before

        create()
    print(f"HTTP create path: {dict(sorted(statuses.items()))}")
    assert statuses[201] >= 30, statuses
    assert sum(count for status, count in statuses.items() if 400 <= status < 500) >= 30, statuses
