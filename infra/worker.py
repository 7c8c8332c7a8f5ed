"""The worker: each worker function's event source mapping on the run queue, with partial batch failures and
capped concurrency."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StageConfig


class Worker(Construct):
    """Lambda lets several functions consume one queue, each through its own mapping with its own
    ``MaximumConcurrency`` (at most 1,000): ``worker_functions`` mappings run that many times as many."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        functions: Sequence[lambda_.Function],
        run_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.functions = list(functions)
        self.event_sources: list[sources.SqsEventSource] = []
        for function in self.functions:
            event_source = sources.SqsEventSource(
                run_queue,
                batch_size=config.worker_batch_size,
                max_concurrency=config.worker_max_concurrency,
                report_batch_item_failures=True,
            )
            function.add_event_source(event_source)
            self.event_sources.append(event_source)
