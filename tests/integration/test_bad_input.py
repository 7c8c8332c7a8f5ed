"""Bad input gets a 4xx with a clear message, and nothing is stored.

One table of refused requests, each sent through the authorizer and the real API handler under moto. Every
case checks the status, the error code, the field the error names, that the message says something, and
that no table gained or lost an item.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import TOKENS, item_counts
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]
JOB_ID = "{job_id}"  # replaced by the id of a job created before the request is measured


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    status: int
    code: str
    field: str | None
    body: Any = None
    raw_body: str | None = None
    headers: dict[str, str] | None = None
    query: dict[str, str] | None = None
    mentions: str | None = None
    """Text the message must contain, where a message without it would not say what is wrong."""


def job(**overrides: Any) -> dict[str, Any]:
    """A valid create body with some fields replaced; a field set to ``...`` is left out."""
    body: dict[str, Any] = {
        "name": "bad-input-probe",
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Paris"},
        "target": {"type": "http", "url": "https://hooks.example.com/run"},
        "payload": {"kind": "probe"},
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not ...}


def cron(**fields: Any) -> dict[str, Any]:
    return {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Paris", **fields}


def http(**fields: Any) -> dict[str, Any]:
    return {"type": "http", "url": "https://hooks.example.com/run", **fields}


def workflow(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"type": "workflow", "tasks": list(tasks), **fields}


def step(task_id: str, *parents: str, **fields: Any) -> dict[str, Any]:
    """A workflow task calling the probe's webhook after ``parents``."""
    return {"id": task_id, "target": http(), "depends_on": list(parents), **fields}


def create(**overrides: Any) -> Case:
    """A ``POST /v1/jobs`` case; the expectations come after."""
    return Case("POST", "/v1/jobs", 0, "", None, body=job(**overrides))


def raw(method: str, path: str, **request: Any) -> Case:
    return Case(method, path, 0, "", None, **request)


def expect(case: Case, status: int, code: str, field: str | None, mentions: str | None = None) -> Case:
    return replace(case, status=status, code=code, field=field, mentions=mentions)


