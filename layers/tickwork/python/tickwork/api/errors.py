"""The one place where errors become HTTP statuses and the design's error shape."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache
from http import HTTPStatus
from typing import Any, get_args

from tickwork import errors
from tickwork.domain import models
from tickwork.domain.tenants import TENANT_ID_PATTERN
from tickwork.targets import registry

STATUS_BY_ERROR: tuple[tuple[type[errors.TickworkError], HTTPStatus], ...] = (
    (errors.PayloadTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (errors.InvalidInput, HTTPStatus.BAD_REQUEST),
    (errors.Unauthorized, HTTPStatus.UNAUTHORIZED),
    (errors.Forbidden, HTTPStatus.FORBIDDEN),
    (errors.NotFound, HTTPStatus.NOT_FOUND),
    (errors.MethodNotAllowed, HTTPStatus.METHOD_NOT_ALLOWED),
    (errors.Conflict, HTTPStatus.CONFLICT),
    (errors.IdempotencyKeyReused, HTTPStatus.UNPROCESSABLE_ENTITY),
    (errors.QuotaExceeded, HTTPStatus.TOO_MANY_REQUESTS),
)

# Location prefixes Powertools and pydantic put before a field path.
_LOCATION_ROOTS = frozenset({"body", "query", "path", "header"})
_CODE_BY_TYPE = {
    "extra_forbidden": "unknown_field",
    "missing": "missing_field",
    "payload_too_large": "payload_too_large",
    "json_invalid": "invalid_json",
}
_CODE_BY_SECTION = {
    "schedule": "invalid_schedule",
    "target": "invalid_target",
    "retry": "invalid_retry_policy",
}
# What a value must look like, in words, for the patterns that are not a plain ``^[chars]{m,n}$``.
_PATTERN_WORDS = {
    TENANT_ID_PATTERN: "must start with a lower-case letter or a digit, then use only lower-case letters,"
    " digits, '_' and '-' (1 to 63 characters)",
}
_CHARACTER_CLASS = re.compile(r"\^\[([^\]]+)\]\{(\d+),(\d+)\}\$")
_RANGE_WORDS = {
    "A-Za-z": "letters",
    "a-zA-Z": "letters",
    "a-z": "lower-case letters",
    "A-Z": "capital letters",
}
_UNION_FIELDS = ("schedule", "target")


def status_of(error: errors.TickworkError) -> HTTPStatus:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def error_body(
    code: str, message: str, field: str | None = None, details: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "field": field}
    if details:
        body["details"] = list(details)
    return {"error": body}


def body_of(error: errors.TickworkError) -> dict[str, Any]:
    return error_body(error.code, error.message, error.field)


def field_path(location: Iterable[Any]) -> str | None:
    parts = [str(part) for part in location]
    if parts and parts[0] == "header":
        # Powertools reports headers by their lower-cased alias; name them as the design does.
        return "-".join(word.capitalize() for word in parts[1].split("-")) if len(parts) > 1 else None
    if parts and parts[0] in _LOCATION_ROOTS:
        parts = parts[1:]
    kept = [
        part
        for i, part in enumerate(parts)
        # the discriminator value pydantic inserts into the location of a tagged-union error
        if not (i > 0 and parts[i - 1] in _UNION_FIELDS and part in _union_tags())
        # pydantic names a refused dict key by the key, then "[key]": the field is the key (or the dict)
        and part not in ("", "[key]")
    ]
    return ".".join(kept) or None


def describe_validation_errors(raw_errors: Sequence[Any]) -> tuple[HTTPStatus, dict[str, Any]]:
    """The status and body for pydantic or Powertools validation errors: the first error on top, all of
    them in ``details``."""
    details: list[dict[str, Any]] = []
    for raw in raw_errors:
        error_type = str(raw.get("type", ""))
        # A model-level rule that concerns one field inside the model names it (``ctx["at"]``).
        inside = str((raw.get("ctx") or {}).get("at", "")).split(".")
        location = [*raw.get("loc", ()), *inside]
        field = None if error_type == "json_invalid" else field_path(location)
        # A body that is JSON but not an object is a malformed request; a nested value that is not an
        # object is a bad value of its own section (a schedule given as a string is an invalid schedule).
        body_not_object = error_type == "model_attributes_type" and field is None
        code = (
            "invalid_json"
            if body_not_object
            else _CODE_BY_TYPE.get(error_type)
            or _CODE_BY_SECTION.get((field or "").split(".")[0], "invalid_field")
        )
        message = str(raw.get("msg", "invalid value"))
        if error_type == "extra_forbidden":
            message = f"unknown field {field!r}"
        elif error_type == "json_invalid":
            reason = (raw.get("ctx") or {}).get("error")
            message = (
                f"the request body is not valid JSON: {reason}"
                if reason
                else "the request body is not valid JSON"
            )
        elif body_not_object:
            message = "the request body must be a JSON object"
        elif error_type == "missing" and field is None:
            message = "the request body is required"
        elif (own := _own_words(error_type, field, raw.get("ctx") or {})) is not None:
            message = own
        elif field and not message.startswith(field):
            message = f"{field}: {message}"
        details.append({"code": code, "message": message, "field": field})
    if not details:
        details.append({"code": "invalid_request", "message": "the request is not valid", "field": None})
    first = details[0]
    too_large = any(detail["code"] == "payload_too_large" for detail in details)
    if too_large:
        first = next(detail for detail in details if detail["code"] == "payload_too_large")
    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE if too_large else HTTPStatus.BAD_REQUEST
    return status, error_body(first["code"], first["message"], first["field"], details)


def _own_words(error_type: str, field: str | None, ctx: dict[str, Any]) -> str | None:
    """tickwork's sentence for a pattern, enum or tagged-union error (pydantic's would quote a regular
    expression, or Python's reprs); None for other errors."""
    name = _named(field)
    if error_type == "string_pattern_mismatch":
        return f"{name} {pattern_words(str(ctx.get('pattern', '')))}"
    if error_type in ("literal_error", "enum"):
        return f"{name} must be one of {', '.join(_quoted(str(ctx.get('expected', ''))))}"
    if error_type == "union_tag_invalid":
        return f"{name}.type must be one of {', '.join(_quoted(str(ctx.get('expected_tags', ''))))}"
    if error_type == "union_tag_not_found":
        tags = _tags((field or "").rsplit(".", 1)[-1])
        return f"{name}.type is required: one of {', '.join(tags)}" if tags else f"{name}.type is required"
    return None


