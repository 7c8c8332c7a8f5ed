"""Small helpers for instants: tickwork keeps every instant as an aware UTC datetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def to_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("timestamp must carry a UTC offset (RFC 3339)")
    return value.astimezone(UTC)


def to_epoch_ms(value: datetime) -> int:
    """Whole milliseconds since the epoch, rounded down."""
    delta = to_utc(value) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def from_epoch_ms(value: int) -> datetime:
    return EPOCH + timedelta(milliseconds=value)


def to_rfc3339(value: datetime) -> str:
    """UTC with a ``Z`` suffix, milliseconds only when they are not zero."""
    value = to_utc(value)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
