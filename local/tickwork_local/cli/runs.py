"""`tickwork runs` (list, show, cancel, retry and watch the tenant's runs) and `tickwork dead-letters`."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer

from tickwork_local.cli.errors import EXIT_FAILED, CliError, UsageError, translated
from tickwork_local.cli.jobs import as_json, confirm, show_answer, show_page
from tickwork_local.cli.options import (
    AllOption,
    CursorOption,
    OutputOption,
    RunArgument,
    RunStatus,
    YesOption,
    examples,
    parse_duration,
    parse_since,
    positive_float,
)
from tickwork_local.cli.output import Format, Output, dump_yaml, run_event, show_run, show_runs, text
from tickwork_local.cli.session import Session, command

if TYPE_CHECKING:
    from tickwork.api.schemas import RunOut

app = typer.Typer(
    name="runs",
    help="List, inspect, cancel, retry and watch runs across the tenant's jobs.",
    no_args_is_help=True,
    epilog=examples(
        "tickwork runs list --status FAILED --status DEAD --since 1d",
        "tickwork runs watch",
    ),
)

StatusOption = Annotated[
    list[str] | None,
    typer.Option(
        "--status",
        metavar="STATUS",
        show_default=False,
        help=f"only runs in this status, one of {', '.join(get_args(RunStatus))}; repeatable",
    ),
]


def run_statuses(given: list[str] | None) -> list[str]:
    known = get_args(RunStatus)
    statuses = [value.upper() for value in given or []]
    unknown = [value for value in statuses if value not in known]
    if unknown:
        raise UsageError(f"--status {unknown[0]!r} is not a run status: one of {', '.join(known)}")
    return statuses


JobFilterOption = Annotated[
    str | None,
    typer.Option("--job", metavar="JOB", show_default=False, help="only this job's runs (its id or name)"),
]
SinceOption = Annotated[
    datetime | None,
    typer.Option(
        "--since",
        metavar="TIME",
        parser=parse_since,
        show_default=False,
        help="only runs scheduled at or after this RFC 3339 time, or this long ago (30m, 2h, 1d)",
    ),
]
UntilOption = Annotated[
    datetime | None,
    typer.Option(
        "--until",
        metavar="TIME",
        parser=parse_since,
        show_default=False,
        help="only runs scheduled before this RFC 3339 time, or this long ago",
    ),
]
CountLimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        metavar="N",
        min=1,
        show_default=False,
        help="show at most N runs (default 50, or all with --all)",
    ),
]


def job_filter(session: Session, job: str | None) -> str | None:
    return session.job(job).job_id if job else None


def collect(
    session: Session,
    *,
    statuses: list[str] | None,
    job_id: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    cursor: str | None,
    every: bool,
) -> tuple[list[RunOut], str | None]:
    """Runs from GET /v1/runs, page after page, until ``limit`` of them (or every one with ``every``); and
    the cursor of what is left. A page may hold fewer runs than asked and still have more after it."""
    wanted = None if every else (limit or 50)
    runs: list[RunOut] = []
    seen: set[str] = set()
    with session.output.progress("listing runs", total=wanted) as advance:
        while True:
            size = 100 if wanted is None else min(100, wanted - len(runs))
            page = session.client.list_all_runs(
                status=statuses or None, job_id=job_id, since=since, until=until, limit=size, cursor=cursor
            )
            runs += page.items
            advance(len(page.items))
            cursor = page.next_cursor
            if not cursor or cursor in seen or (wanted is not None and len(runs) >= wanted):
                return runs, cursor
            seen.add(cursor)


@app.command(
    "list",
    epilog=examples(
        "tickwork runs list --status DEAD",
        "tickwork runs list --job nightly-report --since 2h -o wide",
        "tickwork runs list --status FAILED --since 2026-11-22T00:00:00Z --all -o json",
    ),
)
@command
def list_runs(
    ctx: typer.Context,
    status: StatusOption = None,
    job: JobFilterOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: CountLimitOption = None,
    cursor: CursorOption = None,
    every: AllOption = False,
    output: OutputOption = None,
) -> None:
    """List the tenant's runs, newest first by scheduled time.

    GET /v1/runs, page after page until --limit runs (or every one with --all). Fires still waiting in the
    queue show in jobs runs, not here."""
    session = Session(ctx, output)
    statuses = run_statuses(status)
    runs, next_cursor = collect(
        session,
        statuses=statuses,
        job_id=job_filter(session, job),
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        every=every,
    )
    show_page(session.output, runs, next_cursor, show_runs, "runs")


@app.command(
    "get",
    epilog=examples(
        "tickwork runs get '01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000'",
        "tickwork runs get '01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000/extract'",
    ),
)
@command
def get(ctx: typer.Context, run: RunArgument, output: OutputOption = None) -> None:
    """Show one run with all its attempts.

    A pool run shows its progress, stage, the worker holding its lease, its last heartbeat, when its lease
    lapses, whether it was asked to stop, and its last checkpoint. A workflow run shows its tasks as the
    tree of its job's definition, each with its run's status, attempts and times (waiting: no run yet); a
    task's own run is shown by its id, <workflow run id>/<task id>."""
    session = Session(ctx, output)
    document = as_json(session.client.get_run(run))
    if session.output.machine:
        session.output.document(document)
    else:
        show_run(session.output, document, definition=session.workflow_of(document))


