"""Retry decisions: given a policy, the attempt that just ended and its outcome, retry or not, and when."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from tickwork.domain.models import RetryPolicy


class OutcomeClass(StrEnum):
    SUCCESS = "success"
    RETRYABLE = "retryable"  # 408, 429, 5xx, timeouts, connection errors
    PERMANENT = "permanent"  # other 4xx, a bad target: retrying would not help


class StopReason(StrEnum):
    SUCCEEDED = "succeeded"
    PERMANENT_ERROR = "permanent_error"
    MAX_ATTEMPTS = "max_attempts"
    MAX_AGE = "max_age"


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay: timedelta = timedelta(0)
    stop_reason: StopReason | None = None

    @property
    def retry_at_offset_seconds(self) -> float:
        return self.delay.total_seconds()


def backoff_ceiling(policy: RetryPolicy, attempt: int) -> float:
    """The un-jittered delay after ``attempt`` (1-based): ``initial * multiplier^(attempt-1)``, capped."""
    exponent = min(attempt - 1, 1000)
    try:
        raw = policy.initial_delay_seconds * policy.multiplier**exponent
    except OverflowError:
        raw = policy.max_delay_seconds
    return min(policy.max_delay_seconds, raw)


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    ceiling = backoff_ceiling(policy, attempt)
    if policy.jitter == "full":
        return rng.uniform(0, ceiling)
    if policy.jitter == "equal":
        return ceiling / 2 + rng.uniform(0, ceiling / 2)
    return ceiling


def decide_retry(
    policy: RetryPolicy,
    attempt: int,
    outcome: OutcomeClass,
    *,
    scheduled_for: datetime,
    now: datetime,
    rng: random.Random,
) -> RetryDecision:
    """Whether attempt ``attempt + 1`` should happen, and after what delay.

    Retries stop at ``max_attempts``, and when the next attempt would start later than ``max_age_seconds``
    after the fire's scheduled time.
    """
    if outcome is OutcomeClass.SUCCESS:
        return RetryDecision(retry=False, stop_reason=StopReason.SUCCEEDED)
    if outcome is OutcomeClass.PERMANENT:
        return RetryDecision(retry=False, stop_reason=StopReason.PERMANENT_ERROR)
    if attempt >= policy.max_attempts:
        return RetryDecision(retry=False, stop_reason=StopReason.MAX_ATTEMPTS)
    delay = timedelta(seconds=backoff_delay(policy, attempt, rng))
    if now + delay - scheduled_for > timedelta(seconds=policy.max_age_seconds):
        return RetryDecision(retry=False, stop_reason=StopReason.MAX_AGE)
    return RetryDecision(retry=True, delay=delay)
