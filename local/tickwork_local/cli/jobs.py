"""`tickwork jobs`: create, list, show, change, pause, resume, cancel, trigger and export jobs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwork_local.cli.errors import (
    EXIT_OK,
    EXIT_RUN_DEAD,
    EXIT_RUN_FAILED,
    EXIT_RUN_NOT_RUN,
    EXIT_WAIT_TIMEOUT,
    CliError,
    UsageError,
    translated,
)
from tickwork_local.cli.options import (
    AllOption,
    AtOption,
    CronOption,
    CursorOption,
    Delivery,
    DescriptionOption,
    ExcludeDateOption,
    ExcludeHolidaysOption,
    ExcludeWindowOption,
    IdempotencyKeyOption,
    JitterOption,
    JobArgument,
    JobStatus,
    LimitOption,
    MaxAttemptsOption,
    MethodOption,
    MisfireOption,
    OutputOption,
    OverlapOption,
    PayloadOption,
    PriorityOption,
    RateOption,
    TargetJsonOption,
    TimezoneOption,
    UrlOption,
    YesOption,
    examples,
    key_value,
    parse_duration,
    parse_when,
    positive_float,
)
from tickwork_local.cli.output import Format, Output, show_job, show_jobs, show_run, show_runs, text
from tickwork_local.cli.session import Session, command
from tickwork_local.cli.specs import (
    JobFlags,
    ScheduleFlags,
    build_job_spec,
    exported,
    load_spec_file,
    parse_json_value,
)

if TYPE_CHECKING:
    from pydantic import BaseModel
    from tickwork.api.schemas import JobOut

app = typer.Typer(
    name="jobs",
    help="Create, list, inspect and manage jobs. A JOB is given by its id or by its name.",
    no_args_is_help=True,
    epilog=examples(
        "tickwork jobs list",
        "tickwork jobs get nightly-report",
    ),
)

# How `jobs trigger --wait` ends, by the run's final status.
WAIT_EXIT_CODES = {
    "SUCCEEDED": EXIT_OK,
    "FAILED": EXIT_RUN_FAILED,
    "DEAD": EXIT_RUN_DEAD,
    "ABANDONED": EXIT_RUN_NOT_RUN,
    "MISSED": EXIT_RUN_NOT_RUN,
    "SKIPPED": EXIT_RUN_NOT_RUN,
    "CANCELLED": EXIT_RUN_NOT_RUN,
}


def as_json(model: BaseModel) -> dict[str, Any]:
    """An answer as the API sent it."""
    return model.model_dump(mode="json")


def dropped_note(output: Output, dropped: list[str]) -> None:
    if dropped:
        output.note(f"note: left out fields the API sets itself: {', '.join(dropped)}")


def show_answer(output: Output, document: dict[str, Any], summary: str | None = None) -> None:
    """A job (or run) answer: the object itself with -o json|yaml, else ``summary`` or the object's fields."""
    if output.machine:
        output.document(document)
    elif summary is not None:
        output.line(summary)
    else:
        show_job(output, document)


def show_page(
    output: Output,
    items: list[Any],
    next_cursor: str | None,
    show: Callable[[Output, list[Any]], None],
    what: str,
) -> None:
    """A page of jobs or runs: the API's page as a document, or a table and how to get the next page."""
    documents = [as_json(item) for item in items]
    if output.machine:
        output.document({"items": documents, "next_cursor": next_cursor})
        return
    show(output, documents)
    if next_cursor:
        output.note(f"more {what}: add --cursor {next_cursor} for the next page, or --all")


