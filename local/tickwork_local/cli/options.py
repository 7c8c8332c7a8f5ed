"""Argument types and the options several commands share, declared once.

Parsers raise ``typer.BadParameter``: Typer reports it as a usage error (exit 2) naming the option."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

import typer

from tickwork_local.cli.output import Format

# The bounds of Tenant's settings, kept here so that --help needs no import of tickwork (a test checks them).
MAX_API_REQUESTS_PER_SECOND = 10_000
MAX_RUNS_PER_SECOND = 10_000
MAX_BURST = 100_000
JobStatus = Literal["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"]
RunStatus = Literal[
    "PLANNED",
    "ENQUEUED",
    "RUNNING",
    "RETRY_WAIT",
    "SUCCEEDED",
    "FAILED",
    "DEAD",
    "ABANDONED",
    "MISSED",
    "SKIPPED",
    "CANCELLED",
]
Delivery = Literal["at_least_once", "at_most_once"]

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
SCHEDULE_PANEL = "Schedule (one of --at, --cron, --rate)"
TARGET_PANEL = "Target (one of --url, --target-json)"
GLOBAL_PANEL = "Global options"


def examples(*commands: str, before: str | None = None) -> str:
    """A command's help epilog: ``before`` (a paragraph), then "Examples:" and each command on its own."""
    lines = "\n\n".join(f"  {line}" for line in commands)
    return (f"{before}\n\n" if before else "") + f"Examples:\n\n{lines}"


# --- parsers ------------------------------------------------------------------------------------------------
def parse_duration(text: str | int) -> int:
    """Seconds from ``90``, ``90s``, ``5m``, ``1h30m`` or ``1d`` (an int is a default, taken as it is)."""
    if isinstance(text, int):
        return text
    value = text.strip().lower()
    if value.isdigit():
        seconds = int(value)
    else:
        match = _DURATION.fullmatch(value)
        if not value or match is None:
            raise typer.BadParameter(f"{text!r} is not a duration like 30, 30s, 5m, 1h30m or 1d")
        days, hours, minutes, secs = (int(part or 0) for part in match.groups())
        seconds = days * 86400 + hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise typer.BadParameter(f"{text!r} must be more than zero seconds")
    return seconds


def parse_zero_or_duration(text: str | int) -> int:
    """A duration, or 0 for none (``--jitter 0`` turns jitter off)."""
    return 0 if str(text).strip() in ("0", "0s") else parse_duration(text)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_when(text: str) -> str:
    """An RFC 3339 time, passed on as written, or ``+DURATION`` counted from now."""
    if text.startswith("+"):
        return rfc3339(datetime.now(UTC) + timedelta(seconds=parse_duration(text[1:])))
    return text


