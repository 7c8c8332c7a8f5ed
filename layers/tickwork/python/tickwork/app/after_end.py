"""What follows a run's end, in one place: the steps, in the order they run.

1. the dead letter of a DEAD run: sent, then its debt cleared (a failure in between leaves the debt, paid by
   whoever reads the run next: the message's next delivery);
2. the job's completion, once its schedule's last fire has ended, however it ended;
3. a `queue` job's next fire, if already due, sent at once rather than when its held message comes back;
4. a backfill chain's next fire, sent once this fire's attempt has ended (paced);
5. a workflow task's end: recorded once in its workflow run's fan-in, then each child it settles started
   (stored PLANNED and sent) or skipped (stored SKIPPED, its own end carried on in turn).

Whoever ended the run (an attempt, a decision that ends it unrun, a lost attempt taken over) calls
:class:`AfterEnd` with an :class:`Ended`, which says which of the steps the end asks for; a duplicate
delivery of a run that ended calls it too, to finish what the first delivery may have left undone: a step
may then run twice, so a second message for a fire is absorbed as a duplicate, a completed job stays
completed, and a dead letter goes out while it is owed (at least once). The run writes among the steps go
through :class:`~tickwork.app.lifecycle.RunLifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import Clock, DeadLetters, Dispatch, JobStore, Metrics, RunQueue, TaskEndStore
from tickwork.domain.arrival import BACKFILL_SPACING, Candidate
from tickwork.domain.fires import is_last_fire, next_in_chain
from tickwork.domain.lanes import Lane
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import (
    NOT_STARTED_RUN_STATUSES,
    Attempt,
    Job,
    JobStatus,
    Run,
    RunMessage,
    RunStatus,
    WorkflowTarget,
    scheduled_run_id,
)
from tickwork.domain.priority import message_priority
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.domain.workflow import (
    Decision,
    TaskEnds,
    TaskOutcome,
    cancelled_by_failure,
    child_run_id,
    children_settled_by,
    decided_children,
    outcome_of,
    parse_child_run_id,
    task_graph,
)
from tickwork.errors import TaskMessagesUnsent
from tickwork.observability import logger


@dataclass(frozen=True)
class ChainStep:
    """The backfill chain a fire belongs to: its next fire follows once this one's attempt has ended."""

    until: int
    """The chain's last fire (epoch ms)."""
    paced_from: datetime | None
    """This fire's attempt started then: the next one waits ``BACKFILL_SPACING`` after it (None: no wait)."""


@dataclass(frozen=True)
class Ended:
    """A run as its end was stored, or found stored by a duplicate delivery, and the steps its end asks
    for. In a backfill chain, a RETRY_WAIT run's attempt has ended too: its chain goes on."""

    job: Job
    run: Run
    status_code: int | None = None
    """What the target answered last, for the dead letter."""
    hand_on: bool = False
    """A `queue` job's fire ended: its next fire may be sent now."""
    chain: ChainStep | None = None