# --- create -------------------------------------------------------------------------------------------------
@app.command(
    "create",
    epilog=examples(
        "tickwork jobs create --name hello --rate 10s --url http://127.0.0.1:9000/hook"
        " --payload '{\"hi\": 1}'",
        'tickwork jobs create --name report --cron "0 9 * * 1-5" --timezone America/New_York'
        " --exclude-holidays US-NY --url https://example.com/hook",
        "tickwork jobs create --file job.yaml --name nightly-copy",
    ),
)
@command
def create(
    ctx: typer.Context,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-f",
            metavar="FILE",
            show_default=False,
            help="a job spec as JSON or YAML (- reads stdin); flags override its fields",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(show_default=False, help="the job's name, unique in the tenant: letters, digits, . _ -"),
    ] = None,
    at: AtOption = None,
    cron: CronOption = None,
    rate: RateOption = None,
    timezone: TimezoneOption = None,
    exclude_holidays: ExcludeHolidaysOption = None,
    exclude_date: ExcludeDateOption = None,
    exclude_window: ExcludeWindowOption = None,
    jitter: JitterOption = None,
    url: UrlOption = None,
    target_json: TargetJsonOption = None,
    method: MethodOption = None,
    payload: PayloadOption = None,
    description: DescriptionOption = None,
    misfire_policy: MisfireOption = None,
    overlap_policy: OverlapOption = None,
    priority: PriorityOption = None,
    max_attempts: MaxAttemptsOption = None,
    idempotency_key: IdempotencyKeyOption = None,
    output: OutputOption = None,
) -> None:
    """Create a job from flags, from a JSON or YAML spec, or both.

    --file reads a whole spec (the body of POST /v1/jobs); flags given with it replace those fields of the
    file: a schedule flag the whole schedule, --url only the webhook's URL, --max-attempts only that field of
    retry."""
    session = Session(ctx, output)
    base, dropped = load_spec_file(file) if file else (None, [])
    flags = JobFlags(
        name=name,
        schedule=ScheduleFlags(at, cron, rate, timezone, exclude_holidays, exclude_date, exclude_window),
        jitter=jitter,
        url=url,
        method=method,
        target_json=target_json,
        payload=payload,
        description=description,
        misfire_policy=misfire_policy,
        overlap_policy=overlap_policy,
        priority=priority,
        max_attempts=max_attempts,
    )
    spec = build_job_spec(base, flags)
    dropped_note(session.output, dropped)
    job = session.client.create_job(spec, idempotency_key=idempotency_key)
    show_answer(session.output, as_json(job))


# --- list, get ----------------------------------------------------------------------------------------------
@app.command(
    "list",
    epilog=examples(
        "tickwork jobs list --status paused",
        "tickwork jobs list --all -o wide",
        "tickwork jobs list --all -o json | jq -r '.items[].name'",
    ),
)
@command
def list_jobs(
    ctx: typer.Context,
    status: Annotated[
        JobStatus | None,
        typer.Option(case_sensitive=False, show_default=False, help="only jobs in this status"),
    ] = None,
    limit: LimitOption = None,
    cursor: CursorOption = None,
    every: AllOption = False,
    output: OutputOption = None,
) -> None:
    """List the tenant's jobs, newest first.

    One page at a time, or every page with --all."""
    session = Session(ctx, output)
    page_size = limit if limit is not None else (100 if every else None)
    page = session.client.list_jobs(status=status, limit=page_size, cursor=cursor)
    items = list(page.items)
    next_cursor = page.next_cursor
    if every:
        with session.output.progress("listing jobs") as advance:
            advance(len(items))
            seen: set[str] = set()
            while next_cursor and next_cursor not in seen:  # a cursor that came back would loop forever
                seen.add(next_cursor)
                page = session.client.list_jobs(status=status, limit=page_size, cursor=next_cursor)
                items += page.items
                advance(len(page.items))
                next_cursor = page.next_cursor
        next_cursor = None
    show_page(session.output, items, next_cursor, show_jobs, "jobs")


@app.command(
    "get",
    epilog=examples(
        "tickwork jobs get nightly-report",
        "tickwork jobs get 01JGZ4M8Q3V5XKQ1T7B2N6C9DE -o yaml",
    ),
)
@command
def get(ctx: typer.Context, job: JobArgument, output: OutputOption = None) -> None:
    """Show one job, its next fire time and its last run."""
    session = Session(ctx, output)
    show_answer(session.output, as_json(session.job(job)))


