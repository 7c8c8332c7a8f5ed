"""`tickwork preview`: a schedule's next fire times, marked with what moves or excludes them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import typer

from tickwork_local.cli.errors import UsageError
from tickwork_local.cli.jobs import as_json
from tickwork_local.cli.options import (
    AtOption,
    CronOption,
    ExcludeDateOption,
    ExcludeHolidaysOption,
    ExcludeWindowOption,
    JitterOption,
    OutputOption,
    RateOption,
    TimezoneOption,
    examples,
    parse_when,
)
from tickwork_local.cli.output import Cell, Output, text
from tickwork_local.cli.session import Session, command
from tickwork_local.cli.specs import ScheduleFlags

EPILOG = examples(
    'tickwork preview --cron "30 2 * * *" --timezone America/New_York'
    " --after 2025-03-08T12:00:00-05:00 --count 3",
    'tickwork preview --cron "0 9 * * 1-5" --timezone America/New_York --exclude-holidays US-NY --jitter 5m',
)

_DST_NOTES = {
    "shifted": "DST: its time is skipped that day; fires at the end of the gap",
    "repeated": "DST: its time occurs twice; fires at both",
}


def preview(
    ctx: typer.Context,
    at: AtOption = None,
    cron: CronOption = None,
    rate: RateOption = None,
    timezone: TimezoneOption = None,
    exclude_holidays: ExcludeHolidaysOption = None,
    exclude_date: ExcludeDateOption = None,
    exclude_window: ExcludeWindowOption = None,
    jitter: JitterOption = None,
    after: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            parser=parse_when,
            show_default=False,
            help="list fires after this RFC 3339 time or +DURATION (default now)",
        ),
    ] = None,
    count: Annotated[
        int | None, typer.Option(metavar="N", min=1, max=100, show_default=False, help="how many fire times")
    ] = None,
    output: OutputOption = None,
) -> None:
    """Show the next fire times of a schedule; nothing is created.

    POST /v1/schedule-preview. For a cron in a time zone each time is also shown in local time; the NOTE
    column marks excluded fires (and why), fires moved or doubled by DST, and with --jitter when each starts
    by."""
    session = Session(ctx, output)
    flags = ScheduleFlags(at, cron, rate, timezone, exclude_holidays, exclude_date, exclude_window)
    schedule = flags.schedule()
    if schedule is None:
        raise UsageError("preview needs a schedule: one of --at, --cron or --rate")
    flags.add_exclusions(schedule)
    answer = session.client.preview(schedule, after=after, count=count, jitter_seconds=jitter)
    document = as_json(answer)
    if session.output.machine:
        session.output.document(document)
        return
    session.output.line(text(document.get("description")))
    fires = document.get("fires") or [{"at": at} for at in document.get("fire_times") or []]
    show_fires(session.output, fires, timezone)


def show_fires(output: Output, fires: Sequence[dict[str, Any]], timezone: str | None) -> None:
    """One row per fire: its time, its local time in ``timezone`` (for a zone other than UTC), and what
    changes it (an exclusion, DST, jitter)."""
    zone = None
    if timezone and timezone.upper() != "UTC":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            zone = None
    rows: list[list[Cell]] = []
    for fire in fires:
        row: list[Cell] = [text(fire.get("at"))]
        if zone is not None:
            row.append(_local_time(fire.get("at"), zone))
        notes = _fire_note(fire, zone)
        row.append((notes, "yellow") if notes != "-" else notes)
        rows.append(row)
    headers = ["FIRE_TIME", *([f"LOCAL ({timezone})"] if zone is not None else []), "NOTE"]
    output.table(headers, rows, empty="no fire times")


def _local_time(moment: Any, zone: Any) -> str:
    try:
        return datetime.fromisoformat(str(moment)).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
    except ValueError:
        return "-"


def _fire_note(fire: dict[str, Any], zone: Any) -> str:
    notes = []
    if fire.get("excluded"):
        notes.append(f"not fired: {str(fire['excluded']).removeprefix('excluded: ')}")
    if fire.get("dst") in _DST_NOTES:
        notes.append(_DST_NOTES[fire["dst"]])
    if fire.get("starts_by"):
        by = _local_time(fire["starts_by"], zone) if zone is not None else text(fire["starts_by"])
        notes.append(f"starts by {by}")
    return "; ".join(notes) or "-"


def register(app: typer.Typer) -> None:
    app.command("preview", epilog=EPILOG, rich_help_panel="Schedules and health")(command(preview))
