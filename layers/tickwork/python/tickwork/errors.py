"""The one exception hierarchy of tickwork.

Every error carries a stable ``code`` and, where it concerns one input field, the dotted ``field`` path.
HTTP status codes are chosen in one place: ``tickwork.api.errors``.
"""

from __future__ import annotations

from typing import Any


class TickworkError(Exception):
    """Base of every error tickwork raises on purpose."""

    code = "internal_error"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None, **context: Any):
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code
        self.context = context


class InvalidInput(TickworkError):
    """A client sent something tickwork will not accept."""

    code = "invalid_request"


class InvalidSchedule(InvalidInput):
    code = "invalid_schedule"


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"


class UnsupportedMediaType(InvalidInput):
    """A request body that is not JSON (``Content-Type`` other than ``application/json``)."""

    code = "unsupported_content_type"


class MethodNotAllowed(TickworkError):
    """The path exists, but not with this HTTP method; ``allowed`` lists the methods it has."""

    code = "method_not_allowed"

    def __init__(self, message: str, *, allowed: tuple[str, ...], **context: Any):
        super().__init__(message, allowed=allowed, **context)
        self.allowed = allowed


class Unauthorized(TickworkError):
    code = "unauthorized"


class Forbidden(TickworkError):
    """The caller is known, and not allowed to do this now."""

    code = "forbidden"


class TenantDisabled(Forbidden):
    """An operator disabled the tenant: its API requests are refused until it is enabled again."""

    code = "tenant_disabled"


class NotFound(TickworkError):
    code = "not_found"


class Conflict(TickworkError):
    """The request is well formed but clashes with the current state."""

    code = "conflict"


class LeaseLost(Conflict):
    """A pool worker's call with a lease token that is no longer the run's: its lease lapsed, a later attempt
    holds the run, or the run ended."""

    code = "lease_lost"


class NameTaken(Conflict):
    code = "name_taken"


class VersionConflict(Conflict):
    code = "version_conflict"


class InvalidState(Conflict):
    code = "invalid_state"


class AlreadyExists(Conflict):
    """A conditional put found the item already there; ``existing`` holds it when known."""

    code = "already_exists"


class IdempotencyKeyReused(TickworkError):
    code = "idempotency_key_reused"


class QuotaExceeded(TickworkError):
    code = "quota_exceeded"


class RateLimited(QuotaExceeded):
    """The tenant sent more API requests than its limit allows in the current window."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int, **context: Any):
        super().__init__(message, retry_after=retry_after, **context)
        self.retry_after = retry_after


class DuplicateAttempt(TickworkError):
    """The same attempt of a run is already being executed elsewhere."""

    code = "duplicate_attempt"


class TaskMessagesUnsent(TickworkError):
    """SQS did not take a workflow task's message: raised for the step that sent it to run again (the
    message that carried it comes back)."""

    code = "task_messages_unsent"
