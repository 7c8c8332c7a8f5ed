"""What every command shares: the global options (accepted before or after the command), the API client
built from them, job names resolved to ids, and errors turned into ``error: ...`` lines and exit codes."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from tickwork_local.cli.errors import EXIT_OK, CliError, UsageError, translated
from tickwork_local.cli.options import ApiUrlOption, JsonOption, RetriesOption, TimeoutOption, TokenOption
from tickwork_local.cli.output import Format, Output

if TYPE_CHECKING:
    from tickwork.api.schemas import JobOut
    from tickwork_client import Client

DEFAULT_API_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_RETRIES = 3
ENV_API_URL = "TICKWORK_API_URL"
ENV_TOKEN = "TICKWORK_TOKEN"  # noqa: S105 - the variable's name, not a token
# Job ids are ULIDs; anything else given for a job is a name.
JOB_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
_GIVEN = "tickwork.given"

T = TypeVar("T")

# The global options, added to every command's signature by @command (and to the root's): Typer then parses
# them before or after the command, and lists them under "Global options" in each --help.
_GLOBALS = (
    inspect.Parameter("api_url", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ApiUrlOption),
    inspect.Parameter("token", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=TokenOption),
    inspect.Parameter("timeout", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=TimeoutOption),
    inspect.Parameter("retries", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RetriesOption),
    inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOption),
)


def command(function: Callable[..., Any] | None = None, *, api: bool = True) -> Any:
    """Make ``function`` (whose first parameter is ``ctx: typer.Context``) a tickwork command: a failure
    prints ``error: ...`` on stderr and exits with its code, and (with ``api``) it takes the global options
    too. Used bare (``@command``) or with arguments (``@command(api=False)``)."""
    if function is None:
        return functools.partial(command, api=api)
    signature = inspect.signature(function, eval_str=True)
    added = _GLOBALS if api else ()
    names = {parameter.name for parameter in added}

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx: typer.Context = kwargs["ctx"]
        given = ctx.meta.setdefault(_GIVEN, {})
        for name in names:
            value = kwargs.pop(name, None)
            if value is not None and value is not False:  # given here: wins over one given before the command
                given[name] = value
        try:
            return function(*args, **kwargs)
        except BrokenPipeError:
            # The reader (e.g. `head`) went away: stop quietly instead of a traceback.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(EXIT_OK) from None
        except Exception as error:
            failure = translated(error)
            if failure is None:
                raise
            Output(Format.TABLE).error(failure)
            raise typer.Exit(failure.exit_code) from None

    run.__doc__ = reflowed(function.__doc__ or "")
    parameters = [*signature.parameters.values(), *added]
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    del run.__wrapped__  # Typer must read the new signature, not the old one
    return run


def reflowed(doc: str) -> str:
    """A docstring with each paragraph on one line: Typer's Rich help keeps single line breaks as they are."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


