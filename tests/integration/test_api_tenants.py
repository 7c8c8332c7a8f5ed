"""A tenant's settings as the API sees them: a disabled tenant gets 403 ``tenant_disabled`` on every route,
enabling it restores everything, a rotated token stops at once, and a changed API limit applies at the next
request, all behind an authorizer whose answers are cached per token as API Gateway caches them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tickwork import tables
from tickwork.adapters.dynamo import from_item, to_item
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.api.app import build_app
from tickwork.domain.tenants import TenantChanges
from tickwork_local.stack import AUTHORIZER_CACHE_SECONDS, CachedAuthorizer

from tests.conftest import TOKENS, item_counts, seed_tenant
from tests.support.apigw import ApiGateway, LambdaContext, rest_event
from tests.support.engine import FakeClock

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]
# On a window's edge, so that requests a fraction of a second apart share the rate limit's window.
START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
JOB = {
    "name": "nightly",
    "schedule": {"type": "cron", "expression": "0 3 * * *"},
    "target": {"type": "http", "url": "https://hooks.example.com/nightly"},
}
JOB_ID = "01JGZ4M8Q3V5XKQ1T7B2N6C9DE"
ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/jobs", JOB),
    ("GET", "/v1/jobs", None),
    ("GET", f"/v1/jobs/{JOB_ID}", None),
    ("HEAD", f"/v1/jobs/{JOB_ID}", None),
    ("PATCH", f"/v1/jobs/{JOB_ID}", {"description": "x"}),
    ("POST", f"/v1/jobs/{JOB_ID}/pause", None),
    ("POST", f"/v1/jobs/{JOB_ID}/resume", None),
    ("DELETE", f"/v1/jobs/{JOB_ID}", None),
    ("POST", f"/v1/jobs/{JOB_ID}/trigger", None),
    ("GET", f"/v1/jobs/{JOB_ID}/runs", None),
    ("GET", "/v1/runs", None),
    ("GET", f"/v1/runs/{JOB_ID}:1", None),
    ("POST", f"/v1/runs/{JOB_ID}:1/retry", None),
    ("POST", "/v1/schedule-preview", {"schedule": {"type": "rate", "every_seconds": 60}}),
    ("GET", "/v1/stats", None),
    # Refused before it is validated: a disabled tenant learns nothing from its requests.
    ("POST", "/v1/jobs", {"name": ""}),
]
DISABLED = {
    "code": "tenant_disabled",
    "message": "tenant 'acme' is disabled: its requests are refused and its fires wait until an operator"
    " enables it again; its jobs and runs are kept",
    "field": None,
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def gateway(dynamodb: Any, tenants: Any, clock: FakeClock) -> ApiGateway:
    """The real authorizer behind a cache that keeps each token's answer as long as API Gateway does, and
    the real resolver on a fake clock."""
    from functions.authorizer import handler as authorizer_handler

    app = build_app(clock=clock)
    return ApiGateway(
        lambda event, context: app.resolve(event, context),
        CachedAuthorizer(authorizer_handler.lambda_handler, AUTHORIZER_CACHE_SECONDS),
    )


def operator(dynamodb: Any) -> DynamoTenantStore:
    return DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name)


def counter(dynamodb: Any, tenant_id: str) -> dict[str, Any]:
    item = dynamodb.get_item(
        TableName=tables.TENANTS.default_name,
        Key=to_item({tables.TENANTS_PK: tables.rate_limit_key(tenant_id)}),
        ConsistentRead=True,
    ).get("Item")
    return from_item(item) if item else {}


def test_a_disabled_tenant_gets_403_on_every_route_and_nothing_is_stored_or_counted(
    gateway: ApiGateway, dynamodb: Any
) -> None:
    # Given acme's token, allowed a moment ago and kept in the authorizer's cache
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 200
    # When an operator disables acme
    operator(dynamodb).update("acme", TenantChanges(disabled=True))
    before, counted = item_counts(dynamodb), counter(dynamodb, "acme")

    # Then every route it tries answers 403 tenant_disabled, at once, and changes nothing
    answers = {
        (method, path): gateway.request(method, path, token=ACME, body=body) for method, path, body in ROUTES
    }
    for (method, path), answer in answers.items():
        assert answer.status == 403, (method, path, answer.body)
        if method != "HEAD":
            assert answer.body == {"error": DISABLED}, (method, path)
    assert item_counts(dynamodb) == before
    assert counter(dynamodb, "acme") == counted  # a refused request is not counted against its rate
    # And health needs no tenant
    assert gateway.request("GET", "/v1/health", token=None).status == 200


def test_another_tenant_is_unaffected(gateway: ApiGateway, dynamodb: Any) -> None:
    operator(dynamodb).update("acme", TenantChanges(disabled=True))
    for method, path, body in ROUTES[:2]:
        assert gateway.request(method, path, token=GLOBEX, body=body).status in (200, 201)
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 403


def test_enabling_restores_the_tenant_at_once_with_its_jobs(gateway: ApiGateway, dynamodb: Any) -> None:
    # Given a job of acme's, and acme disabled while its token's answer is cached
    created = gateway.request("POST", "/v1/jobs", token=ACME, body=JOB)
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    operator(dynamodb).update("acme", TenantChanges(disabled=True))
    assert gateway.request("GET", f"/v1/jobs/{job_id}", token=ACME).status == 403

    # When the operator enables it again
    operator(dynamodb).update("acme", TenantChanges(disabled=False))

    # Then its next request works (no cached 403 to wait out), and its job is as it was
    fetched = gateway.request("GET", f"/v1/jobs/{job_id}", token=ACME)
    assert (fetched.status, fetched.body["status"]) == (200, "ACTIVE")
    assert gateway.request("POST", f"/v1/jobs/{job_id}/pause", token=ACME).status == 200


def test_a_rotated_token_is_refused_at_once_though_the_authorizer_cached_it(
    gateway: ApiGateway, dynamodb: Any
) -> None:
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 200
    operator(dynamodb).rotate_token("acme", token="tw_acme-rotated")

    refused = gateway.request("GET", "/v1/jobs", token=ACME)
    assert (refused.status, refused.body["error"]["code"]) == (401, "unauthorized")
    assert gateway.request("GET", "/v1/jobs", token="tw_acme-rotated").status == 200
    assert gateway.request("GET", "/v1/jobs", token=GLOBEX).status == 200


def test_a_raised_api_limit_applies_at_the_next_request(
    gateway: ApiGateway, dynamodb: Any, clock: FakeClock
) -> None:
    # Given acme at one request a second, its token's answer cached with that limit
    operator(dynamodb).update("acme", TenantChanges(api_requests_per_second=1))
    clock.advance(seconds=0.25)
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 200
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 429

    # When the operator raises it, within the same second
    operator(dynamodb).update("acme", TenantChanges(api_requests_per_second=4))

    # Then the same second lets three more through, and no more
    statuses = [gateway.request("GET", "/v1/jobs", token=ACME).status for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def test_an_authorizer_answer_from_before_the_token_hash_is_still_checked(
    api: ApiGateway, dynamodb: Any
) -> None:
    # An answer API Gateway cached before this version: the tenant, and no token hash.
    def call() -> dict[str, Any]:
        event = rest_event("GET", "/v1/jobs")
        event["requestContext"]["authorizer"] = {"principalId": "acme:default", "tenant_id": "acme"}
        answer: dict[str, Any] = api.api_handler(event, LambdaContext())
        return answer

    assert call()["statusCode"] == 200
    operator(dynamodb).update("acme", TenantChanges(disabled=True))
    assert call()["statusCode"] == 403


def test_a_deleted_tenant_behind_a_cached_answer_is_a_401(gateway: ApiGateway, dynamodb: Any) -> None:
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 200
    dynamodb.delete_item(
        TableName=tables.TENANTS.default_name, Key=to_item({tables.TENANTS_PK: tables.tenant_key("acme")})
    )
    assert gateway.request("GET", "/v1/jobs", token=ACME).status == 401


def test_a_tenant_disabled_before_its_first_request_is_403_not_401(dynamodb: Any) -> None:
    from functions.authorizer import handler as authorizer_handler

    seed_tenant(dynamodb, "initech", "tw_initech", disabled=True)
    gateway = ApiGateway(build_app().resolve, authorizer_handler.lambda_handler)
    answer = gateway.request("GET", "/v1/stats", token="tw_initech")
    assert (answer.status, answer.body["error"]["code"]) == (403, "tenant_disabled")