@app.command(
    "cancel",
    epilog=examples(
        "tickwork runs cancel '01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000'",
        "tickwork runs cancel '01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000' --yes -o json",
    ),
)
@command
def cancel(ctx: typer.Context, run: RunArgument, yes: YesOption = False, output: OutputOption = None) -> None:
    """Cancel a run.

    A run that has not started is CANCELLED at once. A running one is asked to stop: its worker hears it at
    its next heartbeat, and the run ends CANCELLED, not retried. Asks first, unless --yes; without a terminal
    to ask on, --yes is needed."""
    session = Session(ctx, output)
    if not yes:
        confirm(f"cancel run {text(run)}?")
    cancelled = as_json(session.client.cancel_run(run))
    if cancelled["status"] == "CANCELLED":
        summary = f"cancelled run {text(cancelled['run_id'])}"
    else:
        summary = (
            f"asked run {text(cancelled['run_id'])} to stop: it is {text(cancelled['status'])},"
            " and its worker hears it at its next heartbeat"
        )
    show_answer(session.output, cancelled, summary)


@app.command(
    "retry",
    epilog=examples(
        "tickwork runs retry '01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000'",
    ),
)
@command
def retry(
    ctx: typer.Context,
    runs: Annotated[list[str], typer.Argument(metavar="RUN_ID...", show_default=False, help="the runs' ids")],
    output: OutputOption = None,
) -> None:
    """Retry FAILED, DEAD or ABANDONED runs by hand.

    Each gets a new attempt, with the same idempotency key."""
    session = Session(ctx, output)
    retried = retry_each(session, runs)
    if len(retried) < len(runs):
        raise typer.Exit(EXIT_FAILED)


def retry_each(session: Session, run_ids: list[str]) -> list[dict[str, Any]]:
    """Retry each run, with a progress bar for several; print each outcome. Returns the retried runs."""
    retried: list[dict[str, Any]] = []
    with session.output.progress(
        "retrying runs", total=len(run_ids) if len(run_ids) > 1 else None
    ) as advance:
        for run_id in run_ids:
            try:
                run = as_json(session.client.retry_run(run_id))
            except Exception as error:
                failure = translated(error)
                if failure is None:
                    raise
                if len(run_ids) > 1:
                    failure = CliError(
                        f"run {run_id}: {failure.problem.message}",
                        code=failure.problem.code,
                        field=failure.problem.field,
                    )
                session.output.error(failure)
            else:
                retried.append(run)
                if not session.output.machine:
                    session.output.line(
                        f"retrying run {text(run['run_id'])}: {text(run['status'])} after attempt"
                        f" {text(run['attempt'])}"
                    )
            advance(1)
    if session.output.machine:
        session.output.document(retried[0] if len(run_ids) == 1 and retried else retried)
    if len(run_ids) > 1 and not session.output.machine:
        session.output.note(f"retried {len(retried)} of {len(run_ids)} runs")
    return retried


