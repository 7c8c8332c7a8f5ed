"""`tickwork apply` (create or update jobs from specs, by name) and `tickwork export` (the specs it takes)."""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwork_local.cli.errors import EXIT_FAILED, CliError, UsageError, translated
from tickwork_local.cli.jobs import EXPORT_EPILOG, ExportOutput, ExportStatus, as_json, export_jobs, patch_job
from tickwork_local.cli.options import OutputOption, examples
from tickwork_local.cli.output import Output, dump_yaml
from tickwork_local.cli.session import Session, command
from tickwork_local.cli.specs import (
    exported,
    job_documents,
    merge_diff,
    normalised,
    parse_documents,
    read_text,
    spec_of,
    user_fields,
    without_read_only,
)

if TYPE_CHECKING:
    from tickwork.api.schemas import JobOut

APPLY_EPILOG = examples(
    "tickwork apply -f jobs.yaml",
    "tickwork apply -f jobs.yaml --dry-run",
    "tickwork jobs export nightly-report -o yaml | tickwork apply -f -",
    before="A spec is the body of POST /v1/jobs; a field left out takes its default, so applying a spec sets"
    " the whole job. Exit code 1 if any spec was refused (the others are still applied).",
)


@dataclass
class Outcome:
    name: str
    action: str  # created, updated, unchanged, failed
    job: dict[str, Any] | None = None
    changes: list[str] = field(default_factory=list)
    patch: dict[str, Any] | None = None
    error: str | None = None

    def document(self, dry_run: bool) -> dict[str, Any]:
        document: dict[str, Any] = {"name": self.name, "action": self.action, "changes": self.changes}
        if dry_run:
            document["patch"] = self.patch
        else:
            document["job"] = self.job
        if self.error:
            document["error"] = self.error
        return document


