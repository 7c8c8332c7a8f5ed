"""The runs table: one item per run with its attempts, history by job, open runs, recent runs by tenant."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import decode_cursor, encode_cursor, from_item, is_conditional_failure, to_item
from tickwork.adapters.jobs import collect_page
from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    RETRYABLE_BY_HAND,
    Run,
    RunStatus,
)
from tickwork.domain.ports import Page, RunSample
from tickwork.domain.timeutil import to_epoch_ms, to_rfc3339
from tickwork.errors import InvalidInput, InvalidState, NotFound

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A planned run the worker has not picked up this long after its fire time needs the sweeper.
PLANNED_GRACE = timedelta(seconds=60)
_RUN_FIELDS = frozenset(Run.model_fields)


class DynamoRunStore:
    def __init__(self, client: DynamoDBClient, *, table: str, retention: timedelta, attention_shards: int):
        self.client = client
        self.table = table
        self.retention = retention
        self.attention_shards = attention_shards

    def run_to_item(self, run: Run) -> dict[str, Any]:
        values = run.model_dump(mode="json")
        values.update(
            {
                tables.RUNS_PK: tables.run_key(run.tenant_id, run.run_id),
                tables.RUNS_JOB_KEY: tables.run_job_key(run.tenant_id, run.job_id),
                tables.RUNS_SCHEDULED_AT: to_epoch_ms(run.scheduled_for),
                tables.RUNS_TENANT_SHARD: tables.run_tenant_shard(run.tenant_id, run.run_id),
                tables.RUNS_TTL: int((run.scheduled_for + self.retention).timestamp()),
            }
        )
        if run.status is RunStatus.PLANNED:
            values.update(self._attention(run.run_id, run.scheduled_for + PLANNED_GRACE))
        return to_item(values)

    def _attention(self, run_id: str, when: datetime) -> dict[str, int]:
        return {
            tables.ATTENTION_SHARD: tables.stable_shard(run_id, self.attention_shards),
            tables.ATTENTION_AT: to_epoch_ms(when),
        }

    # --- writes -------------------------------------------------------------------------------------------
    def put_if_absent(self, run: Run) -> Run | None:
        try:
            self.client.put_item(
                TableName=self.table,
                Item=self.run_to_item(run),
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": tables.RUNS_PK},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            old = getattr(error, "response", {}).get("Item")
            return run_from_item(old) if old else self.get(run.tenant_id, run.run_id)
        return None

    def reopen(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        allowed = sorted(status.value for status in RETRYABLE_BY_HAND)
        placeholders = {f":s{i}": status for i, status in enumerate(allowed)}
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=self._key(tenant_id, run_id),
                UpdateExpression=(
                    "SET #status = :planned, #shard = :shard, #at = :at, manual_retries = if_not_exists("
                    "manual_retries, :zero) + :one REMOVE finished_at, reason"
                ),
                ConditionExpression=f"#status IN ({', '.join(placeholders)})",
                ExpressionAttributeNames={
                    "#status": "status",
                    "#shard": tables.ATTENTION_SHARD,
                    "#at": tables.ATTENTION_AT,
                },
                ExpressionAttributeValues=to_item(
                    {
                        ":planned": RunStatus.PLANNED.value,
                        ":zero": 0,
                        ":one": 1,
                        ":shard": tables.stable_shard(run_id, self.attention_shards),
                        ":at": to_epoch_ms(now + PLANNED_GRACE),
                        **placeholders,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            current = self.get(tenant_id, run_id)
            raise InvalidState(
                f"only FAILED, DEAD or ABANDONED runs can be retried; this run is {current.status.value}",
                run_status=current.status,
            ) from error
        return run_from_item(response["Attributes"])

    def cancel_not_started(self, tenant_id: str, job_id: str, *, since: datetime, now: datetime) -> int:
        open_statuses = sorted(status.value for status in NOT_STARTED_RUN_STATUSES)
        placeholders = {f":s{i}": status for i, status in enumerate(open_statuses)}
        cancelled = 0
        paginator = self.client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self.table,
            IndexName=tables.RUNS_BY_JOB_INDEX,
            KeyConditionExpression="#job = :job AND #at >= :since",
            FilterExpression=f"#status IN ({', '.join(placeholders)})",
            ExpressionAttributeNames={
                "#job": tables.RUNS_JOB_KEY,
                "#at": tables.RUNS_SCHEDULED_AT,
                "#status": "status",
            },
            ExpressionAttributeValues=to_item(
                {":job": tables.run_job_key(tenant_id, job_id), ":since": to_epoch_ms(since), **placeholders}
            ),
        )
        for page in pages:
            for item in page["Items"]:
                run_id = item["run_id"]["S"]
                try:
                    self.client.update_item(
                        TableName=self.table,
                        Key=self._key(tenant_id, run_id),
                        UpdateExpression=(
                            "SET #status = :cancelled, reason = :reason, finished_at = :now "
                            "REMOVE #shard, #attention"
                        ),
                        ConditionExpression=f"#status IN ({', '.join(placeholders)})",
                        ExpressionAttributeNames={
                            "#status": "status",
                            "#shard": tables.ATTENTION_SHARD,
                            "#attention": tables.ATTENTION_AT,
                        },
                        ExpressionAttributeValues=to_item(
                            {
                                ":cancelled": RunStatus.CANCELLED.value,
                                ":reason": "job_cancelled",
                                ":now": to_rfc3339(now),
                                **placeholders,
                            }
                        ),
                    )
                except ClientError as error:
                    if is_conditional_failure(error):
                        continue  # it started meanwhile: a running attempt finishes
                    raise
                cancelled += 1
        return cancelled

    # --- reads --------------------------------------------------------------------------------------------
    def get(self, tenant_id: str, run_id: str) -> Run:
        response = self.client.get_item(
            TableName=self.table, Key=self._key(tenant_id, run_id), ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"run {run_id!r} not found", field="run_id")
        return run_from_item(response["Item"])

    def list_for_job(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        job_key = tables.run_job_key(tenant_id, job_id)
        key_fields = (tables.RUNS_PK, tables.RUNS_JOB_KEY, tables.RUNS_SCHEDULED_AT)
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": tables.RUNS_BY_JOB_INDEX,
            "KeyConditionExpression": "#job = :job",
            "ScanIndexForward": False,
            "ExpressionAttributeNames": {"#job": tables.RUNS_JOB_KEY},
            "ExpressionAttributeValues": to_item({":job": job_key}),
        }
        start = (
            decode_cursor(cursor, expected={tables.RUNS_JOB_KEY: job_key}, fields=key_fields)
            if cursor
            else None
        )
        if start is not None and not from_item(start)[tables.RUNS_PK].startswith(f"{tenant_id}/{job_id}:"):
            raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor")
        items, last_key = collect_page(self.client, query, limit, start, key_fields)
        return Page([run_from_item(item) for item in items], encode_cursor(last_key) if last_key else None)

    def latest_started(self, tenant_id: str, job_id: str, now: datetime) -> Run | None:
        """The most recent run whose time has come (planned future fires are not "last")."""
        response = self.client.query(
            TableName=self.table,
            IndexName=tables.RUNS_BY_JOB_INDEX,
            KeyConditionExpression="#job = :job AND #at <= :now",
            ScanIndexForward=False,
            Limit=1,
            ExpressionAttributeNames={"#job": tables.RUNS_JOB_KEY, "#at": tables.RUNS_SCHEDULED_AT},
            ExpressionAttributeValues=to_item(
                {":job": tables.run_job_key(tenant_id, job_id), ":now": to_epoch_ms(now)}
            ),
        )
        return run_from_item(response["Items"][0]) if response["Items"] else None

    def recent_for_tenant(self, tenant_id: str, *, since: datetime, until: datetime) -> list[RunSample]:
        samples: list[RunSample] = []
        paginator = self.client.get_paginator("query")
        for shard in range(tables.TENANT_SHARDS):
            for page in paginator.paginate(
                TableName=self.table,
                IndexName=tables.RUNS_BY_TENANT_INDEX,
                KeyConditionExpression="#shard = :shard AND #at BETWEEN :since AND :until",
                ExpressionAttributeNames={
                    "#shard": tables.RUNS_TENANT_SHARD,
                    "#at": tables.RUNS_SCHEDULED_AT,
                },
                ExpressionAttributeValues=to_item(
                    {
                        ":shard": f"{tenant_id}#{shard}",
                        ":since": to_epoch_ms(since),
                        ":until": to_epoch_ms(until),
                    }
                ),
            ):
                for item in page["Items"]:
                    values = from_item(item)
                    samples.append(RunSample(RunStatus(values["status"]), values.get("lag_ms")))
        return samples

    def _key(self, tenant_id: str, run_id: str) -> dict[str, Any]:
        return to_item({tables.RUNS_PK: tables.run_key(tenant_id, run_id)})


def run_from_item(item: dict[str, Any]) -> Run:
    values = from_item(item)
    return Run.model_validate({key: value for key, value in values.items() if key in _RUN_FIELDS})
