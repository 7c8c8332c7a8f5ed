"""Authentication through the API Gateway stand-in: every refused token is a 401 in the error shape, the
tenant comes only from the authorizer, and tokens are found by their SHA-256 hash as a DynamoDB key."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from tickwork import tables
from tickwork.runtime import runtime

from tests.conftest import TOKENS, item_counts, scan_all, seed_tenant
from tests.support.apigw import ApiGateway, LambdaContext, rest_event

ACME = TOKENS["acme"]
UNAUTHORIZED = {
    "error": {"code": "unauthorized", "message": "missing or invalid bearer token", "field": None}
}
JOB = {
    "name": "nightly",
    "schedule": {"type": "cron", "expression": "0 3 * * *"},
    "target": {"type": "http", "url": "https://hooks.example.com/nightly"},
}


def call(api: ApiGateway, authorization: str | None, method: str = "GET", path: str = "/v1/jobs") -> Any:
    event = rest_event(method, path, body=JOB if method == "POST" else None)
    return api.send(event, authorization=authorization)


REFUSED: dict[str, str | None] = {
    "missing": None,
    "empty": "",
    "wrong": "Bearer tw_wrong-token",
    "a-prefix-of-the-token": f"Bearer {ACME[:-1]}",
    "the-token-and-more": f"Bearer {ACME}x",
    "another-case": f"Bearer {ACME.upper()}",
    "no-scheme": ACME,
    "basic-scheme": f"Basic {ACME}",
    "token-scheme": f"Token {ACME}",
    "scheme-only": "Bearer",
    "scheme-and-space": "Bearer ",
    "two-tokens": f"Bearer {ACME} {ACME}",
    "comma-joined": f"Bearer {ACME},Bearer {ACME}",
    "too-long": "Bearer " + "x" * 600,
    "the-stored-hash": f"Bearer {hashlib.sha256(ACME.encode()).hexdigest()}",
    "the-stored-key": f"Bearer token#{hashlib.sha256(ACME.encode()).hexdigest()}",
    "the-tenant-id": "Bearer acme",
}


def test_every_refused_token_is_a_401_in_the_error_shape_and_stores_nothing(
    api: ApiGateway, dynamodb: Any
) -> None:
    before = item_counts(dynamodb)
    answers = {
        (case, method, path): call(api, authorization, method, path)
        for case, authorization in REFUSED.items()
        for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/stats"))
    }
    assert {case: (r.status, r.body) for case, r in answers.items()} == dict.fromkeys(
        answers, (401, UNAUTHORIZED)
    )
    assert item_counts(dynamodb) == before


def test_the_right_token_passes_with_any_case_of_the_scheme(api: ApiGateway) -> None:
    for scheme in ("Bearer", "bearer", "BEARER"):
        assert call(api, f"{scheme} {ACME}").status == 200


@pytest.mark.parametrize(
    ("change", "status_after"),
    [
        ("delete-tenant", 401),
        ("disable-tenant", 401),
        ("delete-token", 401),
    ],
)
def test_a_token_stops_working_when_its_tenant_or_itself_goes(
    api: ApiGateway, dynamodb: Any, change: str, status_after: int
) -> None:
    assert call(api, f"Bearer {ACME}").status == 200
    table = tables.TENANTS.default_name
    if change == "delete-tenant":
        dynamodb.delete_item(TableName=table, Key={"pk": {"S": tables.tenant_key("acme")}})
    elif change == "disable-tenant":
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": tables.tenant_key("acme")}},
            UpdateExpression="SET #s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "DISABLED"}},
        )
    else:
        token_key = tables.token_key(hashlib.sha256(ACME.encode()).hexdigest())
        dynamodb.delete_item(TableName=table, Key={"pk": {"S": token_key}})
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/stats")):
        response = call(api, f"Bearer {ACME}", method, path)
        assert (response.status, response.body) == (status_after, UNAUTHORIZED)
    # The other tenant is not affected.
    assert call(api, f"Bearer {TOKENS['globex']}").status == 200


def test_the_api_refuses_an_event_that_did_not_pass_the_authorizer(api: ApiGateway, dynamodb: Any) -> None:
    # Defence in depth: the API function itself answers 401 when API Gateway passes no authorizer context.
    before = item_counts(dynamodb)
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/stats")):
        event = rest_event(method, path, body=JOB if method == "POST" else None)
        response = api.api_handler(event, LambdaContext())
        assert response["statusCode"] == 401, path
    assert item_counts(dynamodb) == before


def test_the_tenant_comes_only_from_the_authorizer(api: ApiGateway, dynamodb: Any) -> None:
    # A client naming another tenant anywhere in its request still acts as itself.
    globex = TOKENS["globex"]
    spoofed = api.request(
        "POST",
        "/v1/jobs",
        token=globex,
        body={**JOB, "tenant_id": "acme"},
        headers={"X-Tenant-Id": "acme", "X-Amzn-Authorizer-Tenant-Id": "acme"},
        query={"tenant_id": "acme"},
    )
    assert (spoofed.status, spoofed.body["error"]["field"]) == (400, "tenant_id")
    created = api.request(
        "POST", "/v1/jobs", token=globex, body=JOB, headers={"X-Tenant-Id": "acme"}, query={"tenant": "acme"}
    )
    assert created.status == 201
    stored = scan_all(dynamodb, tables.JOBS.default_name)
    assert {item["pk"]["S"].split("/")[0] for item in stored} == {"globex"}  # its job and its name lock
    assert api.request("GET", "/v1/jobs", token=ACME).body["items"] == []


# --- tokens are looked up by hash, never compared ---------------------------------------------------------
def test_no_stored_item_holds_a_plaintext_token(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "initech", "tw_initech-plain-token")
    stored = str(scan_all(dynamodb, tables.TENANTS.default_name))
    assert "tw_initech-plain-token" not in stored
    assert tables.token_key(hashlib.sha256(b"tw_initech-plain-token").hexdigest()) in stored


def test_the_authorizer_reads_the_token_item_by_its_hash_and_sends_no_plaintext_token(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given every DynamoDB call the authorizer's client makes, recorded by a botocore event hook
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.name, params))

    client = runtime().dynamodb
    client.meta.events.register("provide-client-params.dynamodb.*", record)
    try:
        assert call(api, f"Bearer {ACME}").status == 200  # a known token
        known = list(calls)
        calls.clear()
        assert call(api, "Bearer tw_guessed-token").status == 401  # an unknown one
        unknown = list(calls)
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb.*", record)

    # Then the first call is a GetItem keyed by the SHA-256 of the token: DynamoDB finds the item by its
    # hash, so no stored secret is compared with what the client sent, byte by byte or otherwise
    digest = hashlib.sha256(ACME.encode()).hexdigest()
    assert known[0] == (
        "GetItem",
        {
            "TableName": tables.TENANTS.default_name,
            "Key": {"pk": {"S": f"token#{digest}"}},
            "ConsistentRead": True,
        },
    )
    guessed = hashlib.sha256(b"tw_guessed-token").hexdigest()
    assert [name for name, _ in unknown] == ["GetItem"]  # one lookup, and nothing else, for a wrong token
    assert unknown[0][1]["Key"] == {"pk": {"S": f"token#{guessed}"}}
    # And no request to DynamoDB ever carries a plaintext token, nor scans for one
    on_tenants = [
        name for name, params in known + unknown if params.get("TableName") == tables.TENANTS.default_name
    ]
    assert set(on_tenants) <= {"GetItem", "UpdateItem"}  # key lookups, and the API's request counter
    assert ACME not in str(known) and "tw_guessed-token" not in str(unknown)
