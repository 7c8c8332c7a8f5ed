"""Tenants and their API tokens. Tokens are stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets

from pydantic import Field

from tickwork.domain.models import Instant, StrictModel

TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class Tenant(StrictModel):
    tenant_id: str = Field(pattern=TENANT_ID_PATTERN)
    name: str
    status: str = "ACTIVE"
    max_jobs: int = Field(10_000, ge=1)
    max_in_flight: int = Field(100, ge=1)
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
