"""Tenants and their API tokens. Tokens are stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tickwork.domain.models import Instant, StrictModel
from tickwork.errors import TenantDisabled

TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
DEFAULT_API_REQUESTS_PER_SECOND = 50
MAX_API_REQUESTS_PER_SECOND = 10_000
MAX_RUNS_PER_SECOND = 10_000
MAX_BURST = 100_000
# The label of a tenant's first token (``tickwork tenants create``, the local stack's tenants).
DEFAULT_TOKEN_LABEL = "default"  # noqa: S105 - a label, not a token
# The name items written before the contract's ``max_concurrent_runs`` give the same limit.
LEGACY_MAX_IN_FLIGHT = "max_in_flight"
# Fixed windows of one second: the counter is one item, and a refused client waits at most a second.
RATE_WINDOW_SECONDS = 1


class Tenant(StrictModel):
    """A tenant and its settings. The settings are the operator's (``tickwork tenants``), never the tenant's
    own token's."""

    tenant_id: str = Field(pattern=TENANT_ID_PATTERN)
    name: str
    status: str = "ACTIVE"
    max_jobs: int = Field(10_000, ge=1)
    max_concurrent_runs: int | None = Field(None, ge=1)
    """At most this many of the tenant's attempts at once; None: no limit (fair queues share the workers).
    Items written before this name hold it as ``max_in_flight``."""
    max_runs_per_second: int | None = Field(None, ge=1, le=MAX_RUNS_PER_SECOND)
    """A throttle on the tenant's run starts: runs over it wait for the start they reserve, none is dropped
    (:mod:`tickwork.domain.throttle`); None: no throttle."""
    burst: int | None = Field(None, ge=1, le=MAX_BURST)
    """The most run starts in any one second after a quiet spell, at least ``max_runs_per_second``; None:
    the rate (an even pace). Only with ``max_runs_per_second``."""
    # Per second, over all of the tenant's tokens; API Gateway's stage limit still bounds the whole API.
    api_requests_per_second: int = Field(
        DEFAULT_API_REQUESTS_PER_SECOND, ge=1, le=MAX_API_REQUESTS_PER_SECOND
    )
    disabled: bool = Field(False, strict=True)
    """A disabled tenant's API requests get 403 ``tenant_disabled`` and its fires wait as in a pause of
    each of its jobs (:mod:`tickwork.app.tenant_switch`); nothing of it is deleted, and enabling it again
    plans the fires that fell in the pause under each job's misfire policy."""
    disabled_at: Instant | None = None
    """When it was disabled: its jobs are paused as of this time, whenever the pause reached each."""
    signing_secret: str = Field(repr=False)
    created_at: Instant

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        """``max_in_flight`` (older items, older callers) is ``max_concurrent_runs``; the new name wins."""
        if isinstance(data, dict) and LEGACY_MAX_IN_FLIGHT in data:
            data = dict(data)
            legacy = data.pop(LEGACY_MAX_IN_FLIGHT)
            data.setdefault("max_concurrent_runs", legacy)
        return data

    @field_validator("burst")
    @classmethod
    def _burst_covers_the_rate(cls, burst: int | None, info: ValidationInfo) -> int | None:
        if burst is None or "max_runs_per_second" not in info.data:
            return burst  # no burst, or the rate itself was refused (its own error says why)
        rate = info.data["max_runs_per_second"]
        if rate is None:
            raise ValueError(
                f"burst {burst} needs max_runs_per_second: a burst is how far the throttle lets runs get"
                " ahead of its rate"
            )
        if burst < rate:
            raise ValueError(
                f"burst {burst} is below max_runs_per_second {rate}: give a burst of at least the rate, or"
                " none (one second's worth)"
            )
        return burst

    @property
    def max_in_flight(self) -> int | None:
        """The older name of ``max_concurrent_runs``, read-only, for the code that still reads it."""
        return self.max_concurrent_runs

    def check_enabled(self) -> None:
        """Raise :class:`TenantDisabled` if the operator disabled the tenant."""
        if self.disabled:
            raise TenantDisabled(
                f"tenant {self.tenant_id!r} is disabled: its requests are refused and its fires wait until an"
                " operator enables it again; its jobs and runs are kept",
                tenant_id=self.tenant_id,
            )

    def changed(self, changes: TenantChanges) -> Tenant:
        """The tenant with ``changes`` applied, validated as a whole (a new burst against the stored rate)."""
        return Tenant.model_validate({**self.model_dump(), **changes.given()})


class TenantChanges(StrictModel):
    """A partial update of a tenant's settings: the fields given and nothing else. A field given as None
    clears an optional setting (no limit); the tenant as changed is validated as a whole
    (:meth:`Tenant.changed`)."""

    name: str | None = Field(None, min_length=1, max_length=200)
    max_jobs: int | None = Field(None, ge=1)
    max_concurrent_runs: int | None = Field(None, ge=1)
    max_runs_per_second: int | None = Field(None, ge=1, le=MAX_RUNS_PER_SECOND)
    burst: int | None = Field(None, ge=1, le=MAX_BURST)
    api_requests_per_second: int | None = Field(None, ge=1, le=MAX_API_REQUESTS_PER_SECOND)
    disabled: bool | None = Field(None, strict=True)
    disabled_at: Instant | None = None

    def given(self) -> dict[str, Any]:
        """The fields given, with their values as stored (None to clear; times as RFC 3339 text)."""
        return self.model_dump(mode="json", include=self.model_fields_set)


@dataclass(frozen=True)
class TenantRecord:
    """A tenant as an operator sees it: its settings and how many jobs count against ``max_jobs``."""

    tenant: Tenant
    job_count: int = 0


@dataclass(frozen=True)
class TenantPage:
    items: list[TenantRecord]
    next_cursor: str | None
    """The tenant id to start the next page after; None on the last page."""


@dataclass(frozen=True)
class RotatedToken:
    """A tenant's new API token (shown once, never stored) and how many tokens it replaced."""

    tenant_id: str
    label: str
    token: str = field(repr=False)
    revoked: int = 0


class Principal(StrictModel):
    """Who made a request: the tenant, and which of its tokens was used."""

    tenant: Tenant
    token_label: str

    @property
    def actor(self) -> str:
        return f"{self.tenant.tenant_id}:{self.token_label}"


def parse_bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None if it is not one."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512 or " " in token:
        return None
    return token


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return f"tw_{secrets.token_urlsafe(32)}"


def new_signing_secret() -> str:
    return secrets.token_hex(32)


@dataclass(frozen=True)
class RateWindow:
    """The fixed window of API requests that ``now`` falls in."""

    start: int
    """Epoch seconds."""
    end: int

    @classmethod
    def at(cls, now: datetime) -> RateWindow:
        start = math.floor(now.timestamp()) // RATE_WINDOW_SECONDS * RATE_WINDOW_SECONDS
        return cls(start, start + RATE_WINDOW_SECONDS)

    def retry_after(self, now: datetime) -> int:
        """Whole seconds until the next window opens, as ``Retry-After`` wants them; at least 1."""
        return max(1, math.ceil(self.end - now.timestamp()))
