"""Worker Lambda: SQS run-queue batches through Powertools' BatchProcessor, reporting partial failures.

A message that must come back later (early, held by the overlap policy or the tenant's limit) gets its
visibility timeout set to the delay and is reported as a failure, so SQS delivers it again then.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from tickwork.domain.models import RunMessage
from tickwork.execution import RunExecutor
from tickwork.observability import logger, metrics, tracer
from tickwork.runtime import Runtime, runtime


class ComeBackLater(Exception):
    """Reported as a batch item failure after the message's visibility was set to the delay."""


def handle_record(
    record: SQSRecord, current: Runtime | None = None, executor: RunExecutor | None = None
) -> str:
    current = current or runtime()
    executor = executor or current.executor()
    try:
        message = RunMessage.model_validate_json(record.body)
    except ValidationError:
        # Malformed messages are dropped, never retried forever.
        current.metrics.count("MessagesDropped")
        logger.warning("malformed run message dropped", extra={"message_id": record.message_id})
        return "dropped"
    outcome = executor.handle(message)
    if not outcome.done:
        current.sqs.change_message_visibility(
            QueueUrl=current.queue.queue_url,
            ReceiptHandle=record.receipt_handle,
            VisibilityTimeout=outcome.retry_in_seconds,
        )
        raise ComeBackLater(outcome.note)
    return outcome.note


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    current = runtime()
    executor = current.executor(budget=context)
    # Per invocation: the processor keeps the batch it is processing. A batch whose every message must come
    # back later is not an error: each one is reported as a failure.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_partial_response(
        event=event,
        record_handler=lambda record: handle_record(record, current, executor),
        processor=processor,
        context=context,
    )
