"""The runs table: a partition per job, a run item per stored run keyed by its fire (or trigger) time, so a
job's history is a key range; manual runs found from their id through a pointer; a sparse attention index."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import (
    decode_cursor,
    encode_cursor,
    from_item,
    is_conditional_failure,
    to_item,
)
from tickwork.adapters.expressions import Update
from tickwork.app.ports import Expect, Page, Written
from tickwork.domain.lifecycle import RETRYABLE_BY_HAND, attention_at
from tickwork.domain.models import Run, parse_run_id
from tickwork.domain.pools import PoolBacklog
from tickwork.domain.run_listing import Position, RunFilter, Slice, position_of
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms, to_rfc3339
from tickwork.domain.workflow import ChildRunKey, parse_child_run_id
from tickwork.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_RUN_FIELDS = frozenset(Run.model_fields)
BATCH_GET_SIZE = 100
UNPROCESSED_TRIES = 8
# The statuses an operator acts on: only runs in these carry the failure index's attributes.
OPERATOR_STATUSES = RETRYABLE_BY_HAND
# A query that reads a few runs of one job by their key range reads at most this many items.
RANGE_READ_LIMIT = 8
# A pool run's output and checkpoint are any JSON (floats included, which DynamoDB's numbers would change):
# stored as their JSON text.
OUTPUT_TEXT = "output_json"
CHECKPOINT_TEXT = "checkpoint_json"


def run_keys(run: Run) -> dict[str, str]:
    child = parse_child_run_id(run.run_id)
    if child is not None:
        # A task's run: in its workflow run's tasks partition, whose key its scheduled time (the workflow
        # run's) and the workflow run's manual hash make without a read.
        parent_sort_key = tables.run_sort_key(to_epoch_ms(run.scheduled_for), child.parent.manual)
        return {
            tables.RUNS_PK: tables.tasks_key(run.tenant_id, run.job_id, parent_sort_key),
            tables.RUNS_SK: child.task_id,
        }
    key = parse_run_id(run.run_id)
    manual = key.manual if key is not None else None
    return {
        tables.RUNS_PK: tables.job_key(run.tenant_id, run.job_id),
        tables.RUNS_SK: tables.run_sort_key(to_epoch_ms(run.scheduled_for), manual),
    }


def run_from_item(item: dict[str, Any]) -> Run:
    values = from_item(item)
    if OUTPUT_TEXT in values:
        values["output"] = json.loads(values.pop(OUTPUT_TEXT))
    return Run.model_validate({key: value for key, value in values.items() if key in _RUN_FIELDS})


class DynamoRunStore:
    def __init__(self, client: DynamoDBClient, *, table: str, retention: timedelta, attention_shards: int):
        self.client = client
        self.table = table
        self.retention = retention
        self.attention_shards = attention_shards

    def run_to_item(self, run: Run) -> dict[str, Any]:
        values = run.model_dump(mode="json", exclude_defaults=True)
        if run.dead_letter_owed:
            values["dead_letter_owed"] = True
        if run.retry_sent_at is not None:
            values["retry_sent_at"] = to_rfc3339(run.retry_sent_at)
        if run.workflow_retry:
            values["workflow_retry"] = run.workflow_retry
        if run.lease_token is not None:
            values["lease_token"] = run.lease_token
        if run.pool_waiting_since is not None:
            values["pool_waiting_since"] = to_rfc3339(run.pool_waiting_since)
        if run.pool_wait_alarm_at is not None:
            values["pool_wait_alarm_at"] = to_rfc3339(run.pool_wait_alarm_at)
        if "output" in values:
            values[OUTPUT_TEXT] = _json_text(values.pop("output"))
        if run.progress is not None:
            values["progress"] = Decimal(repr(run.progress))
        values.update(
            {
                **run_keys(run),
                # The fields the API always shows, even at their defaults
                "run_id": run.run_id,
                "job_id": run.job_id,
                "tenant_id": run.tenant_id,
                "status": run.status.value,
                tables.SCHEMA_VERSION: tables.ITEM_SCHEMA,
                tables.RUNS_TTL: int((run.scheduled_for + self.retention).timestamp()),
            }
        )
        when = attention_at(run)
        if when is not None:
            values[tables.ATTENTION_SHARD] = tables.stable_shard(run.run_id, self.attention_shards)
            values[tables.ATTENTION_AT] = to_epoch_ms(when)
        if run.waiting_in_pool:
            assert run.pool is not None
            values[tables.POOL_KEY] = tables.pool_key(run.tenant_id, run.pool)
            values[tables.POOL_AT] = tables.pool_sort_key(to_epoch_ms(run.due_at), run.run_id)
        if run.status in OPERATOR_STATUSES:
            # Put replaces the whole item, so a run that leaves these statuses (a retry) leaves the index.
            values[tables.FAILURE_TENANT] = run.tenant_id
            values[tables.FAILURE_AT] = tables.failure_sort_key(to_epoch_ms(run.scheduled_for), run.run_id)
        return to_item(values)

    # --- writes -------------------------------------------------------------------------------------------
    def put(self, run: Run, expect: Expect) -> Written:
        key = parse_run_id(run.run_id)
        if key is not None and key.manual is not None and expect.absent and not expect.present:
            pointer = self._claim_pointer(run, key.manual)
            if pointer is not None:
                return Written(False, self._find_at(pointer))
        update = Update()
        condition = _condition(update, expect)
        request: dict[str, Any] = {
            "TableName": self.table,
            "Item": self.run_to_item(run),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        names, values = (
            update.expression().get("ExpressionAttributeNames"),
            update.expression().get("ExpressionAttributeValues"),
        )
        if names:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = values
        return _written(lambda: self.client.put_item(**request))

    def delete(self, run: Run, expect: Expect) -> Written:
        update = Update()
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": to_item(run_keys(run)),
            "ConditionExpression": _condition(update, expect),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **update.expression(),
        }
        return _written(lambda: self.client.delete_item(**request))

    def _claim_pointer(self, run: Run, manual: str) -> dict[str, Any] | None:
        """A manual run's id names no time: a pointer item holds where its run item is. Claiming it makes
        the same idempotency key give the same run. Returns the existing pointer's run key when taken."""
        keys = run_keys(run)
        try:
            self.client.put_item(
                TableName=self.table,
                Item=to_item(
                    {
                        tables.RUNS_PK: keys[tables.RUNS_PK],
                        tables.RUNS_SK: tables.manual_pointer_key(manual),
                        "run_sk": keys[tables.RUNS_SK],
                        tables.RUNS_TTL: int((run.scheduled_for + self.retention).timestamp()),
                    }
                ),
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": tables.RUNS_PK},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            stored: dict[str, Any] = error.response.get("Item") or {}  # type: ignore[assignment]
            old = from_item(stored)
            return {tables.RUNS_PK: keys[tables.RUNS_PK], tables.RUNS_SK: old.get("run_sk", "")}
        return None

    # --- reads --------------------------------------------------------------------------------------------
    def get(self, tenant_id: str, run_id: str, *, consistent: bool = True) -> Run:
        child = parse_child_run_id(run_id)
        if child is not None:
            return self._get_task(tenant_id, child, consistent=consistent)
        key = parse_run_id(run_id)
        if key is None:
            raise NotFound(f"run {run_id!r} not found", field="run_id")
        partition = tables.job_key(tenant_id, key.job_id)
        if key.manual is not None:
            pointer = self._get(
                {tables.RUNS_PK: partition, tables.RUNS_SK: tables.manual_pointer_key(key.manual)}, consistent
            )
            where = from_item(pointer)["run_sk"] if pointer else None
            found = (
                self._find_at({tables.RUNS_PK: partition, tables.RUNS_SK: where}, consistent)
                if where
                else None
            )
        else:
            assert key.fire_ms is not None
            item = self._get(
                {tables.RUNS_PK: partition, tables.RUNS_SK: tables.run_sort_key(key.fire_ms)}, consistent
            )
            found = run_from_item(item) if item else None
        if found is None or found.tenant_id != tenant_id:
            raise NotFound(f"run {run_id!r} not found", field="run_id")
        return found

    def find_many(
        self, tenant_id: str, job_id: str, run_ids: Sequence[str], *, consistent: bool = True
    ) -> dict[str, Run]:
        """Scheduled runs of one job in one query over their key range (they are usually neighbours: this
        fire and the one before), else one read each; manual ones through their pointer, a workflow's task
        runs in their workflow run's partition. Consistent reads unless ``consistent`` is False."""
        found: dict[str, Run] = {}
        scheduled: dict[str, str] = {}
        for run_id in run_ids:
            child = parse_child_run_id(run_id)
            if child is not None and child.parent.job_id == job_id:
                with contextlib.suppress(NotFound):
                    found[run_id] = self._get_task(tenant_id, child, consistent=consistent)
                continue
            key = parse_run_id(run_id)
            if key is None or key.job_id != job_id:
                continue
            if key.fire_ms is not None:
                scheduled[tables.run_sort_key(key.fire_ms)] = run_id
            else:
                with contextlib.suppress(NotFound):
                    found[run_id] = self.get(tenant_id, run_id, consistent=consistent)
        if not scheduled:
            return found
        partition = tables.job_key(tenant_id, job_id)
        if len(scheduled) == 1:
            ((sort_key, run_id),) = scheduled.items()
            item = self._get({tables.RUNS_PK: partition, tables.RUNS_SK: sort_key}, consistent)
            if item:
                found[run_id] = run_from_item(item)
            return found
        response = self.client.query(
            TableName=self.table,
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :low AND :high",
            ExpressionAttributeNames={"#pk": tables.RUNS_PK, "#sk": tables.RUNS_SK},
            ExpressionAttributeValues=to_item(
                {":pk": partition, ":low": min(scheduled), ":high": max(scheduled)}
            ),
            ConsistentRead=consistent,
            Limit=RANGE_READ_LIMIT,
        )
        seen = set()
        for item in response["Items"]:
            sort_key = item[tables.RUNS_SK]["S"]
            seen.add(sort_key)
            if sort_key in scheduled:
                found[scheduled[sort_key]] = run_from_item(item)
        if response.get("LastEvaluatedKey"):
            # Too many runs between them: read the rest one by one.
            for sort_key, run_id in scheduled.items():
                if sort_key not in seen:
                    item = self._get({tables.RUNS_PK: partition, tables.RUNS_SK: sort_key}, consistent)
                    if item:
                        found[run_id] = run_from_item(item)
        return found

    def list_for_job(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        partition = tables.job_key(tenant_id, job_id)
        key_fields = (tables.RUNS_PK, tables.RUNS_SK)
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :pk AND #sk < :end",
            "ScanIndexForward": False,
            "ExpressionAttributeNames": {"#pk": tables.RUNS_PK, "#sk": tables.RUNS_SK},
            "ExpressionAttributeValues": to_item({":pk": partition, ":end": tables.HISTORY_END}),
            "Limit": limit,
        }
        if cursor:
            start = decode_cursor(cursor, expected={tables.RUNS_PK: partition}, fields=key_fields)
            if not str(from_item(start)[tables.RUNS_SK]) < tables.HISTORY_END:
                raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor")
            query["ExclusiveStartKey"] = start
        response = self.client.query(**query)
        last = response.get("LastEvaluatedKey")
        return Page(
            [run_from_item(item) for item in response["Items"]], encode_cursor(last) if last else None
        )

    def latest(self, tenant_id: str, job_id: str, *, until: datetime) -> Run | None:
        response = self.client.query(
            TableName=self.table,
            KeyConditionExpression="#pk = :pk AND #sk < :end",
            ScanIndexForward=False,
            Limit=1,
            ExpressionAttributeNames={"#pk": tables.RUNS_PK, "#sk": tables.RUNS_SK},
            ExpressionAttributeValues=to_item(
                {
                    ":pk": tables.job_key(tenant_id, job_id),
                    ":end": tables.run_sort_key(to_epoch_ms(until) + 1),
                }
            ),
        )
        return run_from_item(response["Items"][0]) if response["Items"] else None

    def get_many(self, tenant_id: str, runs: Sequence[tuple[str, int]]) -> dict[str, Run]:
        """Runs of any of the tenant's jobs by id and scheduled time (which together name the item, a manual
        run's too), in BatchGetItem calls of up to 100 keys, eventually consistent."""
        keys: dict[tuple[str, str], str] = {}
        for run_id, scheduled_ms in runs:
            key = parse_run_id(run_id)
            if key is not None:
                partition = tables.job_key(tenant_id, key.job_id)
                keys[(partition, tables.run_sort_key(scheduled_ms, key.manual))] = run_id
        found: dict[str, Run] = {}
        wanted = [to_item({tables.RUNS_PK: pk, tables.RUNS_SK: sk}) for pk, sk in keys]
        for start in range(0, len(wanted), BATCH_GET_SIZE):
            request: dict[str, Any] = {self.table: {"Keys": wanted[start : start + BATCH_GET_SIZE]}}
            for attempt in range(UNPROCESSED_TRIES):
                response = self.client.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(self.table, []):
                    run = run_from_item(item)
                    if run.tenant_id == tenant_id:
                        found[run.run_id] = run
                request = dict(response.get("UnprocessedKeys") or {})
                if not request:
                    break
                time.sleep(min(1.0, 0.05 * 2**attempt))
        return found

    def list_failures(
        self, tenant_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        """From the failure index: the tenant's FAILED, DEAD and ABANDONED runs, newest first."""
        names = {"#pk": tables.FAILURE_TENANT, "#sk": tables.FAILURE_AT}
        values: dict[str, Any] = {":pk": tenant_id}
        return self._read_slice(
            {"IndexName": tables.FAILURES_INDEX},
            names,
            values,
            only,
            before=before,
            want=want,
            budget=budget,
            stopped_at=lambda key: _failure_position(key[tables.FAILURE_AT]["S"]),
        )

    def list_for_job_filtered(
        self, tenant_id: str, job_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        """From the job's history: its runs in ``only``'s time range, newest first, filtered by status."""
        names = {"#pk": tables.RUNS_PK, "#sk": tables.RUNS_SK}
        values: dict[str, Any] = {":pk": tables.job_key(tenant_id, job_id)}
        return self._read_slice(
            {},
            names,
            values,
            RunFilter(statuses=only.statuses, since=only.since, until=only.until),
            before=before,
            want=want,
            budget=budget,
            stopped_at=lambda key: _history_position(job_id, key[tables.RUNS_SK]["S"]),
        )

    def _read_slice(
        self,
        query: dict[str, Any],
        names: dict[str, str],
        values: dict[str, Any],
        only: RunFilter,
        *,
        before: Position | None,
        want: int,
        budget: int,
        stopped_at: Callable[[dict[str, Any]], Position],
    ) -> Slice:
        """Up to ``want`` matching runs below ``before``, reading at most ``budget`` items (a filter pays for
        every item it looks at); where it stopped when it did not reach the end."""
        since_ms = to_epoch_ms(only.since) if only.since is not None else None
        through = [to_epoch_ms(only.until) - 1] if only.until is not None else []
        if before is not None:
            through.append(before.scheduled_ms)
        low, high = tables.history_bounds(since_ms, min(through) if through else None)
        filters = []
        if only.statuses is not None:
            listed = ", ".join(f":status{i}" for i in range(len(only.statuses)))
            filters.append(f"#status IN ({listed})")
            names["#status"] = "status"
            values.update({f":status{i}": status.value for i, status in enumerate(sorted(only.statuses))})
        if only.job_id is not None:
            filters.append("#job = :job")
            names["#job"] = "job_id"
            values[":job"] = only.job_id
        values.update({":low": low, ":high": high})
        request: dict[str, Any] = {
            "TableName": self.table,
            **query,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ScanIndexForward": False,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
        }
        if filters:
            request["FilterExpression"] = " AND ".join(filters)
        runs: list[Run] = []
        read = 0
        start: dict[str, Any] | None = None
        while True:
            # Unfiltered, each item read is one run; filtered, read in larger steps, within the budget.
            step = want - len(runs) if not filters else max(want - len(runs), 25)
            request["Limit"] = max(1, min(step, budget - read))
            if start is not None:
                request["ExclusiveStartKey"] = start
            response = self.client.query(**request)
            read += response.get("ScannedCount", len(response["Items"]))
            for item in response["Items"]:
                run = run_from_item(item)
                if before is None or position_of(run) < before:
                    runs.append(run)
            start = response.get("LastEvaluatedKey")
            if not start:
                return Slice(runs)
            if len(runs) >= want or read >= budget:
                return Slice(runs, stopped_at(start))

    def due_for_attention(self, shard: int, *, now: datetime, limit: int) -> list[tuple[str, str]]:
        response = self.client.query(
            TableName=self.table,
            IndexName=tables.ATTENTION_INDEX,
            KeyConditionExpression="#shard = :shard AND #at <= :now",
            ExpressionAttributeNames={"#shard": tables.ATTENTION_SHARD, "#at": tables.ATTENTION_AT},
            ExpressionAttributeValues=to_item({":shard": shard, ":now": to_epoch_ms(now)}),
            Limit=limit,
        )
        return [(item["tenant_id"]["S"], item["run_id"]["S"]) for item in response["Items"]]

    # --- pools --------------------------------------------------------------------------------------------
    def waiting_in_pool(self, tenant_id: str, pool: str, *, limit: int) -> list[Run]:
        """Runs waiting in the tenant's pool, oldest due first. The index is eventually consistent: a run may
        show here a moment after its claim, which the claim's conditional write then refuses."""
        response = self.client.query(
            TableName=self.table,
            IndexName=tables.POOL_INDEX,
            KeyConditionExpression="#pool = :pool",
            ExpressionAttributeNames={"#pool": tables.POOL_KEY},
            ExpressionAttributeValues=to_item({":pool": tables.pool_key(tenant_id, pool)}),
            Limit=limit,
        )
        return [run_from_item(item) for item in response["Items"]]

    def pool_backlog(self, tenant_id: str, pool: str, *, now: datetime, cap: int) -> PoolBacklog:
        """The pool's runs due by ``now``: counted by ``Select=COUNT`` queries of its index partition that
        stop after ``cap`` + 1 entries (a count reads the entries, a few hundred bytes each), and the oldest's
        due time from one ``Limit=1`` query, oldest first."""
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": tables.POOL_INDEX,
            "KeyConditionExpression": "#pool = :pool AND #at < :after_now",
            "ExpressionAttributeNames": {"#pool": tables.POOL_KEY, "#at": tables.POOL_AT},
            "ExpressionAttributeValues": to_item(
                {
                    ":pool": tables.pool_key(tenant_id, pool),
                    # Every entry due by now sorts below the next millisecond's digits.
                    ":after_now": f"{to_epoch_ms(now) + 1:013d}",
                }
            ),
        }
        oldest = self.client.query(**query, Limit=1, ProjectionExpression="#at")["Items"]
        if not oldest:
            return PoolBacklog(pool=pool, waiting=0, capped=False, oldest_due=None)
        counted = 0
        while counted <= cap:
            page = self.client.query(**query, Select="COUNT", Limit=cap + 1 - counted)
            counted += page["Count"]
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        due_ms = int(oldest[0][tables.POOL_AT]["S"].partition("#")[0])
        return PoolBacklog(
            pool=pool, waiting=min(counted, cap), capped=counted > cap, oldest_due=from_epoch_ms(due_ms)
        )

    def save_checkpoint(self, run: Run, checkpoint: Any) -> bool:
        """Keep ``checkpoint`` as the run's last, unless a later attempt (a higher fencing token) has saved
        one: a worker that lost its lease cannot overwrite its successor's."""
        keys = run_keys(run)
        try:
            self.client.put_item(
                TableName=self.table,
                Item=to_item(
                    {
                        tables.RUNS_PK: keys[tables.RUNS_PK],
                        tables.RUNS_SK: tables.checkpoint_key(keys[tables.RUNS_SK]),
                        CHECKPOINT_TEXT: _json_text(checkpoint),
                        "fencing_token": run.fencing_token,
                        tables.RUNS_TTL: int((run.scheduled_for + self.retention).timestamp()),
                    }
                ),
                ConditionExpression="attribute_not_exists(#pk) OR #token <= :token",
                ExpressionAttributeNames={"#pk": tables.RUNS_PK, "#token": "fencing_token"},
                ExpressionAttributeValues=to_item({":token": run.fencing_token}),
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            return False
        return True

    def checkpoint_of(self, run: Run) -> Any:
        """The run's last saved checkpoint (None: none yet)."""
        keys = run_keys(run)
        item = self._get({**keys, tables.RUNS_SK: tables.checkpoint_key(keys[tables.RUNS_SK])})
        return json.loads(item[CHECKPOINT_TEXT]["S"]) if item else None

    # --- helpers ------------------------------------------------------------------------------------------
    def tasks_of(self, tenant_id: str, run: Run) -> list[Run]:
        """The task runs of workflow run ``run`` that exist, in one consistent query of their partition."""
        key = parse_run_id(run.run_id)
        if key is None:
            return []
        partition = tables.tasks_key(
            tenant_id, run.job_id, tables.run_sort_key(to_epoch_ms(run.scheduled_for), key.manual)
        )
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": tables.RUNS_PK},
            "ExpressionAttributeValues": to_item({":pk": partition}),
            "ConsistentRead": True,
        }
        while True:
            response = self.client.query(**request)
            items.extend(response["Items"])
            if not response.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        # The partition's other items (the tasks' ends) sort first, under a key no task id can take.
        tasks = [item for item in items if not item[tables.RUNS_SK]["S"].startswith("#")]
        return [run for run in map(run_from_item, tasks) if run.tenant_id == tenant_id]

    def _get_task(self, tenant_id: str, child: ChildRunKey, *, consistent: bool = True) -> Run:
        """A task's run: its workflow run's sort key (a manual one's through its pointer), then the task."""
        parent = child.parent
        partition = tables.job_key(tenant_id, parent.job_id)
        if parent.manual is not None:
            pointer = self._get(
                {tables.RUNS_PK: partition, tables.RUNS_SK: tables.manual_pointer_key(parent.manual)},
                consistent,
            )
            parent_sort_key = from_item(pointer)["run_sk"] if pointer else None
        else:
            assert parent.fire_ms is not None
            parent_sort_key = tables.run_sort_key(parent.fire_ms)
        found = None
        if parent_sort_key is not None:
            tasks = tables.tasks_key(tenant_id, parent.job_id, parent_sort_key)
            found = self._find_at({tables.RUNS_PK: tasks, tables.RUNS_SK: child.task_id}, consistent)
        if found is None or found.tenant_id != tenant_id:
            raise NotFound(f"run {child.parent_run_id}/{child.task_id} not found", field="run_id")
        return found

    def _get(self, key: dict[str, str], consistent: bool = True) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=self.table, Key=to_item(key), ConsistentRead=consistent)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _find_at(self, key: dict[str, Any], consistent: bool = True) -> Run | None:
        item = self._get(key, consistent)
        return run_from_item(item) if item else None


def _written(write: Callable[[], object]) -> Written:
    """A conditional write's outcome: written, or not, with the item it found (its ALL_OLD)."""
    try:
        write()
    except ClientError as error:
        if not is_conditional_failure(error):
            raise
        old: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
        return Written(False, run_from_item(old) if old else None)
    return Written(True)


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _failure_position(sort_key: str) -> Position:
    epoch_ms, _, run_id = sort_key.partition("#")
    return Position(int(epoch_ms), run_id)


def _history_position(job_id: str, sort_key: str) -> Position:
    """A history key's run: a scheduled run's key is its fire time; a manual run's adds "m" and its hash."""
    epoch_ms, manual = int(sort_key[:13]), sort_key[14:]
    return Position(epoch_ms, f"{job_id}:m:{manual}" if manual else f"{job_id}:{epoch_ms}")


def _condition(update: Update, expect: Expect) -> str:
    """The condition expression of a run write, from what the engine expects to find stored."""
    pk = update.name(tables.RUNS_PK)
    present: list[str] = [f"attribute_exists({pk})"]
    if expect.statuses is not None:
        statuses = ", ".join(update.value(status.value) for status in sorted(expect.statuses))
        present.append(f"{update.name('status')} IN ({statuses})")
    if expect.token is not None or expect.token_below is not None:
        token = update.name("fencing_token")
    if expect.token is not None:
        if expect.token == 0:
            present.append(f"(attribute_not_exists({token}) OR {token} = {update.value(0)})")
        else:
            present.append(f"{token} = {update.value(expect.token)}")
    if expect.token_below is not None:
        present.append(f"(attribute_not_exists({token}) OR {token} < {update.value(expect.token_below)})")
    if expect.manual_retries is not None:
        retries = update.name("manual_retries")
        present.append(
            f"{retries} = {update.value(expect.manual_retries)}"
            if expect.manual_retries
            else f"(attribute_not_exists({retries}) OR {retries} = {update.value(0)})"
        )
    if expect.lease is not None:
        expires_at, cancel_requested = expect.lease
        expiry, cancel = update.name("lease_expires_at"), update.name("cancel_requested")
        present.append(
            f"attribute_not_exists({expiry})"
            if expires_at is None
            else f"{expiry} = {update.value(to_rfc3339(expires_at))}"
        )
        present.append(
            f"{cancel} = {update.value(True)}"
            if cancel_requested
            else f"(attribute_not_exists({cancel}) OR {cancel} = {update.value(False)})"
        )
    options = []
    if expect.absent:
        options.append(f"attribute_not_exists({pk})")
    if expect.present:
        options.append("(" + " AND ".join(present) + ")")
    return " OR ".join(options) if options else f"attribute_not_exists({pk}) AND attribute_exists({pk})"


__all__ = ["DynamoRunStore", "run_from_item", "run_keys"]
