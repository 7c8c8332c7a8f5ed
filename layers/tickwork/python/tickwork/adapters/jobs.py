"""The jobs table: job items, per-tenant name locks, and the sparse sharded due index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import (
    cancellation_codes,
    decode_cursor,
    encode_cursor,
    from_item,
    is_conditional_failure,
    to_item,
    update_if,
)
from tickwork.adapters.expressions import Update
from tickwork.domain.models import Job, JobSpec, JobStatus
from tickwork.domain.ports import Page
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.errors import NameTaken, NotFound, QuotaExceeded, VersionConflict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_SPEC_FIELDS = frozenset(JobSpec.model_fields)
BATCH_GET_SIZE = 100  # BatchGetItem's limit


def job_to_item(job: Job, *, due_shards: int) -> dict[str, Any]:
    values: dict[str, Any] = {
        tables.JOBS_PK: job.tenant_id,
        tables.JOBS_SK: tables.job_sort_key(job.job_id),
        "job_id": job.job_id,
        "tenant_id": job.tenant_id,
        "name": job.name,
        "status": job.status.value,
        "version": job.version,
        "created_at": job.model_dump(mode="json")["created_at"],
        "updated_at": job.model_dump(mode="json")["updated_at"],
        "spec": job.spec().model_dump_json(),
        "pause": job.pause.model_dump_json() if job.pause else None,
        "cancelled_at": job.model_dump(mode="json")["cancelled_at"],
        tables.DUE_AT: to_epoch_ms(job.next_fire_at) if job.next_fire_at else None,
    }
    if job.status is JobStatus.ACTIVE and job.next_fire_at is not None:
        # Only active jobs with a fire left carry the shard, so only they appear in the due index.
        values[tables.DUE_SHARD] = tables.stable_shard(job.job_id, due_shards)
    return to_item(values)


def job_from_item(item: dict[str, Any]) -> Job:
    values = from_item(item)
    fields: dict[str, Any] = json.loads(values["spec"])
    fields.update(
        job_id=values["job_id"],
        tenant_id=values["tenant_id"],
        status=values["status"],
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        pause=json.loads(values["pause"]) if "pause" in values else None,
        cancelled_at=values.get("cancelled_at"),
        next_fire_at=from_epoch_ms(values[tables.DUE_AT]) if tables.DUE_AT in values else None,
    )
    return Job.model_validate(fields)


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
            {
                "Update": {
                    "TableName": self.tenants_table,
                    "Key": to_item({tables.TENANTS_PK: tables.tenant_key(job.tenant_id)}),
                    "UpdateExpression": "ADD job_count :one",
                    "ConditionExpression": (
                        "attribute_exists(#pk) AND (attribute_not_exists(job_count) OR job_count < :max)"
                    ),
                    "ExpressionAttributeNames": {"#pk": tables.TENANTS_PK},
                    "ExpressionAttributeValues": to_item({":one": 1, ":max": max_jobs}),
                }
            },
        ]
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            codes = cancellation_codes(error)
            if len(codes) == 3 and codes[1] == "ConditionalCheckFailed":
                raise NameTaken(f"a job named {job.name!r} already exists", field="name") from error
            if len(codes) == 3 and codes[2] == "ConditionalCheckFailed":
                raise QuotaExceeded(f"the tenant's limit of {max_jobs} jobs is reached") from error
            raise

    def save(self, job: Job, *, expected_version: int, previous_name: str | None = None) -> None:
        put = self._put_if_version(job, expected_version)
        if previous_name is None:
            try:
                self.client.put_item(**put)
            except ClientError as error:
                if is_conditional_failure(error):
                    raise self._version_conflict(job, expected_version) from error
                raise
            return
        self._transact(
            [{"Put": put}, self._claim_name(job), self._release_name(job, previous_name)],
            job,
            expected_version,
        )

    def cancel(self, job: Job, *, expected_version: int) -> None:
        tenant_update = {
            "Update": {
                "TableName": self.tenants_table,
                "Key": to_item({tables.TENANTS_PK: tables.tenant_key(job.tenant_id)}),
                "UpdateExpression": "ADD job_count :minus_one",
                "ExpressionAttributeValues": to_item({":minus_one": -1}),
            }
        }
        put = self._put_if_version(job, expected_version)
        self._transact(
            [{"Put": put}, self._release_name(job, job.name), tenant_update], job, expected_version
        )

    def advance_cursor(self, job: Job, next_fire_at: datetime | None) -> bool:
        """Move the cursor, conditional on the job's version; planners do not bump the version, so a
        tenant's ``If-Match`` is not broken by planning. With no fire left the job leaves the due index."""
        update = Update()
        if next_fire_at is None:
            update.remove(tables.DUE_AT, tables.DUE_SHARD)
        else:
            update.set_many({tables.DUE_AT: to_epoch_ms(next_fire_at)})
        update.where(f"{update.name('version')} = {update.value(job.version)}")
        update.where(f"{update.name('status')} = {update.value(JobStatus.ACTIVE.value)}")
        return self._try_update(job, update)

    def complete_if_exhausted(self, job: Job) -> bool:
        """ACTIVE -> COMPLETED once the schedule has no fire left (its last run has finished)."""
        update = Update().set(status=JobStatus.COMPLETED.value)
        update.where(f"attribute_not_exists({update.name(tables.DUE_AT)})")
        update.where(f"{update.name('status')} = {update.value(JobStatus.ACTIVE.value)}")
        update.where(f"{update.name('version')} = {update.value(job.version)}")
        return self._try_update(job, update)

    def _try_update(self, job: Job, update: Update) -> bool:
        return update_if(
            self.client, TableName=self.table, Key=self._key(job.tenant_id, job.job_id), **update.expression()
        )

    # --- reads --------------------------------------------------------------------------------------------
    def get(self, tenant_id: str, job_id: str) -> Job:
        response = self.client.get_item(
            TableName=self.table, Key=self._key(tenant_id, job_id), ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"job {job_id!r} not found", field="job_id")
        return job_from_item(response["Item"])

    def get_many(self, keys: list[tuple[str, str]]) -> list[Job]:
        """The jobs of ``(tenant_id, job_id)`` keys, a hundred to a request, in the order asked; missing
        ones are left out."""
        found: dict[tuple[str, str], Job] = {}
        for start in range(0, len(keys), BATCH_GET_SIZE):
            wanted: dict[str, Any] = {
                self.table: {
                    "Keys": [
                        self._key(tenant_id, job_id)
                        for tenant_id, job_id in keys[start : start + BATCH_GET_SIZE]
                    ],
                    "ConsistentRead": True,
                }
            }
            while wanted:
                response = self.client.batch_get_item(RequestItems=wanted)
                for item in response["Responses"].get(self.table, []):
                    job = job_from_item(item)
                    found[(job.tenant_id, job.job_id)] = job
                wanted = dict(response.get("UnprocessedKeys") or {})
        return [found[key] for key in keys if key in found]

    def list_for_tenant(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[Job]:
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :tenant AND begins_with(#sk, :prefix)",
            "ScanIndexForward": False,
            "ExpressionAttributeNames": {"#pk": tables.JOBS_PK, "#sk": tables.JOBS_SK, "#status": "status"},
            "ExpressionAttributeValues": to_item({":tenant": tenant_id, ":prefix": tables.JOB_SK_PREFIX}),
        }
        if status is None:
            query["FilterExpression"] = "#status <> :cancelled"
            query["ExpressionAttributeValues"].update(to_item({":cancelled": JobStatus.CANCELLED.value}))
        else:
            query["FilterExpression"] = "#status = :status"
            query["ExpressionAttributeValues"].update(to_item({":status": status.value}))
        start = (
            decode_cursor(
                cursor, expected={tables.JOBS_PK: tenant_id}, fields=(tables.JOBS_PK, tables.JOBS_SK)
            )
            if cursor
            else None
        )
        items, last_key = collect_page(self.client, query, limit, start, (tables.JOBS_PK, tables.JOBS_SK))
        return Page([job_from_item(item) for item in items], encode_cursor(last_key) if last_key else None)

    def due_job_ids(self, shard: int, *, until: datetime, limit: int) -> list[tuple[str, str, int]]:
        """(tenant_id, job_id, next_fire_at ms) of the shard's jobs due by ``until``, earliest first."""
        found: list[tuple[str, str, int]] = []
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
                values = from_item(item)
                found.append(
                    (
                        values[tables.JOBS_PK],
                        values[tables.JOBS_SK].removeprefix(tables.JOB_SK_PREFIX),
                        values[tables.DUE_AT],
                    )
                )
        return found

    def count_by_status(self, tenant_id: str) -> dict[JobStatus, int]:
        counts: dict[JobStatus, int] = {}
        for item in self._query_all(
            KeyConditionExpression="#pk = :tenant AND begins_with(#sk, :prefix)",
            ProjectionExpression="#status",
            ExpressionAttributeNames={"#pk": tables.JOBS_PK, "#sk": tables.JOBS_SK, "#status": "status"},
            ExpressionAttributeValues=to_item({":tenant": tenant_id, ":prefix": tables.JOB_SK_PREFIX}),
        ):
            status = JobStatus(item["status"]["S"])
            counts[status] = counts.get(status, 0) + 1
        return counts

    # --- helpers ------------------------------------------------------------------------------------------
    def _key(self, tenant_id: str, job_id: str) -> dict[str, Any]:
        return to_item({tables.JOBS_PK: tenant_id, tables.JOBS_SK: tables.job_sort_key(job_id)})

    def _put_if_version(self, job: Job, expected_version: int) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": job_to_item(job, due_shards=self.due_shards),
            "ConditionExpression": "version = :expected",
            "ExpressionAttributeValues": to_item({":expected": expected_version}),
        }

    def _claim_name(self, job: Job) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table,
                "Item": to_item(
                    {
                        tables.JOBS_PK: job.tenant_id,
                        tables.JOBS_SK: tables.name_sort_key(job.name),
                        "job_id": job.job_id,
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
                "Key": to_item({tables.JOBS_PK: job.tenant_id, tables.JOBS_SK: tables.name_sort_key(name)}),
                "ConditionExpression": "job_id = :job_id",
                "ExpressionAttributeValues": to_item({":job_id": job.job_id}),
            }
        }

    def _transact(self, items: list[Any], job: Job, expected_version: int) -> None:
        try:
            self.client.transact_write_items(TransactItems=items)
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
