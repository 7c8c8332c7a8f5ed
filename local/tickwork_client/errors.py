"""The client's one exception hierarchy, and the one place where an HTTP status picks its exception."""

from __future__ import annotations

import json
from email.message import Message
from http import HTTPStatus

from pydantic import ValidationError
from tickwork.api.schemas import ErrorBody, ErrorDetail, ErrorInfo

# API Gateway's name for the request id the API logs as correlation_id.
REQUEST_ID_HEADER = "x-amzn-RequestId"


class ClientError(Exception):
    """Base of every error the client raises on purpose."""

    attempts = 1
    """How many times the request was sent before the client gave up."""


class Unreachable(ClientError):
    """No HTTP answer: the connection was refused or dropped, DNS failed, or the answer took too long."""


class UnexpectedResponse(ClientError):
    """A success status whose body is not what the route answers: the URL points at something else, or the
    server runs another version of the API."""


class ApiError(ClientError):
    """An error answer, in the API's shape ``{"error": {"code", "message", "field", "details"}}``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        details: tuple[ErrorDetail, ...] = (),
        request_id: str | None = None,
    ):
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.details = details
        self.request_id = request_id
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"HTTP {self.status} {self.code}: {self.message}"
        # The API's messages usually start with the field already.
        if self.field and self.field not in self.message:
            text += f" (field: {self.field})"
        return text


class InvalidRequest(ApiError):
    """400, 413 or 422: the request was refused as sent; ``field`` names the offending input."""


class Unauthorized(ApiError):
    """401 or 403: the token is missing, wrong or revoked."""


class NotFound(ApiError):
    """404: no such job or run for this tenant (another tenant's ids are not found either)."""


class Conflict(ApiError):
    """409: the name is taken, the version moved on, or the job or run is in the wrong state."""


class LeaseLost(Conflict):
    """409 ``lease_lost``: the lease token of a heartbeat, complete or fail is no longer the run's. The lease
    lapsed (no heartbeat within the heartbeat timeout) or the run ended, and the run may already be another
    worker's: this worker can change nothing of it and should stop working on it."""


class RateLimited(ApiError):
    """429: the tenant's API rate limit. ``retry_after`` is the wait the API asked for, in seconds."""

    retry_after: float | None = None


class ServerError(ApiError):
    """5xx: a fault on the server's side (or of a proxy in front of it)."""


ERROR_BY_STATUS: dict[int, type[ApiError]] = {
    HTTPStatus.BAD_REQUEST: InvalidRequest,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: InvalidRequest,
    HTTPStatus.UNPROCESSABLE_ENTITY: InvalidRequest,
    HTTPStatus.UNAUTHORIZED: Unauthorized,
    HTTPStatus.FORBIDDEN: Unauthorized,
    HTTPStatus.NOT_FOUND: NotFound,
    HTTPStatus.CONFLICT: Conflict,
    HTTPStatus.TOO_MANY_REQUESTS: RateLimited,
}


# Error codes that need handling of their own, under the status they come with.
ERROR_BY_CODE: dict[tuple[int, str], type[ApiError]] = {
    (HTTPStatus.CONFLICT, "lease_lost"): LeaseLost,
}


def error_class(status: int, code: str | None = None) -> type[ApiError]:
    if code is not None and (status, code) in ERROR_BY_CODE:
        return ERROR_BY_CODE[status, code]
    if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
        return ServerError
    return ERROR_BY_STATUS.get(status, ApiError)


def api_error(status: int, body: bytes, headers: Message, *, retry_after: float | None = None) -> ApiError:
    """The exception for an error answer. Bodies not in the API's shape (API Gateway's ``{"message"}``, a
    proxy's page, a redirect) keep what they say under a code made from the status."""
    request_id = headers.get(REQUEST_ID_HEADER)
    try:
        info: ErrorInfo | None = ErrorBody.model_validate_json(body).error
    except ValidationError:
        info = None
    cls = error_class(status, info.code if info is not None else None)
    if info is not None:
        error = cls(status, info.code, info.message, info.field, tuple(info.details), request_id)
    else:
        error = cls(status, _code_of(status), _message_of(status, body, headers), request_id=request_id)
    if isinstance(error, RateLimited):
        error.retry_after = retry_after
    return error


def _code_of(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return f"http_{status}"


def _message_of(status: int, body: bytes, headers: Message) -> str:
    if 300 <= status < 400:
        return f"redirected to {headers.get('Location') or '?'}; redirects are not followed"
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        return str(document["message"])
    return body.decode("utf-8", errors="replace").strip()[:200] or f"HTTP {status}"
