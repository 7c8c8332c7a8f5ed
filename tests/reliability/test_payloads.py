"""Payload limits and unicode, from the API to the webhook receiver.

The limit is 262,144 bytes of compact UTF-8 JSON: a payload of exactly that size is accepted and reaches the
receiver intact (the run message carries only ids, and the envelope around the payload may be larger than
the limit); one byte more is a 413 naming ``payload`` and stores nothing. Bytes are counted, not
characters. Unicode descriptions, tags and payloads survive create, get, list and delivery unchanged, and
the delivery's signature verifies at the receiver.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tickwork import tables
from tickwork.domain.models import (
    MAX_AWS_PAYLOAD_BYTES,
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    header_bytes,
    payload_size,
)
from tickwork.runtime import runtime
from tickwork.targets import verify_signature

from bench._cost_meter import item_size
from tests.conftest import TOKENS, item_counts, scan_all
from tests.integration.conftest import Engine
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]
SECRET = "secret-acme"  # what both fixtures seed for acme
ENVELOPE_OVERHEAD = len('{"s":""}')
URL = "https://hooks.example.com/run"


def payload_of(size: int, character: str) -> dict[str, str]:
    """``{"s": "..."}`` of exactly ``size`` bytes of compact UTF-8 JSON, padded with ASCII where the
    character's width does not divide the room left."""
    room = size - ENVELOPE_OVERHEAD
    width = len(character.encode())
    text = character * (room // width) + "x" * (room % width)
    payload = {"s": text}
    assert payload_size(payload) == size
    return payload


def body(name: str, payload: Any, target: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        # Far ahead, so the API plans nothing: the delivery below is a manual trigger.
        "schedule": {"type": "cron", "expression": "0 0 1 1 *", "timezone": "UTC"},
        "target": target or {"type": "http", "url": "https://hooks.example.com/run"},
        "payload": payload,
        **extra,
    }


@pytest.fixture
def local_api(api: ApiGateway, monkeypatch: pytest.MonkeyPatch) -> ApiGateway:
    """The API as the local stack runs it: webhooks on loopback (the test receiver) are allowed."""
    monkeypatch.setenv("TICKWORK_ALLOW_PRIVATE_TARGETS", "true")
    runtime.cache_clear()
    return api


def deliver_now(engine: Engine, job_id: str) -> Any:
    """Trigger the job and run the worker; returns the receiver's one request."""
    run = engine.runtime.service.trigger_job("acme", job_id, idempotency_key=None, now=engine.clock())
    engine.drain()
    (request,) = [received for received in engine.receiver.requests if run.run_id in received.body.decode()]
    assert engine.run("acme", run.run_id).status.value == "SUCCEEDED"
    return request


# 1, 2, 3 and 4 bytes per character: the limit counts bytes, not characters.
CHARACTERS = [
    pytest.param("a", id="ascii"),
    pytest.param("\u00e9", id="2-byte"),
    pytest.param("\u20ac", id="3-byte"),
    pytest.param("\U0001f600", id="4-byte-emoji"),
]


@pytest.mark.parametrize("character", CHARACTERS)
def test_a_payload_of_exactly_the_limit_is_accepted_and_one_byte_more_is_413(
    api: ApiGateway, dynamodb: Any, character: str
) -> None:
    at_limit = payload_of(MAX_PAYLOAD_BYTES, character)
    over = payload_of(MAX_PAYLOAD_BYTES + 1, character)
    assert len(over["s"]) < MAX_PAYLOAD_BYTES or character == "a"  # characters alone would pass

    before = item_counts(dynamodb)
    refused = api.request("POST", "/v1/jobs", token=ACME, body=body("over", over))
    assert refused.status == 413
    assert refused.body["error"]["code"] == "payload_too_large"
    assert refused.body["error"]["field"] == "payload"
    assert str(MAX_PAYLOAD_BYTES + 1) in refused.body["error"]["message"]
    assert item_counts(dynamodb) == before

    accepted = api.request("POST", "/v1/jobs", token=ACME, body=body("at-limit", at_limit))
    assert accepted.status == 201, accepted.body
    assert accepted.body["payload"] == at_limit


def test_the_payload_at_the_limit_reaches_the_receiver_intact_with_a_valid_signature(
    engine: Engine, local_api: ApiGateway
) -> None:
    api = local_api
    payload = payload_of(MAX_PAYLOAD_BYTES, "\U0001f600")
    created = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body=body("at-limit", payload, engine.http("/limit") | {"timeout_seconds": 10}),
    )
    assert created.status == 201, created.body

    request = deliver_now(engine, created.body["job_id"])

    assert len(request.body) > MAX_PAYLOAD_BYTES  # the envelope around the payload is larger than the limit
    assert request.json()["payload"] == payload
    signature = request.headers["X-Tickwork-Signature"]
    timestamp = int(signature.split(",")[0].removeprefix("t="))
    assert verify_signature(SECRET, signature, request.body, now_epoch=timestamp)


