"""The run queue (SQS with native delays) and the dead-run queue."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.adapters.runs import START_GRACE, DynamoRunLeases
from tickwork.domain.models import Run, RunMessage, RunStatus
from tickwork.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_DELAY_SECONDS = 900  # SQS's limit for DelaySeconds
BATCH_SIZE = 10  # SendMessageBatch's limit
__all__ = ["BATCH_SIZE", "MAX_DELAY_SECONDS", "START_GRACE", "SqsDeadRunQueue", "SqsRunDispatcher"]


def delay_seconds(due_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message: rounded down (the worker waits out the rest), clamped to 0-900."""
    return max(0, min(MAX_DELAY_SECONDS, math.floor((due_at - now).total_seconds())))


def message_body(run: Run) -> str:
    return RunMessage(tenant_id=run.tenant_id, run_id=run.run_id).model_dump_json(exclude_none=True)


class SqsRunDispatcher:
    """Sends runs to the run queue in batches of ten, the tenant as ``MessageGroupId`` (SQS fair queues).
    A run is ENQUEUED once sent (the planner stores it so before sending); a run whose send failed is
    PLANNED, for the sweeper."""

    def __init__(self, client: SQSClient, *, queue_url: str, leases: DynamoRunLeases):
        self.client = client
        self.queue_url = queue_url
        self.leases = leases

    def dispatch(self, runs: Sequence[Run], now: datetime) -> None:
        """Send runs already stored (PLANNED, or due again), then mark each one sent ENQUEUED."""
        for _, sent in self._send(runs, now):
            for run in sent:
                self.leases.mark_enqueued(run, now, START_GRACE)

    def stored_as(self, run: Run, now: datetime) -> Run:
        """How the planner stores a run it is about to send: ENQUEUED already, so a successful send needs
        no second write. A failed send puts it back to PLANNED (``send_stored``); a planner that dies
        between the put and the send leaves it to the sweeper at its time + START_GRACE."""
        return run.model_copy(update={"status": RunStatus.ENQUEUED, "enqueued_at": now})

    def send_stored(self, runs: Sequence[Run], now: datetime) -> None:
        """Send runs stored by ``stored_as``, in batches of ten whatever their jobs."""
        done = 0
        try:
            for batch, sent in self._send(runs, now):
                done += len(batch)
                accepted = {run.run_id for run in sent}
                for run in batch:
                    if run.run_id not in accepted:
                        self.leases.unsent(run, now)
        except Exception:
            for run in runs[done:]:
                self.leases.unsent(run, now)
            raise

    def _send(self, runs: Sequence[Run], now: datetime) -> Iterator[tuple[list[Run], list[Run]]]:
        """Each batch of up to ten runs, with the runs SQS accepted."""
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
            yield batch, [batch[int(success["Id"])] for success in response.get("Successful", [])]

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
