"""The runs table: one item per run with its attempts, history by job, open runs, recent runs by tenant."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta
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
from tickwork.adapters.jobs import collect_page
from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    RETRYABLE_BY_HAND,
    TERMINAL_RUN_STATUSES,
    Attempt,
    Run,
    RunStatus,
)
from tickwork.domain.ports import Page, RunSample
from tickwork.domain.timeutil import to_epoch_ms, to_rfc3339
from tickwork.errors import InvalidInput, InvalidState, NotFound

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A PLANNED run whose message was not sent this long after it was stored needs the sweeper.
PLANNED_GRACE = timedelta(seconds=30)
# An ENQUEUED run that has not started this long after it was due needs the sweeper.
START_GRACE = timedelta(seconds=60)
# Whether a run's attempt holds one of the tenant's in-flight slots (false: its lease took none), so
# whoever ends the attempt (the worker, or the sweeper once the lease expired) gives back what was taken.
# Absent counts as held: leases taken before the flag existed all held one.
SLOT = "in_flight_slot"
# Set with DEAD until the dead letter is known to be in its queue: a redelivered message finds it and
# sends the letter again (the worker may have died, or the send failed, right after the DEAD write).
DEAD_LETTER_OWED = "dead_letter_owed"
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
            values.update(self._attention(run.run_id, run.created_at + PLANNED_GRACE))
        elif run.status is RunStatus.ENQUEUED:
            # Stored as sent: the sweeper looks again only if it has not started by its time + grace.
            sent_at = run.enqueued_at or run.created_at
            values.update(self._attention(run.run_id, max(run.due_at, sent_at) + START_GRACE))
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
        update = Update().set(status=RunStatus.PLANNED.value)
        update.set_many(self._attention(run_id, now + PLANNED_GRACE))
        retries = update.name("manual_retries")
        update.set_raw(f"{retries} = if_not_exists({retries}, {update.value(0)}) + {update.value(1)}")
        update.remove("finished_at", "reason")
        update.where_status_in(sorted(status.value for status in RETRYABLE_BY_HAND))
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=self._key(tenant_id, run_id),
                ReturnValues="ALL_NEW",
                **update.expression(),
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

    def close_unstarted(
        self, tenant_id: str, run_id: str, status: RunStatus, reason: str, now: datetime
    ) -> bool:
        """A run that never started ends here (CANCELLED, MISSED or SKIPPED), with the reason. False when it
        started meanwhile: a running attempt finishes."""
        update = Update().set(status=status.value, reason=reason, finished_at=to_rfc3339(now))
        update.remove(tables.ATTENTION_SHARD, tables.ATTENTION_AT)
        update.where_status_in(sorted(s.value for s in NOT_STARTED_RUN_STATUSES))
        return update_if(
            self.client, TableName=self.table, Key=self._key(tenant_id, run_id), **update.expression()
        )

    def cancel_not_started(
        self,
        tenant_id: str,
        job_id: str,
        *,
        since: datetime,
        now: datetime,
        reason: str = "job_cancelled",
        keep: Callable[[Run], bool] | None = None,
    ) -> int:
        query = Update()
        job, at, status = (
            query.name(tables.RUNS_JOB_KEY),
            query.name(tables.RUNS_SCHEDULED_AT),
            query.name("status"),
        )
        not_started = ", ".join(query.value(s.value) for s in sorted(NOT_STARTED_RUN_STATUSES))
        job_key, oldest = query.value(tables.run_job_key(tenant_id, job_id)), query.value(to_epoch_ms(since))
        key = f"{job} = {job_key} AND {at} >= {oldest}"
        names_and_values = query.expression()
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            IndexName=tables.RUNS_BY_JOB_INDEX,
            KeyConditionExpression=key,
            FilterExpression=f"{status} IN ({not_started})",
            ExpressionAttributeNames=names_and_values["ExpressionAttributeNames"],
            ExpressionAttributeValues=names_and_values["ExpressionAttributeValues"],
        )
        runs = (run_from_item(item) for page in pages for item in page["Items"])
        return sum(
            self.close_unstarted(tenant_id, run.run_id, RunStatus.CANCELLED, reason, now)
            for run in runs
            if keep is None or not keep(run)
        )

    # --- reads --------------------------------------------------------------------------------------------
    def dead_letter_owed(self, tenant_id: str, run_id: str) -> bool:
        response = self.client.get_item(
            TableName=self.table,
            Key=self._key(tenant_id, run_id),
            ConsistentRead=True,
            ProjectionExpression="#owed",
            ExpressionAttributeNames={"#owed": DEAD_LETTER_OWED},
        )
        return DEAD_LETTER_OWED in response.get("Item", {})

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


class LeaseConflict(Exception):
    """Another worker changed the run first (a duplicate delivery, a newer attempt, a finished run)."""


class TenantBusy(Exception):
    """The tenant already has ``max_in_flight`` attempts running."""


class DynamoRunLeases:
    """The conditional writes of a run's execution: lease, heartbeat, finish, requeue.

    Every write after the lease is conditional on the fencing token the lease handed out, so a worker that
    lost its lease can never overwrite a newer attempt. The tenant's in-flight counter moves in the same
    transaction as the lease and the finish, so it cannot drift when a worker dies between the two.
    """

    def __init__(self, store: DynamoRunStore, *, tenants_table: str):
        self.store = store
        self.client = store.client
        self.tenants_table = tenants_table

    def _attention(self, update: Update, run_id: str, when: datetime) -> None:
        update.set_many(self.store._attention(run_id, when))

    def _run_update(self, run: Run, update: Update) -> dict[str, Any]:
        return {
            "TableName": self.store.table,
            "Key": self.store._key(run.tenant_id, run.run_id),
            **update.expression(),
        }

    def _tenant_slot(self, tenant_id: str, delta: int, max_in_flight: int | None = None) -> dict[str, Any]:
        update = Update().add("in_flight", delta)
        if max_in_flight is not None:
            in_flight = update.name("in_flight")
            update.where(f"attribute_not_exists({in_flight}) OR {in_flight} < {update.value(max_in_flight)}")
        return {
            "TableName": self.tenants_table,
            "Key": to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
            **update.expression(),
        }

    def mark_enqueued(self, run: Run, now: datetime, start_grace: timedelta) -> bool:
        """PLANNED/RETRY_WAIT/ENQUEUED -> ENQUEUED once its message is in the queue."""
        update = Update().set(status=RunStatus.ENQUEUED.value, enqueued_at=to_rfc3339(now))
        self._attention(update, run.run_id, max(run.due_at, now) + start_grace)
        update.where_status_in(
            [RunStatus.PLANNED.value, RunStatus.ENQUEUED.value, RunStatus.RETRY_WAIT.value]
        )
        return self._try(self._run_update(run, update))

    def unsent(self, run: Run, now: datetime) -> bool:
        """A run stored ENQUEUED whose send failed goes back to PLANNED, for the sweeper after the grace."""
        update = Update().set(status=RunStatus.PLANNED.value)
        update.remove("enqueued_at")
        self._attention(update, run.run_id, now + PLANNED_GRACE)
        update.where_status_in([RunStatus.ENQUEUED.value])
        update.where(f"{update.name('fencing_token')} = {update.value(run.fencing_token)}")
        return self._try(self._run_update(run, update))

    def close_unstarted(self, run: Run, status: RunStatus, reason: str, now: datetime) -> bool:
        return self.store.close_unstarted(run.tenant_id, run.run_id, status, reason, now)

    def take(
        self,
        run: Run,
        *,
        owner: str,
        now: datetime,
        lease_for: timedelta,
        max_in_flight: int,
        count_slot: bool = True,
    ) -> Run:
        """One conditional write: the run as read (status and fencing token) -> RUNNING with attempt + 1 and
        fencing token + 1. A RUNNING run may be taken only once its lease has expired; it keeps its tenant
        slot. With ``count_slot``, the tenant's in-flight counter goes up in the same transaction, unless it
        is at ``max_in_flight``; without it (a limit the worker fleet cannot reach) the lease is a single
        write. Raises LeaseConflict or TenantBusy."""
        attempt = run.attempt + 1
        expires = now + lease_for
        record = Attempt(attempt=attempt, started_at=now, worker_id=owner)
        update = Update().set(
            status=RunStatus.RUNNING.value,
            lease_owner=owner,
            lease_expires_at=to_rfc3339(expires),
            attempt=attempt,
            fencing_token=run.fencing_token + 1,
        )
        update.set_if_absent(
            started_at=to_rfc3339(now), lag_ms=max(0, to_epoch_ms(now) - to_epoch_ms(run.scheduled_for))
        )
        update.append("attempts", [record.model_dump(mode="json", exclude_none=True)])
        update.remove("retry_at")
        self._attention(update, run.run_id, expires)
        # The fencing token read is what makes the lease exclusive. The status may still move from PLANNED to
        # ENQUEUED meanwhile (the dispatcher marks a run after sending it, and the worker can be faster).
        token = update.name("fencing_token")
        update.where(f"{token} = {update.value(run.fencing_token)}")
        if run.status is RunStatus.RUNNING:
            attention = update.name(tables.ATTENTION_AT)
            update.where(f"{update.name('status')} = {update.value(RunStatus.RUNNING.value)}")
            update.where(f"{attention} < {update.value(to_epoch_ms(now))}")
            items: list[Any] = [{"Update": self._run_update(run, update)}]
        else:
            update.where_status_in(sorted(s.value for s in NOT_STARTED_RUN_STATUSES))
            update.set(**{SLOT: count_slot})
            items = [{"Update": self._run_update(run, update)}]
            if count_slot:
                items.append({"Update": self._tenant_slot(run.tenant_id, 1, max_in_flight)})
        try:
            if len(items) == 1:
                self._update_or_raise(items[0]["Update"])
            else:
                self.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            codes = cancellation_codes(error)
            if (
                len(codes) > 1
                and codes[1] == "ConditionalCheckFailed"
                and codes[0] != "ConditionalCheckFailed"
            ):
                raise TenantBusy(run.tenant_id) from error
            if codes and codes[0] == "ConditionalCheckFailed":
                raise LeaseConflict(run.run_id) from error
            raise
        return run.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "attempt": attempt,
                "fencing_token": run.fencing_token + 1,
                "lease_owner": owner,
                "lease_expires_at": expires,
                "started_at": run.started_at or now,
                "lag_ms": run.lag_ms
                if run.lag_ms is not None
                else max(0, to_epoch_ms(now) - to_epoch_ms(run.scheduled_for)),
                "attempts": [*run.attempts, record],
                "retry_at": None,
            }
        )

    def _update_or_raise(self, request: dict[str, Any]) -> None:
        """A single-item write, its conditional failure reported the way a cancelled transaction is."""
        try:
            self.client.update_item(**request)
        except ClientError as error:
            if is_conditional_failure(error):
                error.response["CancellationReasons"] = [{"Code": "ConditionalCheckFailed"}]
            raise

    def extend(self, run: Run, until: datetime) -> bool:
        """Heartbeat: push the lease out, only while this attempt still holds it."""
        update = Update().set(lease_expires_at=to_rfc3339(until))
        self._attention(update, run.run_id, until)
        self._hold(update, run)
        return self._try(self._run_update(run, update))

    def finish(
        self,
        run: Run,
        *,
        status: RunStatus,
        attempt: Attempt,
        now: datetime,
        retry_at: datetime | None = None,
        attention_at: datetime | None = None,
        reason: str | None = None,
        slot_held: bool | None = None,
    ) -> bool:
        """Record the attempt's outcome and the run's next status, conditional on the fencing token, and
        give the tenant's slot back when the lease took one (``slot_held``; None: as the item says). False
        when the lease was lost meanwhile."""
        update = Update().set(status=status.value)
        _replace_attempt(update, attempt)
        update.remove("lease_owner", "lease_expires_at")
        if retry_at is not None:
            update.set(retry_at=to_rfc3339(retry_at))
        if reason is not None:
            update.set(reason=reason)
        if status in TERMINAL_RUN_STATUSES:
            update.set(finished_at=to_rfc3339(now))
            update.remove(tables.ATTENTION_SHARD, tables.ATTENTION_AT)
        if status is RunStatus.DEAD:
            update.set(**{DEAD_LETTER_OWED: True})
        elif attention_at is not None:
            self._attention(update, run.run_id, attention_at)
        self._hold(update, run)
        return self._end_attempt(run, update, slot_held)

    def dead_letter_sent(self, run: Run) -> bool:
        """The DEAD run's letter is in the dead-run queue: nothing is owed any more."""
        update = Update().remove(DEAD_LETTER_OWED)
        update.where(f"attribute_exists({update.name(DEAD_LETTER_OWED)})")
        return self._try(self._run_update(run, update))

    def requeue_expired(self, run: Run, *, now: datetime, abandon: bool, start_grace: timedelta) -> bool:
        """The sweeper's repair of a lease that expired: back to ENQUEUED for another attempt, or ABANDONED
        for at-most-once jobs. Conditional on the dead attempt's fencing token; frees its tenant slot."""
        last = run.attempts[-1] if run.attempts else None
        update = Update().remove("lease_owner", "lease_expires_at")
        if abandon:
            update.set(status=RunStatus.ABANDONED.value, finished_at=to_rfc3339(now), reason="lease_expired")
            update.remove(tables.ATTENTION_SHARD, tables.ATTENTION_AT)
        else:
            update.set(status=RunStatus.ENQUEUED.value, enqueued_at=to_rfc3339(now))
            self._attention(update, run.run_id, now + start_grace)
        if last is not None and last.finished_at is None:
            closed = last.model_copy(
                update={"finished_at": now, "outcome": "abandoned", "error_code": "lease_expired"}
            )
            _replace_attempt(update, closed)
        self._hold(update, run)
        attention = update.name(tables.ATTENTION_AT)
        update.where(f"{attention} < {update.value(to_epoch_ms(now))}")
        return self._end_attempt(run, update, None)

    def _end_attempt(self, run: Run, update: Update, slot_held: bool | None) -> bool:
        """Apply the attempt's last write; the tenant's slot goes back in the same transaction if it held
        one. Unknown (None): the item says, so try one way, then the other."""
        update.remove(SLOT)
        tries = [True, False] if slot_held is None else [slot_held]
        for held in tries:
            attempt = copy.deepcopy(update)
            flag = attempt.name(SLOT)
            if held:
                attempt.where(f"attribute_not_exists({flag}) OR {flag} = {attempt.value(True)}")
                items = [
                    {"Update": self._run_update(run, attempt)},
                    {"Update": self._tenant_slot(run.tenant_id, -1)},
                ]
                if self._try_transaction(items):
                    return True
            else:
                attempt.where(f"{flag} = {attempt.value(False)}")
                if self._try(self._run_update(run, attempt)):
                    return True
        return False

    def _hold(self, update: Update, run: Run) -> None:
        status, token = update.name("status"), update.name("fencing_token")
        update.where(f"{status} = {update.value(RunStatus.RUNNING.value)}")
        update.where(f"{token} = {update.value(run.fencing_token)}")

    def _try(self, request: dict[str, Any]) -> bool:
        return update_if(self.client, **request)

    def _try_transaction(self, items: list[Any]) -> bool:
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            if cancellation_codes(error)[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True


def _replace_attempt(update: Update, attempt: Attempt) -> None:
    """Attempt n sits at index n - 1: every lease appends exactly one record."""
    record = update.value(attempt.model_dump(mode="json", exclude_none=True))
    update.set_raw(f"{update.name('attempts')}[{attempt.attempt - 1}] = {record}")


def running_runs_of_job(store: DynamoRunStore, tenant_id: str, job_id: str, *, now: datetime) -> list[str]:
    """Ids of the job's runs that hold a live lease now (for the overlap policy)."""
    update = Update()
    job, at, status, attention = (
        update.name(tables.RUNS_JOB_KEY),
        update.name(tables.RUNS_SCHEDULED_AT),
        update.name("status"),
        update.name(tables.ATTENTION_AT),
    )
    request: dict[str, Any] = {
        "TableName": store.table,
        "IndexName": tables.RUNS_BY_JOB_INDEX,
        "KeyConditionExpression": f"{job} = {update.value(tables.run_job_key(tenant_id, job_id))} AND "
        f"{at} >= {update.value(to_epoch_ms(now - RUNNING_LOOKBACK))}",
        "FilterExpression": f"{status} = {update.value(RunStatus.RUNNING.value)} AND "
        f"{attention} > {update.value(to_epoch_ms(now))}",
        "ProjectionExpression": "run_id",
    }
    expression = update.expression()
    request["ExpressionAttributeNames"] = expression["ExpressionAttributeNames"]
    request["ExpressionAttributeValues"] = expression["ExpressionAttributeValues"]
    running: list[str] = []
    for page in store.client.get_paginator("query").paginate(**request):
        running.extend(item["run_id"]["S"] for item in page["Items"])
    return running


def due_for_attention(
    store: DynamoRunStore, shard: int, *, now: datetime, limit: int
) -> list[tuple[str, str]]:
    """(tenant_id, run_id) of open runs whose attention time has passed, oldest first."""
    response = store.client.query(
        TableName=store.table,
        IndexName=tables.OPEN_RUNS_INDEX,
        KeyConditionExpression="#shard = :shard AND #at <= :now",
        ExpressionAttributeNames={"#shard": tables.ATTENTION_SHARD, "#at": tables.ATTENTION_AT},
        ExpressionAttributeValues=to_item({":shard": shard, ":now": to_epoch_ms(now)}),
        Limit=limit,
    )
    return [(item["tenant_id"]["S"], item["run_id"]["S"]) for item in response["Items"]]


# A run started more than this long before now is not looked at by the overlap check.
RUNNING_LOOKBACK = timedelta(days=2)