# --- update -------------------------------------------------------------------------------------------------
@app.command(
    "update",
    epilog=examples(
        'tickwork jobs update nightly-report --cron "30 2 * * *" --timezone Europe/Paris',
        "tickwork jobs update nightly-report --payload '{\"full\": true}' --max-attempts 3",
        "tickwork jobs update reminder --at 2026-12-01T09:00:00Z",
        "tickwork jobs update hello --url https://example.com/v2 --header X-Team=ops --tag team=ops",
    ),
)
@command
def update(
    ctx: typer.Context,
    job: JobArgument,
    name: Annotated[str | None, typer.Option(show_default=False, help="rename the job")] = None,
    at: AtOption = None,
    cron: CronOption = None,
    rate: RateOption = None,
    timezone: TimezoneOption = None,
    exclude_holidays: ExcludeHolidaysOption = None,
    exclude_date: ExcludeDateOption = None,
    exclude_window: ExcludeWindowOption = None,
    no_exclusions: Annotated[
        bool,
        typer.Option("--no-exclusions", rich_help_panel="Schedule", help="remove every exclusion"),
    ] = False,
    start_at: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            show_default=False,
            rich_help_panel="Schedule",
            help="no fire before this RFC 3339 time (none: no bound)",
        ),
    ] = None,
    end_at: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            show_default=False,
            rich_help_panel="Schedule",
            help="no fire after this RFC 3339 time (none: no bound)",
        ),
    ] = None,
    jitter: JitterOption = None,
    url: UrlOption = None,
    target_json: TargetJsonOption = None,
    method: MethodOption = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=VALUE",
            show_default=False,
            rich_help_panel="Target (one of --url, --target-json)",
            help="set a header of the webhook; repeatable",
        ),
    ] = None,
    remove_header: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            show_default=False,
            rich_help_panel="Target (one of --url, --target-json)",
            help="remove a header of the webhook; repeatable",
        ),
    ] = None,
    target_timeout: Annotated[
        int | None,
        typer.Option(
            metavar="SECONDS",
            min=1,
            max=900,
            show_default=False,
            rich_help_panel="Target (one of --url, --target-json)",
            help="how long a webhook call may take",
        ),
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            metavar="JSON", show_default=False, help="JSON (or @FILE) handed to the target; null removes it"
        ),
    ] = None,
    description: DescriptionOption = None,
    misfire_policy: MisfireOption = None,
    misfire_grace: Annotated[
        int | None,
        typer.Option(
            metavar="SECONDS",
            min=0,
            show_default=False,
            help="how late a fire may start before the misfire policy decides",
        ),
    ] = None,
    backfill_limit: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, show_default=False, help="most missed fires a backfill runs"),
    ] = None,
    overlap_policy: OverlapOption = None,
    max_concurrent_runs: Annotated[
        int | None,
        typer.Option(
            metavar="N", min=1, show_default=False, help="with --overlap-policy allow: at most N at once"
        ),
    ] = None,
    priority: PriorityOption = None,
    max_attempts: MaxAttemptsOption = None,
    delivery: Annotated[
        Delivery | None, typer.Option(show_default=False, help="at_least_once (default) or at_most_once")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", show_default=False, help="set a tag; repeatable"),
    ] = None,
    remove_tag: Annotated[
        list[str] | None, typer.Option(metavar="KEY", show_default=False, help="remove a tag; repeatable")
    ] = None,
    if_version: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=1,
            show_default=False,
            help="change the job only if it is still at this version (else a conflict, exit 1)",
        ),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Change some fields of a job and keep the others.

    A PATCH /v1/jobs/{id}: a new schedule of the same type keeps the old one's other fields (--cron keeps
    the time zone), and the next fire is recomputed. A completed job given a schedule that fires again (a new
    --at) is ACTIVE again; a cancelled job cannot be changed."""
    session = Session(ctx, output)
    patch: dict[str, Any] = {}
    if name is not None:
        patch["name"] = name
    flags = ScheduleFlags(at, cron, rate, None, exclude_holidays, exclude_date, exclude_window)
    schedule: dict[str, Any] = flags.schedule() or {}
    if timezone is not None:
        if at is not None or rate is not None:
            raise UsageError("--timezone applies to cron schedules, not --at or --rate")
        schedule["timezone"] = timezone
    exclude = flags.exclusions()
    if exclude is not None and no_exclusions:
        raise UsageError("give --exclude-* or --no-exclusions, not both")
    if exclude is not None:
        schedule["exclude"] = exclude
    elif no_exclusions:
        schedule["exclude"] = None
    for key, given in (("start_at", start_at), ("end_at", end_at)):
        if given is not None:
            schedule[key] = None if given.lower() == "none" else parse_when(given)
    if schedule:
        patch["schedule"] = schedule
    if url is not None and target_json is not None:
        raise UsageError("give one of --url or --target-json, not both")
    target: dict[str, Any] = {}
    if target_json is not None:
        given_target = parse_json_value(target_json, "--target-json")
        if not isinstance(given_target, dict):
            raise UsageError('--target-json must be a JSON object like {"type": "sqs", "queue_url": "..."}')
        target.update(given_target)
    if url is not None:
        target.update({"type": "http", "url": url})
    if method is not None:
        target["method"] = method
    headers: dict[str, str | None] = dict(key_value(item) for item in header or [])
    headers.update(dict.fromkeys(remove_header or []))
    if headers:
        target["headers"] = headers
    if target_timeout is not None:
        target["timeout_seconds"] = target_timeout
    if target:
        patch["target"] = target
    if payload is not None:
        patch["payload"] = parse_json_value(payload, "--payload")
    simple = {
        "description": description,
        "misfire_policy": misfire_policy,
        "misfire_grace_seconds": misfire_grace,
        "backfill_limit": backfill_limit,
        "overlap_policy": overlap_policy,
        "max_concurrent_runs": max_concurrent_runs,
        "jitter_seconds": jitter,
        "priority": priority,
        "delivery": delivery,
    }
    patch.update({key: value for key, value in simple.items() if value is not None})
    if max_attempts is not None:
        patch["retry"] = {"max_attempts": max_attempts}
    tags: dict[str, str | None] = dict(key_value(item) for item in tag or [])
    tags.update(dict.fromkeys(remove_tag or []))
    if tags:
        patch["tags"] = tags
    if not patch:
        raise UsageError("nothing to change: give at least one field to update (see --help)")
    try:
        if remove_tag:  # the tags to keep come from the job as it is
            updated = patch_job(session, session.job(job), patch, version=if_version)
        else:
            updated = session.on_job(
                job, lambda job_id: session.client.update_job(job_id, patch, version=if_version)
            )
    except Exception as error:
        failure = translated(error)
        if failure is not None and failure.problem.code == "invalid_state":
            failure.hint = (
                "a cancelled job keeps its spec, and a completed one takes a change only with a schedule"
                " that fires again (a new --at): otherwise create a new job (cancelling a completed one"
                " frees its name)"
            )
        raise failure or error from None
    show_answer(session.output, as_json(updated))


def patch_job(session: Session, job: JobOut, patch: dict[str, Any], *, version: int | None) -> JobOut:
    """PATCH the job. A tag to remove (``null`` in ``patch["tags"]``) takes two requests: the API's patch
    takes no ``null`` inside ``tags``, only ``tags: null`` to clear them all, so the tags are cleared, then
    the rest of the patch sets the tags to keep, each request pinned to the version the last one left."""
    tags = patch.get("tags")
    if not (isinstance(tags, dict) and None in tags.values()):
        return session.client.update_job(job.job_id, patch, version=version)
    kept = {key: value for key, value in {**job.tags, **tags}.items() if value is not None}
    cleared = session.client.update_job(
        job.job_id, {"tags": None}, version=job.version if version is None else version
    )
    rest = {key: value for key, value in patch.items() if key != "tags"}
    if kept:
        rest["tags"] = kept
    return session.client.update_job(job.job_id, rest, version=cleared.version) if rest else cleared


# --- pause, resume, cancel ----------------------------------------------------------------------------------
@app.command(
    "pause",
    epilog=examples(
        'tickwork jobs pause nightly-report --reason "warehouse migration"',
    ),
)
@command
def pause(
    ctx: typer.Context,
    job: JobArgument,
    reason: Annotated[
        str | None,
        typer.Option(show_default=False, help="why it is paused; stored with the time and who paused it"),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Pause a job: no fire runs until it is resumed, not even one already queued."""
    session = Session(ctx, output)
    paused = session.on_job(job, lambda job_id: session.client.pause_job(job_id, reason=reason))
    because = f": {text(reason)}" if reason else ""
    summary = f"paused job {paused.job_id} ({text(paused.name)}){because}"
    show_answer(session.output, as_json(paused), summary)


