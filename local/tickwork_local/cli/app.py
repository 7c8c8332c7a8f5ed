"""The `tickwork` command: its Typer app, made of one module per noun, and ``main``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from tickwork_local.cli import apply, jobs, local, preview, receive, runs, stats, tenants
from tickwork_local.cli.errors import EXIT_USAGE
from tickwork_local.cli.session import command

EPILOG = (
    "Environment: TICKWORK_API_URL, the API's base URL (default http://127.0.0.1:8000); TICKWORK_TOKEN, the"
    " tenant's API token. A flag wins over its variable. NO_COLOR turns colours off."
    "\n\nExit codes: 0 success, 1 the API refused (4xx/5xx) or no such job, 2 usage error, 3 the API could"
    " not be reached; jobs trigger --wait also 4 FAILED, 5 DEAD, 6 not run, 7 still running."
    "\n\nExamples:\n\n  tickwork local\n\n"
    "  TICKWORK_TOKEN=tw_... tickwork jobs create --name hello --rate 10s --url http://127.0.0.1:9000/hook\n\n"
    "  tickwork jobs list -o json | jq '.items[].job_id'\n\n"
    "  tickwork jobs export --all > jobs.yaml && tickwork apply -f jobs.yaml --dry-run"
)

app = typer.Typer(
    name="tickwork",
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # a bug's traceback stays plain, and never shows locals (the token)
    context_settings={"help_option_names": ["--help", "-h"]},
)
app.add_typer(jobs.app, rich_help_panel="Jobs and runs")
app.add_typer(runs.app, rich_help_panel="Jobs and runs")
runs.register(app)
apply.register(app)
preview.register(app)
stats.register(app)
local.register(app)
receive.register(app)
app.add_typer(tenants.app, rich_help_panel="On this machine")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"tickwork {version('tickwork')}")
        except PackageNotFoundError:
            typer.echo("tickwork (not installed)")
        raise typer.Exit()


@app.callback()
@command
def root(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """tickwork: manage jobs of the tickwork scheduler through its HTTP API, keep them as code (apply,
    export), run the whole scheduler locally (tickwork local), administer tenants and receive webhooks."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line (``argv``, default ``sys.argv[1:]``); returns the exit code."""
    command_line = typer.main.get_command(app)
    try:
        command_line.main(args=argv, prog_name="tickwork")
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        return code if isinstance(code, int) else EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
