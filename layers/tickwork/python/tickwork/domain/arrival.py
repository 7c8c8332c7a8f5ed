"""What a worker does with a run-queue message when it arrives: the arrival decision, as a pure function.

:func:`decide_arrival` takes the job, its lane, the run item as read and the other run items it needs, the
message, its run key and ``now``, and returns a :data:`Decision`: a value saying what to do. It reads no
clock, sends nothing and writes nothing; the worker carries the decision out (its sends, sleeps and
writes), and claims the lease when the decision is to attempt the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from tickwork.domain.fires import (
    Arrival,
    first_fire_anchor,
    is_fire_of,
    is_superseded,
    jitter_of,
    latest_fire_until,
    on_arrival,
    previous_fire,
)
from tickwork.domain.lanes import Holder, Lane, capacity, ended
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import (
    Job,
    JobStatus,
    Run,
    RunKey,
    RunMessage,
    RunStatus,
    WorkflowTarget,
    scheduled_run_id,
)
from tickwork.domain.pools import pool_target_of
from tickwork.domain.schedule import exclusion_of, next_fire_time
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms

# Sleep at most this long before a run's time; a message that early goes back to the queue for the rest.
MAX_EARLY_WAIT = timedelta(seconds=3)
# SQS's longest delay: a retry due later waits in the run item, for the sweeper.
MAX_DELAY_SECONDS = 900
# Backfill runs at most ten fires a second per job: a chain's fire starts this long after the one before.
BACKFILL_SPACING = timedelta(milliseconds=100)
# A start is taken before its claim's write, and the call follows that write a few milliseconds later, more
# or less: a fire waits this much longer, so the calls themselves, not only the starts, stay ten a second.
PACING_SLACK = timedelta(milliseconds=10)


class Stage(StrEnum):
    """Where a run stands when its message is handled."""

    NEW = "new"  # a fire (or a manual run) that has not started
    RETRY = "retry"  # between attempts: the next one is due
    LOST = "lost"  # its last attempt's lease passed with nothing recorded: that worker died


@dataclass(frozen=True)
class Candidate:
    """The run a message is about, as far as the worker knows it."""

    run: Run
    stored: Run | None
    """The run item as read (None: none yet), the condition of the next write to it."""
    stage: Stage
    lost_holder: Holder | None = None
    chain_until: int | None = None
    """This fire starts a backfill chain that runs every fire up to this one (epoch ms)."""


# --- the decision ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Duplicate:
    """The run has ended: the delivery is a duplicate, absorbed (after finishing what the first delivery may
    have left undone)."""

    run: Run


@dataclass(frozen=True)
class LookAgain:
    """Another delivery's attempt holds the lease: send the message again once it has passed."""

    delay_seconds: int


@dataclass(frozen=True)
class UnknownManual:
    """A manual run with no run item: the API never stored it. The message is dropped."""


@dataclass(frozen=True)
class RetryNotDue:
    """The next attempt is not due for a while: send the message again for its time."""

    delay_seconds: int


@dataclass(frozen=True)
class WaitFirst:
    """The next attempt is due in a moment: sleep out the remainder, then do ``then`` (decided as of now)."""

    seconds: float
    then: Decision


@dataclass(frozen=True)
class EndUnrun:
    """The run ends without an attempt (MISSED, SKIPPED or CANCELLED) with its reason; with ``hand_on``, a
    `queue` job's next fire is sent at once rather than waiting for the lane."""

    candidate: Candidate
    status: RunStatus
    reason: str
    hand_on: bool = False


@dataclass(frozen=True)
class Note:
    """Nothing to do but say why: the fire is someone else's (a resume plans it again, a chain covers it)."""

    text: str


@dataclass(frozen=True)
class HoldBack:
    """Not yet: send the message again shortly."""

    text: str


@dataclass(frozen=True)
class StartChain:
    """A backfill job's overdue fire starts a chain that runs every fire up to ``until``, oldest first. The
    lane records the chain from ``first`` (this fire, or the first of a chain it joins) to ``until``."""

    candidate: Candidate
    until: datetime
    first: datetime


@dataclass(frozen=True)
class TakeOver:
    """The last attempt's worker died: record that attempt lost, then end the run CANCELLED (its job was
    cancelled) or go on as its delivery and retry policy say."""

    candidate: Candidate
    cancelled: bool = False


