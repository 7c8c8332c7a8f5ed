"""What one delivery attempt came to, and how an outcome is classified for the retry policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tickwork.domain.retry import OutcomeClass

MAX_MESSAGE_CHARS = 500
REFUSED_CODE = "target_not_allowed"


@dataclass(frozen=True)
class TargetResult:
    """What one delivery attempt came to. ``error_message`` is short and never holds header values or
    secrets: it is stored on the run and shown to the tenant."""

    outcome: OutcomeClass
    status_code: int | None = None
    error_code: str | None = None
    error_message: str | None = None
    output: Any = None
    """A workflow task's result for its children (a webhook's 2xx JSON body), kept on its run."""
    continues: bool = False
    """The target accepted the attempt and goes on with it (a webhook's 202): the attempt stays RUNNING under
    the lease token the call carried, until the heartbeat, complete and fail routes, or its lapse, end it."""

    @property
    def ok(self) -> bool:
        return self.outcome is OutcomeClass.SUCCESS


def clip(text: str) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def success(status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.SUCCESS, status_code=status_code)


def accepted(status_code: int) -> TargetResult:
    """A webhook's 202: taken on, to be continued through the run's routes."""
    return TargetResult(OutcomeClass.SUCCESS, status_code=status_code, continues=True)


def retryable(code: str, message: str, status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.RETRYABLE, status_code, code, clip(message))


def permanent(code: str, message: str, status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.PERMANENT, status_code, code, clip(message))


def refused(host: str) -> TargetResult:
    return permanent(REFUSED_CODE, f"target host {host!r} is a private, loopback or link-local address")


def classify_status(status: int) -> OutcomeClass:
    """2xx succeeded; 408, 429 and 5xx may pass if tried again; anything else will not."""
    if 200 <= status < 300:
        return OutcomeClass.SUCCESS
    if status in (408, 429) or 500 <= status < 600:
        return OutcomeClass.RETRYABLE
    return OutcomeClass.PERMANENT
