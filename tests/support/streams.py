"""The runs table's DynamoDB stream, read from moto as Lambda's event source mapping reads it (after the last
record handed over), and given to the indexer handler as a stream event.

moto's stream records are read from its streams backend: its HTTP route for DynamoDB Streams does not answer
the calls today's botocore signs for the ``dynamodb`` service."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodbstreams.models import dynamodbstreams_backends
from tickwork import tables
from tickwork.runtime import Runtime


class StreamIndexer:
    def __init__(self, dynamodb: Any):
        self.backend = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID][dynamodb.meta.region_name]
        table = dynamodb.describe_table(TableName=tables.RUNS.default_name)["Table"]
        self.stream_arn: str = table["LatestStreamArn"]
        self.after: int | None = None
        self.lock = threading.Lock()

    def records(self) -> list[dict[str, Any]]:
        """Every record written since the last call, as a Lambda stream event carries them."""
        shard = self.backend.describe_stream(self.stream_arn)["Shards"][0]
        kind = "AFTER_SEQUENCE_NUMBER" if self.after is not None else "TRIM_HORIZON"
        # moto's backend takes the number as an int, as its HTTP layer passes it
        iterator = self.backend.get_shard_iterator(
            self.stream_arn,
            shard["ShardId"],
            kind,
            self.after,  # type: ignore[arg-type]
        )
        found: list[dict[str, Any]] = []
        while True:
            page = self.backend.get_records(iterator.arn, 1000)
            if not page["Records"]:
                return found
            for record in page["Records"]:
                found.append(_as_lambda_record(record, self.stream_arn))
                self.after = int(record["dynamodb"]["SequenceNumber"])
            iterator = self.backend.shard_iterators[page["NextShardIterator"]]

    def index(self, current: Runtime | None = None) -> dict[str, int]:
        """Hand the new records to the indexer handler, as one batch (with ``current``'s clients)."""
        from functions.indexer.handler import handle

        with self.lock:
            return handle({"Records": self.records()}, current)


Handler = Callable[[dict[str, Any], Any], Any]
# The tenant-wide routes that read the run index.
INDEXED_ROUTES = frozenset({"/v1/runs", "/v1/stats"})


def indexed_first(make_handler: Callable[[], Handler], dynamodb: Any) -> Callable[[], Handler]:
    """API handlers that index the runs' changes before a route reads the run index, as an indexer that has
    caught up would have: the tests of those routes are about what they answer. The index's delay is tested
    end to end on the local stack."""
    indexer = StreamIndexer(dynamodb)

    def make() -> Handler:
        handler = make_handler()

        def handle(event: dict[str, Any], context: Any) -> Any:
            if str(event.get("path", "")).rstrip("/") in INDEXED_ROUTES:
                indexer.index()
            return handler(event, context)

        return handle

    return make


def _as_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    change = dict(record["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": change, "eventSourceARN": stream_arn}
