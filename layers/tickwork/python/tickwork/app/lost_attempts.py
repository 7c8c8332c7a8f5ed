"""A lost attempt taken over: its worker died (its lease passed with nothing recorded).

The attempt is recorded as lost (abandoned, the lease expired). Then the run ends CANCELLED when its job was
cancelled; ABANDONED when the job is at-most-once; DEAD when its retry policy allows no further attempt;
otherwise it goes on to its next attempt, claimed as any other.
"""

from __future__ import annotations

import random
from datetime import datetime

from tickwork.app.after_end import AfterEnd, Ended, log_end
from tickwork.app.lifecycle import RunLifecycle, lost_attempt_closed
from tickwork.app.ports import Metrics
from tickwork.domain.arrival import Candidate, Stage
from tickwork.domain.models import Job, Run, RunStatus
from tickwork.domain.retry import OutcomeClass, decide_retry


class LostAttempts:
    def __init__(self, *, lifecycle: RunLifecycle, after_end: AfterEnd, metrics: Metrics, rng: random.Random):
        self.lifecycle = lifecycle
        self.after_end = after_end
        self.metrics = metrics
        self.rng = rng

    def take_over(
        self, job: Job, candidate: Candidate, now: datetime, *, cancelled: bool
    ) -> Candidate | str | None:
        """The run's end (a note), the run to attempt next, or None when another write got there first."""
        run = lost_attempt_closed(candidate, now)
        if cancelled:
            return self._end(job, candidate, run, RunStatus.CANCELLED, "job_cancelled", now)
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
                return None
            return Candidate(run, run, Stage.LOST, candidate.lost_holder)
        return Candidate(run, candidate.stored, Stage.LOST, candidate.lost_holder)

    def _end(
        self, job: Job, candidate: Candidate, run: Run, status: RunStatus, reason: str, now: datetime
    ) -> str:
        """The run ends after its lost attempt (ABANDONED, DEAD, CANCELLED)."""
        final = self.lifecycle.end_lost(candidate, run, status, reason, now)
        if final is not None:
            if status is not RunStatus.DEAD:  # a DEAD run's dead letter says it
                log_end(final, error_code=final.attempts[-1].error_code if final.attempts else None)
            self.after_end(Ended(job, final))
        return f"{status.value.lower()}: {reason}"
