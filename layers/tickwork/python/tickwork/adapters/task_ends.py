"""The ends of a workflow run's tasks (the runs table, the run's tasks partition, one item): the fan-in.

Each task's end is one conditional write of its own attribute, which returns every end recorded so far, so
the write that completes a child's parents sees them all and decides the child. A repeated end (a duplicate
delivery finishing what its first delivery started) writes nothing and gets the ends as they stand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from tickwork import tables
from tickwork.adapters.dynamo import from_item, is_conditional_failure, to_item
from tickwork.domain.models import Run, parse_run_id
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.domain.workflow import TaskEnds, TaskOutcome

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _outcomes(item: dict[str, Any] | None) -> dict[str, TaskOutcome]:
    values = from_item(item) if item else {}
    prefix = tables.TASK_END_PREFIX
    return {
        name[len(prefix) :]: cast(TaskOutcome, value)
        for name, value in values.items()
        if name.startswith(prefix)
    }


class DynamoTaskEnds:
    def __init__(self, client: DynamoDBClient, *, table: str, retention_seconds: int):
        self.client = client
        self.table = table
        self.retention_seconds = retention_seconds

    def key(self, workflow_run: Run) -> dict[str, Any]:
        parsed = parse_run_id(workflow_run.run_id)
        if parsed is None:
            raise ValueError(f"{workflow_run.run_id!r} is not a workflow run's id")
        sort_key = tables.run_sort_key(to_epoch_ms(workflow_run.scheduled_for), parsed.manual)
        partition = tables.tasks_key(workflow_run.tenant_id, workflow_run.job_id, sort_key)
        # Its go: the workflow run's re-runs by hand (a task's run carries the go it belongs to).
        ends_key = tables.task_ends_sort_key(workflow_run.manual_retries)
        return to_item({tables.RUNS_PK: partition, tables.RUNS_SK: ends_key})

    def record(self, workflow_run: Run, task_id: str, outcome: TaskOutcome) -> TaskEnds:
        """The task's end, once: its attribute set if absent; every end recorded, as the write left them."""
        expires = int(workflow_run.scheduled_for.timestamp()) + self.retention_seconds
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=self.key(workflow_run),
                UpdateExpression="SET #end = :outcome, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(#end)",
                ExpressionAttributeNames={"#end": tables.TASK_END_PREFIX + task_id, "#ttl": tables.RUNS_TTL},
                ExpressionAttributeValues=to_item({":outcome": outcome, ":ttl": expires}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            old: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
            return TaskEnds(_outcomes(old), recorded=False)
        return TaskEnds(_outcomes(response.get("Attributes")), recorded=True)

    def begin_retry(self, reopened: Run, kept: dict[str, TaskOutcome]) -> None:
        """The ends a retry of the workflow run keeps, as the first ends of its new go (``reopened``: the run
        as the retry reopens it), written once: a repeated retry of the same go (after a failure between this
        write and the run's) finds them written and leaves them, with whatever the go recorded since."""
        expires = int(reopened.scheduled_for.timestamp()) + self.retention_seconds
        values = {tables.TASK_END_PREFIX + task_id: outcome for task_id, outcome in kept.items()}
        key = self.key(reopened)
        try:
            self.client.put_item(
                TableName=self.table,
                Item={**key, **to_item({**values, tables.RUNS_TTL: expires})},
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": tables.RUNS_PK},
            )
        except ClientError as error:
            if not is_conditional_failure(error):
                raise

    def read(self, workflow_run: Run) -> dict[str, TaskOutcome]:
        response = self.client.get_item(TableName=self.table, Key=self.key(workflow_run), ConsistentRead=True)
        return _outcomes(response.get("Item"))
