"""Planner Lambda: on each EventBridge tick, plan the due jobs of its shards, then sweep."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.observability import logger, metrics, tracer
from tickwork.runtime import runtime


def shards_of(event: dict[str, Any], shard_count: int) -> list[int]:
    """The shards this planner owns: ``{"shards": [..]}`` from the rule's input, else all of them."""
    owned = event.get("shards")
    if not isinstance(owned, list):
        return list(range(shard_count))
    return sorted({shard for shard in owned if isinstance(shard, int) and 0 <= shard < shard_count})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    current = runtime()
    shards = shards_of(event, current.settings.due_shards)
    report = current.planner_tick.tick(datetime.now(UTC), shards, align_sends=True)
    return {
        "shards": shards,
        "due_jobs": report.due_jobs,
        "planned_runs": report.planned_runs,
        "missed_runs": report.missed_runs,
        "swept": report.swept,
        "stray_shards": report.stray_shards,
    }