@app.command(
    "resume",
    epilog=examples(
        "tickwork jobs resume nightly-report",
    ),
)
@command
def resume(ctx: typer.Context, job: JobArgument, output: OutputOption = None) -> None:
    """Resume a paused job.

    Fires missed while it was paused follow the job's misfire policy; to resume otherwise, change it first
    (jobs update --misfire-policy)."""
    session = Session(ctx, output)
    resumed = session.on_job(job, session.client.resume_job)
    next_fire = text(as_json(resumed)["next_fire_at"])
    summary = f"resumed job {resumed.job_id} ({text(resumed.name)}); next fire at {next_fire}"
    show_answer(session.output, as_json(resumed), summary)


@app.command(
    "cancel",
    epilog=examples(
        "tickwork jobs cancel nightly-report",
        "tickwork jobs cancel old-job --yes",
    ),
)
@command
def cancel(ctx: typer.Context, job: JobArgument, yes: YesOption = False, output: OutputOption = None) -> None:
    """Cancel a job for good.

    Its planned runs become CANCELLED, a running attempt finishes, and its name is free again. Asks first,
    unless --yes; without a terminal to ask on, --yes is needed."""
    session = Session(ctx, output)
    found = session.job(job)
    if not yes:
        confirm(f"cancel job {found.job_id} ({text(found.name)}) for good?")
    cancelled = session.client.cancel_job(found.job_id)
    show_answer(
        session.output, as_json(cancelled), f"cancelled job {cancelled.job_id} ({text(cancelled.name)})"
    )


