"""The tenants table: tenant profiles and their API tokens (stored as SHA-256 hashes only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tickwork import tables
from tickwork.adapters.dynamo import from_item, to_item
from tickwork.domain.tenants import Principal, Tenant, hash_token
from tickwork.errors import NotFound

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoTenantStore:
    def __init__(self, client: DynamoDBClient, *, table: str):
        self.client = client
        self.table = table

    def put(self, tenant: Tenant, *, token: str, token_label: str = "default") -> None:  # noqa: S107
        """Store the tenant and one token for it. Only the token's hash is written."""
        self.client.transact_write_items(
            TransactItems=[
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
            ]
        )

    def get(self, tenant_id: str) -> Tenant:
        item = self._get(tables.tenant_key(tenant_id))
        if item is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return Tenant.model_validate(
            {key: value for key, value in item.items() if key in Tenant.model_fields}
        )

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
