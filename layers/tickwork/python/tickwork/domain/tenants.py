"""Tenants and their API tokens. Tokens are stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass
from datetime import datetime

from pydantic import Field

from tickwork.domain.models import Instant, StrictModel

TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
DEFAULT_API_REQUESTS_PER_SECOND = 50
MAX_API_REQUESTS_PER_SECOND = 10_000
# Fixed windows of one second: the counter is one item, and a refused client waits at most a second.
RATE_WINDOW_SECONDS = 1


class Tenant(StrictModel):
    tenant_id: str = Field(pattern=TENANT_ID_PATTERN)
    name: str
    status: str = "ACTIVE"
    max_jobs: int = Field(10_000, ge=1)
    max_in_flight: int | None = Field(None, ge=1)
    """At most this many of the tenant's attempts at once; None: no limit (fair queues share the workers)."""
    # Per second, over all of the tenant's tokens; API Gateway's stage limit still bounds the whole API.
    api_requests_per_second: int = Field(
        DEFAULT_API_REQUESTS_PER_SECOND, ge=1, le=MAX_API_REQUESTS_PER_SECOND
    )
    signing_secret: str = Field(repr=False)
    created_at: Instant


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
