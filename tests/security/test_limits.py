"""Limits that keep one tenant from taking more than its share: the job quota, target header count and size,
request header sizes. (The API rate limit is in ``test_rate_limit.py``; payload sizes in the reliability
suite.) Every refusal stores nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tickwork.runtime import runtime

from tests.conftest import TOKENS, item_counts, seed_tenant
from tests.support.apigw import ApiGateway
from tests.support.engine import make_requests_atomic

ACME = TOKENS["acme"]


def job(name: str, **target: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"type": "rate", "every_seconds": 3600},
        "target": {"type": "http", "url": "https://hooks.example.com/x", **target},
    }


@pytest.fixture
def small(api: ApiGateway, dynamodb: Any) -> str:
    """A tenant allowed two jobs."""
    seed_tenant(dynamodb, "initech", "tw_initech", max_jobs=2)
    return "tw_initech"


# --- the job quota ----------------------------------------------------------------------------------------
def test_the_create_past_the_quota_is_a_429_that_stores_nothing(
    api: ApiGateway, dynamodb: Any, small: str
) -> None:
    assert [api.request("POST", "/v1/jobs", token=small, body=job(f"j{i}")).status for i in range(2)] == [
        201,
        201,
    ]
    before = item_counts(dynamodb)

    refused = api.request("POST", "/v1/jobs", token=small, body=job("j2"))

    assert refused.status == 429
    assert refused.body["error"]["code"] == "quota_exceeded"
    assert "Retry-After" not in refused.headers  # waiting does not help: a job must go first
    assert item_counts(dynamodb) == before
    # The name was not claimed either: once a slot is free, the same name is accepted.
    listed = api.request("GET", "/v1/jobs", token=small).body["items"]
    assert sorted(item["name"] for item in listed) == ["j0", "j1"]


def test_cancelling_a_job_frees_its_slot_and_refused_creates_take_none(
    api: ApiGateway, dynamodb: Any, small: str
) -> None:
    first = api.request("POST", "/v1/jobs", token=small, body=job("j0")).body
    # A create refused for bad input does not use up a slot
    bad = api.request("POST", "/v1/jobs", token=small, body=job("bad", url="ftp://x.example.com/"))
    assert bad.status == 400
    assert api.request("POST", "/v1/jobs", token=small, body=job("j1")).status == 201
    assert api.request("POST", "/v1/jobs", token=small, body=job("j2")).status == 429
    # Cancelling one frees its slot (and its name)
    assert api.request("DELETE", f"/v1/jobs/{first['job_id']}", token=small).status == 200
    assert api.request("POST", "/v1/jobs", token=small, body=job("j0")).status == 201
    assert api.request("POST", "/v1/jobs", token=small, body=job("j3")).status == 429
    # Cancelling twice does not free two
    assert api.request("DELETE", f"/v1/jobs/{first['job_id']}", token=small).status == 200
    assert api.request("POST", "/v1/jobs", token=small, body=job("j3")).status == 429


def test_concurrent_creates_never_pass_the_quota(api: ApiGateway, dynamodb: Any) -> None:
    # Eight creates through the API at once, each on its own handler instance as on Lambda
    seed_tenant(dynamodb, "initech", "tw_initech", max_jobs=3)
    make_requests_atomic(runtime().dynamodb)  # moto in process does not lock; DynamoDB does
    statuses: dict[str, int] = {}
    barrier = threading.Barrier(8)

    def create(index: int) -> None:
        barrier.wait()
        response = api.request("POST", "/v1/jobs", token="tw_initech", body=job(f"c{index}"))
        statuses[f"c{index}"] = response.status
        if response.status == 201:
            assert response.body["name"] == f"c{index}"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(statuses.values()) == [201] * 3 + [429] * 5
    listed = api.request("GET", "/v1/jobs", token="tw_initech").body["items"]
    assert sorted(item["name"] for item in listed) == sorted(n for n, s in statuses.items() if s == 201)


def test_the_quota_of_one_tenant_is_not_anothers(api: ApiGateway, small: str) -> None:
    for i in range(2):
        api.request("POST", "/v1/jobs", token=small, body=job(f"j{i}"))
    assert api.request("POST", "/v1/jobs", token=small, body=job("j2")).status == 429
    assert api.request("POST", "/v1/jobs", token=ACME, body=job("j2")).status == 201


# --- target headers ---------------------------------------------------------------------------------------
HEADERS_REFUSED: dict[str, dict[str, str]] = {
    "51 headers": {f"X-H{i}": "v" for i in range(51)},
    "a value of 4097 characters": {"X-Big": "v" * 4097},
    "a name of 129 characters": {"X-" + "n" * 127: "v"},
    "Authorization": {"Authorization": "Bearer other"},
    "authorization in lower case": {"authorization": "Bearer other"},
    "Host": {"Host": "internal.example.com"},
    "Content-Length": {"Content-Length": "0"},
    "Idempotency-Key": {"Idempotency-Key": "mine"},
    "an X-Tickwork header": {"X-Tickwork-Signature": "t=1,v1=forged"},
    "an X-Tickwork header in another case": {"x-TICKWORK-run-id": "forged"},
    "a line break (header injection)": {"X-A": "v\r\nX-Injected: 1"},
    "a bare line feed": {"X-A": "v\nX-Injected: 1"},
    "a NUL": {"X-A": "v\x00"},
    "non-ASCII text": {"X-A": "café"},
    "a space in the name": {"X A": "v"},
    "a colon in the name": {"X-A:": "v"},
    "an empty name": {"": "v"},
}


def test_target_headers_over_the_limits_or_reserved_are_refused(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    answers = {
        case: api.request("POST", "/v1/jobs", token=ACME, body=job("h", headers=headers))
        for case, headers in HEADERS_REFUSED.items()
    }
    outcomes = {
        case: (r.status, (r.body["error"]["field"] or "").split(".")[:2]) for case, r in answers.items()
    }
    assert outcomes == dict.fromkeys(HEADERS_REFUSED, (400, ["target", "headers"]))
    assert item_counts(dynamodb) == before


def test_target_headers_at_the_limits_are_accepted(api: ApiGateway) -> None:
    at_limits = {
        "50 headers": {f"X-H{i}": "v" for i in range(50)},
        "a value of 4096 characters": {"X-Big": "v" * 4096},
        "a name of 128 characters": {"X-" + "n" * 126: "v"},
        "tabs and spaces": {"X-A": "a\tb c"},
    }
    statuses = {
        case: api.request("POST", "/v1/jobs", token=ACME, body=job(f"ok-{i}", headers=headers)).status
        for i, (case, headers) in enumerate(at_limits.items())
    }
    assert statuses == dict.fromkeys(at_limits, 201)


def test_a_patch_cannot_slip_a_reserved_header_in(api: ApiGateway) -> None:
    created = api.request("POST", "/v1/jobs", token=ACME, body=job("p")).body
    response = api.request(
        "PATCH",
        f"/v1/jobs/{created['job_id']}",
        token=ACME,
        body={"target": {"headers": {"X-Tickwork-Fencing-Token": "999"}}},
    )
    assert response.status == 400
    kept = api.request("GET", f"/v1/jobs/{created['job_id']}", token=ACME).body
    assert kept["target"]["headers"] == {}


# --- request headers --------------------------------------------------------------------------------------
def test_request_headers_over_their_limits_are_400s_naming_them(api: ApiGateway, dynamodb: Any) -> None:
    created = api.request("POST", "/v1/jobs", token=ACME, body=job("r")).body
    before = item_counts(dynamodb)
    too_long_key = api.request(
        "POST", "/v1/jobs", token=ACME, body=job("r2"), headers={"Idempotency-Key": "k" * 256}
    )
    too_long_trigger_key = api.request(
        "POST", f"/v1/jobs/{created['job_id']}/trigger", token=ACME, headers={"Idempotency-Key": "k" * 256}
    )
    too_long_if_match = api.request(
        "PATCH",
        f"/v1/jobs/{created['job_id']}",
        token=ACME,
        body={"description": "x"},
        headers={"If-Match": '"' + "1" * 70 + '"'},
    )
    answers = {
        "Idempotency-Key on create": too_long_key,
        "Idempotency-Key on trigger": too_long_trigger_key,
        "If-Match": too_long_if_match,
    }
    assert {case: (r.status, r.body["error"]["field"]) for case, r in answers.items()} == {
        "Idempotency-Key on create": (400, "Idempotency-Key"),
        "Idempotency-Key on trigger": (400, "Idempotency-Key"),
        "If-Match": (400, "If-Match"),
    }
    assert item_counts(dynamodb) == before
    # At the limit, a 255-character key is accepted.
    ok = api.request("POST", "/v1/jobs", token=ACME, body=job("r3"), headers={"Idempotency-Key": "k" * 255})
    assert ok.status == 201
