"""When the client sends a request again, and how long it waits first. Pure functions of their inputs: the
client passes the clock's reading and the random draw."""

from __future__ import annotations

import math
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http import HTTPStatus


@dataclass(frozen=True)
class RetryPolicy:
    """How the client retries a request that was refused for now (429, 5xx) or got no answer.

    Not to be confused with a job's ``retry`` (``tickwork.domain.models.RetryPolicy``), which the scheduler
    applies to the job's runs.
    """

    max_attempts: int = 4
    """Sends of one request in all, the first included; 1 turns retries off."""
    initial_delay: float = 0.5
    """Seconds: the longest first backoff. Each retry doubles it, up to ``max_delay``."""
    max_delay: float = 20.0
    """Seconds: the longest backoff. A ``Retry-After`` is honoured even when longer."""
    max_total_wait: float = 60.0
    """Seconds from the first send: a wait that would end later is not started, and the error is raised."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.initial_delay, self.max_delay, self.max_total_wait) < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, retry: int, draw: float) -> float:
        """The wait before retry number ``retry`` (1 for the first), with full jitter: ``draw`` (uniform in
        [0, 1)) times the exponential cap. Full jitter spreads clients that failed together."""
        cap = min(self.max_delay, math.ldexp(self.initial_delay, min(retry - 1, 64)))  # initial * 2^(retry-1)
        return draw * cap


NO_RETRIES = RetryPolicy(max_attempts=1)


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds, or an HTTP date read against ``now``
    (epoch seconds). None when absent or unreadable, so the backoff applies instead."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # "-0000": RFC 5322's unknown zone; HTTP dates are always GMT
        return None
    wait = moment.timestamp() - now
    return max(0.0, wait) if math.isfinite(wait) else None


def retryable_status(status: int, *, repeatable: bool) -> bool:
    """429 means the API refused before doing anything (the rate limit runs before the route): always safe to
    send again. Other 5xx may come after the work was done, so only requests safe to repeat are retried."""
    if status == HTTPStatus.TOO_MANY_REQUESTS:
        return True
    return status >= HTTPStatus.INTERNAL_SERVER_ERROR and repeatable
