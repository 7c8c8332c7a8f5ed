"""The one place where errors become HTTP statuses and the design's error shape."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import Any

from tickwork import errors

STATUS_BY_ERROR: tuple[tuple[type[errors.TickworkError], HTTPStatus], ...] = (
    (errors.PayloadTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (errors.InvalidInput, HTTPStatus.BAD_REQUEST),
    (errors.Unauthorized, HTTPStatus.UNAUTHORIZED),
    (errors.NotFound, HTTPStatus.NOT_FOUND),
    (errors.MethodNotAllowed, HTTPStatus.METHOD_NOT_ALLOWED),
    (errors.Conflict, HTTPStatus.CONFLICT),
    (errors.IdempotencyKeyReused, HTTPStatus.UNPROCESSABLE_ENTITY),
    (errors.QuotaExceeded, HTTPStatus.TOO_MANY_REQUESTS),
)

# Location prefixes Powertools and pydantic put before a field path.
_LOCATION_ROOTS = frozenset({"body", "query", "path", "header"})
# Discriminator values pydantic inserts into the location of a tagged-union error.
_UNION_TAGS = frozenset({"once", "cron", "rate", "http", "sqs", "lambda", "eventbridge", "stepfunctions"})
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
        if not (i > 0 and parts[i - 1] in ("schedule", "target") and part in _UNION_TAGS)
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
        field = None if error_type == "json_invalid" else field_path(raw.get("loc", ()))
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
