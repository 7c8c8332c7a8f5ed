"""The per-tenant API rate limit: a fixed one-second window counted in DynamoDB, 429 with Retry-After.

The limiter and the API both take time as a parameter here (a fake clock), so window edges are exact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from tickwork import tables
from tickwork.adapters.dynamo import from_item, to_item
from tickwork.adapters.tenants import DynamoApiRateLimiter
from tickwork.api.app import build_app
from tickwork.domain.tenants import (
    DEFAULT_API_REQUESTS_PER_SECOND,
    MAX_API_REQUESTS_PER_SECOND,
    RateWindow,
    Tenant,
)
from tickwork.errors import RateLimited
from tickwork_local import cli

from tests.conftest import TOKENS, item_counts, seed_tenant
from tests.support.apigw import ApiGateway
from tests.support.engine import FakeClock, make_requests_atomic

# On a window's edge, so that a quarter second later is still the same window.
START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
JOB = {
    "name": "nightly",
    "schedule": {"type": "cron", "expression": "0 3 * * *"},
    "target": {"type": "http", "url": "https://hooks.example.com/nightly"},
}


def counter(dynamodb: Any, tenant_id: str) -> dict[str, Any]:
    item = dynamodb.get_item(
        TableName=tables.TENANTS.default_name,
        Key=to_item({tables.TENANTS_PK: tables.rate_limit_key(tenant_id)}),
        ConsistentRead=True,
    ).get("Item")
    return from_item(item) if item else {}


@pytest.fixture
def limiter(dynamodb: Any) -> DynamoApiRateLimiter:
    make_requests_atomic(dynamodb)
    return DynamoApiRateLimiter(dynamodb, table=tables.TENANTS.default_name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


def gateway_at(clock: Callable[[], datetime]) -> ApiGateway:
    """The real authorizer and the real resolver, with the API reading the fake clock."""
    from functions.authorizer import handler as authorizer_handler

    app = build_app(clock=clock)
    return ApiGateway(lambda event, context: app.resolve(event, context), authorizer_handler.lambda_handler)


# --- the domain -------------------------------------------------------------------------------------------
def test_a_tenant_may_make_50_requests_a_second_unless_told_otherwise() -> None:
    tenant = Tenant(tenant_id="t", name="T", signing_secret="s", created_at=START)
    assert tenant.api_requests_per_second == DEFAULT_API_REQUESTS_PER_SECOND == 50
    assert cli.MAX_API_REQUESTS_PER_SECOND == MAX_API_REQUESTS_PER_SECOND


@pytest.mark.parametrize("limit", [0, -1, MAX_API_REQUESTS_PER_SECOND + 1])
def test_the_limit_is_bounded(limit: int) -> None:
    with pytest.raises(ValidationError, match="api_requests_per_second"):
        Tenant(tenant_id="t", name="T", signing_secret="s", created_at=START, api_requests_per_second=limit)


@pytest.mark.parametrize(
    ("offset", "start", "retry_after"),
    [(0.0, 0, 1), (0.25, 0, 1), (0.999, 0, 1), (1.0, 1, 1), (59.5, 59, 1)],
)
def test_windows_are_whole_seconds_and_retry_after_is_at_least_one(
    offset: float, start: int, retry_after: int
) -> None:
    now = START + timedelta(seconds=offset)
    window = RateWindow.at(now)
    assert window.start == int(START.timestamp()) + start
    assert window.end == window.start + 1
    assert window.retry_after(now) == retry_after


# --- the limiter against DynamoDB -------------------------------------------------------------------------
def test_the_limit_holds_within_a_window_and_the_next_window_starts_afresh(
    dynamodb: Any, limiter: DynamoApiRateLimiter
) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    for _ in range(3):
        limiter.take("acme", limit=3, now=START + timedelta(seconds=0.1))
    before = counter(dynamodb, "acme")

    with pytest.raises(RateLimited) as refused:
        limiter.take("acme", limit=3, now=START + timedelta(seconds=0.75))

    assert (refused.value.code, refused.value.retry_after) == ("rate_limited", 1)
    assert counter(dynamodb, "acme") == before  # a refused request counts nothing
    assert before[tables.RATE_COUNT] == 3
    limiter.take("acme", limit=3, now=START + timedelta(seconds=1))
    assert counter(dynamodb, "acme")[tables.RATE_COUNT] == 1


def test_tenants_are_counted_apart(dynamodb: Any, limiter: DynamoApiRateLimiter) -> None:
    for tenant_id, token in TOKENS.items():
        seed_tenant(dynamodb, tenant_id, token)
    limiter.take("acme", limit=1, now=START)
    with pytest.raises(RateLimited):
        limiter.take("acme", limit=1, now=START)
    limiter.take("globex", limit=1, now=START)  # not refused: acme's requests are not globex's


def test_a_counter_that_expired_or_predates_the_limit_is_started_again(
    dynamodb: Any, limiter: DynamoApiRateLimiter
) -> None:
    # No counter item at all: a tenant created before the limit existed, or one whose counter expired.
    limiter.take("initech", limit=2, now=START)
    limiter.take("initech", limit=2, now=START)
    with pytest.raises(RateLimited):
        limiter.take("initech", limit=2, now=START)
    stored = counter(dynamodb, "initech")
    assert stored[tables.RATE_WINDOW] == int(START.timestamp())
    assert stored[tables.TENANTS_TTL] == int((START + timedelta(days=1)).timestamp())


def test_a_clock_a_little_behind_counts_in_the_window_already_open(
    dynamodb: Any, limiter: DynamoApiRateLimiter
) -> None:
    limiter.take("acme", limit=2, now=START + timedelta(seconds=1))
    limiter.take("acme", limit=2, now=START + timedelta(seconds=0.9))  # another function, 100 ms behind
    with pytest.raises(RateLimited):
        limiter.take("acme", limit=2, now=START + timedelta(seconds=1.2))


@pytest.mark.parametrize("opened_before", [False, True], ids=["same-window", "window-opening-race"])
def test_concurrent_requests_never_pass_more_than_the_limit(
    dynamodb: Any, limiter: DynamoApiRateLimiter, opened_before: bool
) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    if opened_before:
        limiter.take("acme", limit=5, now=START)  # last second's window: every thread must reopen it
    now = START + timedelta(seconds=1) if opened_before else START
    passed, refused = [], []
    barrier = threading.Barrier(16)

    def call() -> None:
        barrier.wait()
        try:
            limiter.take("acme", limit=5, now=now)
            passed.append(1)
        except RateLimited:
            refused.append(1)

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert (len(passed), len(refused)) == (5, 11)
    assert counter(dynamodb, "acme")[tables.RATE_COUNT] == 5


# --- through the API --------------------------------------------------------------------------------------
def test_the_request_over_the_limit_is_a_429_with_retry_after_and_stores_nothing(
    dynamodb: Any, clock: FakeClock
) -> None:
    # Given a tenant allowed 3 requests a second (the API reads its limit with the tenant)
    seed_tenant(dynamodb, "acme", TOKENS["acme"], api_requests_per_second=3)
    gateway = gateway_at(clock)
    clock.advance(seconds=0.25)
    for _ in range(3):
        assert gateway.request("GET", "/v1/jobs", token=TOKENS["acme"]).status == 200
    before, counted = item_counts(dynamodb), counter(dynamodb, "acme")

    # When it sends a fourth, a create, in the same second
    response = gateway.request("POST", "/v1/jobs", token=TOKENS["acme"], body=JOB)

    # Then it is refused with the error shape and Retry-After, and nothing was stored or counted
    assert response.status == 429
    assert response.body == {
        "error": {
            "code": "rate_limited",
            "message": "more than 3 API requests per second; retry after 1 s",
            "field": None,
        }
    }
    assert response.headers["Retry-After"] == "1"
    assert item_counts(dynamodb) == before
    assert counter(dynamodb, "acme") == counted
    # And the next second the same create goes through
    clock.advance(seconds=0.75)
    assert gateway.request("POST", "/v1/jobs", token=TOKENS["acme"], body=JOB).status == 201


def test_every_authenticated_route_is_limited_and_health_is_not(dynamodb: Any, clock: FakeClock) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], api_requests_per_second=1)
    gateway = gateway_at(clock)
    assert gateway.request("GET", "/v1/stats", token=TOKENS["acme"]).status == 200
    routes = [
        ("POST", "/v1/jobs", JOB),
        ("GET", "/v1/jobs", None),
        ("GET", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE", None),
        ("PATCH", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE", {"description": "x"}),
        ("POST", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE/pause", None),
        ("POST", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE/resume", None),
        ("DELETE", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE", None),
        ("POST", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE/trigger", None),
        ("GET", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE/runs", None),
        ("GET", "/v1/runs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1", None),
        ("POST", "/v1/runs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1/retry", None),
        ("POST", "/v1/schedule-preview", {"schedule": {"type": "rate", "every_seconds": 60}}),
        ("GET", "/v1/stats", None),
    ]
    for method, path, body in routes:
        response = gateway.request(method, path, token=TOKENS["acme"], body=body)
        assert (method, path, response.status) == (method, path, 429)
    for _ in range(3):
        assert gateway.request("GET", "/v1/health", token=None).status == 200


def test_one_tenant_at_its_limit_does_not_slow_another(dynamodb: Any, clock: FakeClock) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], api_requests_per_second=1)
    seed_tenant(dynamodb, "globex", TOKENS["globex"], api_requests_per_second=2)
    gateway = gateway_at(clock)
    statuses = [gateway.request("GET", "/v1/jobs", token=TOKENS["acme"]).status for _ in range(3)]
    statuses += [gateway.request("GET", "/v1/jobs", token=TOKENS["globex"]).status for _ in range(3)]
    assert statuses == [200, 429, 429, 200, 200, 429]


def test_a_new_tenants_first_request_adds_no_item(dynamodb: Any, clock: FakeClock) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    before = item_counts(dynamodb)
    assert gateway_at(clock).request("GET", "/v1/jobs", token=TOKENS["acme"]).status == 200
    assert item_counts(dynamodb) == before


def test_the_deployed_handler_applies_the_limit(api: ApiGateway, dynamodb: Any) -> None:
    # The Lambda entry point (wall clock): a tenant allowed one request a second cannot make 3 in a row
    # unless a second boundary falls between them, and two boundaries cannot.
    seed_tenant(dynamodb, "initech", "tw_initech", api_requests_per_second=1)
    statuses = [api.request("GET", "/v1/jobs", token="tw_initech").status for _ in range(3)]
    assert 429 in statuses and set(statuses) == {200, 429}


class CountingWrites:
    """The DynamoDB client, counting the UpdateItem calls made through it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.updates = 0

    def update_item(self, **request: Any) -> Any:
        self.updates += 1
        return self.client.update_item(**request)