@dataclass(frozen=True)
class AttemptRun:
    """Claim the lease and attempt the run, at the candidate's stage."""

    candidate: Candidate


Decision = (
    Duplicate
    | LookAgain
    | UnknownManual
    | RetryNotDue
    | WaitFirst
    | EndUnrun
    | Note
    | HoldBack
    | StartChain
    | TakeOver
    | AttemptRun
)

BEHIND_EARLIER = HoldBack("held back: an earlier fire comes first")
LANE_FULL = HoldBack("held back: sent again")


def decide_arrival(
    job: Job,
    lane: Lane,
    stored: Run | None,
    records: dict[str, Run],
    message: RunMessage,
    key: RunKey,
    now: datetime,
    first: Run | None = None,
) -> Decision:
    """What to do with ``message`` at ``now``. ``stored`` is its run item as read (None: none), ``records``
    the run items read with it (the lane holders', the fire owed before it); ``first``, a workflow task's run
    before its first write, when it has no item yet (None: the message is stale)."""
    if stored is not None and stored.status in TERMINAL:
        return Duplicate(stored)
    if stored is not None and stored.in_pool:
        return Note(f"in its pool: {stored.status.value.lower()} for the pool's workers")
    if stored is not None and stored.held_outside:
        return Note("continued by its target: running under its lease token")
    holder = lane.holders.get(message.run_id)
    token = stored.fencing_token if stored is not None else None
    running_holder = holder is not None and not ended(holder, token)
    if running_holder and holder is not None and holder.lease_until > now:
        return _look_again_after(holder.lease_until, now)
    if (
        stored is not None
        and stored.status is RunStatus.RUNNING
        and stored.lease_expires_at is not None
        and stored.lease_expires_at > now
    ):
        return _look_again_after(stored.lease_expires_at, now)
    if key.is_manual and stored is None and first is None:
        return UnknownManual()

    run = stored or first or fire_run(job, key, message, now)
    lost_recorded = bool(run.attempts) and run.attempts[-1].finished_at is not None
    if running_holder or (run.status is RunStatus.RUNNING and not lost_recorded):
        candidate = Candidate(run, stored, Stage.LOST, holder if running_holder else None)
    elif run.status is RunStatus.RETRY_WAIT or run.attempts or run.manual_retries:
        # Between attempts: a retry, or a re-run by hand (a new attempt of a run that ended; a workflow run's
        # records no attempts of its own).
        candidate = Candidate(run, stored, Stage.RETRY)
    else:
        candidate = Candidate(run, stored, Stage.NEW)

    if candidate.stage is Stage.RETRY and run.retry_at is not None:
        early = (run.retry_at - now).total_seconds()
        if early > MAX_EARLY_WAIT.total_seconds():
            return RetryNotDue(math.ceil(min(early, MAX_DELAY_SECONDS)))
        if early > 0:
            return WaitFirst(early, _decide_candidate(job, lane, candidate, records, message, key, now))
    return _decide_candidate(job, lane, candidate, records, message, key, now)


