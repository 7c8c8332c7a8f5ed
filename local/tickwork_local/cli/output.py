"""How the CLI prints: Rich tables and colours on a terminal, plain aligned text when stdout is a pipe or a
file, and the API's own objects as JSON or YAML with ``-o json|yaml``.

- Colour only on a terminal, and never with ``NO_COLOR`` set (https://no-color.org).
- Plain text never wraps, so a line of a table stays one line for ``grep`` and ``awk``.
- JSON and YAML carry no colour and no decoration: they are for scripts.
- Notes, hints, progress and errors go to stderr; stdout holds only the answer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tickwork_local.cli.errors import CliError, clean

if TYPE_CHECKING:
    from rich.console import Console


class Format(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"


# A table cell: its text, or its text and a Rich style (shown only on a colour terminal).
Cell = str | tuple[str, str]

STATUS_STYLES = {
    # jobs
    "ACTIVE": "green",
    "PAUSED": "yellow",
    "COMPLETED": "blue",
    # runs
    "PLANNED": "blue",
    "ENQUEUED": "blue",
    "RUNNING": "cyan",
    "RETRY_WAIT": "yellow",
    "SUCCEEDED": "green",
    "FAILED": "red",
    "DEAD": "bold red",
    "ABANDONED": "red",
    "MISSED": "magenta",
    "SKIPPED": "dim",
    "CANCELLED": "dim",
}


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def make_console(*, stderr: bool) -> Console:
    """A Rich console on stdout (or stderr), whichever stream that is when it writes (a test runner's, or
    a progress bar's proxy)."""
    from rich.console import Console

    # No colour system at all under NO_COLOR: not even bold or dim escape codes. Data is printed as it is:
    # no Rich markup ("[bold]") and no emoji codes (the ":m:" of a manual run's id is not "Ⓜ").
    return Console(
        stderr=stderr,
        highlight=False,
        markup=False,
        emoji=False,
        color_system=None if no_color() else "auto",
    )


def text(value: Any) -> str:
    """A value as one line of text: ``-`` for nothing, JSON for lists and objects."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, int | float):
        return str(value)
    return clean(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def status(value: Any) -> Cell:
    shown = text(value)
    return (shown, STATUS_STYLES.get(shown, ""))


def plain(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    cells = [[plain(cell) for cell in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *cells]
    ]
    return "\n".join(lines)


def plain_fields(pairs: Sequence[tuple[str, Cell]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {plain(value) or '-'}".rstrip() for name, value in pairs)


@dataclass(frozen=True)
class Branch:
    """A line of a tree and the lines nested under it."""

    label: Cell
    children: tuple[Branch, ...] = ()


def plain_tree(root: Branch) -> str:
    """The tree as text lines with ``├──`` and ``└──`` guides, as Rich draws it."""
    lines = [plain(root.label)]

    def walk(branch: Branch, indent: str) -> None:
        for index, child in enumerate(branch.children):
            last = index == len(branch.children) - 1
            lines.append(f"{indent}{'└── ' if last else '├── '}{plain(child.label)}")
            walk(child, indent + ("    " if last else "│   "))

    walk(root, "")
    return "\n".join(lines)


def dump(document: Any, format: Format) -> str:
    """The document as JSON or YAML text, ending with a newline."""
    if format is Format.YAML:
        return dump_yaml([document])
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def dump_yaml(documents: Sequence[Any]) -> str:
    import yaml

    return str(
        yaml.safe_dump_all(
            documents, sort_keys=False, allow_unicode=True, default_flow_style=False, explicit_start=None
        )
    )


class Output:
    """Where a command's answer goes, and in which form."""

    def __init__(self, format: Format):
        self.format = format

    @cached_property
    def out(self) -> Console:
        return make_console(stderr=False)

    @cached_property
    def err(self) -> Console:
        return make_console(stderr=True)

    @property
    def machine(self) -> bool:
        """JSON or YAML: the API's objects, for scripts."""
        return self.format in (Format.JSON, Format.YAML)

    @property
    def wide(self) -> bool:
        return self.format is Format.WIDE

    @property
    def terminal(self) -> bool:
        return self.out.is_terminal

    # --- answers (stdout) -----------------------------------------------------------------------------------
    def document(self, document: Any) -> None:
        """The API's object (or a list of them) as JSON or YAML."""
        sys.stdout.write(dump(document, Format.YAML if self.format is Format.YAML else Format.JSON))
        sys.stdout.flush()

    def documents(self, documents: Sequence[Any]) -> None:
        """Several objects: one YAML document each, or a JSON list."""
        if self.format is Format.YAML:
            sys.stdout.write(dump_yaml(documents))
        else:
            sys.stdout.write(json.dumps(list(documents), indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Cell]], *, empty: str) -> None:
        if not rows:
            self.line(empty)
            return
        if not self.terminal:
            self.line(plain_table(headers, rows))
            return
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
        for header in headers:
            table.add_column(header, overflow="fold")
        for row in rows:
            table.add_row(*(Text(cell) if isinstance(cell, str) else Text(*cell) for cell in row))
        self.out.print(table)

    def fields(self, pairs: Sequence[tuple[str, Cell]]) -> None:
        """An object as aligned ``name  value`` lines."""
        if not self.terminal:
            self.line(plain_fields(pairs))
            return
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in pairs:
            cell = Text(value or "-") if isinstance(value, str) else Text(value[0] or "-", value[1])
            grid.add_row(name, cell)
        self.out.print(grid)

    def tree(self, root: Branch) -> None:
        if not self.terminal:
            self.line(plain_tree(root))
            return
        from rich.text import Text
        from rich.tree import Tree

        def grow(node: Tree, branch: Branch) -> None:
            for child in branch.children:
                label = Text(child.label) if isinstance(child.label, str) else Text(*child.label)
                grow(node.add(label), child)

        top = Tree(Text(root.label) if isinstance(root.label, str) else Text(*root.label), guide_style="dim")
        grow(top, root)
        self.out.print(top)

    def line(self, message: str = "", style: str | None = None) -> None:
        if self.terminal and style:
            self.out.print(message, style=style, markup=False, emoji=False, soft_wrap=True)
        else:
            sys.stdout.write(message + "\n")
            sys.stdout.flush()

    def event(self, cells: Sequence[Cell]) -> None:
        """One line made of cells, two spaces apart (``runs watch``)."""
        if not self.terminal:
            self.line("  ".join(plain(cell) for cell in cells))
            return
        from rich.text import Text

        line = Text()
        for index, cell in enumerate(cells):
            if index:
                line.append("  ")
            line.append(*((cell,) if isinstance(cell, str) else cell))
        self.out.print(line, soft_wrap=True)

    def diff(self, lines: Sequence[str]) -> None:
        """A unified diff, its added lines green and removed ones red on a colour terminal."""
        for line in lines:
            style = None
            if line.startswith(("+++", "---")):
                style = "bold"
            elif line.startswith("+"):
                style = "green"
            elif line.startswith("-"):
                style = "red"
            elif line.startswith("@@"):
                style = "cyan"
            self.line(line, style)

    # --- around the answer (stderr) -------------------------------------------------------------------------
    def note(self, message: str) -> None:
        """A hint or a remark: on stderr, so that stdout holds only the answer."""
        self.err.print(message, style="dim", markup=False, emoji=False, highlight=False, soft_wrap=True)

    def error(self, error: CliError) -> None:
        for line in error.lines():
            self.err.print(line, style="red", markup=False, emoji=False, highlight=False, soft_wrap=True)

    @contextmanager
    def progress(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """A Rich progress bar on stderr while the block runs, on a terminal only; yields ``advance(n)``."""
        if not self.err.is_terminal:
            yield _ignore
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        counter = MofNCompleteColumn() if total is not None else TextColumn("{task.completed}")
        columns = [
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            counter,
            TimeElapsedColumn(),
        ]
        # What the command prints meanwhile goes above the bar when stdout is the terminal too; when it is a
        # pipe or a file, it goes there untouched.
        redirect = self.out.is_terminal
        with Progress(
            *columns, console=self.err, transient=True, redirect_stdout=redirect, redirect_stderr=False
        ) as progress:
            task = progress.add_task(description, total=total)

            def advance(count: int) -> None:
                progress.advance(task, count)

            yield advance

    @contextmanager
    def spinner(self, message: str) -> Iterator[Callable[[str], None]]:
        """A Rich spinner on stderr while the block runs, on a terminal only; yields ``update(message)``."""
        if not self.err.is_terminal:
            yield _ignore
            return
        from rich.text import Text

        # A spinner reads a string as markup with emoji codes: its text is given as Text, taken literally.
        with self.err.status(Text(message)) as shown:

            def update(message: str) -> None:
                shown.update(Text(message))

            yield update


def _ignore(value: Any) -> None:
    """What ``progress`` and ``spinner`` yield when there is no terminal to show them on."""


# --- what objects look like ---------------------------------------------------------------------------------
def format_seconds(total: int) -> str:
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def schedule_summary(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return text(schedule)
    kind = schedule.get("type")
    if kind == "once":
        return f"once at {text(schedule.get('at'))}"
    if kind == "cron":
        return f'cron "{text(schedule.get("expression"))}" {text(schedule.get("timezone") or "UTC")}'
    if kind == "rate":
        every = schedule.get("every_seconds")
        return f"every {format_seconds(every)}" if isinstance(every, int) else "rate"
    return text(kind)


def target_summary(target: Any) -> str:
    if not isinstance(target, dict):
        return text(target)
    from tickwork.targets.registry import kind_for  # only a listing of targets needs the kinds

    kind = target.get("type")
    try:
        described = kind_for(kind) if isinstance(kind, str) else None
    except KeyError:
        described = None  # a kind this CLI does not know: the server may have more
    return described.summary(target, text) if described else text(kind)


def last_error(run: Mapping[str, Any]) -> str:
    """The error of the run's latest attempt that had one."""
    for attempt in reversed([a for a in run.get("attempts") or [] if isinstance(a, dict)]):
        if attempt.get("error_code"):
            message = text(attempt.get("error_code"))
            if attempt.get("error_message"):
                message += ": " + text(attempt.get("error_message"))[:100]
            return message
    return text(run.get("reason"))


def show_jobs(output: Output, jobs: Sequence[Mapping[str, Any]]) -> None:
    headers = ["ID", "NAME", "STATUS", "SCHEDULE", "NEXT_FIRE_AT"]
    if output.wide:
        headers += ["TARGET", "LAST_RUN", "DESCRIPTION"]
    rows: list[list[Cell]] = []
    for job in jobs:
        row: list[Cell] = [
            text(job.get("job_id")),
            text(job.get("name")),
            status(job.get("status")),
            schedule_summary(job.get("schedule")),
            text(job.get("next_fire_at")),
        ]
        if output.wide:
            last_run = job.get("last_run")
            row += [
                target_summary(job.get("target")),
                status(last_run.get("status")) if isinstance(last_run, dict) else "-",
                text(job.get("description")),
            ]
        rows.append(row)
    output.table(headers, rows, empty="no jobs")


def show_runs(
    output: Output, runs: Sequence[Mapping[str, Any]], names: Mapping[str, str | None] | None = None
) -> None:
    """Runs as a table; with ``names`` (job names by id), each run's job name beside its id."""
    headers = [
        "RUN_ID",
        *(["JOB"] if names is not None else []),
        "SCHEDULED_FOR",
        "STATUS",
        "ATTEMPT",
        "LAG_MS",
    ]
    if output.wide:
        headers += ["TRIGGER", "STARTED_AT", "FINISHED_AT", "ERROR"]
    rows: list[list[Cell]] = []
    for run in runs:
        row: list[Cell] = [
            text(run.get("run_id")),
            *([text(names.get(str(run.get("job_id"))))] if names is not None else []),
            text(run.get("scheduled_for")),
            status(run.get("status")),
            text(run.get("attempt")),
            text(run.get("lag_ms")),
        ]
        if output.wide:
            row += [
                text(run.get("trigger")),
                text(run.get("started_at")),
                text(run.get("finished_at")),
                last_error(run),
            ]
        rows.append(row)
    output.table(headers, rows, empty="no runs")


def show_job(output: Output, job: Mapping[str, Any]) -> None:
    state = job.get("status")
    shown_status: Cell = status(state)
    pause = job.get("pause")
    if isinstance(pause, dict):
        detail = f" (paused at {text(pause.get('paused_at'))} by {text(pause.get('paused_by'))}"
        detail += f": {text(pause.get('reason'))})" if pause.get("reason") else ")"
        shown_status = (text(state) + detail, STATUS_STYLES.get(text(state), ""))
    last_run = job.get("last_run")
    last: Cell = "-"
    if isinstance(last_run, dict):
        last = (
            f"{text(last_run.get('run_id'))} {text(last_run.get('status'))}"
            f" (attempt {text(last_run.get('attempt'))}, scheduled for {text(last_run.get('scheduled_for'))})"
        )
    retry = job.get("retry") if isinstance(job.get("retry"), dict) else {}
    assert isinstance(retry, dict)
    tags = job.get("tags") or {}
    pairs: list[tuple[str, Cell]] = [
        ("job_id", text(job.get("job_id"))),
        ("name", text(job.get("name"))),
        ("status", shown_status),
        ("schedule", schedule_summary(job.get("schedule"))),
        ("in words", text(job.get("schedule_description"))),
        ("target", target_summary(job.get("target"))),
        ("next_fire_at", text(job.get("next_fire_at"))),
        ("last_run", last),
        ("misfire", f"{text(job.get('misfire_policy'))} (grace {text(job.get('misfire_grace_seconds'))} s)"),
        ("overlap", text(job.get("overlap_policy"))),
        ("priority", text(job.get("priority", "normal"))),
        ("delivery", text(job.get("delivery"))),
        ("retry", f"up to {text(retry.get('max_attempts'))} attempts" if retry else "-"),
        ("jitter", format_seconds(job["jitter_seconds"]) if job.get("jitter_seconds") else "-"),
        ("concurrency", concurrency_summary(job)),
        ("description", text(job.get("description"))),
        ("payload", text(job.get("payload"))),
        (
            "tags",
            ", ".join(f"{text(k)}={text(v)}" for k, v in tags.items()) if isinstance(tags, dict) else "-",
        ),
        ("version", text(job.get("version"))),
        ("created_at", text(job.get("created_at"))),
        ("updated_at", text(job.get("updated_at"))),
    ]
    if job.get("cancelled_at"):
        pairs.append(("cancelled_at", text(job.get("cancelled_at"))))
    output.fields(pairs)
    target = job.get("target")
    if isinstance(target, dict) and target.get("type") == "workflow":
        output.line()
        output.tree(workflow_tree(target))


# A task waiting for more parents than this names the first few and counts the others.
AFTER_NAMES = 5


def workflow_tree(
    target: Mapping[str, Any], describe: Callable[[str, Mapping[str, Any]], Cell] | None = None
) -> Branch:
    """A workflow's tasks as a tree: each task under the parent of its that comes last in a topological
    order, and a task with several parents says which it waits for. Each task appears once.

    Each task's line is ``describe(task_id, task)`` (by default, the task's id and target), followed by its
    trigger rule when not the default and the parents it waits for when several: ``jobs get`` and ``runs
    get`` draw the same tree, one with the definition's targets, the other with each task's run."""
    tasks = [task for task in target.get("tasks") or [] if isinstance(task, dict)]
    by_id = {text(task.get("id")): task for task in tasks}
    parents = {
        task_id: [text(parent) for parent in task.get("depends_on") or [] if text(parent) in by_id]
        for task_id, task in by_id.items()
    }
    order = _topological(parents)
    position = {task_id: index for index, task_id in enumerate(order)}
    nested: dict[str | None, list[str]] = {}
    for task_id in order:
        placed = [parent for parent in parents[task_id] if parent in position]
        under = max(placed, key=position.__getitem__) if placed else None
        nested.setdefault(under, []).append(task_id)
    label_of = describe or _task_target

    def branch(task_id: str) -> Branch:
        shown = label_of(task_id, by_id[task_id])
        label, style = (shown, "") if isinstance(shown, str) else shown
        rule = by_id[task_id].get("trigger_rule")
        if rule and rule != "all_success":
            label += f"  [{text(rule)}]"
        if len(parents[task_id]) > 1:
            named = ", ".join(parents[task_id][:AFTER_NAMES])
            more = len(parents[task_id]) - AFTER_NAMES
            label += f"  (after {named}{f' and {more} more' if more > 0 else ''})"
        return Branch(
            (label, style) if style else label, tuple(branch(child) for child in nested.get(task_id, []))
        )

    terms = text(target.get("failure_mode") or "fail_fast")
    if target.get("max_parallel"):
        terms += f", at most {text(target.get('max_parallel'))} at once"
    count = len(tasks)
    return Branch(
        f"workflow: {count} task{'' if count == 1 else 's'} ({terms})",
        tuple(branch(root) for root in nested.get(None, [])),
    )


def _task_target(task_id: str, task: Mapping[str, Any]) -> Cell:
    """A task of a workflow's definition: its id and its target."""
    return f"{task_id}  {target_summary(task.get('target'))}"


def workflow_run_tree(definition: Mapping[str, Any], run: Mapping[str, Any]) -> Branch:
    """A workflow run's tasks, drawn as its definition's tree (``workflow_tree``) with each task's run on its
    line: status, attempts, when it started, or how long it took and when it finished, and its last error.
    A task with no run yet is ``waiting`` (``not run`` once the workflow run has ended). A task run whose
    task the definition no longer has (the job changed since) is drawn at the top."""
    from tickwork.domain.models import TERMINAL_RUN_STATUSES  # only a workflow run's tree needs it

    task_runs = {text(task.get("task_id")): task for task in run.get("tasks") or [] if isinstance(task, dict)}
    tasks = [task for task in definition.get("tasks") or [] if isinstance(task, dict)]
    defined = {text(task.get("id")) for task in tasks}
    shown = {
        **definition,
        "tasks": tasks + [{"id": task_id} for task_id in task_runs if task_id not in defined],
    }
    ended = run.get("status") in {str(status) for status in TERMINAL_RUN_STATUSES}

    def describe(task_id: str, task: Mapping[str, Any]) -> Cell:
        return task_run_line(task_id, task_runs.get(task_id), ended=ended)

    return workflow_tree(shown, describe)


def task_run_line(task_id: str, task_run: Mapping[str, Any] | None, *, ended: bool) -> Cell:
    """``extract  SUCCEEDED  1 attempt  took 1.2s (finished ...)``, in its status's colour."""
    if task_run is None:
        return (f"{task_id}  {'not run' if ended else 'waiting'}", "dim")
    state = text(task_run.get("status"))
    count = task_run.get("attempt")
    parts = [task_id, state, f"{text(count)} attempt{'' if count == 1 else 's'}"]
    started, finished = task_run.get("started_at"), task_run.get("finished_at")
    took = duration(started, finished)
    if finished and took is not None:
        parts.append(f"took {took} (finished {text(finished)})")
    elif finished:
        parts.append(f"finished {text(finished)}")
    elif started:
        parts.append(f"started {text(started)}")
    if task_run.get("error_code"):
        parts.append(text(task_run.get("error_code")))
    return ("  ".join(parts), STATUS_STYLES.get(state, ""))


def duration(started: Any, finished: Any) -> str | None:
    """From one RFC 3339 time to another: ``350 ms``, ``4.2s`` or ``3m20s``; None without both."""
    if not isinstance(started, str) or not isinstance(finished, str):
        return None
    try:
        seconds = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return None
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))} ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return format_seconds(round(seconds))


