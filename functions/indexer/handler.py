"""Indexer Lambda: a batch of the runs table's stream records into the tenant-wide run index.

The event source mapping delivers each shard's records in order, at least once: a batch delivered again
writes the same chunks again (``tickwork.domain.run_index``). A failed batch is retried whole, so the index
never skips a change; removals (TTL expiry) are left to the index's own TTL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.adapters.run_index import entry_from_image
from tickwork.domain.run_index import IndexEntry
from tickwork.observability import logger, metrics, tracer
from tickwork.runtime import Runtime, runtime

WRITES = (DynamoDBRecordEventName.INSERT, DynamoDBRecordEventName.MODIFY)


def run_changes(records: Iterable[DynamoDBRecord]) -> list[tuple[str, IndexEntry]]:
    """(tenant, summary) of each run a record wrote; other records (removals, manual-run pointers) none."""
    changes = []
    for record in records:
        change = record.dynamodb
        if record.event_name not in WRITES or change is None or change.sequence_number is None:
            continue
        image = change.raw_event.get("NewImage")
        found = entry_from_image(image, int(change.sequence_number)) if image else None
        if found is not None:
            changes.append(found)
    return changes


def handle(event: dict[str, Any], current: Runtime | None = None) -> dict[str, int]:
    current = current or runtime()
    records = list(DynamoDBStreamEvent(event).records)
    chunks = current.indexer.index_changes(run_changes(records))
    return {"records": len(records), "chunks": chunks}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    return handle(event)
