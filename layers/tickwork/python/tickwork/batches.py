"""The worker's SQS batches, handled side by side: one thread per job, a job's records in their fires' order.

A batch's runs mostly share their fire's moment and belong to different jobs. Handled one after another,
the invocation is billed for every run's DynamoDB round trips in a row; side by side, for the longest job's.
Records of one job stay in one thread, in the order of their fires (then as SQS delivered them), so a job's
fires still meet its lane one at a time and in order (overlap ``queue``, backfill), and a fire read ahead,
which waits for its time, never holds back one due before it.
"""

from __future__ import annotations

import json
import time
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


def fire_of(record: dict[str, Any]) -> int:
    """The fire a run-queue record is for (epoch ms), or -1 when it names none (a manual run, a task, a
    malformed body): those keep their place ahead of the job's scheduled fires."""
    try:
        key = parse_run_id(str(json.loads(record.get("body") or "")["run_id"]))
    except (ValueError, KeyError, TypeError):
        return -1
    return key.fire_ms if key is not None and key.fire_ms is not None else -1


class JobOrderedBatchProcessor(BatchProcessor):
    """Powertools' SQS BatchProcessor (partial batch responses, failure reporting) whose records are
    handled by up to ``parallelism`` threads, grouped by :func:`job_of`."""

    def __init__(
        self,
        *,
        parallelism: int = DEFAULT_PARALLELISM,
        group_of: Callable[[dict[str, Any]], str] = job_of,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self.parallelism = parallelism
        self.group_of = group_of
        self.clock = clock

    def process(self) -> list[tuple[Any, ...]]:
        groups: dict[str, list[int]] = {}
        now_ms = int(self.clock() * 1000)
        for index, record in enumerate(self.records):
            group, fire = self.group_of(record), fire_of(record)
            # A fire still to come waits for its time on a thread of its own: it acts at its time, after
            # the job's fires before it, and must not hold back one of them that is due sooner.
            groups.setdefault(f"{group}@{fire}" if fire > now_ms else group, []).append(index)
        for indexes in groups.values():
            # A job's fires in the order of their times, whatever order SQS delivered them in: a fire read
            # ahead waits for its time, and one due before it must not wait behind it.
            indexes.sort(key=lambda index: fire_of(self.records[index]))
        results: list[Any] = [None] * len(self.records)
        if self.parallelism <= 1 or len(groups) <= 1:
            for indexes in groups.values():
                for index in indexes:
                    results[index] = self._process_record(self.records[index])
            return results
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