def test_requests_seconds_apart_cost_one_write_each_and_a_busy_second_one_each(dynamodb: Any) -> None:
    """A worker's heartbeats or long polls come seconds apart: each opens a new window, in one write (not a
    failed count and then a reset); requests within one window are one write each too."""
    writes = CountingWrites(dynamodb)
    limiter = DynamoApiRateLimiter(writes, table=tables.TENANTS.default_name)  # type: ignore[arg-type]
    for n in range(10):
        limiter.take("acme", limit=5, now=START + timedelta(seconds=20 * n))
    assert writes.updates == 10
    busy = START + timedelta(hours=1)
    for n in range(5):
        limiter.take("acme", limit=5, now=busy + timedelta(milliseconds=100 * n))
    assert writes.updates == 15
    assert counter(dynamodb, "acme")[tables.RATE_COUNT] == 5


def test_a_window_another_process_opened_is_counted_in_not_opened_again(dynamodb: Any) -> None:
    first = DynamoApiRateLimiter(dynamodb, table=tables.TENANTS.default_name)
    second = DynamoApiRateLimiter(dynamodb, table=tables.TENANTS.default_name)
    first.take("acme", limit=3, now=START)
    second.take("acme", limit=3, now=START + timedelta(milliseconds=10))  # guesses "open", finds it opened
    first.take("acme", limit=3, now=START + timedelta(milliseconds=20))
    assert counter(dynamodb, "acme")[tables.RATE_COUNT] == 3
    with pytest.raises(RateLimited):
        second.take("acme", limit=3, now=START + timedelta(milliseconds=30))