def read_specs(files: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every job spec in the files, without read-only fields; and the names of those left out."""
    specs: list[dict[str, Any]] = []
    dropped: set[str] = set()
    for path in files:
        source = "stdin" if path == "-" else path
        for number, document in enumerate(
            job_documents(parse_documents(read_text(path, "-f"), path, "-f"), source)
        ):
            spec, left_out = without_read_only(document)
            dropped.update(left_out)
            if not isinstance(spec.get("name"), str):
                raise UsageError(f"{source}: job spec {number + 1} has no name: apply finds jobs by name")
            specs.append(spec)
    if not specs:
        raise UsageError(f"no job spec in {', '.join(files)}")
    twice = [name for name, times in Counter(spec["name"] for spec in specs).items() if times > 1]
    if twice:
        raise UsageError(f"more than one spec names {', '.join(map(repr, twice))}: each job once")
    return specs, sorted(dropped)


def diff_lines(name: str, current: dict[str, Any] | None, desired: dict[str, Any]) -> list[str]:
    before = dump_yaml([current]).splitlines() if current is not None else []
    after = dump_yaml([desired]).splitlines()
    return list(
        difflib.unified_diff(
            before,
            after,
            fromfile=f"{name} (current)" if current is not None else "/dev/null",
            tofile=f"{name} (applied)",
            lineterm="",
        )
    )


def apply_one(session: Session, spec: dict[str, Any], current: JobOut | None, dry_run: bool) -> Outcome:
    name = spec["name"]
    desired = normalised(spec)
    wanted = user_fields(desired, desired.model_dump(mode="json"))
    output = session.output
    if current is None:
        if dry_run:
            if not output.machine:
                output.line(f"job {name} would be created")
                output.diff(diff_lines(name, None, wanted))
            return Outcome(name, "created", changes=list(wanted), patch=spec)
        job = session.client.create_job(spec)
        if not output.machine:
            output.line(f"job {name} created ({job.job_id})")
        return Outcome(name, "created", as_json(job), list(wanted))
    patch = merge_diff(spec_of(current), desired.model_dump(mode="json"))
    if not patch:
        if not output.machine:
            output.line(f"job {name} unchanged")
        return Outcome(name, "unchanged", as_json(current), patch={} if dry_run else None)
    changes = list(patch)
    if dry_run:
        if not output.machine:
            output.line(f"job {name} would be updated: {', '.join(changes)}")
            output.diff(diff_lines(name, exported(current), wanted))
            if current.status == "COMPLETED":
                output.note(
                    f"note: job {name} is COMPLETED: the API takes the change only if its schedule fires"
                    " again, and then the job is ACTIVE again"
                )
        return Outcome(name, "updated", changes=changes, patch=patch)
    try:
        job = patch_job(session, current, patch, version=current.version)
    except Exception as error:
        failure = translated(error)
        if failure is not None and current.status == "COMPLETED":
            failure.hint = (
                f"job {name} is COMPLETED: give it a schedule that fires again (a new at, a later end_at), or"
                f" `tickwork jobs cancel {current.job_id}` to free the name and apply again to create it anew"
            )
        raise failure or error from None
    if not output.machine:
        output.line(f"job {name} updated: {', '.join(changes)}")
    return Outcome(name, "updated", as_json(job), changes)


def apply(
    ctx: typer.Context,
    files: Annotated[
        list[str],
        typer.Option(
            "--file",
            "-f",
            metavar="FILE",
            show_default=False,
            help="job specs in JSON or YAML: several YAML documents, a list, or one spec; - reads stdin;"
            " repeatable",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="show what would change, as a diff, and change nothing")
    ] = False,
    output: OutputOption = None,
) -> None:
    """Create or update jobs from JSON or YAML specs, by name.

    A spec whose job does not exist is created, one that differs from its job updates it, and one that
    matches is left as it is (unchanged)."""
    session = Session(ctx, output)
    specs, dropped = read_specs(files)
    if dropped:
        session.output.note(f"note: left out fields the API sets itself: {', '.join(dropped)}")
    existing = {job.name: job for job in session.iter_jobs() if job.status != "CANCELLED"}
    outcomes: list[Outcome] = []
    with session.output.progress("applying", total=len(specs) if len(specs) > 1 else None) as advance:
        for spec in specs:
            try:
                outcomes.append(apply_one(session, spec, existing.get(spec["name"]), dry_run))
            except Exception as error:
                failure = translated(error)
                if failure is None:
                    raise
                failed = CliError(
                    f"job {spec['name']}: {failure.problem.message}",
                    code=failure.problem.code,
                    field=failure.problem.field,
                    details=failure.details,
                    hint=failure.hint,
                )
                session.output.error(failed)
                outcomes.append(Outcome(spec["name"], "failed", error=failed.problem.text()))
            advance(1)
    report(session.output, outcomes, dry_run)
    if any(outcome.action == "failed" for outcome in outcomes):
        raise typer.Exit(EXIT_FAILED)


def report(output: Output, outcomes: list[Outcome], dry_run: bool) -> None:
    if output.machine:
        output.document([outcome.document(dry_run) for outcome in outcomes])
        return
    counts = Counter(outcome.action for outcome in outcomes)
    if dry_run:
        words = [
            f"{counts['created']} to create",
            f"{counts['updated']} to update",
            f"{counts['unchanged']} unchanged",
        ]
        if counts["failed"]:
            words.append(f"{counts['failed']} refused")
        output.line(f"dry run: {', '.join(words)}; nothing was changed")
    else:
        words = [f"{counts[action]} {action}" for action in ("created", "updated", "unchanged", "failed")]
        output.line(f"applied {len(outcomes)} spec{'s' if len(outcomes) != 1 else ''}: {', '.join(words)}")


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

    The same as tickwork jobs export."""
    export_jobs(Session(ctx, output), list(jobs or []), every, status)


def register(app: typer.Typer) -> None:
    app.command("apply", epilog=APPLY_EPILOG, rich_help_panel="Jobs as code")(command(apply))
    app.command("export", epilog=EXPORT_EPILOG, rich_help_panel="Jobs as code")(command(export))
