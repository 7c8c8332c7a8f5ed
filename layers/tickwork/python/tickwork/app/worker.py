"""The worker: one run-queue message in, at most one attempt of its run out, recorded.

1. wait out the remainder before the fire, so nothing starts early (SQS delays are whole seconds);
2. read the job and its lane together, and the run items it needs (this run's, the lane holders');
3. decide: a duplicate, or a fire that a cancel, a pause, a schedule change or the misfire policy ends
   (recorded with its reason), or one the overlap policy skips or holds back (sent again later: never a
   failed delivery, so never dead-lettered for waiting). The decision is a value from
   :func:`tickwork.domain.arrival.decide_arrival`; the worker carries it out;
4. take the lease: a holder of the job's lane (one conditional write), or, for a job whose runs may overlap
   freely, the run item itself (one conditional write);
5. call the target, with a heartbeat extending the lease while the call lasts;
6. record the attempt and the run's next status in the run item (one conditional write, fenced on the
   token), then retry later, dead-letter, carry a backfill chain on, or complete the job.

The run item is the idempotency record: a message for a run that already ended calls nothing.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tickwork import tables
from tickwork.app.after_end import AfterEnd, ChainStep, Ended
from tickwork.app.lifecycle import RunLifecycle, leased, lost_attempt_closed
from tickwork.app.ports import (
    Clock,
    DeadLetters,
    JobStore,
    Lanes,
    Metrics,
    RunQueue,
    RunStore,
    TenantSlots,
    TenantStore,
)
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
    Stage,
    StartChain,
    TakeOver,
    UnknownManual,
    WaitFirst,
    decide_arrival,
    on_full_lane,
    owed_before,
)
from tickwork.domain.fires import jitter_of
from tickwork.domain.lanes import Holder, Lane, capacity, ended, live_holders, slot_shards
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import (
    Job,
    Run,
    RunKey,
    RunMessage,
    RunStatus,
    parse_run_id,
)
from tickwork.domain.retry import OutcomeClass, decide_retry
from tickwork.domain.tenants import Tenant
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.errors import NotFound
from tickwork.observability import logger
from tickwork.targets import TargetResult

# A run held back (overlap `queue`, a retry or a backfill step waiting for the lane) comes back after this.
HOLD_SECONDS = 2
# A claim that loses a race reads again, this many times at most, then leaves the message for later.
CLAIM_TRIES = 5
OUTCOME_OF = {
    OutcomeClass.SUCCESS: "succeeded",
    OutcomeClass.RETRYABLE: "retryable_error",
    OutcomeClass.PERMANENT: "permanent_error",
}

Execute = Callable[[Job, Run, Tenant], TargetResult]


@dataclass(frozen=True)
class Raced:
    """A write to end the run unrun lost to another write (the run is stored after all, or changed): read it
    again and decide again."""


RACED = Raced()


@dataclass(frozen=True)
class Slot:
    """A slot of the tenant's in-flight limit, held for one attempt."""

    shard: int
    holder: Holder


@dataclass(frozen=True)
class Lease:
    """The attempt a worker holds: its run, RUNNING, and its lane holder when the job has a lane."""

    run: Run
    holder: Holder | None
    slot: Slot | None = None


