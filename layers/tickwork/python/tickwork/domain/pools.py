"""Pools: runs handed to the tenant's own long-running workers, which claim them, prove they are alive with
heartbeats, save checkpoints, and complete or fail them.

This module is the pure part: the ``pool`` target, the bodies of the pool routes as they are validated at the
edge, the lease token that fences a worker's later calls, and the lease's arithmetic. A lease lasts one
heartbeat timeout from the claim or the last heartbeat, and never past the attempt's hard cap
(``timeout_seconds``), whatever the heartbeats.

An ``http`` target's call carries the lease token its attempt would be continued with
(``X-Tickwork-Lease-Token``); a webhook that answers 202 continues the attempt through the same routes, under
the pool target's default terms (:data:`HTTP_CONTINUATION`): the ``http`` target has no fields for them.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, Field, JsonValue
from pydantic_core import PydanticCustomError

from tickwork.domain.models import (
    MAX_POOL_ATTEMPT_SECONDS,
    POOL_NAME,
    HttpTarget,
    Job,
    PoolTarget,
    Run,
    StrictModel,
    payload_depth,
    payload_size,
)

MAX_CHECKPOINT_BYTES = 64 * 1024
MAX_OUTPUT_BYTES = 16 * 1024
MAX_STAGE_CHARS = 200
MAX_CLAIM_RUNS = 10
MAX_CLAIM_WAIT_SECONDS = 20
MAX_JSON_DEPTH = 64
# A run waiting this long in its pool for a claim is counted (``PoolRunsWaitingLong``), and again after each
# further wait of as long; the deployment's setting (``pool_wait_alarm_seconds``) replaces it.
DEFAULT_POOL_WAIT_ALARM = timedelta(minutes=15)


def _sized(what: str, limit: int) -> AfterValidator:
    """A JSON value of at most ``limit`` bytes as stored (compact UTF-8), nested at most 64 levels."""

    def check(value: Any) -> Any:
        depth = payload_depth(value)
        if depth > MAX_JSON_DEPTH:
            raise PydanticCustomError(
                "invalid_json",
                "{what} nests {depth} levels deep; the limit is {limit}",
                {"what": what, "depth": depth, "limit": MAX_JSON_DEPTH},
            )
        try:
            size = payload_size(value)
        except ValueError as error:  # NaN, Infinity, or a lone surrogate UTF-8 cannot encode
            raise PydanticCustomError(
                "invalid_json", "{what} holds a value JSON cannot carry", {"what": what}
            ) from error
        if size > limit:
            raise PydanticCustomError(
                "payload_too_large",
                "{what} is {size} bytes once serialized; the limit is {limit}",
                {"what": what, "size": size, "limit": limit},
            )
        return value

    return AfterValidator(check)


Checkpoint = Annotated[JsonValue, _sized("checkpoint", MAX_CHECKPOINT_BYTES)]
Output = Annotated[JsonValue, _sized("output", MAX_OUTPUT_BYTES)]


@dataclass(frozen=True)
class PoolBacklog:
    """A pool's runs waiting for a claim, due by now: how many (counted up to a cap) and the oldest's due
    time."""

    pool: str
    waiting: int
    capped: bool
    """More runs wait than ``waiting`` counts (the count stopped at its cap)."""
    oldest_due: datetime | None

    def oldest_wait(self, now: datetime) -> timedelta | None:
        return max(now - self.oldest_due, timedelta(0)) if self.oldest_due is not None else None


def pool_target_of(job: Job) -> PoolTarget | None:
    """The job's pool target, if its target is a pool."""
    target: object = job.target  # the target union is made at run time, as kinds register
    return target if isinstance(target, PoolTarget) else None


class LeaseTerms(Protocol):
    """How long a lease held outside lasts without a heartbeat, and the attempt's hard cap."""

    @property
    def heartbeat_timeout_seconds(self) -> int: ...

    @property
    def timeout_seconds(self) -> int: ...


@dataclass(frozen=True)
class Terms:
    heartbeat_timeout_seconds: int
    timeout_seconds: int


HTTP_CONTINUATION = Terms(
    heartbeat_timeout_seconds=PoolTarget.model_fields["heartbeat_timeout_seconds"].default,
    timeout_seconds=PoolTarget.model_fields["timeout_seconds"].default,
)
"""A webhook's attempt continued after a 202: the pool target's defaults (60 s without a heartbeat, 3,600 s
from the call's start in all)."""


