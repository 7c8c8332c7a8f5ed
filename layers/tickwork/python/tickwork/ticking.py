"""The planner's tick: find due jobs in the sharded due index, plan each, then sweep."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from tickwork.adapters.jobs import DynamoJobStore
from tickwork.execution import MetricSink
from tickwork.observability import logger
from tickwork.planning import JobPlanner
from tickwork.sweeping import Sweeper, SweepReport


@dataclass
class TickReport:
    due_jobs: int = 0
    planned_runs: int = 0
    missed_runs: int = 0
    capped: bool = False
    sweep: SweepReport = field(default_factory=SweepReport)


class PlannerTick:
    def __init__(
        self,
        *,
        jobs: DynamoJobStore,
        planner: JobPlanner,
        sweeper: Sweeper,
        metrics: MetricSink,
        max_jobs_per_tick: int = 5000,
        parallelism: int = 4,
    ):
        self.jobs = jobs
        self.planner = planner
        self.sweeper = sweeper
        self.metrics = metrics
        self.max_jobs_per_tick = max_jobs_per_tick
        self.parallelism = parallelism

    def tick(self, now: datetime, shards: list[int]) -> TickReport:
        started = time.perf_counter()
        until = now + self.planner.horizon
        with ThreadPoolExecutor(max_workers=max(1, min(self.parallelism, len(shards)))) as pool:
            per_shard = list(
                pool.map(
                    lambda shard: self.jobs.due_job_ids(shard, until=until, limit=self.max_jobs_per_tick),
                    shards,
                )
            )
        due = sorted((key for keys in per_shard for key in keys), key=lambda key: key[2])
        report = TickReport(due_jobs=len(due), capped=len(due) > self.max_jobs_per_tick)
        # One batched read for the jobs and one batched send for their runs (jobs gone meanwhile are skipped)
        jobs = self.jobs.get_many(
            [(tenant_id, job_id) for tenant_id, job_id, _ in due[: self.max_jobs_per_tick]]
        )
        for result in self.planner.plan_many(jobs, now):
            report.planned_runs += len(result.planned)
            report.missed_runs += len(result.missed)
        report.sweep = self.sweeper.sweep(now)
        self.metrics.count("PlannerDueJobs", report.due_jobs)
        self.metrics.count("RunsPlanned", report.planned_runs)
        self.metrics.count("RunsMissed", report.missed_runs)
        self.metrics.milliseconds("PlannerTickMs", (time.perf_counter() - started) * 1000)
        logger.info("planner tick", extra={"due_jobs": report.due_jobs, "planned": report.planned_runs})
        return report


def all_shards(count: int) -> list[int]:
    return list(range(count))
