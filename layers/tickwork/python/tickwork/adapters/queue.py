"""The run queue (SQS with native delays, the tenant as a fair queue's message group) and the dead-run
queue."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.app.ports import Dispatch
from tickwork.domain.models import Run, RunMessage
from tickwork.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_DELAY_SECONDS = 900  # SQS's limit for DelaySeconds
BATCH_SIZE = 10  # SendMessageBatch's limit


def delay_seconds(due_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message: rounded down (the worker waits out the rest), clamped to 0-900."""
    return max(0, min(MAX_DELAY_SECONDS, math.floor((due_at - now).total_seconds())))


def message_body(message: RunMessage) -> str:
    return message.model_dump_json(exclude_none=True)


class SqsRunQueue:
    def __init__(self, client: SQSClient, *, queue_url: str):
        self.client = client
        self.queue_url = queue_url

    def send(self, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        """Ten to a request; returns the dispatches SQS did not take (a failed request: all of its ten)."""
        unsent: list[Dispatch] = []
        for start in range(0, len(dispatches), BATCH_SIZE):
            batch = list(dispatches[start : start + BATCH_SIZE])
            try:
                response = self.client.send_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {
                            "Id": str(index),
                            "MessageBody": message_body(dispatch.message),
                            "DelaySeconds": delay_seconds(dispatch.due_at, now),
                            "MessageGroupId": dispatch.message.tenant_id,
                        }
                        for index, dispatch in enumerate(batch)
                    ],
                )
            except Exception:
                logger.exception("a batch of runs was not sent", extra={"runs": len(batch)})
                unsent.extend(batch)
                continue
            for failure in response.get("Failed", []):
                dispatch = batch[int(failure["Id"])]
                logger.warning(
                    "run not sent",
                    extra={"run_id": dispatch.message.run_id, "error_code": failure.get("Code")},
                )
                unsent.append(dispatch)
        return unsent

    def send_later(self, message: RunMessage, delay_seconds: int) -> None:
        self.client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=message_body(message),
            DelaySeconds=max(0, min(MAX_DELAY_SECONDS, delay_seconds)),
            MessageGroupId=message.tenant_id,
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
