"""A workflow run's start and its retry by hand.

**The start**: the run written RUNNING under its lease, then the tasks it can start sent (its roots; on a
retry, the tasks the retry runs again that need no parent to end again). A task's run is first written by
its claim, which a second message of it finds written; the claim checks that the run is RUNNING in the go
the message was sent for, so a message of an earlier go is dropped. A worker that dies before the sends
leaves nothing undone: the run's message comes back, finds the run RUNNING, and sends what has no run yet
(:meth:`WorkflowStarts.resume`). What follows each task's end is :class:`~tickwork.app.after_end.AfterEnd`'s.

**A retry** of a FAILED workflow run runs again its failed and cancelled tasks and everything downstream of
them, and keeps what succeeded upstream (with its output). Each go of the run (its first, then each retry:
the run's ``manual_retries``) has a fan-in item of its own. The retry (the API's) writes the new go's first
ends, those it keeps, then reopens the run PLANNED and sends it like any re-run. The run's start (a worker's,
behind the job's lane) then resets the tasks of earlier goes that run again: a failed task about to start is
re-run under its run id (its attempts kept), any other is deleted to be decided again when its parents end.
A task's run carries the go it belongs to, so a start never resets a run of its own go, and an end recorded
late in an earlier go's fan-in never counts in the new one.
"""

from __future__ import annotations

from datetime import datetime

from tickwork.app.after_end import AfterEnd
from tickwork.app.claims import Lease
from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import Metrics, RunQueue, TaskEndStore, Written
from tickwork.domain.arrival import Candidate
from tickwork.domain.lifecycle import RETRYABLE_BY_HAND, TERMINAL
from tickwork.domain.models import Job, Run, WorkflowTarget
from tickwork.domain.workflow import (
    Decision,
    TaskOutcome,
    child_run_id,
    kept_ends,
    parse_child_run_id,
    ready_tasks,
)


def workflow_of(job: Job) -> WorkflowTarget | None:
    return job.target if isinstance(job.target, WorkflowTarget) else None


class WorkflowStarts:
    def __init__(
        self,
        *,
        lifecycle: RunLifecycle,
        queue: RunQueue,
        metrics: Metrics,
        after_end: AfterEnd,
        task_ends: TaskEndStore | None,
    ):
        self.lifecycle = lifecycle
        self.queue = queue
        self.metrics = metrics
        self.after_end = after_end
        self.task_ends = task_ends

    def start(self, job: Job, candidate: Candidate, lease: Lease | None, now: datetime) -> Run | None:
        """Start the workflow run of ``candidate`` under ``lease`` (its lane holder; None for a job with no
        lane): the run as started, or None when another write got there first."""
        workflow = workflow_of(job)
        assert workflow is not None
        holder = lease.holder if lease is not None else None
        run = candidate.run.model_copy(update={"fencing_token": holder.token}) if holder else candidate.run
        ends: dict[str, TaskOutcome] = {}
        if run.manual_retries and self.task_ends is not None:
            ends = self.task_ends.read(run)
        decided = ready_tasks(workflow.tasks, ends)
        if run.manual_retries:
            self._reset_earlier_goes(run, ends, decided, now)
        started = self.lifecycle.start_workflow(candidate, run, in_lane=holder is not None, now=now)
        if started is None:
            self.metrics.count("LeaseConflicts")
            return None
        self.metrics.count("WorkflowRunsStarted")
        # Sent once the run is RUNNING, which a task's first claim checks: cut short before, the run's
        # message comes back and finds it RUNNING (resume).
        self.after_end.settle_tasks(job, started, decided, now)
        # Every task may have ended before this write (a go whose tasks all ended, or all skipped).
        self.after_end.workflow_started(job, started)
        return started

    def resume(self, job: Job, running: Run, now: datetime) -> None:
        """A delivery of a RUNNING workflow run's own message: what its start may have left undone (its tasks
        decided to run with no run yet sent, those to skip stored). A task sent already gets a second
        message, which its claim absorbs."""
        workflow = workflow_of(job)
        if workflow is None or self.task_ends is None:
            return
        decided = ready_tasks(workflow.tasks, self.task_ends.read(running))
        ids = [child_run_id(running.run_id, task_id) for task_id in decided]
        found = self.lifecycle.runs.find_many(running.tenant_id, running.job_id, ids)
        unstarted = {
            task_id: decision
            for task_id, decision in decided.items()
            if child_run_id(running.run_id, task_id) not in found
        }
        self.after_end.settle_tasks(job, running, unstarted, now)
        self.after_end.workflow_started(job, running)

    def _reset_earlier_goes(
        self, run: Run, ends: dict[str, TaskOutcome], decided: dict[str, Decision], now: datetime
    ) -> None:
        """A retry's start: the runs of tasks this go runs again, left by an earlier go, reset. A failed task
        starting now is re-run (PLANNED, its attempts kept); any other is deleted, to be decided again when
        its parents end. A run of this go (a repeated start's) is left as it is."""
        for task_run in self.lifecycle.runs.tasks_of(run.tenant_id, run):
            child = parse_child_run_id(task_run.run_id)
            if child is None or child.task_id in ends or task_run.workflow_retry >= run.manual_retries:
                continue
            if task_run.status not in TERMINAL:
                continue  # an earlier go's run still going: never (that go ended with its last task)
            if decided.get(child.task_id) == "run" and task_run.status in RETRYABLE_BY_HAND:
                self.lifecycle.rerun_task(task_run, run, now)
            else:
                self.lifecycle.forget_task(task_run)


def reopen_workflow(
    lifecycle: RunLifecycle, task_ends: TaskEndStore, job: Job, run: Run, now: datetime
) -> tuple[Run, Written]:
    """A retry by hand of a FAILED workflow run: its new go's fan-in begun with the ends it keeps (those of
    the tasks it does not run again), then the run PLANNED again, for its start to run the rest. The caller
    sends it, as any re-run. Not written when the run changed since it was read (another retry got there)."""
    workflow = workflow_of(job)
    assert workflow is not None
    kept = kept_ends(workflow.tasks, task_ends.read(run))
    reopened = run.model_copy(update={"manual_retries": run.manual_retries + 1})
    task_ends.begin_retry(reopened, kept)
    return lifecycle.rerun(run, now)
