"""The tenants table: tenant profiles, their API tokens (stored as SHA-256 hashes only) and their API request
counters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import cancellation_codes, from_item, is_conditional_failure, to_item, transact
from tickwork.adapters.expressions import Update
from tickwork.domain.tenants import (
    DEFAULT_TOKEN_LABEL,
    LEGACY_MAX_IN_FLIGHT,
    Principal,
    RateWindow,
    RotatedToken,
    Tenant,
    TenantChanges,
    TenantPage,
    TenantRecord,
    hash_token,
)
from tickwork.errors import Conflict, InvalidInput, NotFound, RateLimited

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoTenantStore:
    def __init__(self, client: DynamoDBClient, *, table: str, scan_page_size: int | None = None):
        self.client = client
        self.table = table
        self.scan_page_size = scan_page_size
        """Items one ``Scan`` request reads (tenants are listed by the operator only); None: DynamoDB's
        pages of up to 1 MB."""

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

    def admitted(self, tenant_id: str, token_sha256: str | None) -> Principal | None:
        """The tenant as stored now, with the label of the token used, for a request the authorizer let
        through: API Gateway keeps the authorizer's answer per token for minutes, so a token revoked since,
        a tenant deleted since or a changed setting must be read again. None when the token's item is gone
        (revoked) or names another tenant, or the tenant is gone or not ACTIVE; a disabled tenant is
        returned as it is, for the caller to refuse. One strongly consistent ``BatchGetItem`` of the two
        items; without a token hash (an authorizer answer from before it passed one) the tenant alone."""
        keys = [tables.tenant_key(tenant_id)]
        if token_sha256 is not None:
            keys.append(tables.token_key(token_sha256))
        items = self._get_many(keys)
        tenant_item = items.get(tables.tenant_key(tenant_id))
        if tenant_item is None:
            return None
        tenant = tenant_of(tenant_item)
        if tenant.status != "ACTIVE":
            return None
        if token_sha256 is None:
            return Principal(tenant=tenant, token_label=DEFAULT_TOKEN_LABEL)
        token_item = items.get(tables.token_key(token_sha256))
        if token_item is None or token_item.get("tenant_id") != tenant_id:
            return None
        return Principal(tenant=tenant, token_label=str(token_item.get("label", DEFAULT_TOKEN_LABEL)))

    # --- administration (the operator's, through `tickwork tenants`; no Lambda function calls these) -------
    def record(self, tenant_id: str) -> TenantRecord:
        """The tenant with its job count."""
        item = self._get(tables.tenant_key(tenant_id))
        if item is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return _record_of(item)

    def list_tenants(self, *, limit: int = 100, cursor: str | None = None) -> TenantPage:
        """Up to ``limit`` tenants, and the cursor of the next page (the last tenant id given; None at the
        end). A ``Scan`` of the table filtered to tenant items (tokens, request counters and in-flight
        slots are read and dropped): the table holds a few items per tenant, only an operator lists it, and
        no request path does (no function's role may ``Scan``). Tenants come in the table's order, not by
        id."""
        if limit < 1:
            raise InvalidInput("limit must be at least 1", field="limit")
        found: list[TenantRecord] = []
        start = {tables.TENANTS_PK: tables.tenant_key(cursor)} if cursor else None
        for page, more in self._scan(
            FilterExpression="begins_with(#pk, :prefix)",
            ExpressionAttributeNames={"#pk": tables.TENANTS_PK},
            ExpressionAttributeValues=to_item({":prefix": tables.TENANT_PK_PREFIX}),
            start=start,
        ):
            for index, item in enumerate(page):
                found.append(_record_of(item))
                if len(found) == limit:
                    left = more or index < len(page) - 1
                    return TenantPage(found, found[-1].tenant.tenant_id if left else None)
        return TenantPage(found, None)

    def iter_tenants(self, *, page_size: int = 100) -> Iterator[TenantRecord]:
        """Every tenant, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_tenants(limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def update(self, tenant_id: str, changes: TenantChanges) -> Tenant:
        """Change the settings given and nothing else (the job count, the signing secret and the fields not
        given are left as they are), and return the tenant as changed. The change is validated against the
        stored settings as a whole (``Tenant.changed``: pydantic's ``ValidationError`` when refused) and
        written in one ``UpdateItem``, conditional on the tenant existing and, when the throttle changes, on
        its rate and burst being still as read, so two operators' changes never combine into a burst below
        the rate."""
        given = changes.given()
        for _ in range(_MAX_UPDATE_TRIES):
            current = self.get(tenant_id)
            changed = current.changed(changes)
            if not given:
                return changed
            update = Update()
            update.where(f"attribute_exists({update.name(tables.TENANTS_PK)})")
            cleared = [name for name, value in given.items() if value is None]
            update.set_many({name: value for name, value in given.items() if value is not None})
            if "max_concurrent_runs" in given:
                cleared.append(LEGACY_MAX_IN_FLIGHT)  # the older name would otherwise still be read
            if cleared:
                update.remove(*cleared)
            if given.keys() & {"max_runs_per_second", "burst"}:
                for name in ("max_runs_per_second", "burst"):
                    update.where(_unchanged(update, name, getattr(current, name)))
            try:
                answer = self.client.update_item(
                    TableName=self.table,
                    Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
                    ReturnValues="ALL_NEW",
                    **update.expression(),
                )
            except ClientError as error:
                if not is_conditional_failure(error):
                    raise
                continue  # deleted, or its throttle changed meanwhile: read it again
            return tenant_of(from_item(answer["Attributes"]))
        raise Conflict(
            f"tenant {tenant_id!r} kept changing while it was being updated; try again", field="tenant_id"
        )

    def rotate_token(self, tenant_id: str, *, token: str, label: str = DEFAULT_TOKEN_LABEL) -> RotatedToken:
        """Give the tenant ``token`` under ``label`` and revoke the tokens it had under that label, in one
        transaction conditional on the tenant existing: the new token's hash item is written and the old
        ones' deleted, so an old token stops authenticating at once (the API checks the token's item on
        every request, whatever the authorizer's cache still holds). The tenant's tokens are found with a
        ``Scan`` of the table (the operator's, as for :meth:`list_tenants`)."""
        old = [
            item[tables.TENANTS_PK]
            for page, _ in self._scan(
                FilterExpression="begins_with(#pk, :prefix) AND #tenant = :tenant",
                ExpressionAttributeNames={"#pk": tables.TENANTS_PK, "#tenant": "tenant_id"},
                ExpressionAttributeValues=to_item({":prefix": tables.TOKEN_PK_PREFIX, ":tenant": tenant_id}),
                start=None,
            )
            for item in page
            if str(item.get("label", DEFAULT_TOKEN_LABEL)) == label
        ]
        new_key = tables.token_key(hash_token(token))
        if len(old) > _MAX_REVOKED_AT_ONCE:
            raise Conflict(
                f"tenant {tenant_id!r} has {len(old)} tokens labelled {label!r}, more than one rotation"
                f" revokes ({_MAX_REVOKED_AT_ONCE})",
                field="label",
            )
        try:
            transact(
                self.client,
                [
                    {
                        "ConditionCheck": {
                            "TableName": self.table,
                            "Key": to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
                            "ConditionExpression": "attribute_exists(#pk)",
                            "ExpressionAttributeNames": {"#pk": tables.TENANTS_PK},
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(
                                {tables.TENANTS_PK: new_key, "tenant_id": tenant_id, "label": label}
                            ),
                            # A token is new: a clash would hand another tenant's token to this one.
                            "ConditionExpression": "attribute_not_exists(#pk)",
                            "ExpressionAttributeNames": {"#pk": tables.TENANTS_PK},
                        }
                    },
                    *(
                        {"Delete": {"TableName": self.table, "Key": to_item({tables.TENANTS_PK: key})}}
                        for key in old
                        if key != new_key
                    ),
                ],
            )
        except ClientError as error:
            codes = cancellation_codes(error)
            if codes and codes[0] == "ConditionalCheckFailed":
                raise NotFound(f"tenant {tenant_id!r} not found") from None
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                raise Conflict("the new token is already in use; rotate again", field="token") from None
            raise
        return RotatedToken(tenant_id=tenant_id, label=label, token=token, revoked=len(old))

    def _scan(
        self, *, start: dict[str, str] | None, **request: Any
    ) -> Iterator[tuple[list[dict[str, Any]], bool]]:
        """Each page's matching items, and whether more pages follow."""
        key = to_item(start) if start else None
        while True:
            if key:
                request["ExclusiveStartKey"] = key
            if self.scan_page_size:
                request["Limit"] = self.scan_page_size
            page = self.client.scan(TableName=self.table, ConsistentRead=True, **request)
            key = page.get("LastEvaluatedKey")
            yield [from_item(item) for item in page["Items"]], key is not None
            if key is None:
                return

    def _get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The items of ``keys`` that exist, by key, read strongly consistent in one ``BatchGetItem``; keys
        DynamoDB leaves unprocessed (throttled) are read one by one."""
        response = self.client.batch_get_item(
            RequestItems={
                self.table: {
                    "Keys": [to_item({tables.TENANTS_PK: key}) for key in keys],
                    "ConsistentRead": True,
                }
            }
        )
        found = {
            str(item[tables.TENANTS_PK]): item
            for item in (from_item(raw) for raw in response.get("Responses", {}).get(self.table, []))
        }
        unprocessed: Any = response.get("UnprocessedKeys") or {}
        for raw_key in unprocessed.get(self.table, {}).get("Keys", []):
            key = str(from_item(raw_key)[tables.TENANTS_PK])
            item = self._get(key)
            if item is not None:
                found[key] = item
        return found

    def _get(self, key: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table, Key=to_item({tables.TENANTS_PK: key}), ConsistentRead=True
        )
        return from_item(response["Item"]) if "Item" in response else None


def tenant_of(item: dict[str, Any]) -> Tenant:
    """The tenant a stored item holds, whichever names it was written with (``max_in_flight`` before
    ``max_concurrent_runs``); the item's other attributes (its job count) are not the tenant's."""
    return Tenant.model_validate({key: value for key, value in item.items() if key in _TENANT_ATTRIBUTES})


def _record_of(item: dict[str, Any]) -> TenantRecord:
    return TenantRecord(tenant=tenant_of(item), job_count=int(item.get("job_count") or 0))


def _unchanged(update: Update, name: str, value: Any) -> str:
    """A condition that the attribute still holds ``value`` (absent or NULL for None)."""
    attribute = update.name(name)
    if value is None:
        return f"attribute_not_exists({attribute}) OR attribute_type({attribute}, {update.value('NULL')})"
    return f"{attribute} = {update.value(value)}"


_TENANT_ATTRIBUTES = frozenset({*Tenant.model_fields, LEGACY_MAX_IN_FLIGHT})
# A change whose condition failed is read and tried again this many times (another operator's change).
_MAX_UPDATE_TRIES = 3
# One transaction holds 100 actions: the tenant's check, the new token, and the old ones.
_MAX_REVOKED_AT_ONCE = 98
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
    first request of a new window resets the counter instead, conditional on the window being older, so two
    requests opening the same window count once each. Which of the two to try first is guessed from the
    last window this process counted in: a tenant whose requests come more than a second apart (a worker's
    heartbeats, its long polls) opens a new window each time, in one write rather than a failed count and a
    reset. A refused request changes nothing.
    """

    def __init__(self, client: DynamoDBClient, *, table: str):
        self.client = client
        self.table = table
        self._last_window: dict[str, int] = {}

    def take(self, tenant_id: str, *, limit: int, now: datetime) -> None:
        """Count one request of ``tenant_id`` at ``now``, or raise :class:`RateLimited` if ``limit`` requests
        were already counted in this window."""
        window = RateWindow.at(now)
        key = to_item({tables.TENANTS_PK: tables.rate_limit_key(tenant_id)})
        opening = self._last_window.get(tenant_id, -1) < window.start
        for _ in range(_MAX_COUNTER_WRITES):
            if opening:
                if self._open(key, window):
                    self._last_window[tenant_id] = window.start
                    return
                opening = False  # another request opened it: count in it
                continue
            counted = self._count(key, window, limit)
            if counted is True:
                self._last_window[tenant_id] = window.start
                return
            if counted is False:
                break
            opening = True  # the stored window is an older one
        retry_after = window.retry_after(now)
        raise RateLimited(
            f"more than {limit} API requests per second; retry after {retry_after} s",
            retry_after=retry_after,
        )

    def _count(self, key: dict[str, Any], window: RateWindow, limit: int) -> bool | None:
        """Count in the stored window if it is this one and not full: True when counted, False when it is
        full, None when the stored window is an older one (or there is none)."""
        names = {"#window": tables.RATE_WINDOW, "#count": tables.RATE_COUNT}
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
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            old_item: Any = error.response.get("Item") or {}
        return False if int(from_item(old_item).get(tables.RATE_WINDOW, -1)) >= window.start else None

    def _open(self, key: dict[str, Any], window: RateWindow) -> bool:
        """Start this window with this request, unless the stored window is this one (or a later one)."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=key,
                UpdateExpression="SET #window = :window, #count = :one, #expires = :expires",
                ConditionExpression="attribute_not_exists(#window) OR #window < :window",
                ExpressionAttributeNames={
                    "#window": tables.RATE_WINDOW,
                    "#count": tables.RATE_COUNT,
                    "#expires": tables.TENANTS_TTL,
                },
                ExpressionAttributeValues=to_item(
                    {
                        ":one": 1,
                        ":window": window.start,
                        ":expires": window.start + int(COUNTER_LIFETIME.total_seconds()),
                    }
                ),
            )
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        return False
