"""The runs table's DynamoDB stream, read from moto as Lambda's event source mapping reads it (after the last
record handed over), and given to the indexer handler as a stream event.

moto's stream records are read from its streams backend: its HTTP route for DynamoDB Streams does not answer
the calls today's botocore signs for the ``dynamodb`` service."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodbstreams.models import dynamodbstreams_backends
from tickwork import tables
from tickwork.runtime import Runtime


class StreamIndexer:
    def __init__(self, dynamodb: Any):
        self.backend = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID][dynamodb.meta.region_name]
        table = dynamodb.describe_table(TableName=tables.RUNS.default_name)["Table"]
        self.stream_arn: str = table["LatestStreamArn"]
        self.after: int | None = None

    def records(self) -> list[dict[str, Any]]:
        """Every record written since the last call, as a Lambda stream event carries them."""
        shard = self.backend.describe_stream(self.stream_arn)["Shards"][0]
        kind = "AFTER_SEQUENCE_NUMBER" if self.after is not None else "TRIM_HORIZON"
        iterator = self.backend.get_shard_iterator(self.stream_arn, shard["ShardId"], kind, self.after)
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

        return handle({"Records": self.records()}, current)


def _as_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    change = dict(record["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": change, "eventSourceARN": stream_arn}