class Session:
    """One command's settings (flag, else environment variable, else default), its output and its client."""

    def __init__(self, ctx: typer.Context, output: Format | None = None):
        given: dict[str, Any] = ctx.meta.get(_GIVEN, {})
        self.api_url: str = given.get("api_url") or os.environ.get(ENV_API_URL) or DEFAULT_API_URL
        self.token: str | None = given.get("token") or os.environ.get(ENV_TOKEN) or None
        self.timeout: float = given.get("timeout") or DEFAULT_TIMEOUT_SECONDS
        retries = given.get("retries")
        self.retries: int = DEFAULT_RETRIES if retries is None else retries
        self.output = Output(output or (Format.JSON if given.get("as_json") else Format.TABLE))
        # Job names by id, of every job this command has read: each job is looked up once.
        self.names: dict[str, str | None] = {}

    def __repr__(self) -> str:
        return f"Session({self.api_url!r})"  # never the token

    @cached_property
    def client(self) -> Client:
        if not self.token:
            raise UsageError(f"no API token: pass --token or set {ENV_TOKEN}")
        # Imported here: the client reads answers with the API's own models, slow to load for --help.
        from tickwork_client import Client, RetryPolicy

        try:
            return Client(
                self.api_url,
                self.token,
                timeout=self.timeout,
                retries=RetryPolicy(max_attempts=self.retries + 1),
            )
        except ValueError:
            raise UsageError(f"--api-url must start with http:// or https://, not {self.api_url!r}") from None

    # --- jobs by id or by name ------------------------------------------------------------------------------
    def job(self, ref: str) -> JobOut:
        """The job ``ref`` names: an id, else a name."""
        found = self.on_job(ref, self.client.get_job)
        self.names[found.job_id] = found.name
        return found

    def on_job(self, ref: str, call: Callable[[str], T]) -> T:
        """``call(job_id)`` for the job ``ref`` names. An argument shaped like a job id (a ULID) is taken as
        one; if no job has that id, or for anything else, the job is looked up by name."""
        from tickwork_client import NotFound

        if JOB_ID.fullmatch(ref):
            try:
                return call(ref)
            except NotFound:
                named = self.find_named(ref)
                if named is None:
                    raise
                return call(named.job_id)
        named = self.find_named(ref)
        if named is None:
            raise CliError(f"no job has the id or the name {ref!r}", code="not_found", field="job")
        return call(named.job_id)

    def find_named(self, name: str) -> JobOut | None:
        """The job named ``name``. Names are unique among jobs not cancelled, so one of those is the job; a
        cancelled job keeps its name, so failing that, a cancelled job of that name is, if it is the only
        one."""
        for status in (None, "CANCELLED"):  # the API lists cancelled jobs only when asked for them
            matches = [job for job in self.iter_jobs(status) if job.name == name]
            if len(matches) > 1:
                ids = ", ".join(job.job_id for job in matches)
                raise UsageError(
                    f"{len(matches)} jobs are named {name!r}: give the id of one of them ({ids})",
                    code="ambiguous",
                    field="job",
                )
            if matches:
                return matches[0]
        return None

    def iter_jobs(self, status: str | None = None) -> Iterator[JobOut]:
        for job in self.client.iter_jobs(status=status, page_size=100):
            self.names[job.job_id] = job.name
            yield job

    def job_names(self, job_ids: Iterable[str]) -> dict[str, str | None]:
        """The names of the jobs ``job_ids`` (None for a job not found), each job read once per command.

        Several unknown jobs are looked for in the job list, a page of 100 at a time (cancelled jobs after
        the others), while it has taken fewer pages than there are jobs left to find; whatever is left then
        is read one job at a time. One unknown job is read by its id."""
        from tickwork_client import NotFound

        wanted = list(dict.fromkeys(job_ids))
        missing = [job_id for job_id in wanted if job_id not in self.names]
        pages = 0
        for status in (None, "CANCELLED"):
            cursor: str | None = None
            while len(missing) > max(1, pages):
                page = self.client.list_jobs(status=status, limit=100, cursor=cursor)
                pages += 1
                self.names.update((job.job_id, job.name) for job in page.items)
                missing = [job_id for job_id in missing if job_id not in self.names]
                cursor = page.next_cursor
                if cursor is None:
                    break
        for job_id in missing:
            try:
                self.names[job_id] = self.client.get_job(job_id).name
            except NotFound:
                self.names[job_id] = None
        return {job_id: self.names[job_id] for job_id in wanted}

    def workflow_of(self, run: Mapping[str, Any]) -> dict[str, Any] | None:
        """A workflow run's definition (its job's target, ``GET /v1/jobs/{job_id}``) to draw its tasks by;
        None for a run that is not a workflow run's (its ``tasks`` null)."""
        if run.get("tasks") is None or not isinstance(run.get("job_id"), str):
            return None
        job = self.client.get_job(run["job_id"])
        self.names[job.job_id] = job.name
        target: dict[str, Any] = job.model_dump(mode="json")["target"]
        return target
