"""A job's lane item (the jobs table, the job's partition, sort key "lane"): its holders and its version."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import from_item, is_conditional_failure, to_item
from tickwork.adapters.expressions import Update
from tickwork.domain.lanes import Holder, Lane
from tickwork.domain.priority import PRIORITIES, Priority
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


# On a slot item: the runs waiting for its limit, by run id, each with when its note lapses (epoch ms).
WAITERS = "waiters"
# On a slot item: each priority's note that its runs wait for the limit, until when (epoch ms), one attribute
# a priority so a note is one SET with no map to create first.
AHEAD = "ahead_"
_WAITER_TRIES = 3
BATCH_GET_SIZE = 100  # BatchGetItem's most keys


def holder_to_value(holder: Holder) -> dict[str, Any]:
    return {
        "token": holder.token,
        "attempt": holder.attempt,
        "fire": to_epoch_ms(holder.scheduled_for),
        "started": to_epoch_ms(holder.started_at),
        "lease": to_epoch_ms(holder.lease_until),
        "worker": holder.worker_id,
    }


def lane_from_item(item: dict[str, Any]) -> Lane:
    values = from_item(item)
    holders = {
        run_id: Holder(
            run_id=run_id,
            token=entry["token"],
            attempt=entry["attempt"],
            scheduled_for=from_epoch_ms(entry["fire"]),
            started_at=from_epoch_ms(entry["started"]),
            lease_until=from_epoch_ms(entry["lease"]),
            worker_id=entry["worker"],
        )
        for run_id, entry in (values.get("holders") or {}).items()
    }
    chain, first = values.get("chain_until"), values.get("chain_from")
    return Lane(
        version=values.get("version", 0),
        moved=values.get("moved", 0),
        holders=holders,
        chain_until=from_epoch_ms(chain) if chain else None,
        chain_from=from_epoch_ms(first) if first else None,
        waiters={run_id: from_epoch_ms(until) for run_id, until in (values.get(WAITERS) or {}).items()},
        ahead={
            priority: from_epoch_ms(values[AHEAD + priority])
            for priority in PRIORITIES
            if AHEAD + priority in values
        },
    )


def lane_move(key: dict[str, Any]) -> dict[str, Any]:
    """The update that moves a lane to its next version (making the item if there is none): the write a
    pause, an edit, a cancel of the job or of one of its runs adds, so a claim on the version read before
    them fails (:func:`tickwork.domain.arrival.reads_ahead`)."""
    update = Update()
    update.add("version", 1)
    update.add("moved", 1)
    update.set_raw(f"{update.name(tables.SCHEMA_VERSION)} = {update.value(tables.ITEM_SCHEMA)}")
    return {"Key": key, **update.expression()}


class HolderItems:
    """Items of holders (a job's lane, a tenant's in-flight slots): read, claimed at a version, released."""

    def __init__(self, client: DynamoDBClient, *, table: str, key: Callable[[str, str], dict[str, Any]]):
        self.client = client
        self.table = table
        self.key = key

    def get(self, owner: str, part: str) -> Lane:
        response = self.client.get_item(TableName=self.table, Key=self.key(owner, part), ConsistentRead=True)
        return lane_from_item(response["Item"]) if "Item" in response else Lane()

    def claim(
        self,
        owner: str,
        part: str,
        *,
        seen: Lane,
        holder: Holder,
        drop: Sequence[str],
        forget: Sequence[str] = (),
    ) -> Lane | None:
        """Add the holder and drop the ended ones, conditional on the version read: one write, the lease.
        ``forget``: waiting notes (of ``seen``) to drop in the same write, the holder's own among them."""
        update = Update()
        for run_id in forget:
            update.remove_raw(f"{update.name(WAITERS)}.{update.name(run_id)}")
        if seen.version == 0 or not seen.holders:
            kept = {r: holder_to_value(h) for r, h in seen.holders.items() if r not in drop}
            update.set(holders={**kept, holder.run_id: holder_to_value(holder)})
        else:
            holders = update.name("holders")
            update.set_raw(
                f"{holders}.{update.name(holder.run_id)} = {update.value(holder_to_value(holder))}"
            )
            for run_id in drop:
                update.remove_raw(f"{holders}.{update.name(run_id)}")
        return self._at_version(owner, part, seen, update)

    def heartbeat(self, owner: str, part: str, holder: Holder) -> bool:
        """Push the lease while the holder still holds with its token (and bump the version, so a claim that
        read the old lease does not write over the new one)."""
        update = Update()
        entry = f"{update.name('holders')}.{update.name(holder.run_id)}"
        update.set_raw(f"{entry}.{update.name('lease')} = {update.value(to_epoch_ms(holder.lease_until))}")
        version = update.name("version")
        update.set_raw(f"{version} = {version} + {update.value(1)}")
        update.where(f"{entry}.{update.name('token')} = {update.value(holder.token)}")
        return self._if(owner, part, update)

    def release(self, owner: str, part: str, run_id: str, token: int) -> bool:
        """Let a holder go. Releasing only frees room, so it needs no new version."""
        update = Update()
        entry = f"{update.name('holders')}.{update.name(run_id)}"
        update.remove_raw(entry)
        update.where(f"{entry}.{update.name('token')} = {update.value(token)}")
        return self._if(owner, part, update)

    def note_waiter(
        self, owner: str, part: str, run_id: str, until: datetime, *, seen: Lane, drop: Sequence[str]
    ) -> None:
        """Note the run as waiting until ``until`` and drop the lapsed notes ``drop``; nothing when the run
        holds a slot of this item meanwhile. Holders are untouched, so no version is taken."""
        in_map = bool(seen.waiters)  # a guess: an item whose notes were all dropped keeps an empty map
        for _ in range(_WAITER_TRIES):
            update = Update()
            waiters, run = update.name(WAITERS), update.name(run_id)
            if in_map:
                update.set_raw(f"{waiters}.{run} = {update.value(to_epoch_ms(until))}")
                for lapsed in drop:
                    if lapsed != run_id:
                        update.remove_raw(f"{waiters}.{update.name(lapsed)}")
                update.where(f"attribute_exists({waiters})")
            else:
                update.set_raw(f"{waiters} = {update.value({run_id: to_epoch_ms(until)})}")
                update.where(f"attribute_not_exists({waiters})")
            update.where(f"attribute_not_exists({update.name('holders')}.{run})")
            if self._if(owner, part, update):
                return
            in_map = not in_map

    def note_ahead(self, owner: str, part: str, priority: Priority, until: datetime) -> None:
        """Note that runs of ``priority`` wait for the item's limit until ``until`` (never moved back).
        Holders are untouched, so no version is taken."""
        update = Update()
        note = update.name(AHEAD + priority)
        update.set_raw(f"{note} = {update.value(to_epoch_ms(until))}")
        update.where(f"attribute_not_exists({note}) OR {note} < {update.value(to_epoch_ms(until))}")
        self._if(owner, part, update)

    def forget_waiter(self, owner: str, part: str, run_id: str) -> None:
        """Drop the run's waiting note, if it has one (it took a slot of another item of the limit)."""
        update = Update()
        entry = f"{update.name(WAITERS)}.{update.name(run_id)}"
        update.remove_raw(entry)
        update.where(f"attribute_exists({entry})")
        self._if(owner, part, update)

    def set_chain(
        self,
        owner: str,
        part: str,
        *,
        seen: Lane,
        chain_until: datetime | None,
        chain_from: datetime | None = None,
    ) -> Lane | None:
        update = Update()
        if chain_until is None:
            update.remove("chain_until")
        else:
            update.set(chain_until=to_epoch_ms(chain_until))
        if chain_from is None:
            update.remove("chain_from")
        else:
            update.set(chain_from=to_epoch_ms(chain_from))
        return self._at_version(owner, part, seen, update)

    def _if(self, owner: str, part: str, update: Update) -> bool:
        try:
            self.client.update_item(TableName=self.table, Key=self.key(owner, part), **update.expression())
        except ClientError as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def _at_version(self, owner: str, part: str, seen: Lane, update: Update) -> Lane | None:
        version = update.name("version")
        update.set_raw(f"{version} = {update.value(seen.version + 1)}")
        update.set_raw(f"{update.name(tables.SCHEMA_VERSION)} = {update.value(tables.ITEM_SCHEMA)}")
        if seen.version == 0:
            update.where(f"attribute_not_exists({version}) OR {version} = {update.value(0)}")
        else:
            update.where(f"{version} = {update.value(seen.version)}")
        try:
            self.client.update_item(
                TableName=self.table,
                Key=self.key(owner, part),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.expression(),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            old: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
            return lane_from_item(old) if old else Lane()
        return None


class DynamoLanes:
    """Each job's lane: the jobs table, the job's partition, sort key "lane"."""

    def __init__(self, client: DynamoDBClient, *, table: str):
        self.items = HolderItems(
            client,
            table=table,
            key=lambda tenant_id, job_id: to_item(
                {tables.JOBS_PK: tables.job_key(tenant_id, job_id), tables.JOBS_SK: tables.LANE_SK}
            ),
        )

    def claim(
        self, tenant_id: str, job_id: str, *, seen: Lane, holder: Holder, drop: Sequence[str]
    ) -> Lane | None:
        return self.items.claim(tenant_id, job_id, seen=seen, holder=holder, drop=drop)

    def heartbeat(self, tenant_id: str, job_id: str, holder: Holder) -> bool:
        return self.items.heartbeat(tenant_id, job_id, holder)

    def set_chain(
        self,
        tenant_id: str,
        job_id: str,
        *,
        seen: Lane,
        chain_until: datetime | None,
        chain_from: datetime | None = None,
    ) -> Lane | None:
        return self.items.set_chain(
            tenant_id, job_id, seen=seen, chain_until=chain_until, chain_from=chain_from
        )

    def get(self, tenant_id: str, job_id: str) -> Lane:
        return self.items.get(tenant_id, job_id)

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Lane]:
        found: dict[tuple[str, str], Lane] = dict.fromkeys(keys, Lane())
        partitions = {tables.job_key(t, j): (t, j) for t, j in keys}
        unique = list(partitions)
        for start in range(0, len(unique), BATCH_GET_SIZE):
            wanted: dict[str, Any] = {
                self.items.table: {
                    "Keys": [
                        to_item({tables.JOBS_PK: partition, tables.JOBS_SK: tables.LANE_SK})
                        for partition in unique[start : start + BATCH_GET_SIZE]
                    ],
                    "ConsistentRead": True,
                }
            }
            while wanted:
                response = self.items.client.batch_get_item(RequestItems=wanted)
                for item in response["Responses"].get(self.items.table, []):
                    found[partitions[item[tables.JOBS_PK]["S"]]] = lane_from_item(item)
                wanted = dict(response.get("UnprocessedKeys") or {})
        return found

    def release(self, tenant_id: str, job_id: str, run_id: str, token: int) -> bool:
        return self.items.release(tenant_id, job_id, run_id, token)

    def move(self, tenant_id: str, job_id: str) -> None:
        self.items.client.update_item(
            TableName=self.items.table, **lane_move(self.items.key(tenant_id, job_id))
        )


