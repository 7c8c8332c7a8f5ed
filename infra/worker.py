"""The worker: the run queue's event source mapping with partial batch failures and capped concurrency."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StageConfig


class Worker(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        function: lambda_.Function,
        run_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = function
        self.event_source = sources.SqsEventSource(
            run_queue,
            batch_size=config.worker_batch_size,
            max_concurrency=config.worker_max_concurrency,
            report_batch_item_failures=True,
        )
        function.add_event_source(self.event_source)