# --- watch --------------------------------------------------------------------------------------------------
@app.command(
    "watch",
    epilog=examples(
        "tickwork runs watch",
        "tickwork runs watch --job nightly-report --status DEAD",
        "tickwork runs watch --since 10m --count 20 -o json",
    ),
)
@command
def watch(
    ctx: typer.Context,
    status: StatusOption = None,
    job: JobFilterOption = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            metavar="TIME",
            parser=parse_since,
            show_default=False,
            help="follow runs scheduled from this RFC 3339 time, or this long ago (default: from now)",
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", parser=positive_float, help="seconds between checks")
    ] = 2.0,
    count: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, show_default=False, help="stop after printing N changes"),
    ] = None,
    duration: Annotated[
        int | None,
        typer.Option(
            "--for",
            metavar="DURATION",
            parser=parse_duration,
            show_default=False,
            help="stop after this long",
        ),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Follow runs as they happen.

    Prints each run when it appears and whenever its status or attempt changes: one line each, or JSON
    lines with -o json. Ctrl-C stops, with exit code 0."""
    session = Session(ctx, output)
    statuses = run_statuses(status)
    job_id = job_filter(session, job)
    started = time.monotonic()
    start = since or datetime.now(UTC) - timedelta(seconds=1)
    shown: dict[str, tuple[str, int]] = {}
    printed = 0
    try:
        # Said inside the try: a Ctrl-C the moment it is printed still stops the watch cleanly.
        since_text = start.isoformat(timespec="seconds")
        session.output.note(f"watching runs scheduled from {since_text}; Ctrl-C stops")
        while True:
            page = session.client.list_all_runs(
                status=statuses or None, job_id=job_id, since=start, limit=100
            )
            now = datetime.now(UTC)
            changed = []
            for run in sorted(page.items, key=lambda item: (item.scheduled_for, item.run_id)):
                state = (str(run.status), run.attempt)
                if shown.get(run.run_id) != state:
                    changed.append(run)
                    shown[run.run_id] = state
            # JSON and YAML lines are the API's runs as they are; a line of text names the run's job.
            names = {} if session.output.machine else session.job_names(run.job_id for run in changed)
            for run in changed:
                print_event(session.output, as_json(run), now, names.get(run.job_id))
                printed += 1
                if count is not None and printed >= count:
                    return
            if duration is not None and time.monotonic() - started + interval > duration:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def print_event(output: Output, run: dict[str, Any], seen_at: datetime, job_name: str | None = None) -> None:
    if output.format is Format.YAML:
        output.line("---\n" + dump_yaml([run]).rstrip("\n"))
    elif output.machine:
        output.line(json.dumps(run, ensure_ascii=False))
    else:
        output.event(run_event(run, seen_at, job_name))


# --- dead letters -------------------------------------------------------------------------------------------
def dead_letters(
    ctx: typer.Context,
    job: JobFilterOption = None,
    since: SinceOption = None,
    limit: CountLimitOption = None,
    every: AllOption = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="retry every dead run listed, with a progress bar")
    ] = False,
    output: OutputOption = None,
) -> None:
    """List the tenant's dead runs, or retry them.

    Dead runs are those whose every attempt failed (DEAD), newest first. With --retry, each is retried
    by hand, with a progress bar."""
    session = Session(ctx, output)
    runs, next_cursor = collect(
        session,
        statuses=["DEAD"],
        job_id=job_filter(session, job),
        since=since,
        until=None,
        limit=limit,
        cursor=None,
        every=every,
    )
    if retry:
        if not runs:
            session.output.note("no dead runs to retry")
            return
        retried = retry_each(session, [run.run_id for run in runs])
        if len(retried) < len(runs):
            raise typer.Exit(EXIT_FAILED)
        return
    if session.output.machine:
        session.output.document({"items": [as_json(run) for run in runs], "next_cursor": next_cursor})
        return
    show_runs(session.output, [as_json(run) for run in runs], session.job_names(run.job_id for run in runs))
    if next_cursor:
        session.output.note("more dead runs: add --all, or a larger --limit")


DEAD_LETTERS_EPILOG = examples(
    "tickwork dead-letters",
    "tickwork dead-letters --job nightly-report --since 1d -o wide",
    "tickwork dead-letters --since 1h --retry",
)


def register(app: typer.Typer) -> None:
    app.command("dead-letters", epilog=DEAD_LETTERS_EPILOG, rich_help_panel="Jobs and runs")(
        command(dead_letters)
    )
