"""The sweeper: repairs what a crash or a lost send left behind, using the sparse open-runs index.

- PLANNED runs whose message was never sent, and ENQUEUED runs not started by their time + grace: sent again;
- RUNNING runs whose lease expired: back to the queue, or ABANDONED for at-most-once jobs;
- RETRY_WAIT runs whose (long) delay is over: sent.

Each repair moves the run's attention time into the future, so a second sweep finds nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tickwork.adapters.jobs import DynamoJobStore
from tickwork.adapters.queue import START_GRACE, SqsRunDispatcher
from tickwork.adapters.runs import DynamoRunLeases, DynamoRunStore, due_for_attention
from tickwork.domain.models import RunStatus
from tickwork.errors import NotFound
from tickwork.execution import MetricSink
from tickwork.observability import logger


@dataclass
class SweepReport:
    resent: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        *,
        runs: DynamoRunStore,
        leases: DynamoRunLeases,
        jobs: DynamoJobStore,
        queue: SqsRunDispatcher,
        metrics: MetricSink,
        shards: int,
        limit_per_shard: int = 500,
    ):
        self.runs = runs
        self.leases = leases
        self.jobs = jobs
        self.queue = queue
        self.metrics = metrics
        self.shards = shards
        self.limit_per_shard = limit_per_shard

    def sweep(self, now: datetime) -> SweepReport:
        report = SweepReport()
        for shard in range(self.shards):
            for tenant_id, run_id in due_for_attention(self.runs, shard, now=now, limit=self.limit_per_shard):
                try:
                    self._repair(tenant_id, run_id, now, report)
                except NotFound:
                    logger.warning("open run vanished", extra={"run_id": run_id})
                except Exception:
                    # Its attention time has not moved, so the next sweep tries again; the others go on.
                    logger.exception("repairing an open run failed", extra={"run_id": run_id})
        return report

    def _repair(self, tenant_id: str, run_id: str, now: datetime, report: SweepReport) -> None:
        run = self.runs.get(tenant_id, run_id)
        if run.status in (RunStatus.PLANNED, RunStatus.ENQUEUED, RunStatus.RETRY_WAIT):
            self.queue.dispatch([run], now)
            report.resent.append(run_id)
        elif run.status is RunStatus.RUNNING:
            job = self.jobs.get(tenant_id, run.job_id)
            abandon = job.delivery == "at_most_once"
            if not self.leases.requeue_expired(run, now=now, abandon=abandon, start_grace=START_GRACE):
                return  # the lease holder is alive after all, or another sweeper got there first
            self.metrics.count("LeasesExpired")
            if abandon:
                report.abandoned.append(run_id)
                self.metrics.count("RunsAbandoned")
            else:
                self.queue.send_later(run, 0)
                report.requeued.append(run_id)
