"""The worker's SQS batches, handled side by side: one thread per job, a job's records in batch order.

A batch's runs mostly share their fire's moment and belong to different jobs. Handled one after another,
the invocation is billed for every run's DynamoDB round trips in a row; side by side, for the longest job's.
Records of one job stay in one thread, in the order SQS delivered them, so a job's fires still meet its
lane one at a time and in order (overlap ``queue``, backfill), as they did one after another.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from tickwork.domain.models import parse_run_id
from tickwork.observability import logger

DEFAULT_PARALLELISM = 10
"""The most records of a batch handled at once: a batch holds ten (``worker_batch_size``)."""


def job_of(record: dict[str, Any]) -> str:
    """The job a run-queue record is about (tenant and job id), or its message id when the body cannot
    tell: a malformed record is a group of its own, dropped by the record handler."""
    try:
        body = json.loads(record.get("body") or "")
        key = parse_run_id(str(body["run_id"]))
        if key is not None:
            return f"{body['tenant_id']}/{key.job_id}"
    except (ValueError, KeyError, TypeError):
        pass
    return f"message:{record.get('messageId', id(record))}"


class JobOrderedBatchProcessor(BatchProcessor):
    """Powertools' SQS BatchProcessor (partial batch responses, failure reporting) whose records are
    handled by up to ``parallelism`` threads, grouped by :func:`job_of`."""

    def __init__(
        self,
        *,
        parallelism: int = DEFAULT_PARALLELISM,
        group_of: Callable[[dict[str, Any]], str] = job_of,
    ):
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self.parallelism = parallelism
        self.group_of = group_of

    def process(self) -> list[tuple[Any, ...]]:
        groups: dict[str, list[int]] = {}
        for index, record in enumerate(self.records):
            groups.setdefault(self.group_of(record), []).append(index)
        if self.parallelism <= 1 or len(groups) <= 1:
            return super().process()
        results: list[Any] = [None] * len(self.records)
        # Log keys are per thread (the Lambda context's among them): each thread starts from the caller's.
        inherited = logger.registered_formatter.thread_safe_get_current_keys()

        def handle_group(indexes: list[int]) -> None:
            logger.append_keys(**inherited)
            try:
                for index in indexes:
                    results[index] = self._process_record(self.records[index])
            finally:
                logger.registered_formatter.thread_safe_clear_keys()

        with ThreadPoolExecutor(max_workers=min(self.parallelism, len(groups))) as pool:
            for finished in [pool.submit(handle_group, indexes) for indexes in groups.values()]:
                finished.result()
        return results