def cursor_for(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def iso(moment: datetime) -> str:
    return moment.isoformat()


NOW = datetime.now(UTC)
PAST = iso(NOW - timedelta(hours=1))
NO_OFFSET = (NOW + timedelta(days=1)).replace(tzinfo=None).isoformat()
START = iso(NOW + timedelta(days=2))
END = iso(NOW + timedelta(days=1))
HUGE_PAYLOAD = {"blob": "x" * (256 * 1024)}

S, T, R = "invalid_schedule", "invalid_target", "invalid_retry_policy"
NAME = "name may use only letters, digits, '.', '_' and '-' (1 to 128 characters)"
# pydantic's own wording for patterns, enums and tagged unions: tickwork says these in its own words.
PYDANTIC_WORDING = re.compile(r"should match pattern|Input should be '|Input tag|Unable to extract tag")
FIELD, UNKNOWN, MISSING = "invalid_field", "unknown_field", "missing_field"
PRIVATE = "target_not_allowed"

CASES: list[Any] = [
    # --- schedule ---------------------------------------------------------------------------------------
    pytest.param(
        expect(create(schedule=cron(timezone="Mars/Olympus_Mons")), 400, S, "schedule.timezone"),
        id="unknown-timezone",
    ),
    pytest.param(
        expect(
            create(schedule=cron(timezone="europe/paris")),
            400,
            S,
            "schedule.timezone",
            "unknown IANA time zone 'europe/paris': did you mean Europe/Paris?",
        ),
        id="timezone-in-another-case-gets-a-suggestion",
    ),
    pytest.param(
        expect(create(schedule=cron(expression="0 25 * * *")), 400, S, "schedule.expression"),
        id="cron-hour-25",
    ),
    pytest.param(
        expect(create(schedule=cron(expression="0 3 * *")), 400, S, "schedule.expression"),
        id="cron-4-fields",
    ),
    pytest.param(
        expect(create(schedule=cron(expression="0 0 3 * * * 2030")), 400, S, "schedule.expression"),
        id="cron-7-fields",
    ),
    pytest.param(
        expect(create(schedule=cron(expression="0 0 30 2 *")), 400, S, "schedule.expression"),
        id="cron-never-fires",
    ),
    pytest.param(
        expect(create(schedule={"type": "once", "at": PAST}), 400, S, "schedule.at"),
        id="once-an-hour-ago",
    ),
    pytest.param(
        expect(create(schedule={"type": "once", "at": NO_OFFSET}), 400, S, "schedule.at"),
        id="once-without-offset",
    ),
    pytest.param(
        expect(create(schedule={"type": "once", "at": 4102444800}), 400, S, "schedule.at", "RFC 3339"),
        id="once-at-a-unix-time",  # pydantic alone would read the number as Unix time
    ),
    pytest.param(
        expect(create(schedule=cron(end_at=4102444800.5)), 400, S, "schedule.end_at", "RFC 3339"),
        id="end-at-a-unix-time",
    ),
    pytest.param(
        expect(create(schedule=cron(start_at=START, end_at=END)), 400, S, "schedule"),
        id="end-before-start",
    ),
    pytest.param(
        expect(create(schedule={"type": "rate", "every_seconds": 0}), 400, S, "schedule.every_seconds"),
        id="rate-every-0-seconds",
    ),
    pytest.param(
        expect(
            create(schedule={"type": "hourly", "minute": 5}),
            400,
            S,
            "schedule",
            "schedule.type must be one of once, cron, rate",
        ),
        id="unknown-schedule-type",
    ),
    pytest.param(
        expect(
            create(schedule=cron(dst={"gap": "jump"})),
            400,
            S,
            "schedule.dst.gap",
            "schedule.dst.gap must be one of shift, skip",
        ),
        id="unknown-dst-gap-policy",
    ),
    pytest.param(
        expect(create(schedule=cron(every="day")), 400, UNKNOWN, "schedule.every"),
        id="unknown-field-in-schedule",
    ),
    # --- retry ------------------------------------------------------------------------------------------
    pytest.param(
        expect(create(retry={"max_attempts": 0}), 400, R, "retry.max_attempts"),
        id="retry-0-attempts",
    ),
    pytest.param(
        expect(create(retry={"max_attempts": 101}), 400, R, "retry.max_attempts"),
        id="retry-101-attempts",
    ),
    pytest.param(
        expect(create(retry={"initial_delay_seconds": -1}), 400, R, "retry.initial_delay_seconds"),
        id="retry-negative-initial-delay",
    ),
    pytest.param(
        expect(create(retry={"initial_delay_seconds": 60, "max_delay_seconds": 30}), 400, R, "retry"),
        id="retry-max-delay-below-initial",
    ),
    pytest.param(
        expect(create(retry={"multiplier": 0.5}), 400, R, "retry.multiplier"),
        id="retry-multiplier-below-1",
    ),
    pytest.param(
        expect(create(retry={"max_attempts": 3, "backoff": "linear"}), 400, UNKNOWN, "retry.backoff"),
        id="unknown-field-in-retry",
    ),
    # --- top level --------------------------------------------------------------------------------------
    pytest.param(
        expect(create(urgency="high"), 400, UNKNOWN, "urgency"),
        id="unknown-top-level-field",
    ),
    pytest.param(
        expect(create(payload=HUGE_PAYLOAD), 413, "payload_too_large", "payload"),
        id="payload-over-256-kib",
    ),
    pytest.param(expect(create(name=""), 400, FIELD, "name"), id="name-empty"),
    pytest.param(expect(create(name="n" * 129), 400, FIELD, "name", NAME), id="name-129-chars"),
    pytest.param(expect(create(name="daily report"), 400, FIELD, "name", NAME), id="name-with-space"),
    pytest.param(expect(create(name="reports/daily"), 400, FIELD, "name"), id="name-with-slash"),
    pytest.param(expect(create(name="rapport-journalière"), 400, FIELD, "name"), id="name-unicode"),
    pytest.param(expect(create(name=...), 400, MISSING, "name"), id="missing-name"),
    pytest.param(expect(create(schedule=...), 400, MISSING, "schedule"), id="missing-schedule"),
    pytest.param(expect(create(target=...), 400, MISSING, "target"), id="missing-target"),
    pytest.param(
        expect(
            create(misfire_policy="fire_all"),
            400,
            FIELD,
            "misfire_policy",
            "misfire_policy must be one of skip, fire_once, backfill",
        ),
        id="unknown-misfire-policy",
    ),
    pytest.param(
        expect(
            create(overlap_policy="wait"),
            400,
            FIELD,
            "overlap_policy",
            "overlap_policy must be one of allow, skip, queue",
        ),
        id="unknown-overlap-policy",
    ),
    pytest.param(
        expect(
            create(delivery="exactly_once"),
            400,
            FIELD,
            "delivery",
            "delivery must be one of at_least_once, at_most_once",
        ),
        id="unknown-delivery",
    ),
    pytest.param(
        expect(
            create(retry={"jitter": "half"}),
            400,
            R,
            "retry.jitter",
            "retry.jitter must be one of full, equal, none",
        ),
        id="unknown-retry-jitter",
    ),
    pytest.param(
        expect(
            create(priority="urgent"), 400, FIELD, "priority", "priority must be one of high, normal, low"
        ),
        id="unknown-priority",
    ),
    pytest.param(
        expect(create(priority=1), 400, FIELD, "priority"),
        id="priority-not-a-string",
    ),
    pytest.param(
        expect(create(concurrency_key="db", max_concurrency=0), 400, FIELD, "max_concurrency"),
        id="max-concurrency-zero",
    ),
    pytest.param(
        expect(create(concurrency_key="db", max_concurrency=1001), 400, FIELD, "max_concurrency"),
        id="max-concurrency-over-1000",
    ),
    pytest.param(
        expect(create(concurrency_key="k" * 129, max_concurrency=2), 400, FIELD, "concurrency_key"),
        id="concurrency-key-over-128",
    ),
    pytest.param(
        expect(
            create(concurrency_key="db"), 400, FIELD, None, "concurrency_key and max_concurrency go together"
        ),
        id="concurrency-key-without-max",
    ),
    pytest.param(
        expect(create(backfill_limit=0), 400, FIELD, "backfill_limit"),
        id="backfill-limit-0",
    ),
    pytest.param(
        expect(create(misfire_grace_seconds=-5), 400, FIELD, "misfire_grace_seconds"),
        id="negative-misfire-grace",
    ),
    pytest.param(
        expect(raw("POST", "/v1/jobs", raw_body='{"name": "x",'), 400, "invalid_json", None),
        id="body-not-json",
    ),
    pytest.param(
        expect(
            raw("POST", "/v1/jobs", raw_body='{"name": "x" "schedule": 1}'),
            400,
            "invalid_json",
            None,
            "not valid JSON: Expecting ',' delimiter at line 1 column 14",
        ),
        id="body-json-says-where-it-breaks",
    ),
    pytest.param(
        expect(
            raw("POST", "/v1/jobs", raw_body='{\n  "name": "x"\n  "schedule": 1\n}'),
            400,
            "invalid_json",
            None,
            "at line 3 column 3",
        ),
        id="body-json-says-on-which-line-it-breaks",
    ),
    pytest.param(
        expect(raw("POST", "/v1/jobs", body=[job()]), 400, "invalid_json", None, "object"),
        id="body-json-array",
    ),
    pytest.param(
        expect(raw("POST", "/v1/jobs", body=[]), 400, "invalid_json", None, "object"),
        id="body-empty-json-array",
    ),
    pytest.param(
        expect(raw("POST", "/v1/jobs", body="nightly"), 400, "invalid_json", None, "object"),
        id="body-json-string",
    ),
    pytest.param(
        expect(raw("POST", "/v1/jobs"), 400, MISSING, None, "body"),
        id="body-missing",
    ),
    pytest.param(
        expect(
            raw("POST", "/v1/jobs", raw_body=json.dumps(job())[:-1] + ', "payload": {"ratio": NaN}}'),
            400,
            "invalid_json",
            None,
        ),
        id="body-with-nan",
    ),
    pytest.param(
        expect(create(schedule="0 3 * * *"), 400, S, "schedule"),
        id="schedule-not-an-object",
    ),
    pytest.param(expect(create(target=None), 400, T, "target"), id="target-null"),
    pytest.param(expect(create(retry=[5]), 400, R, "retry"), id="retry-not-an-object"),
    pytest.param(
        expect(replace(create(), headers={"Idempotency-Key": "k" * 256}), 400, FIELD, "Idempotency-Key"),
        id="idempotency-key-too-long",
    ),
    # --- http targets -----------------------------------------------------------------------------------
    pytest.param(
        expect(
            create(target=http(headers={"X-Tickwork-Signature": "forged"})),
            400,
            T,
            "target.headers",
            "X-Tickwork-Signature",
        ),
        id="header-x-tickwork-signature",
    ),
    pytest.param(
        expect(
            create(target=http(headers={"x-TickWork-Anything": "1"})),
            400,
            T,
            "target.headers",
            "x-TickWork-Anything",
        ),
        id="header-x-tickwork-any-case",
    ),
    pytest.param(
        expect(
            create(target=http(headers={"Authorization": "Bearer x"})),
            400,
            T,
            "target.headers",
            "Authorization",
        ),
        id="header-authorization",
    ),
    pytest.param(
        expect(
            create(target=http(headers={"X-Trace": "a\r\nX-Injected: 1"})),
            400,
            T,
            "target.headers",
            "X-Trace",
        ),
        id="header-value-with-newline",
    ),
    pytest.param(
        expect(create(target=http(headers={"X Trace": "1"})), 400, T, "target.headers", "X Trace"),
        id="header-name-with-space",
    ),
    pytest.param(
        expect(create(target=http(url="ftp://files.example.com/drop")), 400, T, "target.url"),
        id="url-ftp-scheme",
    ),
    pytest.param(
        expect(create(target=http(url="https:///run")), 400, T, "target.url"),
        id="url-without-host",
    ),
    pytest.param(
        expect(create(target=http(url="https://user:pw@hooks.example.com/run")), 400, T, "target.url"),
        id="url-with-credentials",
    ),
    pytest.param(
        expect(create(target=http(url=" https://hooks.example.com/run")), 400, T, "target.url"),
        id="url-after-a-space",  # urlsplit would drop the space; the document's pattern refuses it
    ),
    pytest.param(
        expect(create(target=http(url="https:hooks.example.com/run")), 400, T, "target.url"),
        id="url-without-slashes",
    ),
    pytest.param(
        expect(create(target=http(timeout_seconds=0)), 400, T, "target.timeout_seconds"),
        id="timeout-0",
    ),
    pytest.param(
        expect(create(target=http(timeout_seconds=901)), 400, T, "target.timeout_seconds"),
        id="timeout-901",
    ),
    pytest.param(
        expect(create(target=http(verify_tls=False)), 400, UNKNOWN, "target.verify_tls"),
        id="unknown-field-in-target",
    ),
    *[
        pytest.param(
            expect(create(target=http(url=url)), 400, PRIVATE, "target.url"),
            id=f"private-host-{label}",
        )
        for label, url in [
            ("loopback", "http://127.0.0.1:8080/hook"),
            ("rfc1918", "https://10.0.0.5/hook"),
            ("metadata", "http://169.254.169.254/latest/meta-data/"),
            ("ipv6-loopback", "http://[::1]/hook"),
            ("localhost", "http://localhost:3000/hook"),
            ("decimal-loopback", "http://2130706433/hook"),
            ("hex-loopback", "http://0x7f000001/hook"),
            ("short-loopback", "http://127.1/hook"),
            ("ipv4-mapped-loopback", "http://[::ffff:127.0.0.1]/hook"),
        ]
    ],
    # --- other targets ----------------------------------------------------------------------------------
    pytest.param(
        expect(
            create(target={"type": "sqs", "queue_url": "https://example.com/not-a-queue"}),
            400,
            T,
            "target.queue_url",
            "target.queue_url must be an SQS queue URL, such as https://sqs.",
        ),
        id="sqs-bad-queue-url",
    ),
    pytest.param(
        expect(
            create(target={"type": "lambda", "function_arn": "arn:aws:s3:::bucket"}),
            400,
            T,
            "target.function_arn",
            "target.function_arn must be a Lambda function ARN, such as arn:aws:lambda:",
        ),
        id="lambda-bad-arn",
    ),
    pytest.param(
        expect(
            create(
                target={
                    "type": "stepfunctions",
                    "state_machine_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f",
                }
            ),
            400,
            T,
            "target.state_machine_arn",
            "target.state_machine_arn must be a Step Functions state machine ARN, such as arn:aws:states:",
        ),
        id="stepfunctions-bad-arn",
    ),
    pytest.param(
        expect(
            create(target={"type": "eventbridge", "event_bus_name": "my bus", "detail_type": "tick"}),
            400,
            T,
            "target.event_bus_name",
            "target.event_bus_name must be an event bus name",
        ),
        id="eventbridge-bad-bus-name",
    ),
    pytest.param(
        expect(
            create(
                target={"type": "eventbridge", "event_bus_name": "b", "detail_type": "t", "source": "my app"}
            ),
            400,
            T,
            "target.source",
            "target.source may use only letters, digits, '.', '_' and '-' (1 to 256 characters)",
        ),
        id="eventbridge-bad-source",
    ),
    pytest.param(
        expect(
            create(target={"type": "smtp", "to": "ops@example.com"}),
            400,
            T,
            "target",
            "target.type must be one of http, sqs, lambda, eventbridge, stepfunctions, pool, workflow",
        ),
        id="unknown-target-type",
    ),
    pytest.param(
        expect(
            create(target={"url": "https://hooks.example.com/run"}),
            400,
            T,
            "target",
            "target.type is required: one of http, sqs, lambda, eventbridge, stepfunctions, pool, workflow",
        ),
        id="target-without-a-type",
    ),
    pytest.param(
        expect(
            create(target=http(method="GET")),
            400,
            T,
            "target.method",
            "target.method must be one of POST, PUT, PATCH",
        ),
        id="http-method-get",
    ),
    # --- workflows --------------------------------------------------------------------------------------
    pytest.param(
        expect(
            create(target=workflow(step("a", "c"), step("b", "a"), step("c", "b"))),
            400,
            T,
            "target.tasks.0.depends_on",
            "tasks a -> b -> c -> a form a cycle",
        ),
        id="workflow-cycle",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("extract"), step("load", "extract", "transfrom"))),
            400,
            T,
            "target.tasks.1.depends_on",
            "task 'load' depends on 'transfrom', which is not a task of this workflow",
        ),
        id="workflow-unknown-dependency",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a"), step("b"), step("a", "b"))),
            400,
            T,
            "target.tasks.2.id",
            "task id 'a' is used twice, by tasks 0 and 2",
        ),
        id="workflow-duplicate-task-id",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a", "a"))),
            400,
            T,
            "target.tasks.0.depends_on",
            "task 'a' depends on itself",
        ),
        id="workflow-self-dependency",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a"), step("b", "a", "a"))),
            400,
            T,
            "target.tasks.1.depends_on",
            "task 'b' lists 'a' more than once in depends_on",
        ),
        id="workflow-duplicate-dependency",
    ),
    pytest.param(
        expect(
            create(target=workflow(*(step(f"t{index}") for index in range(101)))),
            400,
            T,
            "target.tasks",
            "a workflow has at most 100 tasks; this one has 101",
        ),
        id="workflow-101-tasks",
    ),
    pytest.param(
        expect(create(target=workflow()), 400, T, "target.tasks", "a workflow needs at least one task"),
        id="workflow-without-tasks",
    ),
    pytest.param(
        expect(
            create(target=workflow({"id": "inner", "target": workflow(step("a"))})),
            400,
            T,
            "target.tasks.0.target.type",
            "task 'inner' targets a workflow: a workflow's tasks may target anything but another workflow",
        ),
        id="workflow-inside-a-workflow",
    ),
    pytest.param(
        expect(
            create(target=workflow(*(step(f"t{index}", payload="x" * 1000) for index in range(70)))),
            413,
            "payload_too_large",
            "target.tasks",
            "the limit is 65536 in all, so that the job and each run's copy of the definition fit",
        ),
        id="workflow-tasks-over-64-kib",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a", payload=HUGE_PAYLOAD))),
            413,
            "payload_too_large",
            "target.tasks.0.payload",
            "the limit is 262144",
        ),
        id="workflow-task-payload-over-256-kib",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("Extract Orders"))),
            400,
            T,
            "target.tasks.0.id",
            "must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit",
        ),
        id="workflow-bad-task-id",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a"), step("b", "a", trigger_rule="none_failed"))),
            400,
            T,
            "target.tasks.1.trigger_rule",
            "must be one of all_success, all_done, one_success, one_failed",
        ),
        id="workflow-unknown-trigger-rule",
    ),
    pytest.param(
        expect(create(target=workflow(step("a"), max_parallel=0)), 400, T, "target.max_parallel"),
        id="workflow-max-parallel-0",
    ),
    pytest.param(
        expect(create(target=workflow(step("a"), max_parallel=101)), 400, T, "target.max_parallel"),
        id="workflow-max-parallel-101",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a"), failure_mode="stop")),
            400,
            T,
            "target.failure_mode",
            "must be one of fail_fast, continue",
        ),
        id="workflow-unknown-failure-mode",
    ),
    pytest.param(
        expect(
            create(target=workflow(step("a", timeout_seconds=60))),
            400,
            UNKNOWN,
            "target.tasks.0.timeout_seconds",
        ),
        id="workflow-task-unknown-field",
    ),
    pytest.param(
        expect(
            create(target=workflow({"id": "peek", "target": http(url="http://169.254.169.254/")})),
            400,
            PRIVATE,
            "target.tasks.0.target.url",
            "task 'peek': target host '169.254.169.254'",
        ),
        id="workflow-task-private-target",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            T,
            "target.tasks.0.depends_on",
            body={"target": workflow(step("a", "b"), step("b", "a"))},
            mentions="tasks a -> b -> a form a cycle",
        ),
        id="patch-to-a-workflow-with-a-cycle",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            T,
            "target.tasks.0.target.type",
            body={"target": workflow({"id": "inner", "target": workflow(step("a"))})},
            mentions="task 'inner' targets a workflow",
        ),
        id="patch-to-a-workflow-inside-a-workflow",
    ),
    # --- listing ----------------------------------------------------------------------------------------
    *[
        pytest.param(
            Case("GET", "/v1/jobs", 400, code, field, query=query),
            id=f"list-{label}",
        )
        for label, query, code, field in [
            ("limit-0", {"limit": "0"}, FIELD, "limit"),
            ("limit-101", {"limit": "101"}, FIELD, "limit"),
            ("limit-abc", {"limit": "abc"}, FIELD, "limit"),
            ("status-bogus", {"status": "BOGUS"}, FIELD, "status"),
            ("cursor-malformed", {"cursor": "%%%not-base64%%%"}, "invalid_cursor", "cursor"),
            ("cursor-not-an-object", {"cursor": cursor_for({"a": 1})}, "invalid_cursor", "cursor"),
            (
                "cursor-other-tenant",
                # Well formed, naming another tenant's job (by_tenant index key and table key)
                {"cursor": cursor_for({"tenant_id": "globex", "job_id": "X", "pk": "globex/X", "sk": "job"})},
                "invalid_cursor",
                "cursor",
            ),
        ]
    ],
    pytest.param(
        Case("GET", f"/v1/jobs/{JOB_ID}/runs", 400, FIELD, "limit", query={"limit": "0"}),
        id="runs-limit-0",
    ),
    pytest.param(
        Case(
            "GET",
            f"/v1/jobs/{JOB_ID}/runs",
            400,
            "invalid_cursor",
            "cursor",
            query={"cursor": cursor_for({"pk": "globex/X", "sk": "1795338900000"})},
        ),
        id="runs-cursor-foreign",
    ),
    pytest.param(
        Case(
            "GET",
            f"/v1/jobs/{JOB_ID}/runs",
            400,
            "invalid_cursor",
            "cursor",
            query={"cursor": "a.not-a-time"},
        ),
        id="runs-cursor-ahead-malformed",
    ),
    pytest.param(
        Case(
            "GET",
            "/v1/jobs/not%20an%20id",
            400,
            FIELD,
            "job_id",
            mentions="job_id may use only letters, digits, '.', '_', ':' and '-' (1 to 200 characters)",
        ),
        id="get-job-malformed-id",
    ),
    pytest.param(
        Case(
            "GET",
            "/v1/jobs",
            400,
            FIELD,
            "status",
            query={"status": "RUNNING"},
            mentions="status must be one of ACTIVE, PAUSED, COMPLETED, CANCELLED",
        ),
        id="list-status-of-a-run",
    ),
    pytest.param(
        Case(
            "GET",
            "/v1/runs",
            400,
            FIELD,
            "status.0",
            query={"status": "NAPPING"},
            mentions="status must be one of PLANNED, ENQUEUED, RUNNING, RETRY_WAIT, SUCCEEDED, FAILED, DEAD,",
        ),
        id="tenant-runs-unknown-status",
    ),
    # --- preview ----------------------------------------------------------------------------------------
    *[
        pytest.param(
            Case("POST", "/v1/schedule-preview", 400, code, field, body=body),
            id=f"preview-{label}",
        )
        for label, body, code, field in [
            ("count-0", {"schedule": cron(), "count": 0}, FIELD, "count"),
            ("count-101", {"schedule": cron(), "count": 101}, FIELD, "count"),
            ("bad-schedule", {"schedule": cron(expression="61 * * * *")}, S, "schedule.expression"),
            ("after-without-offset", {"schedule": cron(), "after": NO_OFFSET}, FIELD, "after"),
            ("body-json-array", [{"schedule": cron(), "count": 3}], "invalid_json", None),
        ]
    ],
    # --- changing an existing job -----------------------------------------------------------------------
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, UNKNOWN, "urgency", body={"urgency": "high"}),
        id="patch-unknown-field",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            FIELD,
            "priority",
            body={"priority": "urgent"},
            mentions="priority must be one of high, normal, low",
        ),
        id="patch-unknown-priority",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            S,
            "schedule.expression",
            body={"schedule": {"expression": "0 25 * * *"}},
        ),
        id="patch-bad-cron",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            PRIVATE,
            "target.url",
            body={"target": {"url": "http://169.254.169.254/"}},
        ),
        id="patch-private-target",
    ),
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, FIELD, "name", body={"name": "has space"}),
        id="patch-bad-name",
    ),
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, FIELD, "version", body={"version": 0}),
        id="patch-version-0",
    ),
    # null resets a field to its default; these have none
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, FIELD, "name", body={"name": None}),
        id="patch-name-null",
    ),
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, S, "schedule", body={"schedule": None}),
        id="patch-schedule-null",
    ),
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, T, "target", body={"target": None}),
        id="patch-target-null",
    ),
    # a patch has the bounds of a create
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            FIELD,
            "misfire_grace_seconds",
            body={"misfire_grace_seconds": 7 * 86_400 + 1},
        ),
        id="patch-misfire-grace-over-a-week",
    ),
    pytest.param(
        Case("PATCH", f"/v1/jobs/{JOB_ID}", 400, FIELD, "tags", body={"tags": {"": "empty key"}}),
        id="patch-tag-with-an-empty-key",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            413,
            "payload_too_large",
            "payload",
            body={"payload": HUGE_PAYLOAD},
        ),
        id="patch-payload-over-256-kib",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            "invalid_json",
            None,
            body=[{"description": "changed"}],
        ),
        id="patch-body-json-array",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            FIELD,
            "If-Match",
            body={"description": "new"},
            headers={"If-Match": "9" * 65},
        ),
        id="patch-if-match-too-long",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            "invalid_request",
            "If-Match",
            body={"description": "new"},
            headers={"If-Match": '"two"'},
        ),
        id="patch-if-match-not-a-number",
    ),
    pytest.param(
        Case(
            "PATCH",
            f"/v1/jobs/{JOB_ID}",
            400,
            "invalid_request",
            "If-Match",
            body={"description": "new"},
            headers={"If-Match": '"' + "1" * 19 + '"'},  # documented as at most 18 digits
        ),
        id="patch-if-match-19-digits",
    ),
    pytest.param(
        Case(
            "POST",
            f"/v1/jobs/{JOB_ID}/pause",
            400,
            FIELD,
            "reason",
            body={"reason": "r" * 1025},
        ),
        id="pause-reason-over-1024",
    ),
    pytest.param(
        Case(
            "POST",
            f"/v1/jobs/{JOB_ID}/pause",
            400,
            "invalid_json",
            None,
            body=[{"reason": "maintenance"}],
        ),
        id="pause-body-json-array",
    ),
]


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 45


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_and_nothing_is_stored(api: ApiGateway, dynamodb: Any, case: Case) -> None:
    # Given, for routes on one job, a job that exists (created before anything is measured)
    path, job_path, existing = case.path, None, None
    if JOB_ID in path:
        created = api.request("POST", "/v1/jobs", token=ACME, body=job(name="existing"))
        assert created.status == 201, created.body
        job_path = f"/v1/jobs/{created.body['job_id']}"
        path = path.replace(JOB_ID, created.body["job_id"])
        existing = api.request("GET", job_path, token=ACME)
        assert existing.status == 200, existing.body
    before = item_counts(dynamodb)

    # When the bad request is sent with acme's token
    response = api.request(
        case.method,
        path,
        token=ACME,
        body=case.body,
        raw_body=case.raw_body,
        headers=case.headers,
        query=case.query,
    )

    # Then it is refused with the design's error shape, naming the field at fault
    assert response.status == case.status, response.body
    assert isinstance(response.body, dict), response.body
    error = response.body["error"]
    assert error["code"] == case.code, error
    assert error["field"] == case.field, error
    assert isinstance(error["message"], str), error
    assert error["message"].strip(), error
    if case.mentions is not None:
        assert case.mentions in error["message"], error
    for detail in [error, *error.get("details", [])]:
        assert not PYDANTIC_WORDING.search(detail["message"]), detail
    # And nothing was written
    assert item_counts(dynamodb) == before
    if job_path is not None and existing is not None:
        # And the job the request aimed at is exactly as it was
        after = api.request("GET", job_path, token=ACME)
        assert after.status == 200
        assert after.body == existing.body
        assert after.headers["ETag"] == existing.headers["ETag"]
