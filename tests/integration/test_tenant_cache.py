"""The workers' cache of tenants: a change to a tenant (a limit, a new signing secret) reaches them within
10 s, as the contract allows, and a warm worker does not read the tenant for every run before that."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
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


def test_a_batchs_threads_missing_the_tenant_at_once_read_it_once(dynamodb: Any) -> None:
    store = DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name)
    seed_tenant(dynamodb, "acme", "tw_acme")
    reads: list[str] = []
    asked = threading.Condition()
    asking = [0]
    get = store.get

    def counted(tenant_id: str) -> Any:
        # The read takes as long as it takes every thread of the batch to ask for the tenant.
        reads.append(tenant_id)
        with asked:
            asked.wait_for(lambda: asking[0] == 10, timeout=5)
        return get(tenant_id)

    store.get = counted  # type: ignore[method-assign]
    cached = CachedTenants(store, clock=Clock())

    def worker_thread() -> str:
        with asked:
            asking[0] += 1
            asked.notify_all()
        return cached.get("acme").tenant_id

    with ThreadPoolExecutor(max_workers=10) as pool:
        assert list(pool.map(lambda _: worker_thread(), range(10))) == ["acme"] * 10
    assert reads == ["acme"]