def confirm(question: str) -> None:
    """Ask on the terminal; without one, refuse (exit 2) and say to add --yes."""
    if not sys.stdin.isatty():
        raise UsageError(f"{question} Add --yes to confirm: there is no terminal to ask on")
    if not typer.confirm(question, default=False, err=True):
        raise CliError("nothing was changed", code="cancelled")


# --- trigger, runs ------------------------------------------------------------------------------------------
@app.command(
    "trigger",
    epilog=examples(
        "tickwork jobs trigger nightly-report --idempotency-key deploy-42",
        "tickwork jobs trigger nightly-report --wait --wait-timeout 10m",
        before="Exit codes with --wait: 0 SUCCEEDED, 4 FAILED, 5 DEAD, 6 ABANDONED, MISSED, SKIPPED or"
        " CANCELLED, 7 still running when --wait-timeout ran out (and 1 the API refused, 2 usage, 3"
        " unreachable).",
    ),
)
@command
def trigger(
    ctx: typer.Context,
    job: JobArgument,
    idempotency_key: IdempotencyKeyOption = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="wait for the run to end; the exit code says how it ended")
    ] = False,
    wait_timeout: Annotated[
        int,
        typer.Option(
            metavar="DURATION",
            parser=parse_duration,
            help="with --wait: give up after this long (default 10m)",
        ),
    ] = 600,
    interval: Annotated[
        float,
        typer.Option(metavar="SECONDS", parser=positive_float, help="with --wait: seconds between checks"),
    ] = 1.0,
    output: OutputOption = None,
) -> None:
    """Run a job now, outside its schedule.

    The same --idempotency-key always gives the same run. With --wait, follow the run until it ends and exit
    with a code that says how (see below)."""
    session = Session(ctx, output)
    client = session.client
    run = session.on_job(job, lambda job_id: client.trigger_job(job_id, idempotency_key=idempotency_key))
    if not wait:
        summary = (
            f"triggered job {run.job_id}: run {run.run_id} is {run.status}, scheduled for"
            f" {text(as_json(run)['scheduled_for'])}"
        )
        show_answer(session.output, as_json(run), summary)
        return
    from tickwork.domain.models import TERMINAL_RUN_STATUSES

    deadline = time.monotonic() + wait_timeout
    with session.output.spinner(f"run {run.run_id}: {run.status}") as update:
        while run.status not in TERMINAL_RUN_STATUSES and time.monotonic() < deadline:
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            run = client.get_run(run.run_id)
            update(f"run {run.run_id}: {run.status} (attempt {run.attempt})")
    document = as_json(run)
    if session.output.machine:
        session.output.document(document)
    else:
        show_run(session.output, document, definition=session.workflow_of(document))
    if run.status not in TERMINAL_RUN_STATUSES:
        session.output.note(f"run {run.run_id} is still {run.status} after {wait_timeout} s; stopped waiting")
        raise typer.Exit(EXIT_WAIT_TIMEOUT)
    raise typer.Exit(WAIT_EXIT_CODES.get(str(run.status), EXIT_RUN_NOT_RUN))


