"""The run lifecycle: which status a run may move to from which, in one table.

A fire that was planned but has no run item yet is ``None`` here: it is PLANNED or ENQUEUED as the API shows
it (derived from the job's cursor), and its first stored status is the first write about it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.domain.models import Run, RunStatus
from tickwork.errors import TickworkError

S = RunStatus
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.DEAD, S.ABANDONED, S.MISSED, S.SKIPPED, S.CANCELLED})
WAITING = frozenset({S.PLANNED, S.ENQUEUED, S.RETRY_WAIT})
"""Not started, or between attempts: a pause, a cancel or a policy can still stop it."""
RETRYABLE_BY_HAND = frozenset({S.FAILED, S.DEAD, S.ABANDONED})

# The reasons a run can end without running, by the decision that ended it.
_ENDED_UNRUN = {S.MISSED, S.SKIPPED, S.CANCELLED}
_ATTEMPT_ENDS = {S.SUCCEEDED, S.RETRY_WAIT, S.FAILED, S.DEAD, S.ABANDONED}

TRANSITIONS: dict[RunStatus | None, frozenset[RunStatus]] = {
    # A fire with no item: stored by the API (a manual run, PLANNED then ENQUEUED), claimed by a worker, or
    # ended by a decision (misfire, overlap, pause, cancel).
    None: frozenset({S.PLANNED, S.ENQUEUED, S.RUNNING, *_ENDED_UNRUN}),
    S.PLANNED: frozenset({S.ENQUEUED, S.RUNNING, *_ENDED_UNRUN}),
    # Back to PLANNED when its send failed (the sweeper sends it again).
    S.ENQUEUED: frozenset({S.PLANNED, S.RUNNING, *_ENDED_UNRUN}),
    # An attempt ends; or its lease expired and another attempt takes over (RUNNING again); or it is
    # cancelled (its job cancelled, or the run itself), and not retried.
    S.RUNNING: frozenset({S.RUNNING, S.CANCELLED, *_ATTEMPT_ENDS}),
    # The next attempt starts, or the run ends before it: cancelled, or its age ran out (DEAD).
    S.RETRY_WAIT: frozenset({S.ENQUEUED, S.RUNNING, S.CANCELLED, S.DEAD}),
    # A re-run by hand starts over as PLANNED.
    **{status: frozenset({S.PLANNED}) for status in RETRYABLE_BY_HAND},
    S.SUCCEEDED: frozenset(),
    S.MISSED: frozenset(),
    S.SKIPPED: frozenset(),
    S.CANCELLED: frozenset(),
}


class IllegalTransition(TickworkError):
    """A bug: the engine tried to move a run where the lifecycle does not go."""

    code = "illegal_transition"


def can_move(old: RunStatus | None, new: RunStatus) -> bool:
    return new in TRANSITIONS[old]


def ensure_move(old: RunStatus | None, new: RunStatus) -> None:
    if not can_move(old, new):
        raise IllegalTransition(f"a run cannot go from {old.value if old else 'no item'} to {new.value}")


# A stored run the sweeper looks at: one whose message may not have gone out, or a retry it must send.
PLANNED_GRACE = timedelta(seconds=30)
START_GRACE = timedelta(seconds=60)
SWEEP_LEAD = timedelta(minutes=2)


def attention_at(run: Run) -> datetime | None:
    """When the sweeper should look at a stored run, if ever. Runs on their way (a fire's run, an attempt in
    progress, a finished run) need none, so their writes touch no index. A pool run waiting for a claim is
    looked at once it has waited the pool wait threshold (to count it, not to change it: it waits for the
    tenant's workers, however long); a claimed one, or a webhook's run that answered 202, when its lease
    lapses, so each heartbeat moves its entry."""
    if run.waiting_in_pool:
        return run.pool_wait_alarm_at
    if run.held_outside and run.status is S.RUNNING:
        return run.lease_expires_at  # none for a workflow run: its tasks are the sweeper's to look at
    if run.status is S.PLANNED:
        return run.created_at + PLANNED_GRACE
    if run.status is S.ENQUEUED:
        return max(run.scheduled_for, run.enqueued_at or run.created_at) + START_GRACE
    if run.status is S.RETRY_WAIT and run.retry_at is not None:
        if run.retry_sent_at is None:
            return run.retry_at - SWEEP_LEAD
        return max(run.retry_at, run.retry_sent_at) + START_GRACE
    return None


def sources_of(new: RunStatus) -> frozenset[RunStatus | None]:
    """Every status (None: no item) a run may reach ``new`` from: the condition of a store's write."""
    return frozenset(old for old, targets in TRANSITIONS.items() if new in targets)
