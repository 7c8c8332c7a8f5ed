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
from tickwork.domain.models import MAX_PAYLOAD_BYTES, payload_size
from tickwork.runtime import runtime
from tickwork.targets import verify_signature

from tests.conftest import TOKENS, item_counts
from tests.integration.conftest import Engine
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]
SECRET = "secret-acme"  # what both fixtures seed for acme
ENVELOPE_OVERHEAD = len('{"s":""}')


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