def _decide_candidate(
    job: Job,
    lane: Lane,
    candidate: Candidate,
    records: dict[str, Run],
    message: RunMessage,
    key: RunKey,
    now: datetime,
) -> Decision:
    """The policies: a cancel, a pause, a schedule change, the misfire policy and the fires' order."""
    if job.status is JobStatus.CANCELLED:
        if candidate.stage is Stage.LOST:
            return TakeOver(candidate, cancelled=True)
        return EndUnrun(candidate, RunStatus.CANCELLED, "job_cancelled")
    if candidate.stage is Stage.NEW and not key.is_manual:
        fired = candidate.run.scheduled_for
        if job.status is JobStatus.PAUSED:
            assert job.pause is not None
            if fired >= job.pause.paused_at:
                return Note("job paused: resuming plans this fire again")
            return EndUnrun(candidate, RunStatus.MISSED, "job_paused")
        excluded = exclusion_of(job.schedule, fired)
        if excluded is not None:
            # Excluded since it was sent (the job was updated): recorded as the planner records it.
            return EndUnrun(candidate, RunStatus.SKIPPED, excluded)
        if not is_fire_of(job, fired):
            return EndUnrun(candidate, RunStatus.CANCELLED, "schedule_changed")
        if job.misfire_policy == "backfill" and in_chain(lane, fired):
            return _chain_turn(job, lane, candidate, records, message, key, now)
        if message.chain_until is None:
            if lane.chain_until is not None and fired <= lane.chain_until and lane.chain_from is None:
                return Note("covered by a backfill chain")
            arrival = on_arrival(job, fired, now)
            if arrival is not Arrival.RUN:
                return EndUnrun(candidate, RunStatus.MISSED, arrival.value, hand_on=True)
            if job.misfire_policy == "backfill" and is_superseded(job, fired, now):
                # The oldest owed overdue fire starts a chain through every fire due by now (joining the
                # lane's chain when they meet); the messages of the others are covered by it.
                if waits_for_earlier(job, key, message, lane, records):
                    return BEHIND_EARLIER
                first, until = joined_chain(job, lane, fired, latest_fire_until(job, fired, now))
                start = StartChain(candidate, until, first)
                before = owed_before(job, key, message, lane)
                previous = records.get(before) if before is not None else None
                if previous is not None and not attempt_ended(previous):
                    return BEHIND_EARLIER
                return _paced_after(previous, start, now)
            if waits_for_earlier(job, key, message, lane, records):
                return BEHIND_EARLIER
            if job.misfire_policy == "backfill":
                # The first fire after a chain keeps the chain's pace (the fire before it was read anyway).
                before = owed_before(job, key, message, lane)
                return _paced_after(records.get(before) if before else None, AttemptRun(candidate), now)
    if candidate.stage is Stage.LOST:
        return TakeOver(candidate)
    return AttemptRun(candidate)


def on_full_lane(job: Job, candidate: Candidate, message: RunMessage) -> EndUnrun | HoldBack:
    """The job's lane is full. A new fire of a `skip` job (or one past ``max_concurrent_runs``) ends SKIPPED;
    anything else (a `queue` job's fire, a retry, a lost attempt's next one) waits its turn."""
    if candidate.stage is Stage.NEW and job.overlap_policy != "queue" and message.chain_until is None:
        return EndUnrun(candidate, RunStatus.SKIPPED, "overlap")
    return LANE_FULL


def _chain_turn(
    job: Job,
    lane: Lane,
    candidate: Candidate,
    records: dict[str, Run],
    message: RunMessage,
    key: RunKey,
    now: datetime,
) -> Decision:
    """A fire inside the lane's backfill chain, whatever message carries it (a step of the chain, a fire sent
    before an outage and restored with the queue, the start of a second chain that joined it): it runs once
    the chain's fire before it has ended, and not sooner than ``BACKFILL_SPACING`` after that one started,
    so the chain's fires run one at a time, oldest first, at most ten a second. A message that comes before
    its turn is dropped when the fire before has not reached a worker yet (the chain reaches this fire once
    that one ends), and sent again when that one is running."""
    assert lane.chain_until is not None
    assert lane.chain_from is not None
    until = to_epoch_ms(lane.chain_until)
    step = replace(candidate, chain_until=max(until, message.chain_until or until))
    fired = candidate.run.scheduled_for
    first = fired <= lane.chain_from
    if first and message.chain_until is None:
        return Note("covered by a backfill chain: its first message runs it")
    before = owed_before(job, key, message, lane)
    if before is None:
        return AttemptRun(step)
    previous = records.get(before)
    if previous is not None and attempt_ended(previous):
        return _paced_after(previous, AttemptRun(step), now)
    if previous is not None or before in lane.holders or first:
        # The chain's first fire waits for the fire before it, sent before the chain was (a fire of the
        # outage restored with the queue): that one may start the chain earlier, and this one joins it.
        return BEHIND_EARLIER
    return Note("covered by a backfill chain: the fire before it comes first")


def _paced_after(previous: Run | None, then: Decision, now: datetime) -> Decision:
    """``then``, once ``BACKFILL_SPACING`` has passed since the previous fire's last attempt started."""
    started = previous.attempts[-1].started_at if previous is not None and previous.attempts else None
    if started is None:
        return then
    turn = started + BACKFILL_SPACING + PACING_SLACK
    return WaitFirst((turn - now).total_seconds(), then) if now < turn else then


def attempt_ended(run: Run) -> bool:
    """The run's attempt is over (it ended, or waits for a retry): a backfill chain goes on past it."""
    return run.status in TERMINAL or run.status is RunStatus.RETRY_WAIT


