"""Worker Lambda: SQS run-queue batches through Powertools' BatchProcessor, reporting partial failures.

Every message the worker dealt with is a success, deleted by the event source mapping: a run that must wait
(early, held by its overlap policy) has been sent again with a delay, so waiting never counts as a failed
receive and never reaches the dead-letter queue. Only an unexpected error leaves a message for SQS.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError
from tickwork.app.worker import Worker
from tickwork.batches import JobOrderedBatchProcessor
from tickwork.domain.models import RunMessage
from tickwork.observability import logger, metrics, tracer
from tickwork.runtime import Runtime, runtime


def handle_record(record: SQSRecord, current: Runtime | None = None, worker: Worker | None = None) -> str:
    current = current or runtime()
    worker = worker or current.worker()
    try:
        message = RunMessage.model_validate_json(record.body)
    except ValidationError:
        # Malformed messages are dropped, never retried forever.
        current.metrics.count("MessagesDropped")
        logger.warning("malformed run message dropped", extra={"message_id": record.message_id})
        return "dropped"
    try:
        return worker.handle(message)
    except Exception:
        # Left for SQS to deliver again. The batch processor keeps only the error's text: log its traceback.
        logger.exception(
            "handling a run message failed", extra={"tenant_id": message.tenant_id, "run_id": message.run_id}
        )
        raise


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    current = runtime()
    worker = current.worker()
    # Per invocation: the processor keeps the batch it is processing. Different jobs' records are handled
    # side by side, so the invocation is billed for the longest job's round trips rather than all of them.
    processor = JobOrderedBatchProcessor(parallelism=current.settings.worker_parallelism)
    return process_partial_response(
        event=event,
        record_handler=lambda record: handle_record(record, current, worker),
        processor=processor,
        context=context,
    )
