"""The workers' cache of tenants: a change to a tenant (a limit, a new signing secret) reaches them within
10 s, as the contract allows, and a warm worker does not read the tenant for every run before that."""

from __future__ import annotations

from typing import Any

from tickwork import tables
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.runtime import TENANT_CACHE_SECONDS, CachedTenants

from tests.conftest import seed_tenant


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_changed_tenant_reaches_the_workers_within_ten_seconds(dynamodb: Any) -> None:
    # Given a worker's cache of a tenant with an in-flight limit of 5
    store = DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name)
    seed_tenant(dynamodb, "acme", "tw_acme", max_in_flight=5)
    clock = Clock()
    cached = CachedTenants(store, clock=clock)
    assert cached.get("acme").max_in_flight == 5
    assert TENANT_CACHE_SECONDS <= 10

    # When the operator changes the limit
    seed_tenant(dynamodb, "acme", "tw_acme", max_in_flight=50)

    # Then the worker may keep the old one for a moment, and has the new one once 10 s have passed
    clock.now += TENANT_CACHE_SECONDS - 0.5
    assert cached.get("acme").max_in_flight == 5
    clock.now += 0.5
    assert cached.get("acme").max_in_flight == 50
