"""Unit tests for retry decisions: ``backoff_ceiling``, ``backoff_delay`` and ``decide_retry``."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest
from tickwork.domain.models import RetryPolicy
from tickwork.domain.retry import (
    OutcomeClass,
    RetryDecision,
    StopReason,
    backoff_ceiling,
    backoff_delay,
    decide_retry,
)

Jitter = Literal["full", "equal", "none"]
SCHEDULED = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)


def policy(
    *,
    max_attempts: int = 5,
    initial: float = 2,
    max_delay: float = 3600,
    multiplier: float = 2.0,
    jitter: Jitter = "none",
    max_age: int = 86_400,
) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts,
        initial_delay_seconds=initial,
        max_delay_seconds=max_delay,
        multiplier=multiplier,
        jitter=jitter,
        max_age_seconds=max_age,
    )


# --- backoff_ceiling ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("retry_policy", "attempt", "expected"),
    [
        # the design's defaults: 2 s doubling, capped at one hour
        (policy(), 1, 2.0),
        (policy(), 2, 4.0),
        (policy(), 3, 8.0),
        (policy(), 10, 1024.0),
        (policy(), 11, 2048.0),
        (policy(), 12, 3600.0),  # 4096 > 3600
        (policy(), 100, 3600.0),
        # a non-integer multiplier
        (policy(initial=2, multiplier=1.5), 3, 4.5),
        (policy(initial=1, multiplier=3, max_delay=100), 4, 27.0),
        (policy(initial=1, multiplier=3, max_delay=100), 5, 81.0),
        (policy(initial=1, multiplier=3, max_delay=100), 6, 100.0),  # 243 > 100
        # multiplier 1: a constant delay
        (policy(initial=7, multiplier=1.0), 1, 7.0),
        (policy(initial=7, multiplier=1.0), 50, 7.0),
        # initial 0: retry at once, every time
        (policy(initial=0, max_delay=0), 1, 0.0),
        (policy(initial=0, max_delay=60), 30, 0.0),
        # initial == cap
        (policy(initial=60, max_delay=60), 1, 60.0),
        (policy(initial=60, max_delay=60), 9, 60.0),
        # attempts so large that the power overflows a float still give the cap
        (policy(initial=1, multiplier=10, max_delay=600), 400, 600.0),
        (policy(initial=1, multiplier=10, max_delay=600), 10_000, 600.0),
    ],
)
def test_backoff_ceiling(retry_policy: RetryPolicy, attempt: int, expected: float) -> None:
    # Given a policy and the attempt that just failed
    # When the un-jittered delay is computed
    # Then it is initial * multiplier^(attempt - 1), capped at max_delay_seconds
    assert backoff_ceiling(retry_policy, attempt) == expected


def test_backoff_ceiling_grows_then_holds() -> None:
    # Given the default-like policy
    retry_policy = policy(initial=2, multiplier=2, max_delay=3600)

    # When the ceilings of attempts 1..30 are listed
    ceilings = [backoff_ceiling(retry_policy, attempt) for attempt in range(1, 31)]

    # Then each doubles the last until the cap, and never exceeds it after
    assert ceilings[:11] == [2.0 * 2**k for k in range(11)]
    assert all(value == 3600 for value in ceilings[11:])
    assert ceilings == sorted(ceilings)


# --- backoff_delay: jitter ----------------------------------------------------------------------------------
CEILING_POLICIES = [
    policy(initial=2, multiplier=2, max_delay=3600),
    policy(initial=0.5, multiplier=3, max_delay=40),
    policy(initial=10, multiplier=1.0, max_delay=10),
]


@pytest.mark.parametrize("base", CEILING_POLICIES, ids=["2x2-cap3600", "0.5x3-cap40", "flat10"])
def test_full_jitter_is_within_zero_and_the_ceiling(base: RetryPolicy) -> None:
    # Given full jitter
    retry_policy = base.model_copy(update={"jitter": "full"})

    # When many seeded delays are drawn for attempts 1..15
    draws = [
        (attempt, backoff_delay(retry_policy, attempt, random.Random(seed)))
        for seed in range(400)
        for attempt in range(1, 16)
    ]

    # Then every delay lies in [0, ceiling], and together they cover that range
    for attempt, delay in draws:
        assert 0 <= delay <= backoff_ceiling(retry_policy, attempt)
    fractions = [delay / backoff_ceiling(retry_policy, attempt) for attempt, delay in draws]
    assert min(fractions) < 0.01
    assert max(fractions) > 0.99
    assert 0.45 < sum(fractions) / len(fractions) < 0.55


@pytest.mark.parametrize("base", CEILING_POLICIES, ids=["2x2-cap3600", "0.5x3-cap40", "flat10"])
def test_equal_jitter_is_within_half_and_the_ceiling(base: RetryPolicy) -> None:
    # Given equal jitter
    retry_policy = base.model_copy(update={"jitter": "equal"})

    # When many seeded delays are drawn for attempts 1..15
    draws = [
        (attempt, backoff_delay(retry_policy, attempt, random.Random(seed)))
        for seed in range(400)
        for attempt in range(1, 16)
    ]

    # Then every delay lies in [ceiling / 2, ceiling], and together they cover that range
    for attempt, delay in draws:
        ceiling = backoff_ceiling(retry_policy, attempt)
        assert ceiling / 2 <= delay <= ceiling
    fractions = [delay / backoff_ceiling(retry_policy, attempt) for attempt, delay in draws]
    assert min(fractions) < 0.51
    assert max(fractions) > 0.99
    assert 0.7 < sum(fractions) / len(fractions) < 0.8


@pytest.mark.parametrize("base", CEILING_POLICIES, ids=["2x2-cap3600", "0.5x3-cap40", "flat10"])
def test_no_jitter_is_the_ceiling(base: RetryPolicy) -> None:
    # Given no jitter
    retry_policy = base.model_copy(update={"jitter": "none"})

    # When delays are drawn with many seeds
    # Then each is exactly the ceiling
    for seed in range(50):
        for attempt in range(1, 16):
            assert backoff_delay(retry_policy, attempt, random.Random(seed)) == backoff_ceiling(
                retry_policy, attempt
            )


@pytest.mark.parametrize("jitter", ["full", "equal"])
def test_jittered_delays_are_reproducible_from_the_seed(jitter: Jitter) -> None:
    # Given a jittered policy and two generators with the same seed
    retry_policy = policy(jitter=jitter)
    first, second = random.Random(1234), random.Random(1234)

    # When the same attempts are drawn from each
    from_first = [backoff_delay(retry_policy, attempt, first) for attempt in range(1, 10)]
    from_second = [backoff_delay(retry_policy, attempt, second) for attempt in range(1, 10)]

    # Then the delays are identical, and not all at the ceiling (the jitter is real)
    assert from_first == from_second
    assert any(delay < backoff_ceiling(retry_policy, attempt) for attempt, delay in enumerate(from_first, 1))


def test_zero_ceiling_gives_zero_delay_with_any_jitter() -> None:
    for jitter in ("full", "equal", "none"):
        # Given a policy with no delay at all
        retry_policy = policy(initial=0, max_delay=0, jitter=jitter)
        # When / Then every delay is zero
        assert backoff_delay(retry_policy, 3, random.Random(7)) == 0


# --- decide_retry -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attempt", [1, 3, 5, 6])
def test_success_never_retries(attempt: int) -> None:
    # Given an attempt that succeeded
    # When the retry decision is made
    decision = decide_retry(
        policy(), attempt, OutcomeClass.SUCCESS, scheduled_for=SCHEDULED, now=SCHEDULED, rng=random.Random(1)
    )

    # Then there is no retry, and the reason is success
    assert decision == RetryDecision(retry=False, delay=timedelta(0), stop_reason=StopReason.SUCCEEDED)


@pytest.mark.parametrize("attempt", [1, 2, 99])
def test_permanent_errors_are_never_retried(attempt: int) -> None:
    # Given a permanent error with plenty of attempts and age left
    retry_policy = policy(max_attempts=100, max_age=7 * 86_400)

    # When the retry decision is made
    decision = decide_retry(
        retry_policy,
        attempt,
        OutcomeClass.PERMANENT,
        scheduled_for=SCHEDULED,
        now=SCHEDULED,
        rng=random.Random(1),
    )

    # Then it is not retried
    assert decision == RetryDecision(retry=False, delay=timedelta(0), stop_reason=StopReason.PERMANENT_ERROR)


def test_retryable_errors_back_off_exponentially_until_max_attempts() -> None:
    # Given the default-like policy without jitter, and five attempts allowed
    retry_policy = policy(max_attempts=5, initial=2, multiplier=2, jitter="none")
    rng = random.Random(1)

    # When attempts 1..5 each fail with a retryable error, right at the scheduled time
    decisions = [
        decide_retry(
            retry_policy, attempt, OutcomeClass.RETRYABLE, scheduled_for=SCHEDULED, now=SCHEDULED, rng=rng
        )
        for attempt in range(1, 6)
    ]

    # Then attempts 1..4 are retried after 2, 4, 8, 16 s, and attempt 5 is the last
    assert decisions[:4] == [RetryDecision(retry=True, delay=timedelta(seconds=s)) for s in (2, 4, 8, 16)]
    assert [decision.retry_at_offset_seconds for decision in decisions[:4]] == [2.0, 4.0, 8.0, 16.0]
    assert decisions[4] == RetryDecision(retry=False, stop_reason=StopReason.MAX_ATTEMPTS)


@pytest.mark.parametrize(
    ("max_attempts", "attempt", "retried"),
    [(1, 1, False), (2, 1, True), (2, 2, False), (100, 99, True), (100, 100, False), (3, 7, False)],
)
def test_max_attempts_boundary(max_attempts: int, attempt: int, retried: bool) -> None:
    # Given a policy allowing `max_attempts` attempts
    retry_policy = policy(max_attempts=max_attempts, max_delay=60, max_age=7 * 86_400)

    # When attempt `attempt` fails with a retryable error
    decision = decide_retry(
        retry_policy,
        attempt,
        OutcomeClass.RETRYABLE,
        scheduled_for=SCHEDULED,
        now=SCHEDULED,
        rng=random.Random(3),
    )

    # Then there is a next attempt only while attempt < max_attempts
    assert decision.retry is retried
    assert decision.stop_reason is (None if retried else StopReason.MAX_ATTEMPTS)


@pytest.mark.parametrize(
    ("now", "retried"),
    [
        # the next attempt would start 90 + 10 = 100 s after the fire: exactly max_age, still allowed
        (SCHEDULED + timedelta(seconds=90), True),
        # one microsecond later it would start past max_age
        (SCHEDULED + timedelta(seconds=90) + ONE_MICROSECOND, False),
        (SCHEDULED, True),
        (SCHEDULED + timedelta(hours=1), False),
    ],
)
def test_max_age_boundary(now: datetime, retried: bool) -> None:
    # Given a 10-second un-jittered delay and a 100-second maximum age
    retry_policy = policy(initial=10, multiplier=1, max_delay=10, max_age=100)

    # When the first attempt fails with a retryable error at `now`
    decision = decide_retry(
        retry_policy, 1, OutcomeClass.RETRYABLE, scheduled_for=SCHEDULED, now=now, rng=random.Random(0)
    )

    # Then it is retried only if the retry would start no later than scheduled_for + max_age
    if retried:
        assert decision == RetryDecision(retry=True, delay=timedelta(seconds=10))
    else:
        assert decision == RetryDecision(retry=False, stop_reason=StopReason.MAX_AGE)


def test_max_age_counts_the_delay_itself() -> None:
    # Given a policy whose 5th delay (2 * 2^4 = 32 s) is longer than the 30-second maximum age
    retry_policy = policy(max_attempts=10, initial=2, multiplier=2, jitter="none", max_age=30)

    # When attempt 5 fails right at the scheduled time
    decision = decide_retry(
        retry_policy, 5, OutcomeClass.RETRYABLE, scheduled_for=SCHEDULED, now=SCHEDULED, rng=random.Random(0)
    )

    # Then waiting would overrun the age limit, so it stops
    assert decision == RetryDecision(retry=False, stop_reason=StopReason.MAX_AGE)


@pytest.mark.parametrize("jitter", ["full", "equal"])
def test_retry_delay_is_the_jittered_backoff(jitter: Jitter) -> None:
    # Given a jittered policy and two generators with the same seed
    retry_policy = policy(max_attempts=10, jitter=jitter)

    for attempt in range(1, 10):
        # When a retryable failure is decided with one, and a backoff drawn with the other
        decision = decide_retry(
            retry_policy,
            attempt,
            OutcomeClass.RETRYABLE,
            scheduled_for=SCHEDULED,
            now=SCHEDULED,
            rng=random.Random(attempt),
        )
        expected = backoff_delay(retry_policy, attempt, random.Random(attempt))

        # Then the decision's delay is that backoff, within the jitter's bounds
        assert decision.retry is True
        assert decision.stop_reason is None
        assert decision.delay == timedelta(seconds=expected)
        ceiling = backoff_ceiling(retry_policy, attempt)
        lower = 0 if jitter == "full" else ceiling / 2
        assert lower <= decision.retry_at_offset_seconds <= ceiling
