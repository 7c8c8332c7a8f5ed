"""HTTP's own rules, applied to every request before a route runs.

- A path takes the methods of its routes, plus ``HEAD`` where it has ``GET`` and ``OPTIONS`` everywhere. Any
  other method is a 405 whose ``Allow`` header lists them; ``OPTIONS`` answers 204 with the same header.
- A request body must be JSON: ``Content-Type: application/json`` (a ``charset`` other than UTF-8 is refused)
  and valid UTF-8. A request without a body needs no ``Content-Type``.

API Gateway passes all of this to the API function: every route has an ``ANY`` method, and bodies arrive
base64-encoded exactly as sent (binary media type ``*/*``). So these rules live here, in the shared API code,
and the deployed API and the local stack answer alike.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.errors import InvalidInput, MethodNotAllowed, UnsupportedMediaType

JSON = "application/json"
UTF8_NAMES = frozenset({"utf-8", "utf8"})


@dataclass(frozen=True)
class Resource:
    """One path template and the methods its routes answer."""

    path: str
    rule: re.Pattern[str]
    methods: frozenset[str]

    @property
    def allowed(self) -> tuple[str, ...]:
        """The methods for ``Allow``: the routes', ``HEAD`` with ``GET``, and ``OPTIONS``."""
        implicit = {"OPTIONS", *(("HEAD",) if "GET" in self.methods else ())}
        return tuple(sorted(self.methods | implicit))

    @property
    def allow_header(self) -> str:
        return ", ".join(self.allowed)


class ResourceTable:
    """The API's paths, each with the methods its routes answer, matched as the resolver matches them."""

    def __init__(self, routes: Iterable[tuple[str, re.Pattern[str], str]]):
        methods: dict[str, set[str]] = {}
        rules: dict[str, re.Pattern[str]] = {}
        for path, rule, method in routes:
            methods.setdefault(path, set()).add(method.upper())
            rules.setdefault(path, rule)
        self.resources = tuple(Resource(path, rules[path], frozenset(methods[path])) for path in methods)

    def find(self, path: str) -> Resource | None:
        return next((resource for resource in self.resources if resource.rule.match(path)), None)


def refuse_method(resource: Resource, method: str) -> MethodNotAllowed:
    return MethodNotAllowed(
        f"{method} is not allowed on {resource.path}; use {', '.join(resource.allowed)}",
        allowed=resource.allowed,
    )


def header(event: Mapping[str, Any], name: str) -> str | None:
    """A request header, whatever its case (API Gateway keeps the client's)."""
    wanted = name.lower()
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == wanted:
            return str(value)
    return None


def check_media_type(content_type: str | None) -> None:
    """Refuse a request body whose ``Content-Type`` is not JSON in UTF-8."""
    if content_type is None:
        raise UnsupportedMediaType(
            "a request body needs Content-Type: application/json", field="Content-Type"
        )
    media_type, _, parameters = content_type.partition(";")
    media_type = media_type.strip().lower()
    if media_type != JSON:
        shown = media_type or "(empty)"
        raise UnsupportedMediaType(
            f"Content-Type {shown} is not accepted: send the request body as application/json",
            field="Content-Type",
        )
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in UTF8_NAMES:
            raise UnsupportedMediaType(
                f"charset {charset or '(empty)'} is not accepted: send application/json in UTF-8",
                field="Content-Type",
            )


def with_text_body(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with its body checked and as text: an empty body becomes none; any other needs a JSON
    ``Content-Type`` and, when it arrived base64-encoded (as API Gateway sends it), must be valid UTF-8."""
    body = event.get("body")
    encoded = bool(event.get("isBase64Encoded"))
    if not body:
        return {**event, "body": None, "isBase64Encoded": False}
    raw: bytes | None = None
    if encoded:
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:  # never from API Gateway: it encodes what it received
            raise InvalidInput("the request body is not valid base64", code="invalid_request") from error
        if not raw:
            return {**event, "body": None, "isBase64Encoded": False}
    check_media_type(header(event, "Content-Type"))
    if raw is None:
        return dict(event)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(
            f"the request body is not valid UTF-8 (byte {error.start})", code="invalid_json"
        ) from error
    return {**event, "body": text, "isBase64Encoded": False}
