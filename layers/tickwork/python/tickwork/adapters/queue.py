"""The run queues (SQS with native delays, the tenant as a fair queue's message group; one queue per
priority) and the dead-run queue."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.app.ports import Dispatch
from tickwork.domain.models import Run, RunMessage
from tickwork.domain.priority import DEFAULT_PRIORITY, Priority
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
    """Each message goes to its priority's queue (``queue_urls``; one missing: the normal run queue)."""

    def __init__(
        self, client: SQSClient, *, queue_url: str, queue_urls: Mapping[Priority, str | None] | None = None
    ):
        self.client = client
        self.queue_url = queue_url
        self.queue_urls = {priority: url for priority, url in (queue_urls or {}).items() if url}

    def url_for(self, message: RunMessage) -> str:
        return self.queue_urls.get(message.priority or DEFAULT_PRIORITY, self.queue_url)

    def send(self, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        """Ten to a request, each request to one queue; returns the dispatches SQS did not take (a failed
        request: all of its ten)."""
        by_queue: dict[str, list[Dispatch]] = {}
        for dispatch in dispatches:
            by_queue.setdefault(self.url_for(dispatch.message), []).append(dispatch)
        unsent: list[Dispatch] = []
        for queue_url, queued in by_queue.items():
            unsent.extend(self._send(queue_url, queued, now))
        return unsent

    def _send(self, queue_url: str, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        unsent: list[Dispatch] = []
        for start in range(0, len(dispatches), BATCH_SIZE):
            batch = list(dispatches[start : start + BATCH_SIZE])
            try:
                response = self.client.send_message_batch(
                    QueueUrl=queue_url,
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
            QueueUrl=self.url_for(message),
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
