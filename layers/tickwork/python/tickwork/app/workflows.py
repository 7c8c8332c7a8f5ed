"""A workflow run's start: its root tasks stored, the run RUNNING under its lease, then the roots sent.

The roots are stored before the run is written RUNNING, so a worker that dies in between leaves nothing
undone: the run's message comes back and starts it (the roots are found stored), and a root stored but not
sent is sent by the sweeper. What follows each task's end is :class:`~tickwork.app.after_end.AfterEnd`'s.
"""

from __future__ import annotations

from datetime import datetime

from tickwork.app.claims import Lease
from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import Dispatch, Metrics, RunQueue
from tickwork.domain.arrival import Candidate
from tickwork.domain.models import Job, Run, RunMessage, RunStatus, WorkflowTarget
from tickwork.domain.priority import message_priority
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.domain.workflow import task_graph


def workflow_of(job: Job) -> WorkflowTarget | None:
    return job.target if isinstance(job.target, WorkflowTarget) else None


class WorkflowStarts:
    def __init__(self, *, lifecycle: RunLifecycle, queue: RunQueue, metrics: Metrics):
        self.lifecycle = lifecycle
        self.queue = queue
        self.metrics = metrics

    def start(self, job: Job, candidate: Candidate, lease: Lease | None, now: datetime) -> Run | None:
        """Start the workflow run of ``candidate`` under ``lease`` (its lane holder; None for a job with no
        lane): the run as started, or None when another write got there first."""
        workflow = workflow_of(job)
        assert workflow is not None
        holder = lease.holder if lease is not None else None
        run = candidate.run.model_copy(update={"fencing_token": holder.token}) if holder else candidate.run
        roots = [self.lifecycle.plan_task(run, task_id, now) for task_id in task_graph(workflow.tasks).roots]
        started = self.lifecycle.start_workflow(candidate, run, in_lane=holder is not None, now=now)
        if started is None:
            self.metrics.count("LeaseConflicts")
            return None
        self.metrics.count("WorkflowRunsStarted")
        for root, written in roots:
            stored = root if written.ok else written.current
            if stored is not None and stored.status in (RunStatus.PLANNED, RunStatus.ENQUEUED):
                message = RunMessage(
                    tenant_id=stored.tenant_id,
                    run_id=stored.run_id,
                    sent_at=to_epoch_ms(now),
                    priority=message_priority(job.priority),
                )
                # Unsent, the PLANNED root waits for the sweeper, which sends it again.
                self.queue.send([Dispatch(message, now)], now)
        return started