def pattern_words(pattern: str) -> str:
    """What a value matching ``pattern`` looks like: ``may use only letters, digits, '.', '_' and '-' (1 to
    128 characters)`` for ``^[A-Za-z0-9._-]{1,128}$``."""
    if pattern in _PATTERN_WORDS:
        return _PATTERN_WORDS[pattern]
    for kind in registry.kinds():
        if pattern in kind.pattern_words:
            return kind.pattern_words[pattern]
    match = _CHARACTER_CLASS.fullmatch(pattern)
    if match is None:
        return "is not in the form this field takes"
    chars, least, most = match.groups()
    kinds = []
    for ranges, words in _RANGE_WORDS.items():
        if ranges in chars:
            kinds.append(words)
            chars = chars.replace(ranges, "")
            break
    if "0-9" in chars:
        kinds.append("digits")
        chars = chars.replace("0-9", "")
    kinds += [f"'{char}'" for char in chars.replace("\\", "")]
    listed = ", ".join(kinds[:-1]) + f" and {kinds[-1]}" if len(kinds) > 1 else kinds[0]
    size = f"{least} to {most} characters" if least != most else f"{least} characters"
    return f"may use only {listed} ({size})"


def _named(field: str | None) -> str:
    """The field as a message names it: a repeated query parameter without its index."""
    parts = (field or "value").split(".")
    while len(parts) > 1 and parts[-1].isdigit():
        parts.pop()
    return ".".join(parts)


def _quoted(expected: str) -> list[str]:
    """The values of pydantic's ``'a', 'b' or 'c'``."""
    return re.findall(r"'([^']*)'", expected)


def _tags(section: str) -> tuple[str, ...]:
    """The ``type`` values of the tagged union a field of that name holds: the schedule kinds, or the target
    kinds registered now."""
    if section == "schedule":
        return _schedule_tags()
    if section == "target":
        return registry.target_types()
    return ()


def _union_tags() -> frozenset[str]:
    return frozenset((*_schedule_tags(), *registry.target_types()))


@cache
def _schedule_tags() -> tuple[str, ...]:
    members = get_args(get_args(models.Schedule)[0])
    return tuple(tag for member in members for tag in get_args(member.model_fields["type"].annotation))
