"""The indexer: the runs table's stream into the tenant-wide run index, through one event source mapping."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

# A batch per shard at most every few seconds, of up to this many records: one chunk per tenant and minute
# for all of them (docs/cost.md). The window keeps the index a few seconds behind the runs at most.
BATCH_SIZE = 1000
BATCHING_WINDOW = Duration.seconds(2)
# A failed batch is retried whole (its chunks are written again, the same items) for up to a day, then the
# records are given up: the stream keeps them 24 hours.
RECORD_MAX_AGE = Duration.hours(24)


class Indexer(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, function: lambda_.Function, runs: dynamodb.ITable
    ) -> None:
        super().__init__(scope, construct_id)
        self.event_source = sources.DynamoEventSource(
            runs,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=BATCH_SIZE,
            max_batching_window=BATCHING_WINDOW,
            bisect_batch_on_error=False,
            retry_attempts=-1,
            max_record_age=RECORD_MAX_AGE,
            # Only writes are indexed: removals (TTL expiry) never reach the function.
            filters=[
                lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.or_("INSERT", "MODIFY")})
            ],
        )
        function.add_event_source(self.event_source)
