"""The arrival decision (``tickwork.domain.arrival``): what a worker does with a run-queue message, as a pure
function of the job, its lane, the run items read, the message and ``now``.

The contract (design.md, "Policies" and "Worker"): a run that ended absorbs its duplicates; a running
attempt's lease is waited out; a cancel, a pause, a schedule change or the misfire policy ends a fire unrun
with its reason; a job that takes its fires in order holds a fire back behind the one before it; a backfill
job's overdue fire starts a chain; a lost attempt is taken over; anything else is attempted.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork.domain.arrival import (
    BEHIND_EARLIER,
    LANE_FULL,
    AttemptRun,
    Candidate,
    Decision,
    Duplicate,
    EndUnrun,
    LookAgain,
    Note,
    RetryNotDue,
    Stage,
    StartChain,
    TakeOver,
    UnknownManual,
    WaitFirst,
    decide_arrival,
    fire_run,
    joined_chain,
    on_full_lane,
    owed_before,
    waits_for_earlier,
)
from tickwork.domain.lanes import Holder, Lane
from tickwork.domain.lifecycle import TERMINAL
from tickwork.domain.models import (
    Attempt,
    CronSchedule,
    Exclusions,
    HttpTarget,
    Job,
    JobStatus,
    PauseInfo,
    Run,
    RunKey,
    RunMessage,
    RunStatus,
    manual_run_id,
    parse_run_id,
    scheduled_run_id,
)
from tickwork.domain.timeutil import to_epoch_ms

SECOND, MINUTE = timedelta(seconds=1), timedelta(minutes=1)
EVERY_MINUTE = CronSchedule(type="cron", expression="* * * * *")
HOURLY = CronSchedule(type="cron", expression="0 * * * *")


def hm(hour: int, minute: int, second: float = 0) -> datetime:
    return datetime(2025, 1, 1, hour, minute, tzinfo=UTC) + timedelta(seconds=second)


FIRE = hm(12, 0)
NOW = hm(12, 0, 10)
RUN_ID = scheduled_run_id("job-1", FIRE)
MANUAL_ID = manual_run_id("job-1", "k")


def job(**changes: Any) -> Job:
    base = Job(
        name="j",
        schedule=EVERY_MINUTE,
        target=HttpTarget(type="http", url="https://example.com/hook"),
        misfire_policy="fire_once",
        misfire_grace_seconds=60,
        job_id="job-1",
        tenant_id="acme",
        created_at=hm(0, 0),
        updated_at=hm(0, 0),
    )
    return base.model_copy(update=changes)


def message(run_id: str = RUN_ID, **changes: Any) -> RunMessage:
    return RunMessage(tenant_id="acme", run_id=run_id, **changes)


def key_of(run_id: str) -> RunKey:
    key = parse_run_id(run_id)
    assert key is not None
    return key


def run(status: RunStatus, run_id: str = RUN_ID, **changes: Any) -> Run:
    return Run(
        run_id=run_id,
        job_id="job-1",
        tenant_id="acme",
        scheduled_for=FIRE,
        status=status,
        trigger="manual" if ":m:" in run_id else "schedule",
        created_at=FIRE,
        **changes,
    )


def holder(lease_until: datetime, token: int = 3, run_id: str = RUN_ID) -> Holder:
    return Holder(
        run_id=run_id,
        token=token,
        attempt=1,
        scheduled_for=FIRE,
        started_at=FIRE,
        lease_until=lease_until,
        worker_id="w-1",
    )


def lane(*holders: Holder, chain_until: datetime | None = None, chain_from: datetime | None = None) -> Lane:
    return Lane(
        version=3, holders={h.run_id: h for h in holders}, chain_until=chain_until, chain_from=chain_from
    )


def decide(
    the_job: Job | None = None,
    the_lane: Lane | None = None,
    stored: Run | None = None,
    records: dict[str, Run] | None = None,
    the_message: RunMessage | None = None,
    now: datetime = NOW,
) -> Decision:
    the_message = the_message or message()
    return decide_arrival(
        the_job or job(),
        the_lane or lane(),
        stored,
        records if records is not None else ({} if stored is None else {stored.run_id: stored}),
        the_message,
        key_of(the_message.run_id),
        now,
    )


def new_fire(now: datetime = NOW, the_job: Job | None = None, **changes: Any) -> Candidate:
    """The candidate of a fire with no run item yet."""
    the_message = message(**changes)
    return Candidate(fire_run(the_job or job(), key_of(RUN_ID), the_message, now), None, Stage.NEW)


OPEN = [Attempt(attempt=1, started_at=FIRE, worker_id="w-1")]
CLOSED = [Attempt(attempt=1, started_at=FIRE, finished_at=FIRE + SECOND, outcome="retryable_error")]


# --- a run that ended, a lease that holds, an unknown manual run --------------------------------------------
@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_run_that_ended_absorbs_the_delivery_as_a_duplicate(status: RunStatus) -> None:
    ended = run(status, attempts=CLOSED, fencing_token=3)
    # Whatever else holds: a live holder, a cancelled job, a manual run.
    assert decide(job(status=JobStatus.CANCELLED), lane(holder(NOW + MINUTE)), ended) == Duplicate(ended)


@pytest.mark.parametrize(
    ("the_lane", "stored", "expected"),
    [
        # A live holder of this run's attempt, its run item not yet written: back a second after its lease.
        (lane(holder(NOW + 30 * SECOND)), None, LookAgain(31)),
        (lane(holder(NOW + 0.2 * SECOND)), None, LookAgain(2)),
        (lane(holder(NOW + timedelta(hours=1))), None, LookAgain(900)),  # SQS's longest delay
        # The run item's own lease (a job with no lane).
        (lane(), run(RunStatus.RUNNING, attempts=OPEN, lease_expires_at=NOW + 5 * SECOND), LookAgain(6)),
        (
            lane(),
            run(RunStatus.RUNNING, attempts=OPEN, lease_expires_at=NOW + 0.5 * SECOND),
            LookAgain(2),
        ),
    ],
)
def test_an_attempt_holding_its_lease_is_looked_at_again_after_it(
    the_lane: Lane, stored: Run | None, expected: LookAgain
) -> None:
    assert decide(job(status=JobStatus.CANCELLED), the_lane, stored) == expected


def test_a_holder_whose_attempt_is_recorded_holds_nothing() -> None:
    # The run item carries the holder's token: that attempt ended (a retry waits), whatever its lease says.
    waiting = run(RunStatus.RETRY_WAIT, attempts=CLOSED, fencing_token=3, retry_at=NOW - SECOND)
    expected = AttemptRun(Candidate(waiting, waiting, Stage.RETRY))
    assert decide(the_lane=lane(holder(NOW + MINUTE, token=3)), stored=waiting) == expected


def test_a_manual_run_with_no_item_is_dropped() -> None:
    assert decide(the_message=message(MANUAL_ID)) == UnknownManual()


# --- where the run stands --------------------------------------------------------------------------------
LOST_HOLDER = holder(NOW - SECOND)


@pytest.mark.parametrize(
    ("the_lane", "stored", "stage", "lost_holder"),
    [
        (lane(), None, Stage.NEW, None),  # a fire with no item
        (lane(), run(RunStatus.ENQUEUED), Stage.NEW, None),
        (lane(), run(RunStatus.PLANNED), Stage.NEW, None),
        (lane(), run(RunStatus.RETRY_WAIT, attempts=CLOSED, retry_at=NOW), Stage.RETRY, None),
        (lane(), run(RunStatus.PLANNED, attempts=CLOSED, manual_retries=1), Stage.RETRY, None),  # by hand
        # The item's lease passed with its attempt open: that worker died.
        (lane(), run(RunStatus.RUNNING, attempts=OPEN, lease_expires_at=NOW), Stage.LOST, None),
        # ... or with its attempt already recorded lost: the next attempt is a retry.
        (lane(), run(RunStatus.RUNNING, attempts=CLOSED, lease_expires_at=NOW), Stage.RETRY, None),
        # A lane holder whose lease passed with nothing recorded.
        (lane(LOST_HOLDER), None, Stage.LOST, LOST_HOLDER),
        (lane(LOST_HOLDER), run(RunStatus.ENQUEUED, fencing_token=2), Stage.LOST, LOST_HOLDER),
    ],
)
def test_the_stage_follows_the_run_item_and_the_lane(
    the_lane: Lane, stored: Run | None, stage: Stage, lost_holder: Holder | None
) -> None:
    the_run = stored or fire_run(job(), key_of(RUN_ID), message(), NOW)
    candidate = Candidate(the_run, stored, stage, lost_holder)
    expected = TakeOver(candidate) if stage is Stage.LOST else AttemptRun(candidate)
    assert decide(the_lane=the_lane, stored=stored) == expected


# --- a retry's time ----------------------------------------------------------------------------------------
def retry_due(at: datetime) -> Run:
    return run(RunStatus.RETRY_WAIT, attempts=CLOSED, fencing_token=1, retry_at=at)


@pytest.mark.parametrize(
    ("retry_at", "expected_wait"),
    [
        (NOW - SECOND, None),  # due: attempted now
        (NOW, None),
        (NOW + 1.5 * SECOND, 1.5),  # a short remainder is slept out
        (NOW + 3 * SECOND, 3.0),
        (NOW + 3.2 * SECOND, RetryNotDue(4)),  # further ahead: sent again, rounded up
        (NOW + MINUTE, RetryNotDue(60)),
        (NOW + timedelta(hours=1), RetryNotDue(900)),  # SQS's longest delay
    ],
)
def test_a_retry_not_yet_due_waits_for_its_time(
    retry_at: datetime, expected_wait: float | RetryNotDue | None
) -> None:
    stored = retry_due(retry_at)
    attempt = AttemptRun(Candidate(stored, stored, Stage.RETRY))
    expected: Decision = (
        attempt
        if expected_wait is None
        else expected_wait
        if isinstance(expected_wait, RetryNotDue)
        else WaitFirst(expected_wait, attempt)
    )
    assert decide(stored=stored) == expected


def test_a_short_wait_comes_before_what_else_was_decided() -> None:
    stored = retry_due(NOW + SECOND)
    cancelled = EndUnrun(Candidate(stored, stored, Stage.RETRY), RunStatus.CANCELLED, "job_cancelled")
    assert decide(job(status=JobStatus.CANCELLED), stored=stored) == WaitFirst(1.0, cancelled)


# --- the policies -------------------------------------------------------------------------------------------
PAUSED_BEFORE = job(status=JobStatus.PAUSED, pause=PauseInfo(paused_at=hm(11, 59), paused_by="u"))
PAUSED_AFTER = job(status=JobStatus.PAUSED, pause=PauseInfo(paused_at=hm(12, 1), paused_by="u"))
EXCLUDED = job(schedule=EVERY_MINUTE.model_copy(update={"exclude": Exclusions(windows=("* 12 * * *",))}))
SKIP, BACKFILL = job(misfire_policy="skip"), job(misfire_policy="backfill")


@pytest.mark.parametrize(
    ("the_job", "now", "the_lane", "expected"),
    [
        (job(status=JobStatus.CANCELLED), NOW, lane(), (RunStatus.CANCELLED, "job_cancelled", False)),
        # A fire from before the pause is missed; one after it is the resume's to plan.
        (PAUSED_AFTER, NOW, lane(), (RunStatus.MISSED, "job_paused", False)),
        (PAUSED_BEFORE, NOW, lane(), Note("job paused: resuming plans this fire again")),
        (EXCLUDED, NOW, lane(), (RunStatus.SKIPPED, "excluded: window * 12 * * *", False)),
        (job(schedule=HOURLY, updated_at=hm(0, 0)), NOW, lane(), None),  # 12:00 is an hourly fire
        (job(schedule=CronSchedule(type="cron", expression="30 * * * *")), NOW, lane(), "changed"),
        (job(), NOW, lane(chain_until=hm(12, 5)), Note("covered by a backfill chain")),
        (job(), NOW, lane(chain_until=hm(11, 59)), None),  # a chain that ended before it
        # The misfire policy: superseded by a later fire due too, or late past its grace.
        (SKIP, hm(12, 1), lane(), (RunStatus.MISSED, "superseded", True)),
        (job(), hm(12, 1), lane(), (RunStatus.MISSED, "superseded", True)),
        (SKIP, hm(12, 0, 59), lane(), None),  # within its grace, and still the latest
        (job(schedule=HOURLY, misfire_policy="skip"), hm(12, 2), lane(), (RunStatus.MISSED, "late", True)),
        (job(schedule=HOURLY), hm(12, 2), lane(), None),  # fire_once runs a late fire
        (
            job(jitter_seconds=30, misfire_policy="skip"),
            hm(12, 0, 59),
            lane(),
            None,
        ),  # jittered, within grace
    ],
)
def test_a_new_fire_follows_the_cancel_pause_schedule_and_misfire_policy(
    the_job: Job, now: datetime, the_lane: Lane, expected: tuple[RunStatus, str, bool] | Note | str | None
) -> None:
    candidate = new_fire(now, the_job)
    wanted: Decision
    if expected is None:
        wanted = AttemptRun(candidate)
    elif expected == "changed":
        wanted = EndUnrun(candidate, RunStatus.CANCELLED, "schedule_changed")
    elif isinstance(expected, tuple):
        wanted = EndUnrun(candidate, *expected)
    else:
        assert isinstance(expected, Note)
        wanted = expected
    assert decide(the_job, the_lane, now=now) == wanted


@pytest.mark.parametrize(
    "the_job",
    [
        PAUSED_BEFORE,
        PAUSED_AFTER,
        EXCLUDED,
        job(schedule=CronSchedule(type="cron", expression="30 * * * *")),
        job(misfire_policy="skip", overlap_policy="queue"),
    ],
)
def test_the_fire_policies_leave_a_retry_alone(the_job: Job) -> None:
    stored = retry_due(NOW)
    now = hm(12, 5)  # superseded and late too
    assert decide(the_job, stored=stored, now=now) == AttemptRun(Candidate(stored, stored, Stage.RETRY))


def test_the_fire_policies_leave_a_manual_run_alone() -> None:
    stored = run(RunStatus.ENQUEUED, MANUAL_ID)
    decided = decide(PAUSED_AFTER, stored=stored, the_message=message(MANUAL_ID), now=hm(12, 5))
    assert decided == AttemptRun(Candidate(stored, stored, Stage.NEW))


@pytest.mark.parametrize(
    ("the_job", "expected"),
    [
        (job(status=JobStatus.CANCELLED), True),  # taken over to end it CANCELLED
        (job(), False),
        (PAUSED_AFTER, False),  # a lost attempt goes on whatever the fire policies say
        (job(schedule=CronSchedule(type="cron", expression="30 * * * *")), False),
    ],
)
def test_a_lost_attempt_is_taken_over(the_job: Job, expected: bool) -> None:
    stored = run(RunStatus.RUNNING, attempts=OPEN, fencing_token=1, lease_expires_at=NOW - SECOND)
    wanted = TakeOver(Candidate(stored, stored, Stage.LOST), cancelled=expected)
    assert decide(the_job, stored=stored, now=hm(12, 5)) == wanted


# --- fires in order, and backfill chains ---------------------------------------------------------------
EARLIER = scheduled_run_id("job-1", hm(11, 59))
QUEUE = job(overlap_policy="queue")


@pytest.mark.parametrize(
    ("the_job", "now", "records", "the_lane", "the_message", "expected"),
    [
        # A `queue` job's fire waits for the fire before it to reach a worker.
        (QUEUE, NOW, {}, lane(), message(), BEHIND_EARLIER),
        (QUEUE, NOW, {EARLIER: run(RunStatus.RUNNING, EARLIER)}, lane(), message(), None),
        (QUEUE, NOW, {}, lane(holder(NOW + MINUTE, run_id=EARLIER)), message(), None),
        (job(overlap_policy="queue", updated_at=FIRE), NOW, {}, lane(), message(), None),  # first since
        # A backfill job's overdue fire starts a chain through every fire due by now ...
        (job(misfire_policy="backfill", updated_at=FIRE), hm(12, 3, 10), {}, lane(), message(), hm(12, 3)),
        (BACKFILL, hm(12, 3, 10), {EARLIER: run(RunStatus.MISSED, EARLIER)}, lane(), message(), hm(12, 3)),
        # ... once the fire before it has reached a worker;
        (BACKFILL, hm(12, 3, 10), {}, lane(), message(), BEHIND_EARLIER),
        # a fire on time is simply attempted (in order);
        (BACKFILL, NOW, {EARLIER: run(RunStatus.SUCCEEDED, EARLIER)}, lane(), message(), None),
        (BACKFILL, NOW, {}, lane(), message(), BEHIND_EARLIER),
        # a chain's own step runs, whatever is overdue.
        (BACKFILL, hm(12, 3, 10), {}, lane(), message(chain_until=to_epoch_ms(hm(12, 3))), None),
    ],
)
def test_fires_in_order_wait_for_the_one_before_and_backfill_starts_a_chain(
    the_job: Job,
    now: datetime,
    records: dict[str, Run],
    the_lane: Lane,
    the_message: RunMessage,
    expected: object,
) -> None:
    candidate = Candidate(fire_run(the_job, key_of(RUN_ID), the_message, now), None, Stage.NEW)
    wanted = (
        AttemptRun(candidate)
        if expected is None
        else StartChain(candidate, expected, FIRE)
        if isinstance(expected, datetime)
        else expected
    )
    assert decide(the_job, the_lane, None, records, the_message, now) == wanted


CHAIN_END = scheduled_run_id("job-1", hm(11, 50))
AFTER_CHANGE = job(overlap_policy="queue", updated_at=FIRE)


@pytest.mark.parametrize(
    ("the_job", "the_message", "the_lane", "expected"),
    [
        (job(), message(), lane(), None),  # overlap and misfire policies that take fires in any order
        (job(overlap_policy="skip", misfire_policy="skip"), message(), lane(), None),
        (QUEUE, message(), lane(), EARLIER),
        (BACKFILL, message(), lane(), EARLIER),
        (BACKFILL, message(chain_until=to_epoch_ms(hm(12, 3))), lane(), None),  # a chain's step
        (QUEUE, message(MANUAL_ID), lane(), None),
        # The first fire after a change: after the chain the change started, if any.
        (AFTER_CHANGE, message(), lane(), None),
        (AFTER_CHANGE, message(), lane(chain_until=hm(11, 50)), CHAIN_END),
        (AFTER_CHANGE, message(), lane(chain_until=hm(12, 5)), None),
        (QUEUE, message(), lane(chain_until=hm(11, 50)), EARLIER),  # the schedule's own fire comes first
    ],
)
def test_the_fire_owed_before(
    the_job: Job, the_message: RunMessage, the_lane: Lane, expected: str | None
) -> None:
    assert owed_before(the_job, key_of(the_message.run_id), the_message, the_lane) == expected


@pytest.mark.parametrize(
    ("records", "the_lane", "expected"),
    [
        ({}, lane(), True),  # the fire before has not reached a worker
        ({EARLIER: run(RunStatus.ENQUEUED, EARLIER)}, lane(), False),
        ({}, lane(holder(NOW + MINUTE, run_id=EARLIER)), False),
        ({}, lane(holder(NOW - MINUTE, run_id=EARLIER)), False),
    ],
)
def test_a_fire_waits_until_the_one_before_reached_a_worker(
    records: dict[str, Run], the_lane: Lane, expected: bool
) -> None:
    assert waits_for_earlier(QUEUE, key_of(RUN_ID), message(), the_lane, records) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (None, True),
        (RunStatus.ENQUEUED, True),
        (RunStatus.RUNNING, True),
        (RunStatus.RETRY_WAIT, True),
        *((status, False) for status in sorted(TERMINAL)),
    ],
)
def test_the_first_fire_after_a_chain_waits_until_the_chain_has_ended(
    status: RunStatus | None, expected: bool
) -> None:
    records = {} if status is None else {CHAIN_END: run(status, CHAIN_END)}
    the_lane = lane(holder(NOW + MINUTE, run_id=CHAIN_END), chain_until=hm(11, 50))
    assert waits_for_earlier(AFTER_CHANGE, key_of(RUN_ID), message(), the_lane, records) is expected


# --- a full lane ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("the_job", "stage", "the_message", "skipped"),
    [
        (job(overlap_policy="skip"), Stage.NEW, message(), True),
        (job(overlap_policy="allow", max_concurrent_runs=2), Stage.NEW, message(), True),
        (job(overlap_policy="queue"), Stage.NEW, message(), False),
        (job(overlap_policy="skip"), Stage.NEW, message(chain_until=to_epoch_ms(hm(12, 3))), False),
        (job(overlap_policy="skip"), Stage.RETRY, message(), False),
        (job(overlap_policy="skip"), Stage.LOST, message(), False),
    ],
)
def test_a_full_lane_skips_a_new_fire_or_holds_the_run_back(
    the_job: Job, stage: Stage, the_message: RunMessage, skipped: bool
) -> None:
    candidate = Candidate(run(RunStatus.ENQUEUED), None, stage)
    expected = EndUnrun(candidate, RunStatus.SKIPPED, "overlap") if skipped else LANE_FULL
    assert on_full_lane(the_job, candidate, the_message) == expected


# --- a fire's run before its first write -------------------------------------------------------------------
def test_a_fire_run_is_enqueued_when_it_was_sent() -> None:
    sent = fire_run(job(), key_of(RUN_ID), message(sent_at=to_epoch_ms(hm(11, 58))), NOW)
    assert (sent.status, sent.scheduled_for, sent.trigger) == (RunStatus.ENQUEUED, FIRE, "schedule")
    assert (sent.created_at, sent.enqueued_at, sent.jitter_ms) == (hm(11, 58), hm(11, 58), None)
    unsent = fire_run(job(), key_of(RUN_ID), message(), NOW)
    assert (unsent.created_at, unsent.enqueued_at) == (NOW, None)


def test_a_fire_run_carries_its_jitter() -> None:
    jittered = fire_run(job(jitter_seconds=30), key_of(RUN_ID), message(), NOW)
    assert jittered.jitter_ms is not None and 0 <= jittered.jitter_ms <= 30_000


def test_the_decision_is_the_same_for_the_same_inputs() -> None:
    # Nothing but its arguments: no clock, no randomness.
    first = decide(BACKFILL, now=hm(12, 3, 10), records={EARLIER: run(RunStatus.MISSED, EARLIER)})
    again = decide(BACKFILL, now=hm(12, 3, 10), records={EARLIER: run(RunStatus.MISSED, EARLIER)})
    assert first == again


# --- one backfill chain per job, whatever the queue holds -----------------------------------------------
CHAINED = lane(chain_from=hm(11, 58), chain_until=hm(12, 3))
LATER = hm(12, 3, 10)
STEP = message(chain_until=to_epoch_ms(hm(12, 3)))


def ended_at(run_id: str, started: datetime) -> Run:
    done = Attempt(attempt=1, started_at=started, finished_at=started, worker_id="w-1", outcome="succeeded")
    return run(RunStatus.SUCCEEDED, run_id, attempts=[done])


@pytest.mark.parametrize(
    ("the_message", "records", "the_lane", "expected"),
    [
        # The fire before it ended 100 ms ago or more: its turn, whatever message carries it.
        (STEP, {EARLIER: ended_at(EARLIER, LATER - SECOND)}, CHAINED, "run"),
        (message(), {EARLIER: ended_at(EARLIER, LATER - SECOND)}, CHAINED, "run"),
        # Sooner: it waits out the pace.
        (STEP, {EARLIER: ended_at(EARLIER, LATER - timedelta(milliseconds=30))}, CHAINED, "wait"),
        # The fire before is running: sent again shortly.
        (STEP, {EARLIER: run(RunStatus.RUNNING, EARLIER)}, CHAINED, BEHIND_EARLIER),
        (message(), {}, lane(holder(LATER + MINUTE, run_id=EARLIER), chain_from=hm(11, 58)), BEHIND_EARLIER),
        # The fire before has not reached a worker: the chain reaches this one after it.
        (STEP, {}, CHAINED, Note("covered by a backfill chain: the fire before it comes first")),
        (message(), {}, CHAINED, Note("covered by a backfill chain: the fire before it comes first")),
    ],
)
def test_a_fire_inside_the_chain_takes_its_turn(
    the_message: RunMessage, records: dict[str, Run], the_lane: Lane, expected: object
) -> None:
    the_lane = the_lane.model_copy(update={"chain_until": hm(12, 3)})
    decided = decide(BACKFILL, the_lane, None, records, the_message, LATER)
    candidate = Candidate(fire_run(BACKFILL, key_of(RUN_ID), the_message, LATER), None, Stage.NEW)
    step = replace(candidate, chain_until=to_epoch_ms(hm(12, 3)))
    if expected == "run":
        assert decided == AttemptRun(step)
    elif expected == "wait":
        assert isinstance(decided, WaitFirst)
        assert decided.then == AttemptRun(step)
        assert decided.seconds == pytest.approx(0.08)
    else:
        assert decided == expected


@pytest.mark.parametrize(
    ("the_message", "records", "expected"),
    [
        # The chain's first fire: its own message runs it once the schedule's fire before it has ended ...
        (STEP, {EARLIER: ended_at(EARLIER, NOW - MINUTE)}, "run"),
        # ... and waits for that one while it is still owed (sent before the chain, restored with the queue);
        (STEP, {}, BEHIND_EARLIER),
        # another message of it is covered by the chain.
        (message(), {}, Note("covered by a backfill chain: its first message runs it")),
    ],
)
def test_the_first_fire_of_a_chain_comes_after_the_fires_owed_before_it(
    the_message: RunMessage, records: dict[str, Run], expected: object
) -> None:
    the_lane = lane(chain_from=FIRE, chain_until=hm(12, 3))
    decided = decide(BACKFILL, the_lane, None, records, the_message, LATER)
    candidate = Candidate(fire_run(BACKFILL, key_of(RUN_ID), the_message, LATER), None, Stage.NEW)
    if expected == "run":
        assert decided == AttemptRun(replace(candidate, chain_until=to_epoch_ms(hm(12, 3))))
    else:
        assert decided == expected


def test_an_overdue_fire_before_the_chain_starts_it_earlier() -> None:
    """A fire sent before an outage, restored with the queue, older than the planner's chain: the chain
    starts from it, and the planner's fires join it."""
    the_lane = lane(chain_from=hm(12, 2), chain_until=hm(12, 3))
    records = {EARLIER: ended_at(EARLIER, NOW - MINUTE)}
    decided = decide(BACKFILL, the_lane, None, records, message(), LATER)
    candidate = Candidate(fire_run(BACKFILL, key_of(RUN_ID), message(), LATER), None, Stage.NEW)
    assert decided == StartChain(candidate, hm(12, 3), FIRE)