def _topological(parents: Mapping[str, Sequence[str]]) -> list[str]:
    """The tasks, each after its parents, in the order they are defined where free; tasks caught in a loop
    (which the API refuses) come last, in that order."""
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(parents):
        free = [task for task in parents if task not in placed and all(p in placed for p in parents[task])]
        if not free:
            order += [task for task in parents if task not in placed]
            break
        order.append(free[0])
        placed.add(free[0])
    return order


RUN_FIELDS = (
    "run_id",
    "job_id",
    "status",
    "trigger",
    "scheduled_for",
    "attempt",
    "lag_ms",
    "enqueued_at",
    "started_at",
    "finished_at",
    "retry_at",
    "reason",
)


# A checkpoint longer than this is cut in text output; -o json shows it whole.
CHECKPOINT_CHARS = 300


def relative(value: Any, now: datetime) -> str:
    """An RFC 3339 time as ``12s ago`` or ``in 18s``, then the time itself; ``-`` for none."""
    if not isinstance(value, str):
        return text(value)
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return text(value)
    seconds = round((at - now).total_seconds())
    span = format_seconds(abs(seconds))
    return f"{'now' if seconds == 0 else f'in {span}' if seconds > 0 else f'{span} ago'} ({clean(value)})"


def progress_bar(value: Any, width: int = 20) -> str:
    """``[#####...............]  25%``: a pool run's progress, 0 to 1."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return text(value)
    share = min(max(float(value), 0.0), 1.0)
    filled = round(share * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {share * 100:3.0f}%"


def pool_fields(run: Mapping[str, Any], now: datetime) -> list[tuple[str, Cell]]:
    """What a pool run shows besides any run's fields: its progress and stage, who holds its lease and since
    when it last proved alive, when the lease lapses, whether it was asked to stop, and its checkpoint."""
    if not run.get("pool"):
        return []
    running = run.get("status") == "RUNNING"
    heartbeat = run.get("heartbeat_at")
    checkpoint = text(run.get("checkpoint"))
    if len(checkpoint) > CHECKPOINT_CHARS:
        checkpoint = (
            checkpoint[:CHECKPOINT_CHARS] + f"... ({len(checkpoint)} characters; -o json shows it all)"
        )
    return [
        ("pool", text(run.get("pool"))),
        ("progress", progress_bar(run.get("progress"))),
        ("stage", text(run.get("stage"))),
        ("holder", text(run.get("lease_owner")) if running else "-"),
        ("heartbeat", relative(heartbeat, now) if heartbeat else "none yet" if running else "-"),
        ("lease_expires", relative(run.get("lease_expires_at"), now) if running else "-"),
        ("lease_deadline", relative(run.get("lease_deadline"), now) if running else "-"),
        ("cancel_requested", text(run.get("cancel_requested"))),
        ("checkpoint", checkpoint),
    ]


def task_fields(run: Mapping[str, Any]) -> list[tuple[str, Cell]]:
    """A workflow task's run (``<workflow run id>/<task id>``): its workflow run and its task."""
    run_id = run.get("run_id")
    if not isinstance(run_id, str) or "/" not in run_id:
        return []
    workflow_run, task = run_id.rsplit("/", 1)
    return [("workflow_run", text(workflow_run)), ("task", text(task))]


