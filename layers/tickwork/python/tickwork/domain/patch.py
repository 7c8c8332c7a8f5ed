"""JSON merge patch (RFC 7396) for ``PATCH /v1/jobs/{id}``, with two tickwork rules on top."""

from __future__ import annotations

from typing import Any

# Replaced whole, never merged: the tenant's own opaque data.
OPAQUE_FIELDS = frozenset({"payload"})


def merge_patch(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply ``patch`` to ``current``: objects merge key by key and ``null`` removes a key (back to its
    default). An object whose ``type`` changes (a cron schedule becoming a rate one) is replaced whole, and so
    is the payload."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None and key not in OPAQUE_FIELDS:
            merged.pop(key, None)
        elif key in OPAQUE_FIELDS:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge_object(merged[key], value)
        else:
            merged[key] = value
    return merged


def _merge_object(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    if "type" in patch and patch["type"] != current.get("type"):
        return {key: value for key, value in patch.items() if value is not None}
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge_object(merged[key], value)
        else:
            merged[key] = value
    return merged
