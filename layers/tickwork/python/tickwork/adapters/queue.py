"""The run queue (SQS with native delays) and the dead-run queue."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tickwork.adapters.runs import DynamoRunLeases
from tickwork.domain.models import Run, RunMessage
from tickwork.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_DELAY_SECONDS = 900  # SQS's limit for DelaySeconds
BATCH_SIZE = 10  # SendMessageBatch's limit
# An ENQUEUED run that has not started this long after it was due needs the sweeper.
START_GRACE = timedelta(seconds=60)


def delay_seconds(due_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message: rounded down (the worker waits out the rest), clamped to 0-900."""
    return max(0, min(MAX_DELAY_SECONDS, math.floor((due_at - now).total_seconds())))


def message_body(run: Run) -> str:
    return RunMessage(tenant_id=run.tenant_id, run_id=run.run_id).model_dump_json()


class SqsRunDispatcher:
    """Sends runs to the run queue in batches of ten, the tenant as ``MessageGroupId`` (SQS fair queues),
    then marks them ENQUEUED. A run whose send failed stays PLANNED for the sweeper."""

    def __init__(self, client: SQSClient, *, queue_url: str, leases: DynamoRunLeases):
        self.client = client
        self.queue_url = queue_url
        self.leases = leases

    def dispatch(self, runs: Sequence[Run], now: datetime) -> None:
        for start in range(0, len(runs), BATCH_SIZE):
            batch = list(runs[start : start + BATCH_SIZE])
            response = self.client.send_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {
                        "Id": str(index),
                        "MessageBody": message_body(run),
                        "DelaySeconds": delay_seconds(run.due_at, now),
                        "MessageGroupId": run.tenant_id,
                    }
                    for index, run in enumerate(batch)
                ],
            )
            for failure in response.get("Failed", []):
                logger.warning(
                    "run not sent",
                    extra={"run_id": batch[int(failure["Id"])].run_id, "code": failure.get("Code")},
                )
            for success in response.get("Successful", []):
                self.leases.mark_enqueued(batch[int(success["Id"])], now, START_GRACE)

    def send_later(self, run: Run, delay: int) -> None:
        """Re-send one run's message with a delay (a retry, or a run held back by its overlap policy)."""
        self.client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=message_body(run),
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, delay)),
            MessageGroupId=run.tenant_id,
        )


class SqsDeadRunQueue:
    """Runs that exhausted their retries, with their last error, for humans and alarms."""

    def __init__(self, client: SQSClient, *, queue_url: str):
        self.client = client
        self.queue_url = queue_url

    def send(self, run: Run, *, reason: str, error: dict[str, Any] | None) -> None:
        body = {
            "tenant_id": run.tenant_id,
            "job_id": run.job_id,
            "run_id": run.run_id,
            "scheduled_for": run.model_dump(mode="json")["scheduled_for"],
            "attempts": run.attempt,
            "reason": reason,
            "last_error": error,
        }
        self.client.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))