def parse_since(text: str) -> datetime:
    """An RFC 3339 time, or a DURATION meaning that long ago (``30m``, ``2h``, ``1d``)."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(value.removeprefix("-")))
    if moment.tzinfo is None:
        raise typer.BadParameter(f"{text!r} needs a UTC offset, such as 2026-11-22T09:00:00Z")
    return moment


def positive_float(text: str | float) -> float:
    """A number above 0 (a float is a default, taken as it is)."""
    if isinstance(text, float):
        return text
    try:
        value = float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise typer.BadParameter(f"{text!r} must be more than 0")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise typer.BadParameter(f"{text!r} is not KEY=VALUE")
    return key, value


# --- shared options -----------------------------------------------------------------------------------------
OutputOption = Annotated[
    Format | None,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        show_default=False,
        help="table (the default), wide (more columns), or json or yaml: the API's objects, for scripts",
    ),
]

ApiUrlOption = Annotated[
    str | None,
    typer.Option(
        "--api-url",
        "--api",
        metavar="URL",
        show_default=False,
        rich_help_panel=GLOBAL_PANEL,
        help="base URL of the tickwork API (env TICKWORK_API_URL; default http://127.0.0.1:8000)",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        show_default=False,
        rich_help_panel=GLOBAL_PANEL,
        help="the tenant's API token (env TICKWORK_TOKEN; prefer the variable: a flag shows in ps)",
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        parser=positive_float,
        show_default=False,
        rich_help_panel=GLOBAL_PANEL,
        help="give up on a request after this many seconds (default 30)",
    ),
]
RetriesOption = Annotated[
    int | None,
    typer.Option(
        "--retries",
        metavar="N",
        min=0,
        max=20,
        show_default=False,
        rich_help_panel=GLOBAL_PANEL,
        help="send a request refused for now (429, 5xx) or unanswered up to N more times, waiting what"
        " Retry-After asks (default 3; 0 never retries)",
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", hidden=True, rich_help_panel=GLOBAL_PANEL, help="the same as -o json"),
]

JobArgument = Annotated[
    str, typer.Argument(metavar="JOB", show_default=False, help="the job's id, or its name")
]
RunArgument = Annotated[
    str,
    typer.Argument(
        metavar="RUN_ID", show_default=False, help="the run's id (<job_id>:<epoch ms> or <job_id>:m:...)"
    ),
]

# Schedule flags, shared by jobs create, jobs update and preview.
AtOption = Annotated[
    str | None,
    typer.Option(
        "--at",
        metavar="TIME",
        parser=parse_when,
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="fire once at this RFC 3339 time (2026-01-01T09:00:00Z), or +DURATION from now (+30s)",
    ),
]
CronOption = Annotated[
    str | None,
    typer.Option(
        "--cron",
        metavar="EXPR",
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help='fire on a cron expression: 5 fields, or 6 with seconds first ("0 9 * * 1-5", "@daily")',
    ),
]
RateOption = Annotated[
    int | None,
    typer.Option(
        "--rate",
        metavar="EVERY",
        parser=parse_duration,
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="fire every so many seconds: 30, 30s, 5m, 1h30m or 1d",
    ),
]
TimezoneOption = Annotated[
    str | None,
    typer.Option(
        "--timezone",
        metavar="TZ",
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="IANA time zone of a --cron schedule (default UTC), e.g. Europe/Paris",
    ),
]
ExcludeHolidaysOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude-holidays",
        metavar="CALENDAR",
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="no fire on this calendar's public holidays: a country (US), a subdivision (US-NY) or a market"
        " (NYSE); repeatable",
    ),
]
ExcludeDateOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude-date",
        metavar="DATE",
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="no fire on this local date (2026-12-24) or range (2026-12-24..2027-01-01); repeatable",
    ),
]
ExcludeWindowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude-window",
        metavar="CRON",
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help='no fire in the minutes this 5-field cron expression matches ("* 12-13 * * *"); repeatable',
    ),
]
JitterOption = Annotated[
    int | None,
    typer.Option(
        "--jitter",
        metavar="SPREAD",
        parser=parse_zero_or_duration,
        show_default=False,
        rich_help_panel=SCHEDULE_PANEL,
        help="start each fire up to this long after its time (30s, 5m), by a fixed offset per fire",
    ),
]

# Target flags, shared by jobs create and jobs update.
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", show_default=False, rich_help_panel=TARGET_PANEL, help="deliver to this webhook URL"
    ),
]
TargetJsonOption = Annotated[
    str | None,
    typer.Option(
        "--target-json",
        metavar="JSON",
        show_default=False,
        rich_help_panel=TARGET_PANEL,
        help='any target as JSON, or @FILE, e.g. \'{"type": "sqs", "queue_url": "https://..."}\'',
    ),
]
Method = Literal["POST", "PUT", "PATCH"]
MethodOption = Annotated[
    Method | None,
    typer.Option(
        "--method",
        show_default=False,
        rich_help_panel=TARGET_PANEL,
        help="HTTP method of a webhook target (default POST)",
    ),
]
PayloadOption = Annotated[
    str | None,
    typer.Option(
        "--payload",
        metavar="JSON",
        show_default=False,
        help="JSON (or @FILE) handed to the target on every fire",
    ),
]
DescriptionOption = Annotated[
    str | None, typer.Option("--description", show_default=False, help="free text shown with the job")
]
MisfirePolicy = Literal["skip", "fire_once", "backfill"]
MisfireOption = Annotated[
    MisfirePolicy | None,
    typer.Option(
        "--misfire-policy",
        show_default=False,
        help="what to do with fires missed during an outage or a pause (default fire_once)",
    ),
]
Priority = Literal["high", "normal", "low"]
PriorityOption = Annotated[
    Priority | None,
    typer.Option(
        "--priority",
        show_default=False,
        help="under a backlog, higher priorities start first; none waits over 300 s longer (default normal)",
    ),
]
OverlapPolicy = Literal["allow", "skip", "queue"]
OverlapOption = Annotated[
    OverlapPolicy | None,
    typer.Option(
        "--overlap-policy",
        show_default=False,
        help="what to do when a fire is due while the previous run still runs (default skip)",
    ),
]
MaxAttemptsOption = Annotated[
    int | None,
    typer.Option(
        "--max-attempts",
        metavar="N",
        min=1,
        show_default=False,
        help="attempts per run before it is DEAD (default 5)",
    ),
]
IdempotencyKeyOption = Annotated[
    str | None,
    typer.Option(
        "--idempotency-key",
        metavar="KEY",
        show_default=False,
        help="repeat-safe key: running the command again with it does the work only once",
    ),
]
LimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit", metavar="N", min=1, max=100, show_default=False, help="items per page (at most 100)"
    ),
]
CursorOption = Annotated[
    str | None,
    typer.Option(
        "--cursor", show_default=False, help="start at this page (the next_cursor of the previous page)"
    ),
]
AllOption = Annotated[bool, typer.Option("--all", help="follow next_cursor to the last page")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
