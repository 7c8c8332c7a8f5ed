"""Tenants' throttle items in DynamoDB (moto): racing starts each move the time on by one interval, once,
whether the throttle was at rest or busy, and starts of separate stores see each other's moves."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tickwork import tables
from tickwork.adapters.throttles import DynamoTenantThrottles

from tests.support.engine import make_requests_atomic

NOW = 1_800_000_000_000_000
INTERVAL = 100_000


def test_racing_starts_each_take_their_own_place(dynamodb: Any) -> None:
    # moto in process does not serialise requests; DynamoDB's conditional writes are atomic
    make_requests_atomic(dynamodb)
    stores = [DynamoTenantThrottles(dynamodb, table=tables.TENANTS.default_name) for _ in range(4)]

    def start(index: int) -> int:
        return stores[index % 4].advance("acme", 0, now_us=NOW, interval_us=INTERVAL)

    with ThreadPoolExecutor(8) as pool:
        moved = list(pool.map(start, range(40)))
    assert sorted(moved) == [NOW + INTERVAL * n for n in range(1, 41)]


def test_a_throttle_at_rest_starts_again_from_now(dynamodb: Any) -> None:
    store = DynamoTenantThrottles(dynamodb, table=tables.TENANTS.default_name)
    assert store.advance("acme", 0, now_us=NOW, interval_us=INTERVAL) == NOW + INTERVAL
    assert store.advance("acme", 0, now_us=NOW, interval_us=INTERVAL) == NOW + 2 * INTERVAL
    later = NOW + 10 * INTERVAL
    # Another store (another worker) guesses busy from nothing; the item says at rest.
    other = DynamoTenantThrottles(dynamodb, table=tables.TENANTS.default_name)
    assert other.advance("acme", 0, now_us=later, interval_us=INTERVAL) == later + INTERVAL
    assert store.advance("acme", 0, now_us=later, interval_us=INTERVAL) == later + 2 * INTERVAL
    # Shards and tenants are separate items.
    assert store.advance("acme", 1, now_us=later, interval_us=INTERVAL) == later + INTERVAL
    assert store.advance("globex", 0, now_us=later, interval_us=INTERVAL) == later + INTERVAL


def test_a_throttle_item_expires_a_day_after_its_last_start_and_is_not_a_tenant(dynamodb: Any) -> None:
    store = DynamoTenantThrottles(dynamodb, table=tables.TENANTS.default_name)
    store.advance("acme", 0, now_us=NOW, interval_us=INTERVAL)
    item = dynamodb.get_item(
        TableName=tables.TENANTS.default_name, Key={tables.TENANTS_PK: {"S": tables.throttle_key("acme", 0)}}
    )["Item"]
    assert int(item[tables.TENANTS_TTL]["N"]) == NOW // 1_000_000 + 86_400
    assert not tables.throttle_key("acme", 0).startswith(tables.TENANT_PK_PREFIX)