class DynamoTenantSlots:
    """A tenant's in-flight limit, split over a few items of ten slots (the tenants table,
    ``inflight#<tenant>#<shard>``), so no item takes every run's write and each stays small."""

    def __init__(self, client: DynamoDBClient, *, table: str):
        self.items = HolderItems(
            client,
            table=table,
            key=lambda tenant_id, shard: to_item(
                {tables.TENANTS_PK: tables.in_flight_key(tenant_id, int(shard))}
            ),
        )

    def get(self, tenant_id: str, shard: int) -> Lane:
        return self.items.get(tenant_id, str(shard))

    def claim(
        self,
        tenant_id: str,
        shard: int,
        *,
        seen: Lane,
        holder: Holder,
        drop: Sequence[str],
        forget: Sequence[str] = (),
    ) -> Lane | None:
        return self.items.claim(tenant_id, str(shard), seen=seen, holder=holder, drop=drop, forget=forget)

    def note_waiter(
        self, tenant_id: str, shard: int, run_id: str, until: datetime, *, seen: Lane, drop: Sequence[str]
    ) -> None:
        self.items.note_waiter(tenant_id, str(shard), run_id, until, seen=seen, drop=drop)

    def forget_waiter(self, tenant_id: str, shard: int, run_id: str) -> None:
        self.items.forget_waiter(tenant_id, str(shard), run_id)

    def note_ahead(self, tenant_id: str, shard: int, priority: Priority, until: datetime) -> None:
        self.items.note_ahead(tenant_id, str(shard), priority, until)

    def heartbeat(self, tenant_id: str, shard: int, holder: Holder) -> bool:
        return self.items.heartbeat(tenant_id, str(shard), holder)

    def release(self, tenant_id: str, shard: int, run_id: str, token: int) -> bool:
        return self.items.release(tenant_id, str(shard), run_id, token)
