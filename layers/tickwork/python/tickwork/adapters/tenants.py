"""The tenants table: tenant profiles, their API tokens (stored as SHA-256 hashes only) and their API request
counters."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import from_item, to_item, transact
from tickwork.domain.tenants import LEGACY_MAX_IN_FLIGHT, Principal, RateWindow, Tenant, hash_token
from tickwork.errors import NotFound, RateLimited

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoTenantStore:
    def __init__(self, client: DynamoDBClient, *, table: str):
        self.client = client
        self.table = table

    def put(self, tenant: Tenant, *, token: str, token_label: str = "default") -> None:  # noqa: S107
        """Store the tenant and one token for it. Only the token's hash is written."""
        transact(
            self.client,
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": to_item(
                            {
                                tables.TENANTS_PK: tables.tenant_key(tenant.tenant_id),
                                **tenant.model_dump(mode="json"),
                            }
                        ),
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": to_item(
                            {
                                tables.TENANTS_PK: tables.token_key(hash_token(token)),
                                "tenant_id": tenant.tenant_id,
                                "label": token_label,
                            }
                        ),
                    }
                },
                # The request counter exists from the start, so a tenant's first request adds no item.
                {"Put": {"TableName": self.table, "Item": _counter(tenant.tenant_id, tenant.created_at)}},
            ],
        )

    def get(self, tenant_id: str) -> Tenant:
        item = self._get(tables.tenant_key(tenant_id))
        if item is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return tenant_of(item)

    def by_token(self, token: str) -> Principal | None:
        """A DynamoDB key lookup on the token's hash: no stored secret is ever compared byte by byte."""
        token_item = self._get(tables.token_key(hash_token(token)))
        if token_item is None:
            return None
        try:
            tenant = self.get(token_item["tenant_id"])
        except NotFound:
            return None
        if tenant.status != "ACTIVE":
            return None
        return Principal(tenant=tenant, token_label=str(token_item.get("label", "default")))

    def _get(self, key: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table, Key=to_item({tables.TENANTS_PK: key}), ConsistentRead=True
        )
        return from_item(response["Item"]) if "Item" in response else None


def tenant_of(item: dict[str, Any]) -> Tenant:
    """The tenant a stored item holds, whichever names it was written with (``max_in_flight`` before
    ``max_concurrent_runs``); the item's other attributes (its job count) are not the tenant's."""
    return Tenant.model_validate({key: value for key, value in item.items() if key in _TENANT_ATTRIBUTES})


_TENANT_ATTRIBUTES = frozenset({*Tenant.model_fields, LEGACY_MAX_IN_FLIGHT})
# An idle tenant's counter expires after this long; the next request starts a new one.
COUNTER_LIFETIME = timedelta(days=1)
# Increment, else open the window, else (another request opened it first) increment again.
_MAX_COUNTER_WRITES = 3


def _counter(tenant_id: str, now: datetime) -> dict[str, Any]:
    return to_item(
        {
            tables.TENANTS_PK: tables.rate_limit_key(tenant_id),
            tables.RATE_WINDOW: 0,
            tables.RATE_COUNT: 0,
            tables.TENANTS_TTL: int((now + COUNTER_LIFETIME).timestamp()),
        }
    )


class DynamoApiRateLimiter:
    """Each tenant's API requests, counted in fixed one-second windows on one item per tenant.

    One conditional ``UpdateItem`` counts a request in the current window unless the window is full; the
    first request of a new window resets the counter with a second one, conditional on the window being
    older, so two requests opening the same window count once each. A refused request changes nothing.
    """

    def __init__(self, client: DynamoDBClient, *, table: str):
        self.client = client
        self.table = table

    def take(self, tenant_id: str, *, limit: int, now: datetime) -> None:
        """Count one request of ``tenant_id`` at ``now``, or raise :class:`RateLimited` if ``limit`` requests
        were already counted in this window."""
        window = RateWindow.at(now)
        key = to_item({tables.TENANTS_PK: tables.rate_limit_key(tenant_id)})
        names = {"#window": tables.RATE_WINDOW, "#count": tables.RATE_COUNT}
        for _ in range(_MAX_COUNTER_WRITES):
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET #count = #count + :one",
                    # ">=": a window opened by an API function whose clock runs a little ahead is this one.
                    ConditionExpression="#window >= :window AND #count < :limit",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=to_item({":one": 1, ":window": window.start, ":limit": limit}),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                old_item: Any = error.response.get("Item") or {}
                old = from_item(old_item)
            if int(old.get(tables.RATE_WINDOW, -1)) >= window.start:
                break
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET #window = :window, #count = :one, #expires = :expires",
                    ConditionExpression="attribute_not_exists(#window) OR #window < :window",
                    ExpressionAttributeNames={**names, "#expires": tables.TENANTS_TTL},
                    ExpressionAttributeValues=to_item(
                        {
                            ":one": 1,
                            ":window": window.start,
                            ":expires": window.start + int(COUNTER_LIFETIME.total_seconds()),
                        }
                    ),
                )
                return
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
        retry_after = window.retry_after(now)
        raise RateLimited(
            f"more than {limit} API requests per second; retry after {retry_after} s",
            retry_after=retry_after,
        )
