"""Shared fixtures: AWS under moto, the tables from the shared definitions, two tenants, an API client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

# Set before any handler module is imported: tracing is off and no real credentials are ever used.
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Tickwork")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ["AWS_DEFAULT_REGION"] = "eu-west-1"
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ.pop("AWS_PROFILE", None)

from tickwork import tables
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.tenants import Tenant
from tickwork.runtime import runtime
from tickwork_local.harness import moto_aws

from tests.support.apigw import ApiGateway, HandlerPool
from tests.support.streams import indexed_first

TOKENS = {"acme": "tw_token-for-acme", "globex": "tw_token-for-globex"}


def create_tables(client: Any) -> None:
    for definition in tables.ALL_TABLES:
        client.create_table(**definition.create_table_kwargs())
        if definition.ttl_attribute:
            client.update_time_to_live(
                TableName=definition.default_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": definition.ttl_attribute},
            )


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    """A moto DynamoDB with tickwork's four tables (moto as the local stack runs it), and the process runtime
    reset around it."""
    runtime.cache_clear()
    with moto_aws():
        import boto3

        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_tables(client)
        yield client
    runtime.cache_clear()


def seed_tenant(client: Any, tenant_id: str, token: str, **limits: Any) -> Tenant:
    tenant = Tenant(
        tenant_id=tenant_id,
        name=tenant_id.title(),
        signing_secret=f"secret-{tenant_id}",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        **limits,
    )
    DynamoTenantStore(client, table=tables.TENANTS.default_name).put(tenant, token=token)
    return tenant


@pytest.fixture
def tenants(dynamodb: Any) -> dict[str, Tenant]:
    return {tenant_id: seed_tenant(dynamodb, tenant_id, token) for tenant_id, token in TOKENS.items()}


@pytest.fixture
def api(dynamodb: Any, tenants: dict[str, Tenant]) -> ApiGateway:
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler

    # A pool of handler instances, as the local gateway has: tests may send requests from several threads.
    make_handler = indexed_first(api_handler.make_handler, dynamodb)
    return ApiGateway(HandlerPool(make_handler), authorizer_handler.lambda_handler)


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    """Every item, across scan pages (a page stops at 1 MB, which a few large payloads fill)."""
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(TableName=table):
        items.extend(page["Items"])
    return items


def item_counts(client: Any) -> dict[str, int]:
    """How many items each table holds: the evidence that a refused request wrote nothing."""
    return {
        definition.logical_name: len(scan_all(client, definition.default_name))
        for definition in tables.ALL_TABLES
    }
