"""The jobs table: a partition per job (its item and its lane), name locks, the due and by-tenant indexes."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import (
    cancellation_codes,
    decode_cursor,
    encode_cursor,
    from_item,
    to_item,
    transact,
    update_if,
)
from tickwork.adapters.expressions import Update
from tickwork.adapters.lanes import lane_from_item, lane_move
from tickwork.app.ports import Page
from tickwork.domain.flow import MAX_KEYS_KEPT, key_entry, keys_of
from tickwork.domain.lanes import Lane
from tickwork.domain.models import STORED, Job, JobStatus
from tickwork.domain.pools import pool_target_of
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.errors import InvalidInput, NameTaken, NotFound, QuotaExceeded, VersionConflict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_GET_SIZE = 100  # BatchGetItem's limit
# A job's spec longer than this is stored compressed (``spec_z``): every read of a job item pays a read unit
# per 4 KB, and a workflow's definition (its tasks' targets and dependencies) repeats itself. A spec below it
# is stored as it is, a plain job's item unchanged.
SPEC_COMPRESSED_FROM = 2048
# Jobs counted per request when a tenant's jobs are counted by status: pages of a known size rather than of
# 1 MB, so each request reads what it returns (a third less time for 10,000 jobs on the local stack).
COUNT_PAGE = 1000


def job_to_item(job: Job, *, due_shards: int) -> dict[str, Any]:
    dumped = job.model_dump(mode="json")
    values: dict[str, Any] = {
        tables.JOBS_PK: tables.job_key(job.tenant_id, job.job_id),
        tables.JOBS_SK: tables.JOB_SK,
        tables.SCHEMA_VERSION: tables.ITEM_SCHEMA,
        tables.JOB_TENANT: job.tenant_id,
        tables.JOB_ID: job.job_id,
        "name": job.name,
        "status": job.status.value,
        "version": job.version,
        "created_at": dumped["created_at"],
        "updated_at": dumped["updated_at"],
        **_spec_attribute(job.spec().model_dump_json()),
        "pause": job.pause.model_dump_json() if job.pause else None,
        "cancelled_at": dumped["cancelled_at"],
        "last_fire_at": to_epoch_ms(job.last_fire_at) if job.last_fire_at else None,
        tables.DUE_AT: to_epoch_ms(job.next_fire_at) if job.next_fire_at else None,
    }
    if job.status is JobStatus.ACTIVE and job.next_fire_at is not None:
        # Only active jobs with a fire left carry the shard, so only they appear in the due index.
        values[tables.DUE_SHARD] = tables.stable_shard(job.job_id, due_shards)
    return to_item(values)


def _spec_attribute(spec: str) -> dict[str, str | bytes]:
    if len(spec) > SPEC_COMPRESSED_FROM:
        return {"spec_z": zlib.compress(spec.encode(), 6)}
    return {"spec": spec}


def job_from_item(item: dict[str, Any]) -> Job:
    values = from_item(item)
    spec = values["spec"] if "spec" in values else zlib.decompress(bytes(values["spec_z"])).decode()
    fields: dict[str, Any] = json.loads(spec)
    fields.update(
        job_id=values[tables.JOB_ID],
        tenant_id=values[tables.JOB_TENANT],
        status=values["status"],
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        pause=json.loads(values["pause"]) if "pause" in values else None,
        cancelled_at=values.get("cancelled_at"),
        next_fire_at=from_epoch_ms(values[tables.DUE_AT]) if tables.DUE_AT in values else None,
        last_fire_at=from_epoch_ms(values["last_fire_at"]) if "last_fire_at" in values else None,
    )
    return Job.model_validate(fields, context={STORED: True})


class DynamoJobStore:
    def __init__(self, client: DynamoDBClient, *, table: str, tenants_table: str, due_shards: int):
        self.client = client
        self.table = table
        self.tenants_table = tenants_table
        self.due_shards = due_shards

    # --- writes -------------------------------------------------------------------------------------------
    def create(self, job: Job, *, max_jobs: int) -> None:
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": job_to_item(job, due_shards=self.due_shards),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": tables.JOBS_PK},
                }
            },
            self._claim_name(job),
            {"Update": self._count(job.tenant_id, +1, max_jobs=max_jobs, pool=_pool_of(job))},
        ]
        try:
            transact(self.client, items)
        except ClientError as error:
            codes = cancellation_codes(error)
            if len(codes) == 3 and codes[1] == "ConditionalCheckFailed":
                raise NameTaken(f"a job named {job.name!r} already exists", field="name") from error
            if len(codes) == 3 and codes[2] == "ConditionalCheckFailed":
                raise QuotaExceeded(f"the tenant's limit of {max_jobs} jobs is reached") from error
            raise

    def save(self, job: Job, *, expected_version: int, previous_name: str | None = None) -> None:
        """The job as changed (an edit, a pause, a resume), with its lane moved in the same transaction."""
        put = self._put_if_version(job, expected_version)
        names = [self._claim_name(job), self._release_name(job, previous_name)] if previous_name else []
        self._transact([{"Put": put}, *names, self._move_lane(job)], job, expected_version)

    def cancel(self, job: Job, *, expected_version: int) -> None:
        items: list[Any] = [
            {"Put": self._put_if_version(job, expected_version)},
            self._release_name(job, job.name),
        ]
        stored = self.get(job.tenant_id, job.job_id)
        if stored.status is not JobStatus.COMPLETED:  # a completed job gave its quota slot back already
            items.append({"Update": self._count(job.tenant_id, -1)})
        self._transact([*items, self._move_lane(job)], job, expected_version)

    def reopen(
        self, job: Job, *, expected_version: int, max_jobs: int, previous_name: str | None = None
    ) -> None:
        put = self._put_if_version(job, expected_version)
        put["ConditionExpression"] = "version = :expected AND #status = :completed"
        put["ExpressionAttributeNames"] = {"#status": "status"}
        put["ExpressionAttributeValues"] = to_item(
            {":expected": expected_version, ":completed": JobStatus.COMPLETED.value}
        )
        names = [self._claim_name(job), self._release_name(job, previous_name)] if previous_name else []
        items: list[Any] = [
            {"Put": put},
            *names,
            {"Update": self._count(job.tenant_id, +1, max_jobs=max_jobs)},
        ]
        try:
            transact(self.client, items)
        except ClientError as error:
            failed = [code == "ConditionalCheckFailed" for code in cancellation_codes(error)]
            if failed[:1] == [True]:
                raise self._version_conflict(job, expected_version) from error
            if previous_name and failed[1:2] == [True]:
                raise NameTaken(f"a job named {job.name!r} already exists", field="name") from error
            if failed[-1:] == [True]:
                raise QuotaExceeded(f"the tenant's limit of {max_jobs} jobs is reached") from error
            raise

    def advance_cursor(self, job: Job, next_fire_at: datetime | None, last_fire_at: datetime | None) -> bool:
        """Move the cursor, conditional on the job's version and on the cursor as read: of two planners that
        read the same job, one moves it (planners do not bump the version, so a tenant's ``If-Match`` is not
        broken by planning). With no fire left the job leaves the due index."""
        update = Update()
        if next_fire_at is None:
            update.remove(tables.DUE_AT, tables.DUE_SHARD)
            if last_fire_at is not None:
                update.set(last_fire_at=to_epoch_ms(last_fire_at))
        else:
            # The shard too, so a job left in a shard past a lowered count comes home (the index entry moves
            # with the cursor anyway: no extra unit).
            update.set_many(
                {
                    tables.DUE_AT: to_epoch_ms(next_fire_at),
                    tables.DUE_SHARD: tables.stable_shard(job.job_id, self.due_shards),
                }
            )
        update.where(f"{update.name('version')} = {update.value(job.version)}")
        update.where(f"{update.name('status')} = {update.value(JobStatus.ACTIVE.value)}")
        if job.next_fire_at is None:
            update.where(f"attribute_not_exists({update.name(tables.DUE_AT)})")
        else:
            update.where(f"{update.name(tables.DUE_AT)} = {update.value(to_epoch_ms(job.next_fire_at))}")
        return update_if(
            self.client, TableName=self.table, Key=self._key(job.tenant_id, job.job_id), **update.expression()
        )

    def complete(self, tenant_id: str, job_id: str, *, through: datetime | None = None) -> bool:
        """ACTIVE -> COMPLETED once the schedule has no fire left; its quota slot is given back."""
        update = Update().set(status=JobStatus.COMPLETED.value)
        update.remove(tables.DUE_AT, tables.DUE_SHARD)
        cursor = update.name(tables.DUE_AT)
        if through is None:
            update.where(f"attribute_not_exists({cursor})")
        else:
            # The planner sends a fire before it moves the cursor: the run may end first.
            last = update.value(to_epoch_ms(through))
            update.where(f"attribute_not_exists({cursor}) OR {cursor} <= {last}")
        update.where(f"{update.name('status')} = {update.value(JobStatus.ACTIVE.value)}")
        items: list[Any] = [
            {"Update": {"TableName": self.table, "Key": self._key(tenant_id, job_id), **update.expression()}},
            {"Update": self._count(tenant_id, -1)},
        ]
        try:
            transact(self.client, items)
        except ClientError as error:
            if cancellation_codes(error)[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    # --- reads --------------------------------------------------------------------------------------------
    def get(self, tenant_id: str, job_id: str) -> Job:
        response = self.client.get_item(
            TableName=self.table, Key=self._key(tenant_id, job_id), ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"job {job_id!r} not found", field="job_id")
        return job_from_item(response["Item"])

    def get_with_lane(self, tenant_id: str, job_id: str) -> tuple[Job, Lane]:
        """One consistent query of the job's partition: its item and its lane."""
        response = self.client.query(
            TableName=self.table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": tables.JOBS_PK},
            ExpressionAttributeValues=to_item({":pk": tables.job_key(tenant_id, job_id)}),
            ConsistentRead=True,
        )
        by_kind = {item[tables.JOBS_SK]["S"]: item for item in response["Items"]}
        if tables.JOB_SK not in by_kind:
            raise NotFound(f"job {job_id!r} not found", field="job_id")
        lane = lane_from_item(by_kind[tables.LANE_SK]) if tables.LANE_SK in by_kind else Lane()
        return job_from_item(by_kind[tables.JOB_SK]), lane

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Job]:
        """The jobs of ``(tenant_id, job_id)`` keys, a hundred to a request, in the order asked; missing ones
        are left out."""
        found: dict[tuple[str, str], Job] = {}
        for item in self._batch_get([self._key(t, j) for t, j in keys]):
            job = job_from_item(item)
            found[(job.tenant_id, job.job_id)] = job
        return [found[key] for key in keys if key in found]

    def get_many_with_lanes(self, keys: Sequence[tuple[str, str]]) -> list[tuple[Job, Lane]]:
        """The jobs of ``(tenant_id, job_id)`` keys with their lanes (empty when they have none), read
        together: both items of fifty jobs to a request. In the order asked; missing jobs are left out."""
        items = self._batch_get(
            [
                {**self._key(t, j), tables.JOBS_SK: {"S": kind}}
                for t, j in keys
                for kind in (tables.JOB_SK, tables.LANE_SK)
            ]
        )
        by_key = {(item[tables.JOBS_PK]["S"], item[tables.JOBS_SK]["S"]): item for item in items}
        found = []
        for tenant_id, job_id in keys:
            partition = tables.job_key(tenant_id, job_id)
            if (partition, tables.JOB_SK) not in by_key:
                continue
            lane = by_key.get((partition, tables.LANE_SK))
            found.append(
                (job_from_item(by_key[(partition, tables.JOB_SK)]), lane_from_item(lane) if lane else Lane())
            )
        return found

    def list_for_tenant(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[Job]:
        keys, next_cursor = self._page(tenant_id, status=status, limit=limit, cursor=cursor)
        return Page(self.get_many(keys), next_cursor)

    def list_with_lanes(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[tuple[Job, Lane]]:
        keys, next_cursor = self._page(tenant_id, status=status, limit=limit, cursor=cursor)
        return Page(self.get_many_with_lanes(keys), next_cursor)

    def _page(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> tuple[list[tuple[str, str]], str | None]:
        """A page of the by-tenant index, newest first: the jobs' keys, and the cursor of the next page."""
        index_keys = (tables.JOB_TENANT, tables.JOB_ID, tables.JOBS_PK, tables.JOBS_SK)
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": tables.JOBS_BY_TENANT_INDEX,
            "KeyConditionExpression": "#tenant = :tenant",
            "ScanIndexForward": False,
            "ExpressionAttributeNames": {"#tenant": tables.JOB_TENANT, "#status": "status"},
            "ExpressionAttributeValues": to_item({":tenant": tenant_id}),
        }
        if status is None:
            query["FilterExpression"] = "#status <> :cancelled"
            query["ExpressionAttributeValues"].update(to_item({":cancelled": JobStatus.CANCELLED.value}))
        else:
            query["FilterExpression"] = "#status = :status"
            query["ExpressionAttributeValues"].update(to_item({":status": status.value}))
        start = (
            decode_cursor(cursor, expected={tables.JOB_TENANT: tenant_id}, fields=index_keys)
            if cursor
            else None
        )
        if start is not None and not from_item(start)[tables.JOBS_PK].startswith(f"{tenant_id}/"):
            raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor")
        items, last_key = collect_page(self.client, query, limit, start, index_keys)
        keys = [(tenant_id, item[tables.JOB_ID]["S"]) for item in items]
        return keys, encode_cursor(last_key) if last_key else None

    def due_jobs(self, shard: int, *, until: datetime, limit: int) -> list[tuple[str, str]]:
        """(tenant_id, job_id) of the shard's jobs due by ``until``, earliest first."""
        found: list[tuple[str, str]] = []
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": tables.DUE_INDEX,
            "KeyConditionExpression": "#shard = :shard AND #due <= :until",
            "ExpressionAttributeNames": {"#shard": tables.DUE_SHARD, "#due": tables.DUE_AT},
            "ExpressionAttributeValues": to_item({":shard": shard, ":until": to_epoch_ms(until)}),
        }
        for page in self.client.get_paginator("query").paginate(
            **query, PaginationConfig={"MaxItems": limit}
        ):
            for item in page["Items"]:
                tenant_id, _, job_id = item[tables.JOBS_PK]["S"].partition("/")
                found.append((tenant_id, job_id))
        return found

    def count_by_status(self, tenant_id: str) -> dict[JobStatus, int]:
        counts: dict[JobStatus, int] = {}
        for item in self._query_all(
            PaginationConfig={"PageSize": COUNT_PAGE},
            IndexName=tables.JOBS_BY_TENANT_INDEX,
            KeyConditionExpression="#tenant = :tenant",
            ProjectionExpression="#status",
            ExpressionAttributeNames={"#tenant": tables.JOB_TENANT, "#status": "status"},
            ExpressionAttributeValues=to_item({":tenant": tenant_id}),
        ):
            status = JobStatus(item["status"]["S"])
            counts[status] = counts.get(status, 0) + 1
        return counts

    def note_pool(self, tenant_id: str, pool: str) -> None:
        """Put ``pool`` in the tenant's pools (its item's string set): one write, when a job names a pool it
        did not name before."""
        update = Update().add(tables.TENANT_POOLS, frozenset({pool}))
        update.where(f"attribute_exists({update.name(tables.TENANTS_PK)})")
        update_if(
            self.client,
            TableName=self.tenants_table,
            Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            **update.expression(),
        )

    def note_concurrency_key(self, tenant_id: str, key: str, max_concurrency: int) -> None:
        """Put the key and its limit in the tenant's keys (its item's string set): one write, unless the set
        holds its cap of others already."""
        update = Update()
        keys, entry = update.name(tables.TENANT_CONCURRENCY_KEYS), key_entry(key, max_concurrency)
        update.add(tables.TENANT_CONCURRENCY_KEYS, frozenset({entry}))
        update.where(f"attribute_exists({update.name(tables.TENANTS_PK)})")
        update.where(
            f"attribute_not_exists({keys}) OR size({keys}) < {update.value(MAX_KEYS_KEPT)}"
            f" OR contains({keys}, {update.value(entry)})"
        )
        update_if(
            self.client,
            TableName=self.tenants_table,
            Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            **update.expression(),
        )

    def concurrency_keys(self, tenant_id: str) -> dict[str, int]:
        """The concurrency keys the tenant's jobs have named: one read of the tenant's item."""
        response = self.client.get_item(
            TableName=self.tenants_table,
            Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            ProjectionExpression="#keys",
            ExpressionAttributeNames={"#keys": tables.TENANT_CONCURRENCY_KEYS},
        )
        return keys_of(response.get("Item", {}).get(tables.TENANT_CONCURRENCY_KEYS, {}).get("SS", []))

    def pools(self, tenant_id: str) -> list[str]:
        """The pools the tenant's jobs have named: one read of the tenant's item."""
        response = self.client.get_item(
            TableName=self.tenants_table,
            Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            ProjectionExpression="#pools",
            ExpressionAttributeNames={"#pools": tables.TENANT_POOLS},
        )
        named = response.get("Item", {}).get(tables.TENANT_POOLS, {}).get("SS", [])
        return sorted(named)

    # --- helpers ------------------------------------------------------------------------------------------
    def _key(self, tenant_id: str, job_id: str) -> dict[str, Any]:
        return to_item({tables.JOBS_PK: tables.job_key(tenant_id, job_id), tables.JOBS_SK: tables.JOB_SK})

    def _count(
        self, tenant_id: str, delta: int, *, max_jobs: int | None = None, pool: str | None = None
    ) -> dict[str, Any]:
        """The tenant's job count: up one (within ``max_jobs``) on create, down on cancel or completion; and
        a new job's pool put in the tenant's pools, in the same write."""
        update = Update().add("job_count", delta)
        if pool is not None:
            update.add(tables.TENANT_POOLS, frozenset({pool}))
        if max_jobs is not None:
            count = update.name("job_count")
            update.where(f"attribute_exists({update.name(tables.TENANTS_PK)})")
            update.where(f"attribute_not_exists({count}) OR {count} < {update.value(max_jobs)}")
        return {
            "TableName": self.tenants_table,
            "Key": to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            **update.expression(),
        }

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items of ``keys`` that exist, a hundred keys to a request, strongly consistent."""
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), BATCH_GET_SIZE):
            wanted: dict[str, Any] = {
                self.table: {"Keys": keys[start : start + BATCH_GET_SIZE], "ConsistentRead": True}
            }
            while wanted:
                response = self.client.batch_get_item(RequestItems=wanted)
                items += response["Responses"].get(self.table, [])
                wanted = dict(response.get("UnprocessedKeys") or {})
        return items

    def _put_if_version(self, job: Job, expected_version: int) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": job_to_item(job, due_shards=self.due_shards),
            "ConditionExpression": "version = :expected",
            "ExpressionAttributeValues": to_item({":expected": expected_version}),
        }

    def _move_lane(self, job: Job) -> dict[str, Any]:
        """A job's change moves its lane: a fire read ahead of it claims the lane on the version it read, so
        that claim fails and the fire is decided again on the job as changed
        (:func:`tickwork.domain.arrival.reads_ahead`)."""
        key = to_item(
            {tables.JOBS_PK: tables.job_key(job.tenant_id, job.job_id), tables.JOBS_SK: tables.LANE_SK}
        )
        return {"Update": {"TableName": self.table, **lane_move(key)}}

    def _claim_name(self, job: Job) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": to_item(
                    {
                        tables.JOBS_PK: tables.name_key(job.tenant_id, job.name),
                        tables.JOBS_SK: tables.NAME_SK,
                        "owner": job.job_id,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": tables.JOBS_PK},
            }
        }

    def _release_name(self, job: Job, name: str) -> dict[str, Any]:
        return {
            "Delete": {
                "TableName": self.table,
                "Key": to_item(
                    {tables.JOBS_PK: tables.name_key(job.tenant_id, name), tables.JOBS_SK: tables.NAME_SK}
                ),
                "ConditionExpression": "#owner = :job_id",
                "ExpressionAttributeNames": {"#owner": "owner"},
                "ExpressionAttributeValues": to_item({":job_id": job.job_id}),
            }
        }

    def _transact(self, items: list[Any], job: Job, expected_version: int) -> None:
        try:
            transact(self.client, items)
        except ClientError as error:
            codes = cancellation_codes(error)
            if codes and codes[0] == "ConditionalCheckFailed":
                raise self._version_conflict(job, expected_version) from error
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                raise NameTaken(f"a job named {job.name!r} already exists", field="name") from error
            raise

    def _version_conflict(self, job: Job, expected_version: int) -> VersionConflict:
        return VersionConflict(
            f"job {job.job_id!r} changed meanwhile; it is no longer at version {expected_version}",
            field="version",
        )

    def _query_all(self, **query: Any) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(TableName=self.table, **query):
            yield from page["Items"]


def collect_page(
    client: DynamoDBClient,
    query: dict[str, Any],
    limit: int,
    start: dict[str, Any] | None,
    key_fields: tuple[str, ...],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Up to ``limit`` items of a filtered query, and the key to resume after the last one returned (None
    when nothing is left). Filters apply after ``Limit``, so this keeps reading until the page is full."""
    items: list[dict[str, Any]] = []
    while True:
        request = dict(query, Limit=limit + 1 - len(items))
        if start is not None:
            request["ExclusiveStartKey"] = start
        response = client.query(**request)
        items.extend(response["Items"])
        if len(items) > limit:
            items = items[:limit]
            return items, {field: items[-1][field] for field in key_fields}
        start = response.get("LastEvaluatedKey")
        if not start:
            return items, None


def planners_shard_count(client: DynamoDBClient, *, tenants_table: str) -> int | None:
    """The highest due-shard count the planners have used (None before any planned): what a tool outside
    the deployment's functions writes jobs with, so that the planners find them. A shard past a lowered
    count is one the sweeping planner moves home."""
    key = to_item({tables.TENANTS_PK: tables.SHARD_COUNT_PK})
    item = client.get_item(TableName=tenants_table, Key=key).get("Item")
    return int(from_item(item)[tables.SHARD_COUNT_HIGH]) if item else None


class DynamoDueShards:
    """Stray due shards: when the shard count is lowered, jobs written under the higher count sit in shards
    no planner queries. The highest count used is kept in one item; the planner that sweeps also plans and
    moves the jobs of the shards past the current count, then forgets them once they are empty."""

    def __init__(self, client: DynamoDBClient, *, table: str, tenants_table: str, due_shards: int):
        self.client = client
        self.table = table
        self.tenants_table = tenants_table
        self.due_shards = due_shards

    def strays(self) -> list[int]:
        key = to_item({tables.TENANTS_PK: tables.SHARD_COUNT_PK})
        item = self.client.get_item(TableName=self.tenants_table, Key=key).get("Item")
        high = int(from_item(item)[tables.SHARD_COUNT_HIGH]) if item else 0
        if high < self.due_shards:
            update = Update().set_many({tables.SHARD_COUNT_HIGH: self.due_shards})
            name, count = update.name(tables.SHARD_COUNT_HIGH), update.value(self.due_shards)
            update.where(f"attribute_not_exists({name}) OR {name} < {count}")
            update_if(self.client, TableName=self.tenants_table, Key=key, **update.expression())
            return []
        return list(range(self.due_shards, high))

    def rehome(self, shard: int, *, limit: int) -> bool:
        response = self.client.query(
            TableName=self.table,
            IndexName=tables.DUE_INDEX,
            KeyConditionExpression="#shard = :shard",
            ExpressionAttributeNames={"#shard": tables.DUE_SHARD},
            ExpressionAttributeValues=to_item({":shard": shard}),
            Limit=limit,
        )
        for item in response["Items"]:
            job_id = item[tables.JOBS_PK]["S"].partition("/")[2]
            update = Update().set_many({tables.DUE_SHARD: tables.stable_shard(job_id, self.due_shards)})
            update.where(f"{update.name(tables.DUE_SHARD)} = {update.value(shard)}")
            key = {tables.JOBS_PK: item[tables.JOBS_PK], tables.JOBS_SK: item[tables.JOBS_SK]}
            update_if(self.client, TableName=self.table, Key=key, **update.expression())
        return not response["Items"]

    def settle(self, strays: Sequence[int]) -> None:
        if not strays:
            return
        update = Update().set_many({tables.SHARD_COUNT_HIGH: self.due_shards})
        # Unless a planner with a higher count (a deployment rolling out) raised it meanwhile.
        update.where(f"{update.name(tables.SHARD_COUNT_HIGH)} = {update.value(max(strays) + 1)}")
        update_if(
            self.client,
            TableName=self.tenants_table,
            Key=to_item({tables.TENANTS_PK: tables.SHARD_COUNT_PK}),
            **update.expression(),
        )


def _pool_of(job: Job) -> str | None:
    target = pool_target_of(job)
    return target.pool if target is not None else None