class AfterEnd:
    def __init__(
        self,
        *,
        jobs: JobStore,
        lifecycle: RunLifecycle,
        dead_letters: DeadLetters,
        queue: RunQueue,
        metrics: Metrics,
        clock: Clock,
        sleep: Callable[[float], None],
        task_ends: TaskEndStore | None = None,
    ):
        self.task_ends = task_ends
        self.jobs = jobs
        self.metrics = metrics
        self.lifecycle = lifecycle
        self.dead_letters = dead_letters
        self.queue = queue
        self.clock = clock
        self.sleep = sleep
        self.steps: tuple[Callable[[Ended], None], ...] = (
            self.send_dead_letter,
            self.complete_job,
            self.hand_on,
            self.continue_chain,
            self.continue_workflow,
        )

    def end_unrun(
        self, job: Job, candidate: Candidate, status: RunStatus, reason: str, now: datetime, *, hand_on: bool
    ) -> Run | None:
        """A fire (or a run between attempts) ends without running: MISSED, SKIPPED or CANCELLED, then what
        follows its end. None when the write found the run changed: a fire of a job with no lane is decided
        before its run item is read, and an item stored after all (an attempt whose worker died) is decided
        again as it is."""
        final = self.lifecycle.end_unrun(candidate, status, reason, now)
        if final is None:
            return None
        if status is RunStatus.MISSED:
            self.metrics.count("RunsMissed")
        elif status is RunStatus.SKIPPED:
            self.metrics.count("RunsSkipped")
        log_end(final)
        self(Ended(job, final, hand_on=hand_on))
        return final

    def chain_of_duplicate(self, job: Job, lane: Lane, run: Run, message: RunMessage) -> ChainStep | None:
        """A duplicate delivery of a backfill chain's step: the chain goes on from it only if its next fire
        has not been reached (the first delivery died before sending it), so a second message of a step does
        not start a second sequence of the chain's fires. Read only for such duplicates."""
        if message.chain_until is None:
            return None
        following = next_in_chain(job, run.scheduled_for, from_epoch_ms(message.chain_until))
        if following is not None:
            next_id = scheduled_run_id(job.job_id, following)
            if next_id in lane.holders or self.lifecycle.runs.find_many(job.tenant_id, job.job_id, [next_id]):
                return None
        return ChainStep(message.chain_until, None)

    def __call__(self, ended: Ended) -> None:
        for step in self.steps:
            step(ended)

    def send_dead_letter(self, ended: Ended) -> None:
        """Send, then clear the debt; a failure in between leaves the debt, paid when the message returns."""
        run = ended.run
        if run.status is not RunStatus.DEAD or not run.dead_letter_owed:
            return
        error = _error_of(run.attempts[-1] if run.attempts else None, ended.status_code)
        self.dead_letters.send(run, reason=run.reason or "retries_exhausted", error=error)
        logger.info(
            "run dead-lettered",
            extra={
                "status": run.status.value,
                "reason": run.reason or "retries_exhausted",
                "attempt": run.attempt,
                "error_code": error["code"],
            },
        )
        self.lifecycle.dead_letter_paid(run)

    def complete_job(self, ended: Ended) -> None:
        """The job completes once its schedule's last fire has ended, however it ended."""
        job, run = ended.job, ended.run
        if (
            run.status in TERMINAL
            and run.trigger == "schedule"
            and job.status is JobStatus.ACTIVE
            and is_last_fire(job, run.scheduled_for)
        ):
            self.jobs.complete(job.tenant_id, job.job_id, through=run.scheduled_for)

    def hand_on(self, ended: Ended) -> None:
        """A `queue` job's fire has ended: its next fire, if due, is held back waiting for the lane. Send it
        now rather than when its message comes back (the second message is absorbed as a duplicate)."""
        job, run = ended.job, ended.run
        if (
            not ended.hand_on
            or job.overlap_policy != "queue"
            or job.status is not JobStatus.ACTIVE
            or run.trigger != "schedule"
        ):
            return
        following = next_in_chain(job, run.scheduled_for, self.clock())
        if following is not None:
            message = RunMessage(
                tenant_id=job.tenant_id,
                run_id=scheduled_run_id(job.job_id, following),
                sent_at=to_epoch_ms(self.clock()),
                priority=message_priority(job.priority),
            )
            self.queue.send_later(message, 0)

    def continue_workflow(self, ended: Ended) -> None:
        """A workflow task's run ended: its end recorded in the fan-in (once), then what it settles for its
        children, each started or skipped once however often this step runs (a duplicate delivery)."""
        child = parse_child_run_id(ended.run.run_id)
        outcome = outcome_of(ended.run.status)
        if child is None or outcome is None or self.task_ends is None:
            return
        workflow = ended.job.workflow
        if workflow is None:
            return
        workflow_run = _workflow_run_of(ended.run, child.parent_run_id)
        recorded = self.task_ends.record(workflow_run, child.task_id, outcome)
        tasks = workflow.tasks
        ends = recorded
        if outcome == "failed" and workflow.failure_mode == "fail_fast":
            self.cancel_the_rest(ended.job, workflow, workflow_run, ends.outcomes, handlers_too=False)
            ends = TaskEnds(self.task_ends.read(workflow_run), recorded=ends.recorded)
        if len(ends.outcomes) == len(tasks):
            # The workflow run's own end is its job's: read as it stands now.
            definition = self.jobs.get(ended.run.tenant_id, ended.run.job_id)
            self.end_workflow(definition, child.parent_run_id, ends.outcomes)
            return
        graph, rules = task_graph(tasks), {task.id: task.trigger_rule for task in tasks}
        if recorded.recorded:
            # The children this end is the first to settle, from the ends as its own write left them.
            decided = children_settled_by(graph, rules, recorded.outcomes, child.task_id)
        else:
            # A repeat: what the first may have left undone. A child it started with no run yet is sent again
            # (its claim absorbs a second message); one it skipped has its end carried on again.
            decided = decided_children(graph, rules, ends.outcomes, child.task_id)
            started = [task_id for task_id, decision in decided.items() if decision == "run"]
            ids = [child_run_id(workflow_run.run_id, task_id) for task_id in started]
            found = self.lifecycle.runs.find_many(workflow_run.tenant_id, workflow_run.job_id, ids)
            decided = {
                task_id: decision
                for task_id, decision in decided.items()
                if decision == "skip" or child_run_id(workflow_run.run_id, task_id) not in found
            }
        self.settle_tasks(ended.job, workflow_run, decided, self.clock())

    def settle_tasks(
        self, job: Job, workflow_run: Run, decided: Mapping[str, Decision], now: datetime
    ) -> None:
        """Start each task decided to run, ten messages to a request (its run is first written by its claim,
        which a second message finds written); store each decided to skip SKIPPED, its end then carried on
        like any task's. An unsent message raises, for the caller's own message (or call) to come again and
        send it."""
        dispatches = [
            Dispatch(
                RunMessage(
                    tenant_id=workflow_run.tenant_id,
                    run_id=child_run_id(workflow_run.run_id, task_id),
                    sent_at=to_epoch_ms(now),
                    priority=message_priority(job.priority),
                    go=workflow_run.manual_retries,
                ),
                now,
            )
            for task_id, decision in decided.items()
            if decision == "run"
        ]
        if dispatches and self.queue.send(dispatches, now):
            raise TaskMessagesUnsent(f"{workflow_run.run_id}: a task's message was not sent")
        for task_id in (task_id for task_id, decision in decided.items() if decision == "skip"):
            skipped, written = self.lifecycle.plan_task(workflow_run, task_id, now, status=RunStatus.SKIPPED)
            stored = skipped if written.ok else written.current
            if stored is not None and stored.status is RunStatus.SKIPPED:
                self(Ended(job, stored))  # its end settles its own children in turn

    def cancel_the_rest(
        self,
        job: Job,
        workflow: WorkflowTarget,
        workflow_run: Run,
        ended: Mapping[str, TaskOutcome],
        *,
        handlers_too: bool,
    ) -> None:
        """Every task not started is cancelled (those running finish): one with no run yet is stored
        CANCELLED, one waiting for its message or its next attempt ends CANCELLED; each end is then carried
        on like any task's, which ends the workflow run with its last task. ``fail_fast`` (a task failed)
        leaves the clean-up and alert steps to their rules (``handlers_too`` False); a cancel of the run
        cancels them too."""
        now = self.clock()
        waiting = [
            task.id
            for task in workflow.tasks
            if task.id not in ended and (handlers_too or cancelled_by_failure(task))
        ]
        ids = [child_run_id(workflow_run.run_id, task_id) for task_id in waiting]
        stored = self.lifecycle.runs.find_many(workflow_run.tenant_id, workflow_run.job_id, ids)
        cancelled: list[Run] = []
        # Every one stored CANCELLED first, then their ends carried on: a cancelled task's end then finds its
        # children cancelled already, rather than deciding them skipped.
        for task_id, run_id in zip(waiting, ids, strict=True):
            found = stored.get(run_id)
            if found is None:
                run, written = self.lifecycle.plan_task(
                    workflow_run, task_id, now, status=RunStatus.CANCELLED
                )
                if written.ok:
                    cancelled.append(run)
                    continue
                found = written.current  # stored meanwhile (a parent's end started it): cancelled if waiting
            if found is not None and found.status in NOT_STARTED_RUN_STATUSES:
                ended_now = self.lifecycle.cancel_waiting(found, now)
                if ended_now is not None:
                    cancelled.append(ended_now)
            # else running (it finishes), or ended meanwhile (its end is carried on already)
        for run in cancelled:
            self(Ended(job, run))

    def end_workflow(self, definition: Job, run_id: str, outcomes: Mapping[str, TaskOutcome]) -> None:
        """Every task ended: the workflow run ends, FAILED if a task failed, CANCELLED if one was cancelled,
        else SUCCEEDED, then what follows its own end (its job's completion, a queued fire's hand-on). Run
        again by a repeated end, it finds the run ended and carries its end on once more, harmlessly."""
        found = self.lifecycle.runs.find_many(definition.tenant_id, definition.job_id, [run_id])
        running = found.get(run_id)
        if running is None:
            return  # not stored yet (its worker died before its start's write): its start ends it
        if running.status in TERMINAL:
            self(Ended(definition, running, hand_on=True))
            return
        if not (running.status is RunStatus.RUNNING and running.workflow):
            return
        values = set(outcomes.values())
        status = (
            RunStatus.FAILED
            if "failed" in values
            else RunStatus.CANCELLED
            if "cancelled" in values
            else RunStatus.SUCCEEDED
        )
        final = self.lifecycle.end_workflow(running, status, self.clock())
        if final is not None:
            self.metrics.count("WorkflowRunsEnded")
            log_end(final)
            self(Ended(definition, final, hand_on=True))

    def workflow_started(self, job: Job, started: Run) -> None:
        """A workflow run was just written RUNNING: if every task ended before (a worker died between storing
        the roots and the run's start, and the sweeper sent them), no task's end will end it, so it ends now.
        The start's write comes before this read, a task's end in the fan-in before its read of the run:
        one of the two sees the other, and the run's conditional end happens once."""
        workflow = job.workflow
        if workflow is None or self.task_ends is None:
            return
        outcomes = self.task_ends.read(started)
        if len(outcomes) == len(workflow.tasks):
            self.end_workflow(job, started.run_id, outcomes)

    def continue_chain(self, ended: Ended) -> None:
        """Backfill: once this fire's attempt has ended, send the chain's next fire (paced)."""
        job, chain = ended.job, ended.chain
        if chain is None:
            return
        following = next_in_chain(job, ended.run.scheduled_for, from_epoch_ms(chain.until))
        if following is None:
            return
        if chain.paced_from is not None:
            spacing = (chain.paced_from + BACKFILL_SPACING - self.clock()).total_seconds()
            if spacing > 0:
                self.sleep(spacing)
        step = RunMessage(
            tenant_id=job.tenant_id,
            run_id=scheduled_run_id(job.job_id, following),
            sent_at=to_epoch_ms(self.clock()),
            chain_until=chain.until,
            priority=message_priority(job.priority),
        )
        self.queue.send_later(step, 0)


