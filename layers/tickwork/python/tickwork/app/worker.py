"""The worker: one run-queue message in, at most one attempt of its run out, recorded.

1. wait out the remainder before the fire, so nothing starts early (SQS delays are whole seconds). A
   planned fire of a job with a lane (:func:`~tickwork.domain.arrival.reads_ahead`) does step 2 and decides
   first, and waits after: at the fire only its claim on the lane as read (the fence: a pause, a cancel or an
   edit meanwhile moves the lane, and the fire is then read and decided again) and the call are left;
2. read the job and its lane together, and the run items it needs (this run's, the lane holders');
3. decide: a duplicate, or a fire that a cancel, a pause, a schedule change or the misfire policy ends
   (recorded with its reason), or one the overlap policy skips or holds back (sent again later: never a
   failed delivery, so never dead-lettered for waiting), or a lost attempt to take over
   (:mod:`tickwork.app.lost_attempts`). The decision is a value from
   :func:`tickwork.domain.arrival.decide_arrival`; the worker carries it out;
4. take the lease (:mod:`tickwork.app.claims`): a holder of the job's lane (one conditional write), or, for
   a job whose runs may overlap freely, the run item itself (one conditional write);
5. call the target, with a heartbeat extending the lease while the call lasts, and record the attempt and
   the run's next status in the run item, one conditional write fenced on the token: a retry later, or the
   run's end (:mod:`tickwork.app.attempt`);
6. then what follows the end (:mod:`tickwork.app.after_end`): dead-letter, complete the job, hand a `queue`
   job's next fire on, or carry a backfill chain on.

Every write of the run's status goes through :class:`tickwork.app.lifecycle.RunLifecycle`. The run item is
the idempotency record: a message for a run that already ended calls nothing.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tickwork.app.after_end import AfterEnd, Ended
from tickwork.app.at_fire import CallsFirst, LanesAtFire
from tickwork.app.attempt import Attempts, Execute
from tickwork.app.claims import CLAIM_TRIES, Claims, LaneFull, Lease, Wait
from tickwork.app.flow import FlowGauges, FlowReader
from tickwork.app.lifecycle import RunLifecycle, started_now
from tickwork.app.lost_attempts import LostAttempts
from tickwork.app.ports import (
    Clock,
    DeadLetters,
    JobStore,
    Lanes,
    Metrics,
    RunQueue,
    RunStore,
    TaskEndStore,
    TenantGauges,
    TenantSlots,
    TenantStore,
    TenantThrottles,
)
from tickwork.app.workflows import WorkflowStarts, workflow_of
from tickwork.domain.arrival import (
    MAX_DELAY_SECONDS,
    MAX_EARLY_WAIT,
    AttemptRun,
    Candidate,
    Decision,
    Duplicate,
    EndUnrun,
    HoldBack,
    LookAgain,
    Note,
    RetryNotDue,
    StartChain,
    TakeOver,
    UnknownManual,
    WaitFirst,
    decide_arrival,
    on_full_lane,
    owed_before,
    reads_ahead,
)
from tickwork.domain.fires import jitter_of, previous_fire
from tickwork.domain.lanes import Lane, capacity
from tickwork.domain.models import (
    Job,
    Run,
    RunKey,
    RunMessage,
    RunStatus,
    parse_run_id,
)
from tickwork.domain.pools import DEFAULT_POOL_WAIT_ALARM, pool_target_of
from tickwork.domain.priority import message_priority
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.domain.workflow import (
    first_task_run,
    parse_child_run_id,
    task_job,
    task_message_state,
    task_of,
)
from tickwork.errors import NotFound
from tickwork.observability import logger

# A run held back (overlap `queue`, a retry or a backfill step waiting for the lane) comes back after this.
HOLD_SECONDS = 2
# A fire read ahead this long or more before its time claims its lane at once and, at its time, reads the
# lane to check nothing moved it (one request more); one read closer to its time (AWS's 50 ms lead) claims
# at its time, the claim being the check.
CLAIM_AHEAD = timedelta(milliseconds=250)


@dataclass(frozen=True)
class Raced:
    """A write to end the run lost to another write (the run is stored after all, or changed): read it
    again and decide again."""


RACED = Raced()


class Worker:
    def __init__(
        self,
        *,
        jobs: JobStore,
        lanes: Lanes,
        slots: TenantSlots,
        throttles: TenantThrottles,
        runs: RunStore,
        tenants: TenantStore,
        queue: RunQueue,
        dead_letters: DeadLetters,
        execute: Execute,
        metrics: Metrics,
        clock: Clock,
        sleep: Callable[[float], None],
        worker_id: str,
        lead: timedelta = timedelta(0),
        lease_margin: timedelta = timedelta(seconds=30),
        pool_wait_alarm: timedelta = DEFAULT_POOL_WAIT_ALARM,
        rng: random.Random | None = None,
        gauges: TenantGauges | None = None,
        task_ends: TaskEndStore | None = None,
        calls_first: CallsFirst | None = None,
        lanes_at_fire: LanesAtFire | None = None,
    ):
        self.calls_first = calls_first
        self.lanes_at_fire = lanes_at_fire
        self.jobs = jobs
        self.lanes = lanes
        self.runs = runs
        self.queue = queue
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        # A message may come this early and be held: the planner's lead, and a second for SQS's whole seconds.
        self.hold_early = max(MAX_EARLY_WAIT, lead + timedelta(seconds=1))
        rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self.lifecycle = RunLifecycle(runs)
        self.after_end = AfterEnd(
            task_ends=task_ends,
            jobs=jobs,
            lifecycle=self.lifecycle,
            dead_letters=dead_letters,
            queue=queue,
            metrics=metrics,
            clock=clock,
            sleep=sleep,
        )
        self.claims = Claims(
            lanes=lanes,
            slots=slots,
            throttles=throttles,
            tenants=tenants,
            lifecycle=self.lifecycle,
            metrics=metrics,
            worker_id=worker_id,
            lease_margin=lease_margin,
            pool_wait_alarm=pool_wait_alarm,
            flow=FlowGauges(FlowReader(jobs=jobs, slots=slots, throttles=throttles, tenants=tenants), gauges)
            if gauges is not None
            else None,
        )
        self.attempts = Attempts(
            execute=execute,
            tenants=tenants,
            claims=self.claims,
            lifecycle=self.lifecycle,
            after_end=self.after_end,
            queue=queue,
            metrics=metrics,
            clock=clock,
            rng=rng,
        )
        self.workflows = WorkflowStarts(
            lifecycle=self.lifecycle,
            queue=queue,
            metrics=metrics,
            after_end=self.after_end,
            task_ends=task_ends,
        )
        self.lost_attempts = LostAttempts(
            lifecycle=self.lifecycle, after_end=self.after_end, metrics=metrics, rng=rng
        )

    # --- the message ----------------------------------------------------------------------------------------
    def handle(self, message: RunMessage) -> str:
        """Do what the message asks; returns what happened. Afterwards the message can be deleted (a run held
        back has been sent again); an exception leaves it for SQS to deliver again."""
        key = parse_run_id(message.run_id)
        child = parse_child_run_id(message.run_id) if key is None else None
        if child is not None:
            # A workflow task's run: stored before its message is sent, as a manual run is.
            key = RunKey(child.parent.job_id, None, child.task_id)
        if key is None:
            self.metrics.count("MessagesDropped")
            logger.warning("message with a malformed run id dropped", extra={"run_id": message.run_id})
            return "malformed run id"
        if key.fire_ms is not None:
            fire = from_epoch_ms(key.fire_ms)
            if not self._wait_until(fire, message, sleep=False):
                return "early: sent again for its time"
            if message.ahead and message.attempt is None and message.start_at is None and child is None:
                done = self._read_ahead(message, key, fire)
                if done is not None:
                    return done
            self._wait_until(fire, message)
        if message.start_at is not None and not self._wait_until(from_epoch_ms(message.start_at), message):
            return "throttled: sent again for the start it reserved"
        try:
            job, lane = self.jobs.get_with_lane(message.tenant_id, key.job_id)
        except NotFound:
            self.metrics.count("MessagesDropped")
            logger.warning("message for an unknown job dropped", extra={"run_id": message.run_id})
            return "unknown job"
        logger.append_keys(tenant_id=job.tenant_id, job_id=job.job_id, run_id=message.run_id)
        if child is not None:
            task = task_of(job, child.task_id)
            if task is None:
                self.metrics.count("MessagesDropped")
                logger.warning("message for a task its job does not have dropped")
                logger.remove_keys(["tenant_id", "job_id", "run_id"])
                return "unknown task"
            # Run as its own job would be; the workflow run holds the job's lane for all its tasks.
            job, lane = task_job(job, task), Lane()
        if message.priority != message_priority(job.priority):
            # Sent without its job's priority (by the sweeper), or before it changed: any send from here on
            # goes to the queue of the job's priority.
            message = message.model_copy(update={"priority": message_priority(job.priority)})
        try:
            if job.jitter_seconds and key.fire_ms is not None and message.attempt is None:
                fire = from_epoch_ms(key.fire_ms)
                if not self._wait_until(fire + jitter_of(job, fire), message):
                    return "early: sent again for its time"
            return self._handle(message, key, job, lane)
        finally:
            logger.remove_keys(["tenant_id", "job_id", "run_id", "attempt"])

    def _wait_until(self, due: datetime, message: RunMessage, *, sleep: bool = True) -> bool:
        """Never early: sleep out a short remainder (unless not ``sleep``: only the check); a message far
        ahead of its time goes back for later."""
        wait = (due - self.clock()).total_seconds()
        if wait > self.hold_early.total_seconds():
            self.queue.send_later(message, math.ceil(min(wait, MAX_DELAY_SECONDS)))
            return False
        if wait > 0 and sleep:
            self.sleep(wait)
        return True

    def _read_ahead(self, message: RunMessage, key: RunKey, fire: datetime) -> str | None:
        """A planned fire that came before its time: its reads and its decision now, as of its due time, then
        at that time its claim on the lane as read, and the call. None when it is not that simple (the job
        is not read ahead, the decision is not to attempt it, the lane moved meanwhile): it is then read and
        decided at its time, as any other."""
        if fire <= self.clock():
            return None
        try:
            job, lane = self.jobs.get_with_lane(message.tenant_id, key.job_id)
        except NotFound:
            return None
        if not reads_ahead(job) or message.priority != message_priority(job.priority):
            return None
        due = fire + jitter_of(job, fire) if job.jitter_seconds else fire
        before = owed_before(job, key, message, lane)
        records = self._records(job, lane, message.run_id, before)
        decision = decide_arrival(job, lane, records.get(message.run_id), records, message, key, due)
        if not isinstance(decision, AttemptRun):
            return None
        ahead: Lease | None = None
        if (
            due - self.clock() >= CLAIM_AHEAD
            and self.claims.admits_freely(job)
            # An earlier fire of the job may still be to come, or late: it has the lane first.
            and previous_fire(job, fire, since=self.clock() - self.hold_early) is None
        ):
            # Time to spare: the claim now, and at the fire one read of the lane that nothing moved it.
            claimed = self.claims.claim_lane(job, lane, decision.candidate, records, self.clock(), start=due)
            if not isinstance(claimed, Lease):
                return None
            self.metrics.count("RunsClaimedAhead")
            ahead = claimed
        gate = self.calls_first
        # A run claimed (ahead, or at its fire) is one the records of the process wait for until its call
        # (:mod:`tickwork.app.at_fire`); one not claimed yet may wait for them (a `queue` job's next fire), so
        # it is not waited for.
        ticket = gate.expect(due) if gate is not None and ahead is not None else None

        turn: int | None = None

        def called() -> None:
            # The burst's calls go before its records (:mod:`tickwork.app.at_fire`).
            nonlocal turn
            if gate is not None:
                if turn is not None:
                    gate.turns.give_back(turn)
                    turn = None
                if ticket is not None:
                    gate.forget(ticket)
                gate.wait_for_calls()

        checks = self.lanes_at_fire if ahead is not None else None
        check = checks.expect((job.tenant_id, job.job_id), due) if checks is not None else None
        logger.append_keys(tenant_id=job.tenant_id, job_id=job.job_id, run_id=message.run_id)
        try:
            try:
                if gate is not None:
                    # A turn of the process's runs at the fire, for the check or the claim and the call's
                    # start: the run sleeps until a little before its fire, then waits in line for it.
                    self._wait_until(due - gate.turns.early, message)
                    left = max(0.0, (due - self.clock()).total_seconds())
                    turn = gate.turns.take(at=time.monotonic() + left)
                self._wait_until(due, message)  # never early, whatever the line's clock said
            except BaseException:
                # Stopped while waiting for its fire: a claim taken ahead is let go.
                if ahead is not None and ahead.holder is not None:
                    self.lanes.release(job.tenant_id, job.job_id, message.run_id, ahead.holder.token)
                raise
            now = self.clock()
            if ahead is not None:
                # Read with the other claims of the process due by now (:class:`LanesAtFire`), if it can.
                current = (
                    checks.lane(check, self.lanes.get_many)
                    if checks is not None and check is not None
                    else self.lanes.get(job.tenant_id, job.job_id)
                )
                if not still_held(lane, ahead, current):
                    assert ahead.holder is not None
                    self.lanes.release(job.tenant_id, job.job_id, message.run_id, ahead.holder.token)
                    self.metrics.count("ReadAheadDecidedAgain")
                    return None
                lease = replace(ahead, run=started_now(ahead.run, now))
            else:
                taken = self.claims.admit(job, decision.candidate.run, message, now)
                if isinstance(taken, Wait):
                    self.metrics.count(taken.metric)
                    self.queue.send_later(taken.message or message, taken.seconds)
                    return taken.reason
                claimed = self.claims.claim_lane(job, lane, decision.candidate, records, now)
                if not isinstance(claimed, Lease):
                    self.claims.give_back(job, taken)
                    self.metrics.count("ReadAheadDecidedAgain")
                    return None
                lease = replace(claimed, slots=taken)
            if gate is not None:
                # Its call starts: it keeps its turn, and the records waiting, for the gate's hold at most.
                if turn is not None:
                    gate.turns.calling(turn)
                if ticket is not None:
                    gate.calling(ticket)
            return self.attempts.run(message, job, lease, called=called)
        finally:
            if gate is not None and turn is not None:
                gate.turns.give_back(turn)  # not called, or its call failed
            if checks is not None and check is not None:
                checks.forget(check)
            if gate is not None and ticket is not None:
                gate.forget(ticket)
            logger.remove_keys(["tenant_id", "job_id", "run_id", "attempt"])

    def _handle(self, message: RunMessage, key: RunKey, job: Job, lane: Lane) -> str:
        laned = capacity(job) is not None
        # A job with no lane leases the run item itself, whose conditional write tells a new fire from a
        # stored run: it is read first only when the message says it is stored (a retry, a manual run).
        before = owed_before(job, key, message, lane)
        known = laned or key.is_manual or message.attempt is not None or before is not None
        child = parse_child_run_id(message.run_id)
        if child is not None and message.attempt is None:
            # A task's first message (or a second): its run is not read, its claim's conditional create tells
            # which; its workflow run is, eventually consistent (an older read looks again).
            records = self.runs.find_many(job.tenant_id, job.job_id, [child.parent_run_id], consistent=False)
        else:
            records = self._records(job, lane, message.run_id, before) if known else {}
        stored = records.get(message.run_id)
        for _ in range(CLAIM_TRIES):
            now = self.clock()
            if stored is not None and stored.workflow and stored.status is RunStatus.RUNNING:
                # The workflow run's message again: what its start may have left undone.
                self.workflows.resume(job, stored, now)
                return "workflow running: its unsent tasks sent"
            first = None
            if child is not None and stored is None:
                workflow_run = records.get(child.parent_run_id)
                state = task_message_state(workflow_run, message, now)
                if state == "early":
                    self.queue.send_later(message, 1)
                    return "its workflow run read before its start: back in a second"
                if state == "current" and workflow_run is not None:
                    first = first_task_run(workflow_run, child.task_id, message, now)
            # The run to attempt now, what was done instead (a note), or RACED when the run changed meanwhile.
            decision = decide_arrival(job, lane, stored, records, message, key, now, first)
            verdict = self._carry_out(decision, message, job, lane, now)
            if isinstance(verdict, str):
                return verdict
            if isinstance(verdict, Raced):
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
                continue
            if isinstance(decision, WaitFirst):
                # The attempt starts after the wait: its start, and a backfill chain's pace, count from then.
                now = self.clock()
            if verdict.chain_until is not None:
                message = message.model_copy(update={"chain_until": verdict.chain_until})
            taken = self.claims.admit(job, verdict.run, message, now)
            if isinstance(taken, Wait):
                self.metrics.count(taken.metric)
                self.queue.send_later(taken.message or message, taken.seconds)
                return taken.reason
            if laned:
                claimed = self.claims.claim_lane(job, lane, verdict, records, now)
                if isinstance(claimed, Lease) and workflow_of(job) is not None:
                    # Its tasks take their own places under the tenant's limits: the run gives its back.
                    self.claims.give_back(job, taken)
                    started = self.workflows.start(job, verdict, claimed, now)
                    return "workflow started" if started else "contended: the run changed"
                if isinstance(claimed, Lease) and pool_target_of(job) is not None:
                    handed = self.claims.hand_to_pool(job, verdict, claimed, now)
                    return "handed to its pool" if handed else "contended: the run changed"
                if isinstance(claimed, Lease):
                    return self.attempts.run(message, job, replace(claimed, slots=taken))
                if isinstance(claimed, LaneFull):
                    # The overlap policy decides: the fire is skipped, or waits its turn.
                    held = self._carry_out(on_full_lane(job, verdict, message), message, job, lane, now)
                    self.claims.give_back(job, taken)
                    if isinstance(held, str):
                        return held
                else:
                    self.claims.give_back(job, taken)
                    lane = claimed
                before = owed_before(job, key, message, lane)
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
            elif workflow_of(job) is not None:
                self.claims.give_back(job, taken)
                if self.workflows.start(job, verdict, None, now) is not None:
                    return "workflow started"
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
            elif pool_target_of(job) is not None:
                if self.claims.hand_to_pool(job, verdict, None, now) is not None:
                    return "handed to its pool"
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
            else:
                lease, stored = self.claims.claim_run(job, verdict, now)
                if lease is not None:
                    return self.attempts.run(message, job, replace(lease, slots=taken))
                self.claims.give_back(job, taken)
        self.queue.send_later(message, HOLD_SECONDS)
        return "contended: sent again"

    def _records(self, job: Job, lane: Lane, run_id: str, before: str | None) -> dict[str, Run]:
        wanted = {run_id, *lane.holders, *([before] if before else [])}
        child = parse_child_run_id(run_id)
        if child is not None:
            wanted.add(child.parent_run_id)  # its workflow run: a task's first claim checks its go
        return self.runs.find_many(job.tenant_id, job.job_id, sorted(wanted))

    # --- deciding ---------------------------------------------------------------------------------------
    def _carry_out(
        self, decision: Decision, message: RunMessage, job: Job, lane: Lane, now: datetime
    ) -> Candidate | str | Raced:
        """Do what the arrival decision says: its sends, sleeps and writes."""
        match decision:
            case Duplicate(run):
                # What the first delivery may have left undone when it died after its write.
                self.after_end(
                    Ended(job, run, chain=self.after_end.chain_of_duplicate(job, lane, run, message))
                )
                self.metrics.count("DuplicateDeliveriesAbsorbed")
                return f"duplicate: the run is {run.status.value}"
            case LookAgain(delay):
                self.metrics.count("DuplicateDeliveriesAbsorbed")
                self.queue.send_later(message, delay)
                return "duplicate: its attempt is running; back after its lease"
            case UnknownManual():
                self.metrics.count("MessagesDropped")
                return "unknown manual run"
            case RetryNotDue(delay):
                self.queue.send_later(message, delay)
                return "retry not due yet: sent again"
            case WaitFirst(seconds, then):
                self.sleep(seconds)
                return self._carry_out(then, message, job, lane, now)
            case EndUnrun(candidate, status, reason, hand_on):
                # A run decided before its item was read may be stored after all: decided again, as it is.
                final = self.after_end.end_unrun(job, candidate, status, reason, now, hand_on=hand_on)
                return RACED if final is None else f"{status.value.lower()}: {reason}"
            case Note(text):
                return text
            case HoldBack(text):
                self.metrics.count("RunsHeldBack")
                self.queue.send_later(message, HOLD_SECONDS)
                return text
            case StartChain(candidate, until, first):
                changed = self.lanes.set_chain(
                    job.tenant_id, job.job_id, seen=lane, chain_until=until, chain_from=first
                )
                if changed is not None:
                    self.queue.send_later(message, HOLD_SECONDS)
                    return "contended: sent again"
                return replace(candidate, chain_until=to_epoch_ms(until))
            case TakeOver(candidate, cancelled):
                taken_over = self.lost_attempts.take_over(job, candidate, now, cancelled=cancelled)
                return RACED if taken_over is None else taken_over
            case AttemptRun(candidate):
                return candidate


def still_held(seen: Lane, lease: Lease, current: Lane) -> bool:
    """At the fire, for a claim taken ahead of it on the lane ``seen``: whether the lane as read now still
    holds the claim and was not moved since (by an edit, a pause or a cancel of the job, a cancel of the
    fire)."""
    assert lease.holder is not None
    mine = current.holders.get(lease.holder.run_id)
    return mine is not None and mine.token == lease.holder.token and current.moved == seen.moved
