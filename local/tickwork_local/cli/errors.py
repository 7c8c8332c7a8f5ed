"""The CLI's errors and exit codes. Every failure a user can cause ends as one of these, printed as
``error: ...`` on stderr, never as a traceback."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILED = 1  # the API (or DynamoDB) refused, or the thing asked for does not exist
EXIT_USAGE = 2  # bad or missing arguments, an unreadable file, no token, an ambiguous job name
EXIT_UNREACHABLE = 3  # no answer from the API
# `jobs trigger --wait`: how the run ended.
EXIT_RUN_FAILED = 4  # FAILED: the target refused it for good
EXIT_RUN_DEAD = 5  # DEAD: every attempt failed
EXIT_RUN_NOT_RUN = 6  # ABANDONED, MISSED, SKIPPED or CANCELLED
EXIT_WAIT_TIMEOUT = 7  # still not finished when --wait-timeout ran out
EXIT_INTERRUPTED = 130  # Ctrl-C

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Escape control characters so that data from the API cannot drive the terminal."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


@dataclass(frozen=True)
class Problem:
    """One thing wrong, as the API names it: a code, a message and the input at fault."""

    message: str
    code: str | None = None
    field: str | None = None

    def text(self) -> str:
        text = f"{clean(self.code)}: {clean(self.message)}" if self.code else clean(self.message)
        return f"{text} (field: {clean(self.field)})" if self.field else text


class CliError(Exception):
    """A failure to report and exit with: ``error: <code>: <message> (field: <field>)``, and any further
    problems of the same refusal on lines that start with ``  - ``."""

    exit_code = EXIT_FAILED

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        details: Sequence[Problem] = (),
        hint: str | None = None,
    ):
        super().__init__(message)
        self.problem = Problem(message, code, field)
        self.details = [detail for detail in details if detail != self.problem]
        self.hint = hint

    def lines(self) -> list[str]:
        lines = [f"error: {self.problem.text()}"]
        lines += [f"  - {detail.text()}" for detail in self.details]
        if self.hint:
            lines.append(f"  {clean(self.hint)}")
        return lines


class UsageError(CliError):
    exit_code = EXIT_USAGE


class Unreachable(CliError):
    exit_code = EXIT_UNREACHABLE


def translated(error: BaseException) -> CliError | None:
    """The CLI error for an exception the Python client raised (or a CliError as it is); None for a bug.

    The client is imported only by commands that talk to the API: when it was never imported, nothing can
    be one of its errors, and checking costs no import."""
    if isinstance(error, CliError):
        return error
    import sys

    client = sys.modules.get("tickwork_client.errors")
    if client is None:
        return None
    if isinstance(error, client.ApiError):
        details = [Problem(detail.message, detail.code, detail.field) for detail in error.details]
        result = CliError(error.message, code=error.code, field=error.field, details=details)
        if isinstance(error, client.RateLimited) and error.attempts > 1:
            result.hint = f"still rate limited after {error.attempts} tries: wait, or raise --retries"
        return result
    if isinstance(error, client.Unreachable):
        return Unreachable(str(error))
    if isinstance(error, client.UnexpectedResponse):
        return CliError(f"unexpected answer from the API: {error} (check --api-url)")
    return None