UNICODE = {
    "emoji": "\U0001f600\U0001f469\u200d\U0001f469\u200d\U0001f467\U0001f1eb\U0001f1f7",
    "rtl": "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u202eevil\u202c",
    "combining": "e\u0301\u0301 a\u030a Z\u0351\u0352\u0353",
    "nul": "before\x00after",
    "bom-and-nonchars": "\ufeff\uffff\U0010ffff",
    "astral": "\U0001d573\U0001d586\U0001d591",
}


def test_unicode_survives_create_get_list_and_delivery_unchanged(
    engine: Engine, local_api: ApiGateway
) -> None:
    api = local_api
    description = " | ".join(UNICODE.values())
    tags = {f"t-{key}": value[:256] for key, value in UNICODE.items()} | {"\U0001f600": "\u05e9"}
    payload = {
        "text": UNICODE,
        "list": list(UNICODE.values()),
        "\u0645\u0641\u062a\u0627\u062d": {"\x00": "\x00"},
    }
    sent = body("unicode-round-trip", payload, engine.http("/unicode"), description=description, tags=tags)

    created = api.request("POST", "/v1/jobs", token=ACME, body=sent)
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    got = api.request("GET", f"/v1/jobs/{job_id}", token=ACME)
    listed = api.request("GET", "/v1/jobs", token=ACME)
    (in_list,) = [item for item in listed.body["items"] if item["job_id"] == job_id]
    for seen in (created.body, got.body, in_list):
        assert seen["description"] == description
        assert seen["tags"] == tags
        assert seen["payload"] == payload

    request = deliver_now(engine, job_id)

    assert request.json()["payload"] == payload
    signature = request.headers["X-Tickwork-Signature"]
    timestamp = int(signature.split(",")[0].removeprefix("t="))
    assert verify_signature(SECRET, signature, request.body, now_epoch=timestamp)
    # Sent as UTF-8, not as \\u escapes of it: the bytes of the text are in the body.
    assert UNICODE["emoji"].encode() in request.body


@pytest.mark.parametrize(
    "name",
    ["rapport-journali\u00e8re", "\U0001f600", "\u05e9\u05dc\u05d5\u05dd", "a\x00b", "e\u0301"],
    ids=["accented", "emoji", "rtl", "nul", "combining"],
)
def test_a_job_name_outside_the_name_alphabet_is_refused_naming_it(
    api: ApiGateway, dynamodb: Any, name: str
) -> None:
    # Names are ASCII letters, digits, '.', '_' and '-': they appear in URLs, logs and CLI output.
    before = item_counts(dynamodb)
    response = api.request("POST", "/v1/jobs", token=ACME, body=body(name, None))
    assert response.status == 400
    assert response.body["error"]["field"] == "name"
    assert item_counts(dynamodb) == before