def in_chain(lane: Lane, fired: datetime) -> bool:
    """The fire lies within the backfill chain the lane records (from its first fire to its last)."""
    return (
        lane.chain_from is not None
        and lane.chain_until is not None
        and lane.chain_from <= fired <= lane.chain_until
    )


def joined_chain(job: Job, lane: Lane, first: datetime, last: datetime) -> tuple[datetime, datetime]:
    """The chain the lane records once a chain of the fires ``first`` to ``last`` is added to it. A job has
    one chain: one that overlaps the lane's, or follows straight on from it, joins it (its fires then run in
    the same sequence, oldest first); one after a gap replaces it."""
    if lane.chain_until is None or lane.chain_from is None:
        return first, last
    following = next_fire_time(job.schedule, lane.chain_until, anchor=first_fire_anchor(job))
    if following is not None and first > following:
        return first, last
    return min(first, lane.chain_from), max(last, lane.chain_until)


def reads_ahead(job: Job) -> bool:
    """Whether the job's planned fires may be read ahead: a job whose runs share its lane and whose target is
    called by the worker (not a workflow's tasks, not a pool's workers). Its worker reads the job, the lane
    and the run items when the message arrives, and at the fire takes the lane on the version it read: a
    pause, a cancel or a schedule change meanwhile moves the lane's version (they write it too), so that
    claim fails and the fire is decided again on what it reads then."""
    return (
        capacity(job) is not None
        and not isinstance(job.target, WorkflowTarget)
        and pool_target_of(job) is None
    )


def owed_before(job: Job, key: RunKey, message: RunMessage, lane: Lane) -> str | None:
    """For the fire of a job that takes its fires in order (overlap `queue`, misfire `backfill`): the run id
    of the fire before it, which must be dealt with first. Inside a backfill chain, it is the chain's fire
    before it, whatever the message. The first fire after a change (a resume, an update) comes after the
    last fire of a backfill chain the change started."""
    if key.fire_ms is None:
        return None
    fire = from_epoch_ms(key.fire_ms)
    if job.misfire_policy == "backfill" and in_chain(lane, fire):
        assert lane.chain_from is not None
        # Inside the chain, the chain's fire before; its first fire comes after the schedule's fire before it.
        since = lane.chain_from if fire > lane.chain_from else job.updated_at
        chained = previous_fire(job, fire, since=since)
        return scheduled_run_id(job.job_id, chained) if chained is not None else None
    ordered = job.overlap_policy == "queue" or job.misfire_policy == "backfill"
    if not ordered or message.chain_until is not None:
        return None
    earlier = previous_fire(job, fire, since=job.updated_at)
    if earlier is None and lane.chain_until is not None and lane.chain_until < fire:
        earlier = lane.chain_until
    return scheduled_run_id(job.job_id, earlier) if earlier is not None else None


def waits_for_earlier(
    job: Job, key: RunKey, message: RunMessage, lane: Lane, records: dict[str, Run]
) -> bool:
    """The fire before this one (see :func:`owed_before`) has not reached a worker yet, or, when it ends a
    backfill chain, has not ended: the fires after a chain wait for it rather than overlap it."""
    before = owed_before(job, key, message, lane)
    if before is None:
        return False
    if lane.chain_until is not None and before == scheduled_run_id(job.job_id, lane.chain_until):
        last = records.get(before)
        return last is None or last.status not in TERMINAL
    return before not in records and before not in lane.holders


def fire_run(job: Job, key: RunKey, message: RunMessage, now: datetime) -> Run:
    """A fire's run before its first write: ENQUEUED as the API shows it."""
    assert key.fire_ms is not None
    sent = from_epoch_ms(message.sent_at) if message.sent_at is not None else None
    fire = from_epoch_ms(key.fire_ms)
    jitter = jitter_of(job, fire) // timedelta(milliseconds=1) if job.jitter_seconds else None
    return Run(
        run_id=message.run_id,
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        scheduled_for=fire,
        status=RunStatus.ENQUEUED,
        trigger="schedule",
        created_at=sent or now,
        enqueued_at=sent,
        jitter_ms=jitter,
    )


def _look_again_after(lease_until: datetime, now: datetime) -> LookAgain:
    """Another delivery's attempt may be running, or its worker may have died with this very message: come
    back once the lease has passed (a second after), to find the run ended or to take it over."""
    wait = math.ceil((lease_until - now).total_seconds()) + 1
    return LookAgain(max(1, min(wait, MAX_DELAY_SECONDS)))