class Worker:
    def __init__(
        self,
        *,
        jobs: JobStore,
        lanes: Lanes,
        slots: TenantSlots,
        runs: RunStore,
        tenants: TenantStore,
        queue: RunQueue,
        dead_letters: DeadLetters,
        execute: Execute,
        metrics: Metrics,
        clock: Clock,
        sleep: Callable[[float], None],
        worker_id: str,
        lease_margin: timedelta = timedelta(seconds=30),
        rng: random.Random | None = None,
    ):
        self.jobs = jobs
        self.lanes = lanes
        self.slots = slots
        self.runs = runs
        self.tenants = tenants
        self.queue = queue
        self.dead_letters = dead_letters
        self.execute = execute
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.worker_id = worker_id
        self.lease_margin = lease_margin
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self.lifecycle = RunLifecycle(runs)
        self.after_end = AfterEnd(
            jobs=jobs,
            lifecycle=self.lifecycle,
            dead_letters=dead_letters,
            queue=queue,
            clock=clock,
            sleep=sleep,
        )

    # --- the message ----------------------------------------------------------------------------------------
    def handle(self, message: RunMessage) -> str:
        """Do what the message asks; returns what happened. Afterwards the message can be deleted (a run held
        back has been sent again); an exception leaves it for SQS to deliver again."""
        key = parse_run_id(message.run_id)
        if key is None:
            self.metrics.count("MessagesDropped")
            logger.warning("message with a malformed run id dropped", extra={"run_id": message.run_id})
            return "malformed run id"
        if key.fire_ms is not None and not self._wait_until(from_epoch_ms(key.fire_ms), message):
            return "early: sent again for its time"
        try:
            job, lane = self.jobs.get_with_lane(message.tenant_id, key.job_id)
        except NotFound:
            self.metrics.count("MessagesDropped")
            logger.warning("message for an unknown job dropped", extra={"run_id": message.run_id})
            return "unknown job"
        logger.append_keys(tenant_id=job.tenant_id, job_id=job.job_id, run_id=message.run_id)
        try:
            if job.jitter_seconds and key.fire_ms is not None and message.attempt is None:
                fire = from_epoch_ms(key.fire_ms)
                if not self._wait_until(fire + jitter_of(job, fire), message):
                    return "early: sent again for its time"
            return self._handle(message, key, job, lane)
        finally:
            logger.remove_keys(["tenant_id", "job_id", "run_id", "attempt"])

    def _wait_until(self, due: datetime, message: RunMessage) -> bool:
        """Never early: sleep out a short remainder; a message far ahead of its time goes back for later."""
        wait = (due - self.clock()).total_seconds()
        if wait > MAX_EARLY_WAIT.total_seconds():
            self.queue.send_later(message, math.ceil(min(wait, MAX_DELAY_SECONDS)))
            return False
        if wait > 0:
            self.sleep(wait)
        return True

    def _handle(self, message: RunMessage, key: RunKey, job: Job, lane: Lane) -> str:
        laned = capacity(job) is not None
        # A job with no lane leases the run item itself, whose conditional write tells a new fire from a
        # stored run: it is read first only when the message says it is stored (a retry, a manual run).
        before = owed_before(job, key, message, lane)
        known = laned or key.is_manual or message.attempt is not None or before is not None
        records = self._records(job, lane, message.run_id, before) if known else {}
        stored = records.get(message.run_id)
        for _ in range(CLAIM_TRIES):
            now = self.clock()
            verdict = self._decide(message, key, job, lane, stored, records, now)
            if isinstance(verdict, str):
                return verdict
            if isinstance(verdict, Raced):
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
                continue
            if verdict.chain_until is not None:
                message = message.model_copy(update={"chain_until": verdict.chain_until})
            slot = self._take_slot(job, verdict.run, now)
            if slot is False:
                self.metrics.count("RunsHeldBack")
                self.queue.send_later(message, HOLD_SECONDS)
                return "held back: the tenant is at its in-flight limit"
            taken = slot if isinstance(slot, Slot) else None
            if laned:
                lease, lane_now = self._claim_lane(job, lane, verdict, records, message, now)
                if isinstance(lease, Lease):
                    return self._attempt(message, job, replace(lease, slot=taken))
                self._give_back(job, taken)
                if isinstance(lease, str):
                    return lease
                assert lane_now is not None
                lane = lane_now
                before = owed_before(job, key, message, lane)
                records = self._records(job, lane, message.run_id, before)
                stored = records.get(message.run_id)
            else:
                lease, stored = self._claim_run(job, verdict, now)
                if lease is not None:
                    return self._attempt(message, job, replace(lease, slot=taken))
                self._give_back(job, taken)
        self.queue.send_later(message, HOLD_SECONDS)
        return "contended: sent again"

    def _take_slot(self, job: Job, run: Run, now: datetime) -> Slot | bool:
        """A slot of the tenant's in-flight limit: a Slot, True when the tenant has no limit, False when
        every slot is taken. Slots are spread over a few items, so no item takes every run's write."""
        limit = self.tenants.get(job.tenant_id).max_in_flight
        if limit is None:
            return True
        shards = slot_shards(limit)
        first = tables.stable_shard(run.run_id, len(shards))
        lease_until = now + timedelta(seconds=_timeout_of(job)) + self.lease_margin
        for offset in range(len(shards)):
            shard = (first + offset) % len(shards)
            for _ in range(CLAIM_TRIES):
                slots = self.slots.get(job.tenant_id, shard)
                live = [r for r, h in slots.holders.items() if h.lease_until > now and r != run.run_id]
                if len(live) >= shards[shard]:
                    break
                holder = Holder(
                    run_id=run.run_id,
                    token=slots.version + 1,
                    attempt=run.attempt + 1,
                    scheduled_for=run.scheduled_for,
                    started_at=now,
                    lease_until=lease_until,
                    worker_id=self.worker_id,
                )
                gone = [r for r, h in slots.holders.items() if h.lease_until <= now and r != run.run_id]
                if self.slots.claim(job.tenant_id, shard, seen=slots, holder=holder, drop=gone) is None:
                    return Slot(shard, holder)
        return False

    def _give_back(self, job: Job, slot: Slot | None) -> None:
        if slot is not None:
            self.slots.release(job.tenant_id, slot.shard, slot.holder.run_id, slot.holder.token)

    def _records(self, job: Job, lane: Lane, run_id: str, before: str | None) -> dict[str, Run]:
        wanted = {run_id, *lane.holders, *([before] if before else [])}
        return self.runs.find_many(job.tenant_id, job.job_id, sorted(wanted))

    # --- deciding ---------------------------------------------------------------------------------------
    def _decide(
        self,
        message: RunMessage,
        key: RunKey,
        job: Job,
        lane: Lane,
        stored: Run | None,
        records: dict[str, Run],
        now: datetime,
    ) -> Candidate | str | Raced:
        """The run to attempt now, what was done instead (a note), or RACED when the run changed meanwhile."""
        decision = decide_arrival(job, lane, stored, records, message, key, now)
        return self._carry_out(decision, message, job, lane, now)

    def _carry_out(
        self, decision: Decision, message: RunMessage, job: Job, lane: Lane, now: datetime
    ) -> Candidate | str | Raced:
        """Do what the arrival decision says: its sends, sleeps and writes."""
        match decision:
            case Duplicate(run):
                # What the first delivery may have left undone when it died after its write.
                chain = ChainStep(message.chain_until, None) if message.chain_until is not None else None
                self.after_end(Ended(job, run, chain=chain))
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
                return self._end_unrun(job, candidate, status, reason, now, hand_on=hand_on)
            case Note(text):
                return text
            case HoldBack(text):
                self.metrics.count("RunsHeldBack")
                self.queue.send_later(message, HOLD_SECONDS)
                return text
            case StartChain(candidate, until):
                if self.lanes.set_chain(job.tenant_id, job.job_id, seen=lane, chain_until=until) is not None:
                    self.queue.send_later(message, HOLD_SECONDS)
                    return "contended: sent again"
                return replace(candidate, chain_until=to_epoch_ms(until))
            case TakeOver(candidate, cancelled):
                if cancelled:
                    lost = lost_attempt_closed(candidate, now)
                    return self._end(job, candidate, lost, RunStatus.CANCELLED, "job_cancelled", now)
                return self._lost(job, candidate, now)
            case AttemptRun(candidate):
                return candidate

    def _lost(self, job: Job, candidate: Candidate, now: datetime) -> Candidate | str | Raced:
        """The last attempt's worker died: record that attempt as lost. An at-most-once job ends ABANDONED;
        another goes on with its next attempt while its retry policy allows one."""
        run = lost_attempt_closed(candidate, now)
        self.metrics.count("LeasesExpired")
        if job.delivery == "at_most_once":
            self.metrics.count("RunsAbandoned")
            return self._end(job, candidate, run, RunStatus.ABANDONED, "lease_expired", now)
        decision = decide_retry(
            job.retry,
            run.attempt,
            OutcomeClass.RETRYABLE,
            scheduled_for=run.scheduled_for,
            now=now,
            rng=self.rng,
        )
        if not decision.retry:
            reason = decision.stop_reason.value if decision.stop_reason else "retries_exhausted"
            self.metrics.count("RunsDead")
            return self._end(job, candidate, run, RunStatus.DEAD, reason, now)
        if candidate.lost_holder is not None:
            # A lane holder's attempt is in no run item yet: record it lost before the next attempt starts, so
            # the history keeps it even if that one is lost too.
            if not self.lifecycle.record_lost(candidate, run):
                return RACED
            return Candidate(run, run, Stage.LOST, candidate.lost_holder)
        return Candidate(run, candidate.stored, Stage.LOST, candidate.lost_holder)

    # --- claiming ----------------------------------------------------------------------------------------
    def _claim_lane(
        self,
        job: Job,
        lane: Lane,
        candidate: Candidate,
        records: dict[str, Run],
        message: RunMessage,
        now: datetime,
    ) -> tuple[Lease | str | None, Lane | None]:
        """Become a holder of the job's lane: (the lease, None); (a note, None) when the lane is full and
        the run was skipped or held back; (None, the lane as it is now) when another claim got there first."""
        limit = capacity(job)
        assert limit is not None
        run = candidate.run
        recorded = {run_id: stored.fencing_token for run_id, stored in records.items()}
        others = {r: h for r, h in live_holders(lane, recorded, now).items() if r != run.run_id}
        if len(others) >= limit:
            held = self._carry_out(on_full_lane(job, candidate, message), message, job, lane, now)
            return (held, None) if isinstance(held, str) else (None, lane)
        lease_for = timedelta(seconds=_timeout_of(job)) + self.lease_margin
        token = lane.version + 1
        attempt = run.attempt + 1
        holder = Holder(
            run_id=run.run_id,
            token=token,
            attempt=attempt,
            scheduled_for=run.scheduled_for,
            started_at=now,
            lease_until=now + lease_for,
            worker_id=self.worker_id,
        )
        finished = sorted(r for r, h in lane.holders.items() if r != run.run_id and ended(h, recorded.get(r)))
        current = self.lanes.claim(job.tenant_id, job.job_id, seen=lane, holder=holder, drop=finished)
        if current is not None:
            self.metrics.count("LeaseConflicts")
            return None, current
        run = leased(
            candidate, attempt=attempt, token=token, now=now, lease_for=lease_for, worker_id=self.worker_id
        )
        return Lease(run, holder), None

    def _claim_run(self, job: Job, candidate: Candidate, now: datetime) -> tuple[Lease | None, Run | None]:
        """Lease the run item itself (a job with no lane): (the lease, None), or (None, the run as stored
        now) when another worker changed it first."""
        run = candidate.run
        lease_for = timedelta(seconds=_timeout_of(job)) + self.lease_margin
        leased_run = leased(
            candidate,
            attempt=run.attempt + 1,
            token=run.fencing_token + 1,
            now=now,
            lease_for=lease_for,
            worker_id=self.worker_id,
        )
        written = self.lifecycle.claim(candidate, leased_run)
        if written.ok:
            return Lease(leased_run, None), None
        self.metrics.count("LeaseConflicts")
        return None, written.current

    # --- the attempt --------------------------------------------------------------------------------------
    def _attempt(self, message: RunMessage, job: Job, lease: Lease) -> str:
        run = lease.run
        logger.append_keys(attempt=run.attempt)
        logger.debug("run started", extra={"lag_ms": run.lag_ms} if run.attempt == 1 else None)
        self.metrics.count("RunsStarted")
        if run.attempt == 1 and run.lag_ms is not None:
            self.metrics.milliseconds("TriggerLagMs", run.lag_ms)
        tenant = self.tenants.get(job.tenant_id)
        try:
            result = self._call_with_heartbeat(job, lease, tenant)
            stored = self._record(job, lease, result)
        finally:
            # The attempt is over (recorded, or its lease lost): its slot goes back before what follows it.
            self._give_back(job, lease.slot)
        if stored is not None:
            until = message.chain_until
            chain = ChainStep(until, run.attempts[-1].started_at) if until is not None else None
            hand_on = chain is None and stored.status in TERMINAL
            self.after_end(Ended(job, stored, status_code=result.status_code, hand_on=hand_on, chain=chain))
        return f"attempt {run.attempt}: {result.outcome.value}"

    def _call_with_heartbeat(self, job: Job, lease: Lease, tenant: Tenant) -> TargetResult:
        lease_for = timedelta(seconds=_timeout_of(job)) + self.lease_margin
        stop = threading.Event()
        current = [lease.run]  # the run item as this attempt last wrote it (its lease extended)

        def beat() -> None:
            while not stop.wait(lease_for.total_seconds() / 3):
                until = self.clock() + lease_for
                if lease.slot is not None:
                    self.slots.heartbeat(
                        job.tenant_id,
                        lease.slot.shard,
                        lease.slot.holder.model_copy(update={"lease_until": until}),
                    )
                if lease.holder is not None:
                    kept = self.lanes.heartbeat(
                        job.tenant_id, job.job_id, lease.holder.model_copy(update={"lease_until": until})
                    )
                else:
                    extended = self.lifecycle.extend_lease(current[0], until)
                    kept = extended is not None
                    if extended is not None:
                        current[0] = extended
                if not kept:
                    logger.warning("lease lost during the target call")
                    return

        heartbeat = threading.Thread(target=beat, name=f"heartbeat-{lease.run.run_id}", daemon=True)
        heartbeat.start()
        try:
            return self.execute(job, lease.run, tenant)
        finally:
            stop.set()
            heartbeat.join(timeout=5)

    def _record(self, job: Job, lease: Lease, result: TargetResult) -> Run | None:
        """Store the attempt's outcome; returns the run as stored (None: the lease was lost meanwhile)."""
        run = lease.run
        now = self.clock()
        started = run.attempts[-1]
        attempt = started.model_copy(
            update={
                "finished_at": now,
                "duration_ms": max(0, to_epoch_ms(now) - to_epoch_ms(started.started_at)),
                "outcome": OUTCOME_OF[result.outcome],
                "error_code": result.error_code,
                "error_message": result.error_message,
            }
        )
        done = run.model_copy(
            update={"attempts": [*run.attempts[:-1], attempt], "lease_owner": None, "lease_expires_at": None}
        )
        policy = (
            job.retry if job.delivery == "at_least_once" else job.retry.model_copy(update={"max_attempts": 1})
        )
        decision = decide_retry(
            policy, run.attempt, result.outcome, scheduled_for=run.scheduled_for, now=now, rng=self.rng
        )
        in_lane = lease.holder is not None
        if decision.retry:
            delay = math.ceil(decision.delay.total_seconds())
            soon = delay <= MAX_DELAY_SECONDS
            waiting = self.lifecycle.wait_for_retry(
                run,
                done,
                in_lane=in_lane,
                retry_at=now + decision.delay,
                # A retry SQS can delay is sent now; a later one is the sweeper's, nearer the time.
                sent_at=now if soon else None,
            )
            if waiting is None:
                self._lease_lost()
                return None
            self.metrics.count("RunsRetried")
            logger.debug(
                "run attempt failed, retry scheduled",
                extra={
                    "status": waiting.status.value,
                    "error_code": result.error_code,
                    "duration_ms": attempt.duration_ms,
                },
            )
            if soon:
                self.queue.send_later(_retry_message(waiting), delay)
            return waiting
        if result.outcome is OutcomeClass.SUCCESS:
            status, reason, metric = RunStatus.SUCCEEDED, None, "RunsSucceeded"
        elif result.outcome is OutcomeClass.PERMANENT:
            status, reason, metric = RunStatus.FAILED, result.error_code, "RunsFailed"
        else:
            status, metric = RunStatus.DEAD, "RunsDead"
            reason = decision.stop_reason.value if decision.stop_reason else "retries_exhausted"
        final = self.lifecycle.end_attempt(run, done, status, reason, now, in_lane=in_lane)
        if final is None:
            self._lease_lost()
            return None
        self.metrics.count(metric)
        if status is not RunStatus.DEAD:  # a DEAD run's dead letter says it
            _log_end(final, error_code=result.error_code, duration_ms=attempt.duration_ms)
        return final

    def _lease_lost(self) -> None:
        """The attempt's end was not written: its lease was lost, and a newer attempt owns the run."""
        self.metrics.count("LeaseConflicts")
        logger.warning("lease lost before the outcome was recorded; a newer attempt owns the run")

    # --- ends without an attempt ------------------------------------------------------------------------
    def _end_unrun(
        self, job: Job, candidate: Candidate, status: RunStatus, reason: str, now: datetime, *, hand_on: bool
    ) -> str | Raced:
        """A fire (or a run between attempts) ends without running: MISSED, SKIPPED or CANCELLED. A fire of a
        job with no lane is decided before its run item is read: if the item exists after all (an attempt
        whose worker died), the write fails and the run is decided again as it is."""
        final = self.lifecycle.end_unrun(candidate, status, reason, now)
        if final is None:
            return RACED
        if status is RunStatus.MISSED:
            self.metrics.count("RunsMissed")
        elif status is RunStatus.SKIPPED:
            self.metrics.count("RunsSkipped")
        _log_end(final)
        self.after_end(Ended(job, final, hand_on=hand_on))
        return f"{status.value.lower()}: {reason}"

    def _end(
        self,
        job: Job,
        candidate: Candidate,
        run: Run,
        status: RunStatus,
        reason: str,
        now: datetime,
    ) -> str:
        """A lost attempt's run ends (ABANDONED, or DEAD once its retries are spent)."""
        final = self.lifecycle.end_lost(candidate, run, status, reason, now)
        if final is not None:
            if status is not RunStatus.DEAD:  # a DEAD run's dead letter says it
                _log_end(final, error_code=final.attempts[-1].error_code if final.attempts else None)
            self.after_end(Ended(job, final))
        return f"{status.value.lower()}: {reason}"


def _log_end(run: Run, *, error_code: str | None = None, duration_ms: int | None = None) -> None:
    """One line for a run that ended other than DEAD (whose dead letter says it): routine ends at DEBUG,
    a run that failed or was abandoned at INFO, for the operator to look at."""
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


def _retry_message(run: Run) -> RunMessage:
    return RunMessage(tenant_id=run.tenant_id, run_id=run.run_id, attempt=run.attempt + 1)


def _timeout_of(job: Job) -> int:
    return int(getattr(job.target, "timeout_seconds", 30))