def continuation_terms(job: Job) -> LeaseTerms | None:
    """The terms a webhook's attempt is continued under if it answers 202; None for other targets."""
    target: object = job.target
    return HTTP_CONTINUATION if isinstance(target, HttpTarget) else None


def lease_terms_of(job: Job) -> LeaseTerms | None:
    """The terms of the job's leases held outside: its pool target's, or a webhook's continued attempt's."""
    return pool_target_of(job) or continuation_terms(job)


# --- the routes' bodies -------------------------------------------------------------------------------------
class ClaimRequest(StrictModel):
    worker_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@/-]+$")
    max_runs: int = Field(1, ge=1, le=MAX_CLAIM_RUNS)
    wait_seconds: int = Field(MAX_CLAIM_WAIT_SECONDS, ge=0, le=MAX_CLAIM_WAIT_SECONDS)


class HeartbeatRequest(StrictModel):
    lease_token: str = Field(min_length=1, max_length=128)
    progress: float | None = Field(None, ge=0, le=1)
    stage: str | None = Field(None, max_length=MAX_STAGE_CHARS)
    checkpoint: Checkpoint | None = None


class CompleteRequest(StrictModel):
    lease_token: str = Field(min_length=1, max_length=128)
    output: Output | None = None


class FailureDetail(StrictModel):
    code: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    message: str = Field("", max_length=1000)


class FailRequest(StrictModel):
    lease_token: str = Field(min_length=1, max_length=128)
    error: FailureDetail
    retryable: bool = True


# --- the lease ----------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"^(?P<fence>[1-9][0-9]{0,17})\.(?P<secret>[A-Za-z0-9_-]{22})$")


def new_lease_token(fencing_token: int, secret: str | None = None) -> str:
    """``<fencing token>.<22 random characters>``: the number orders the run's attempts (a later claim's is
    higher), the random part keeps a token from being guessed from the run's history."""
    if fencing_token < 1:
        raise ValueError("a lease's fencing token starts at 1")
    return f"{fencing_token}.{secret if secret is not None else secrets.token_urlsafe(16)}"


def fencing_token_of(lease_token: str) -> int | None:
    """The fencing token a lease token carries; None for anything that is not a lease token."""
    matched = _TOKEN.match(lease_token)
    return int(matched.group("fence")) if matched else None


@dataclass(frozen=True)
class Lease:
    """A claimed attempt's lease: when it lapses without a heartbeat, and when the attempt must end."""

    expires_at: datetime
    deadline: datetime

    @classmethod
    def claimed(cls, target: LeaseTerms, now: datetime) -> Lease:
        deadline = now + timedelta(seconds=target.timeout_seconds)
        return cls(min(now + timedelta(seconds=target.heartbeat_timeout_seconds), deadline), deadline)

    def renewed(self, target: LeaseTerms, now: datetime) -> Lease:
        """After a heartbeat at ``now``: one heartbeat timeout more, never past the deadline."""
        return Lease(
            min(now + timedelta(seconds=target.heartbeat_timeout_seconds), self.deadline), self.deadline
        )

    def lapsed(self, now: datetime) -> Literal["heartbeat_timeout", "timeout"] | None:
        """Why the attempt is over at ``now``, if it is: its hard cap reached, or a heartbeat missed."""
        if now >= self.deadline:
            return "timeout"
        if now >= self.expires_at:
            return "heartbeat_timeout"
        return None


def continued(run: Run, lease_token: str, terms: LeaseTerms, now: datetime) -> Run:
    """A webhook's attempt, RUNNING, after it answered 202 at ``now``: leased under ``lease_token`` for one
    heartbeat timeout from the answer, capped at ``timeout_seconds`` from the call's start."""
    started = run.attempts[-1].started_at if run.attempts else now
    lease = Lease.claimed(terms, started).renewed(terms, now)
    return run.model_copy(
        update={
            "lease_token": lease_token,
            "lease_expires_at": lease.expires_at,
            "lease_deadline": lease.deadline,
            "heartbeat_at": None,
        }
    )


__all__ = [
    "DEFAULT_POOL_WAIT_ALARM",
    "HTTP_CONTINUATION",
    "MAX_CHECKPOINT_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_POOL_ATTEMPT_SECONDS",
    "POOL_NAME",
    "ClaimRequest",
    "CompleteRequest",
    "FailRequest",
    "HeartbeatRequest",
    "Lease",
    "LeaseTerms",
    "PoolTarget",
    "Terms",
    "continuation_terms",
    "continued",
    "fencing_token_of",
    "lease_terms_of",
    "new_lease_token",
    "pool_target_of",
]
