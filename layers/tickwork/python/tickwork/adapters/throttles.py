"""Tenants' run-start throttles in DynamoDB: one small item per throttle share in the tenants table
(``throttle#<tenant>#<shard>``), holding its GCRA time in microseconds."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tickwork import tables
from tickwork.adapters.dynamo import is_conditional_failure, to_item
from tickwork.adapters.expressions import Update

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# An item idle this long expires; a missing item is a throttle at rest, so nothing is lost by it.
IDLE_SECONDS = 86_400
_TRIES = 10


class DynamoTenantThrottles:
    def __init__(self, client: DynamoDBClient, *, table: str):
        self.client = client
        self.table = table
        # The last time seen per item: whether the throttle is busy (push its time on) or at rest (start
        # from now) is guessed from it, so a start is one write unless the guess was wrong.
        self._seen: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def advance(self, tenant_id: str, shard: int, *, now_us: int, interval_us: int) -> int:
        with self._lock:
            busy = self._seen.get((tenant_id, shard), 0) >= now_us
        for _ in range(_TRIES):
            moved = self._push(tenant_id, shard, now_us, interval_us) if busy else None
            if moved is None:
                moved = self._restart(tenant_id, shard, now_us, interval_us)
            if moved is not None:
                with self._lock:
                    self._seen[(tenant_id, shard)] = moved
                return moved
            busy = True  # another start moved it past now meanwhile
        raise RuntimeError(f"the throttle of tenant {tenant_id!r} kept changing")

    def time_of(self, tenant_id: str, shard: int) -> int | None:
        """The item's time as stored; None when it has none (a throttle at rest)."""
        answer = self.client.get_item(
            TableName=self.table,
            Key=to_item({tables.TENANTS_PK: tables.throttle_key(tenant_id, shard)}),
            ProjectionExpression="#tat",
            ExpressionAttributeNames={"#tat": tables.THROTTLE_TAT},
        )
        tat = answer.get("Item", {}).get(tables.THROTTLE_TAT)
        return int(tat["N"]) if tat else None

    def _push(self, tenant_id: str, shard: int, now_us: int, interval_us: int) -> int | None:
        """A busy throttle (its time at or past now): its time moved on by one interval."""
        update = Update()
        tat = update.name(tables.THROTTLE_TAT)
        update.set_raw(f"{tat} = {tat} + {update.value(interval_us)}")
        update.where(f"{tat} >= {update.value(now_us)}")
        return self._apply(tenant_id, shard, update, now_us)

    def _restart(self, tenant_id: str, shard: int, now_us: int, interval_us: int) -> int | None:
        """A throttle at rest (no item, or its time past): its time set to one interval from now."""
        update = Update().set_many({tables.THROTTLE_TAT: now_us + interval_us})
        tat = update.name(tables.THROTTLE_TAT)
        update.where(f"attribute_not_exists({tat}) OR {tat} < {update.value(now_us)}")
        return self._apply(tenant_id, shard, update, now_us)

    def _apply(self, tenant_id: str, shard: int, update: Update, now_us: int) -> int | None:
        update.set_many({tables.TENANTS_TTL: now_us // 1_000_000 + IDLE_SECONDS})
        try:
            answer = self.client.update_item(
                TableName=self.table,
                Key=to_item({tables.TENANTS_PK: tables.throttle_key(tenant_id, shard)}),
                ReturnValues="UPDATED_NEW",
                **update.expression(),
            )
        except Exception as error:
            if is_conditional_failure(error):
                return None
            raise
        return int(answer["Attributes"][tables.THROTTLE_TAT]["N"])
