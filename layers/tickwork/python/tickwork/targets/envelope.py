"""What every target receives: the JSON envelope, and for webhooks the headers and the signature.

The signature scheme is ``X-Tickwork-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>``, where the HMAC is
keyed with the tenant's signing secret and computed over ``<t>.<raw body bytes>``. Binding the timestamp into
the MAC lets receivers refuse old deliveries replayed by someone who captured one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.domain.timeutil import to_rfc3339

SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300
USER_AGENT = "tickwork/1"


@dataclass(frozen=True)
class Delivery:
    """One attempt of one run, as the worker hands it to a target."""

    job_id: str
    run_id: str
    scheduled_for: datetime
    attempt: int
    fencing_token: int
    payload: Any
    tenant_secret: str = field(repr=False)  # never printed in logs or tracebacks
    lease_token: str | None = field(default=None, repr=False)
    """The token the attempt is continued with if the webhook answers 202 (``X-Tickwork-Lease-Token``)."""
    parents: dict[str, Any] | None = None
    """A workflow task's parents' outputs, by task id (None: not a task). A task's webhook's 2xx JSON body
    is kept as its own output, for its children."""


def envelope(delivery: Delivery) -> dict[str, Any]:
    return {
        "job_id": delivery.job_id,
        "run_id": delivery.run_id,
        "scheduled_for": to_rfc3339(delivery.scheduled_for),
        "attempt": delivery.attempt,
        "payload": delivery.payload,
        **({"parents": delivery.parents} if delivery.parents is not None else {}),
    }


def envelope_body(delivery: Delivery) -> bytes:
    """The envelope as compact UTF-8 JSON: the exact bytes that are sent and signed."""
    return json.dumps(envelope(delivery), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``timestamp + "." + body`` keyed with ``secret``."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},{SIGNATURE_VERSION}={sign(secret, str(timestamp), body)}"


def verify_signature(
    secret: str,
    header_value: str | None,
    body: bytes,
    *,
    now_epoch: int,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """The receiver-side check of ``X-Tickwork-Signature`` (tickwork itself only signs).

    True when the header is well formed, its timestamp is within ``tolerance_seconds`` of ``now_epoch``
    (either way, to allow for clock skew), and one of its ``v1`` signatures matches ``body``, the raw bytes
    as received. Several ``v1`` entries are accepted so a secret can be rotated without a gap. Comparison is
    constant-time.
    """
    if not header_value:
        return False
    timestamp: str | None = None
    candidates: list[str] = []
    for part in header_value.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not value:
            return False
        if key == "t":
            timestamp = value
        elif key == SIGNATURE_VERSION:
            candidates.append(value)
    if timestamp is None or not (timestamp.isascii() and timestamp.isdigit()) or not candidates:
        return False
    if abs(now_epoch - int(timestamp)) > tolerance_seconds:
        return False
    expected = sign(secret, timestamp, body)
    # Check every candidate so the time taken does not reveal which one matched.
    matches = [hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in candidates]
    return any(matches)


def webhook_headers(delivery: Delivery, body: bytes, *, now_epoch: int) -> dict[str, str]:
    """The headers tickwork sets on every webhook request. Tenants cannot override them: job validation
    refuses ``X-Tickwork-*``, ``Idempotency-Key`` and the other reserved names."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Idempotency-Key": delivery.run_id,
        "X-Tickwork-Run-Id": delivery.run_id,
        "X-Tickwork-Attempt": str(delivery.attempt),
        "X-Tickwork-Scheduled-For": to_rfc3339(delivery.scheduled_for),
        "X-Tickwork-Fencing-Token": str(delivery.fencing_token),
        "X-Tickwork-Signature": signature_header(delivery.tenant_secret, now_epoch, body),
    }
    if delivery.lease_token is not None:
        headers["X-Tickwork-Lease-Token"] = delivery.lease_token
    return headers