def show_run(
    output: Output,
    run: Mapping[str, Any],
    now: datetime | None = None,
    definition: Mapping[str, Any] | None = None,
) -> None:
    """A run's fields and attempts; a workflow run's tasks as a tree of its ``definition`` (its job's
    target), each task with its run."""
    output.fields(
        [(key, status(run.get(key)) if key == "status" else text(run.get(key))) for key in RUN_FIELDS]
        + task_fields(run)
        + pool_fields(run, now or datetime.now(UTC))
    )
    attempts = [attempt for attempt in run.get("attempts") or [] if isinstance(attempt, dict)]
    if definition is not None and run.get("tasks") is not None:
        output.line()
        output.tree(workflow_run_tree(definition, run))
        if not attempts:
            return  # a workflow run's attempts are its tasks'
    if not attempts:
        output.line("attempts       none yet")
        return
    rows: list[list[Cell]] = []
    for attempt in attempts:
        error = "-"
        if attempt.get("error_code"):
            error = text(attempt.get("error_code"))
            if attempt.get("error_message"):
                error += ": " + text(attempt.get("error_message"))[:100]
        rows.append(
            [
                text(attempt.get("attempt")),
                text(attempt.get("started_at")),
                text(attempt.get("finished_at")),
                text(attempt.get("duration_ms")),
                status(attempt.get("outcome")),
                text(attempt.get("worker_id")),
                error,
            ]
        )
    output.line()
    output.line("attempts:")
    headers = ["ATTEMPT", "STARTED_AT", "FINISHED_AT", "DURATION_MS", "OUTCOME", "WORKER", "ERROR"]
    output.table(headers, rows, empty="none yet")


def run_event(run: Mapping[str, Any], seen_at: datetime, job_name: str | None = None) -> list[Cell]:
    """One line of ``runs watch``: when it was seen, and where the run (of job ``job_name``) stands."""
    return [
        seen_at.strftime("%H:%M:%S"),
        text(run.get("run_id")),
        status(run.get("status")),
        f"job={text(job_name)}",
        f"attempt={text(run.get('attempt'))}",
        f"scheduled_for={text(run.get('scheduled_for'))}",
        f"lag_ms={text(run.get('lag_ms'))}",
    ]


def concurrency_summary(job: Mapping[str, Any]) -> str:
    """``key (at most N at once)`` for a job with a concurrency key, else ``-``."""
    key = job.get("concurrency_key")
    if not key:
        return "-"
    return f"{text(key)} (at most {text(job.get('max_concurrency'))} at once)"