def _workflow_run_of(task_run: Run, run_id: str) -> Run:
    """The workflow run a task's run belongs to, as far as its fan-in's key and its tasks' runs need it (its
    id, tenant, job, scheduled time and go, which the task's run carries), without a read."""
    return Run(
        run_id=run_id,
        job_id=task_run.job_id,
        tenant_id=task_run.tenant_id,
        scheduled_for=task_run.scheduled_for,
        status=RunStatus.RUNNING,
        created_at=task_run.created_at,
        manual_retries=task_run.workflow_retry,
    )


def log_end(run: Run, *, error_code: str | None = None, duration_ms: int | None = None) -> None:
    """The line whoever ended a run writes, when it ended other than DEAD (whose dead letter says it):
    routine ends at DEBUG, a run that failed or was abandoned at INFO, for the operator to look at."""
    given = {
        "status": run.status.value,
        "reason": run.reason,
        "attempt": run.attempt or None,  # 0: the run ended before any attempt
        "error_code": error_code,
        "duration_ms": duration_ms,
    }
    fields = {name: value for name, value in given.items() if value is not None}
    # stacklevel: the line's location is the caller's, where the run ended.
    if run.status is RunStatus.SUCCEEDED:
        logger.debug("run succeeded", extra=fields, stacklevel=3)
    elif run.status is RunStatus.FAILED:
        logger.info("run failed", extra=fields, stacklevel=3)
    elif run.status is RunStatus.ABANDONED:
        logger.info("run abandoned", extra=fields, stacklevel=3)
    else:
        logger.debug("run ended", extra=fields, stacklevel=3)


def _error_of(attempt: Attempt | None, status_code: int | None) -> dict[str, Any]:
    return {
        "code": attempt.error_code if attempt else None,
        "message": attempt.error_message if attempt else None,
        "status_code": status_code,
    }