def test_a_lone_surrogate_is_refused_cleanly(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    raw = json.dumps(body("surrogate", None))[:-1] + ', "description": "\\udc00"}'
    response = api.request("POST", "/v1/jobs", token=ACME, raw_body=raw)
    assert 400 <= response.status < 500
    assert set(response.body["error"]) >= {"code", "message", "field"}
    assert item_counts(dynamodb) == before


# --- every copy of a job fits its store ---------------------------------------------------------------------
def largest_job(name: str, url: str) -> dict[str, Any]:
    """Every size-bounded field of a job at its limit at once."""
    header_room = MAX_HEADER_BYTES - 4 * 4  # four headers, each with ": " and CRLF around it
    headers = {f"X-H{i}": "v" * (header_room // 4 - len(f"X-H{i}")) for i in range(4)}
    headers["X-H0"] += "v" * (MAX_HEADER_BYTES - header_bytes(headers))
    assert header_bytes(headers) == MAX_HEADER_BYTES
    path = "/" + "p" * (2048 - len(url) - 1)
    return body(
        name,
        payload_of(MAX_PAYLOAD_BYTES, "\U0001f600"),
        {"type": "http", "url": url + path, "headers": headers, "timeout_seconds": 10},
        description="d" * 1024,
        tags={f"{i:03d}" + "k" * 125: "\U0001f600" * 64 for i in range(50)},
    )


def test_the_largest_job_fits_a_dynamodb_item_and_is_delivered_whole(
    engine: Engine, local_api: ApiGateway, dynamodb: Any
) -> None:
    # Given a job with the largest payload, headers, URL, description and tags the API accepts
    spec = largest_job("largest", engine.receiver.url(""))
    # When it is created, read back and triggered
    created = local_api.request("POST", "/v1/jobs", token=ACME, body=spec)
    assert created.status == 201, created.body
    read = local_api.request("GET", f"/v1/jobs/{created.body['job_id']}", token=ACME)
    request = deliver_now(engine, created.body["job_id"])
    # Then the stored item is under DynamoDB's 400 KB, and the job reads back and is delivered unchanged
    jobs = scan_all(dynamodb, tables.JOBS.default_name)
    (item,) = [item for item in jobs if "spec" in item or "spec_z" in item]
    assert item_size(item) < 400 * 1000, item_size(item)
    assert (read.status, read.body["payload"], read.body["target"]["headers"]) == (
        200,
        spec["payload"],
        spec["target"]["headers"],
    )
    assert request.json()["payload"] == spec["payload"]
    assert request.headers["X-H1"] == spec["target"]["headers"]["X-H1"]


def test_headers_over_their_total_are_413_naming_them_and_store_nothing(
    api: ApiGateway, dynamodb: Any
) -> None:
    before = item_counts(dynamodb)
    fifty_of_4_kib = {f"X-H{i}": "v" * 4096 for i in range(50)}
    values = MAX_HEADER_BYTES + 1 - 4 * (len("X-A0") + 4)  # four headers, one byte over in all
    one_byte_over = {f"X-A{i}": "v" * (values // 4 + (i < values % 4)) for i in range(4)}
    assert header_bytes(one_byte_over) == MAX_HEADER_BYTES + 1
    answers = [
        api.request(
            "POST",
            "/v1/jobs",
            token=ACME,
            body=body(f"h{i}", None, {"type": "http", "url": URL, "headers": h}),
        )
        for i, h in enumerate((fifty_of_4_kib, one_byte_over))
    ]
    assert [(a.status, a.body["error"]["field"]) for a in answers] == [(413, "target.headers")] * 2
    assert str(MAX_HEADER_BYTES) in answers[1].body["error"]["message"]
    assert item_counts(dynamodb) == before


@pytest.mark.parametrize(
    "target",
    [
        {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q"},
        {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"},
        {"type": "eventbridge", "event_bus_name": "default", "detail_type": "tick"},
        {
            "type": "stepfunctions",
            "state_machine_arn": "arn:aws:states:eu-west-1:123456789012:stateMachine:m",
        },
    ],
    ids=lambda target: target["type"],
)
def test_an_aws_target_takes_a_payload_that_fits_its_message_with_the_envelope(
    api: ApiGateway, dynamodb: Any, target: dict[str, Any]
) -> None:
    at_limit = api.request(
        "POST", "/v1/jobs", token=ACME, body=body("aws", payload_of(MAX_AWS_PAYLOAD_BYTES, "a"), target)
    )
    assert at_limit.status == 201, at_limit.body
    before = item_counts(dynamodb)
    over = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body=body("aws-over", payload_of(MAX_AWS_PAYLOAD_BYTES + 1, "a"), target),
    )
    assert (over.status, over.body["error"]["field"]) == (413, "payload")
    # A webhook job with the largest payload cannot be switched to this target either
    webhook = api.request(
        "POST", "/v1/jobs", token=ACME, body=body("hook", payload_of(MAX_PAYLOAD_BYTES, "a"))
    )
    switched = api.request("PATCH", f"/v1/jobs/{webhook.body['job_id']}", token=ACME, body={"target": target})
    assert (switched.status, switched.body["error"]["field"]) == (413, "payload")
    assert (
        api.request("GET", f"/v1/jobs/{webhook.body['job_id']}", token=ACME).body["target"]["type"] == "http"
    )
    assert item_counts(dynamodb)["jobs"] == before["jobs"] + 2  # the webhook job and its name, nothing else
    # The largest envelope of such a job fits the 256 KiB message
    envelope = {
        "job_id": "0" * 26,
        "run_id": "0" * 26 + ":m:" + "0" * 32,
        "scheduled_for": "2026-11-25T00:00:00.000Z",
        "attempt": 100,
        "payload": at_limit.body["payload"],
    }
    assert payload_size(envelope) <= MAX_PAYLOAD_BYTES
