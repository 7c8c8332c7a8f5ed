"""The worker: each worker function's event source mappings on the run queues (one per priority), with partial
batch failures and capped concurrency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from tickwork.domain.priority import Priority

from infra.config import StageConfig


class Worker(Construct):
    """Lambda lets several functions consume one queue, each through its own mapping with its own
    ``MaximumConcurrency`` (at most 1,000): ``worker_functions`` mappings run that many times as many.

    Each priority's queue has a mapping of its own on every worker function, with the same cap: a backlog of
    one priority's runs takes none of another's pollers or concurrency, so a high run never waits behind
    low ones, and low runs are never starved by a flood of high ones."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        functions: Sequence[lambda_.Function],
        run_queues: Mapping[Priority, sqs.IQueue],
    ) -> None:
        super().__init__(scope, construct_id)
        self.functions = list(functions)
        self.event_sources: list[sources.SqsEventSource] = []
        for function in self.functions:
            for run_queue in run_queues.values():
                event_source = sources.SqsEventSource(
                    run_queue,
                    batch_size=config.worker_batch_size,
                    max_concurrency=config.worker_max_concurrency,
                    report_batch_item_failures=True,
                )
                function.add_event_source(event_source)
                self.event_sources.append(event_source)