@app.command(
    "runs",
    epilog=examples(
        "tickwork jobs runs nightly-report --limit 20",
        "tickwork jobs runs nightly-report --all -o wide",
    ),
)
@command
def runs(
    ctx: typer.Context,
    job: JobArgument,
    limit: LimitOption = None,
    cursor: CursorOption = None,
    every: AllOption = False,
    output: OutputOption = None,
) -> None:
    """List a job's run history, newest first.

    Fires waiting in the queue are included. One page at a time, or every page with --all."""
    session = Session(ctx, output)
    client = session.client
    page_size = limit if limit is not None else (100 if every else None)
    page = session.on_job(job, lambda job_id: client.list_runs(job_id, limit=page_size, cursor=cursor))
    items = list(page.items)
    next_cursor = page.next_cursor
    if every and items:
        job_id = items[0].job_id
        seen: set[str] = set()
        with session.output.progress("listing runs") as advance:
            advance(len(items))
            while next_cursor and next_cursor not in seen:
                seen.add(next_cursor)
                page = client.list_runs(job_id, limit=page_size, cursor=next_cursor)
                items += page.items
                advance(len(page.items))
                next_cursor = page.next_cursor
    if every:
        next_cursor = None
    show_page(session.output, items, next_cursor, show_runs, "runs")


# --- export -------------------------------------------------------------------------------------------------
def export_jobs(session: Session, jobs: list[str], every: bool, status: str | None) -> None:
    if bool(jobs) == every:
        raise UsageError("name the jobs to export, or give --all")
    if jobs:
        found = [session.job(ref) for ref in jobs]
    else:
        with session.output.progress("reading jobs") as advance:
            found = []
            for item in session.iter_jobs(status):
                advance(1)
                if item.status != "CANCELLED" or status == "CANCELLED":
                    found.append(item)
    documents = [exported(job) for job in found]
    session.output.format = Format.JSON if session.output.format is Format.JSON else Format.YAML
    if len(documents) == 1 and not every:
        session.output.document(documents[0])
    else:
        session.output.documents(documents)


ExportOutput = Annotated[
    Format | None,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        show_default=False,
        help="yaml (the default) or json",
    ),
]
ExportStatus = Annotated[
    JobStatus | None,
    typer.Option(case_sensitive=False, show_default=False, help="with --all: only jobs in this status"),
]
EXPORT_EPILOG = examples(
    "tickwork jobs export nightly-report > nightly-report.yaml",
    "tickwork jobs export nightly-report -o yaml | tickwork apply -f -",
    "tickwork jobs export --all > jobs.yaml",
)


@app.command("export", epilog=EXPORT_EPILOG)
@command
def export(
    ctx: typer.Context,
    jobs: Annotated[
        list[str] | None,
        typer.Argument(metavar="[JOB]...", show_default=False, help="the jobs' ids or names"),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="every job that is not cancelled")] = False,
    status: ExportStatus = None,
    output: ExportOutput = None,
) -> None:
    """Print jobs as specs that tickwork apply takes back.

    Only the fields a user sets are printed: no id, status, timestamps or next fire time, and no field left
    at its default. One job is one document; several are YAML documents, or a JSON list."""
    export_jobs(Session(ctx, output), list(jobs or []), every, status)