@pytest.mark.parametrize(
    ("the_lane", "first", "last", "expected"),
    [
        (lane(), hm(12, 0), hm(12, 3), (hm(12, 0), hm(12, 3))),
        (lane(chain_from=hm(11, 50), chain_until=hm(12, 1)), hm(12, 0), hm(12, 3), (hm(11, 50), hm(12, 3))),
        (lane(chain_from=hm(12, 2), chain_until=hm(12, 3)), hm(12, 0), hm(12, 1), (hm(12, 0), hm(12, 3))),
        # straight on from the lane's chain: one chain
        (lane(chain_from=hm(11, 50), chain_until=hm(11, 59)), hm(12, 0), hm(12, 3), (hm(11, 50), hm(12, 3))),
        # after a gap: a new chain
        (lane(chain_from=hm(11, 50), chain_until=hm(11, 55)), hm(12, 0), hm(12, 3), (hm(12, 0), hm(12, 3))),
        # a chain recorded without its first fire
        (lane(chain_until=hm(12, 1)), hm(12, 0), hm(12, 3), (hm(12, 0), hm(12, 3))),
    ],
)
def test_a_job_has_one_chain(
    the_lane: Lane, first: datetime, last: datetime, expected: tuple[datetime, datetime]
) -> None:
    assert joined_chain(BACKFILL, the_lane, first, last) == expected
