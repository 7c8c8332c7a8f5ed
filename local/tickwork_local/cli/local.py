"""`tickwork local`: the whole scheduler on this machine, against moto."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, TextIO

import typer

from tickwork_local.cli.errors import CliError, UsageError
from tickwork_local.cli.options import examples, positive_float
from tickwork_local.cli.session import command
from tickwork_local.datadir import DataDirInUse, claim

ENV_PORT = "TICKWORK_PORT"
DEFAULT_LOCAL_PORT = 8000
DEFAULT_DATA_DIR = ".tickwork"
EPILOG = examples(
    "tickwork local",
    "tickwork local --port 8080 --ephemeral",
    "tickwork local --data-dir /tmp/tickwork --reset",
    "tickwork local --tenant-setting api_requests_per_second=500",
    "TICKWORK_LOCAL_TENANTS=acme:token-a:api_requests_per_second=500,globex:token-b tickwork local",
    before="Tenants come from TICKWORK_LOCAL_TENANTS=acme:token-a,globex:token-b; without it one tenant,"
    " 'default', gets a token printed at start-up. An entry may add settings of its tenant after its token"
    " (acme:token-a:api_requests_per_second=500:max_jobs=100), and --tenant-setting gives one to every"
    " local tenant; they are applied at each start, and tickwork tenants update changes them while the stack"
    " runs (the banner says how).",
)


def local_port(given: int | None, environ: Mapping[str, str] = os.environ) -> int:
    """--port, else $TICKWORK_PORT, else 8000; a port number either way."""
    if given is None and environ.get(ENV_PORT):
        text = environ[ENV_PORT]
        if not text.isdigit():
            raise UsageError(f"{ENV_PORT} must be a port number, not {text!r}")
        given = int(text)
    port = DEFAULT_LOCAL_PORT if given is None else given
    if not 0 < port < 65536:
        raise UsageError(f"the port must be between 1 and 65535, not {port}")
    return port


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (the stack would fail to bind it)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # As the HTTP server binds: a port whose last connections linger in TIME_WAIT after a stop is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def reset_data_dir(directory: Path, *, confirmed: bool, answer: TextIO, out: TextIO) -> None:
    """Delete the local stack's files in ``directory`` (its tables, journal, token and log), once the user
    said yes; a directory that holds anything else keeps it."""
    from tickwork_local.stack import DATA_FILES

    found = [directory / name for name in DATA_FILES if (directory / name).exists()]
    if not found:
        out.write(f"nothing to reset in {directory}\n")
        return
    if not confirmed:
        if not answer.isatty():
            raise UsageError(f"--reset deletes every job and run in {directory}: add --yes to confirm")
        out.write(f"delete every job, run and token kept in {directory}? [y/N] ")
        out.flush()
        if answer.readline().strip().lower() not in ("y", "yes"):
            raise CliError("reset cancelled: nothing was deleted")
    for path in found:
        path.unlink()
    if not any(directory.iterdir()):
        directory.rmdir()
    out.write(f"reset {directory}: {len(found)} files deleted\n")


def batch_size(text: str | int) -> int:
    if isinstance(text, int):
        return text
    try:
        value = int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10:
        raise typer.BadParameter(f"{text!r} must be 1 to 10, as many as SQS hands out per receive")
    return value


def local(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="address the API listens on")] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            show_default=False,
            help=f"port the API listens on (default ${ENV_PORT}, else {DEFAULT_LOCAL_PORT})",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="print only the start-up banner, no status lines")
    ] = False,
    data_dir: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            show_default=False,
            help=f"keep jobs, runs and tokens in DIR, every write on disk before it is answered (default"
            f" {DEFAULT_DATA_DIR})",
        ),
    ] = None,
    ephemeral: Annotated[
        bool, typer.Option("--ephemeral", help="keep nothing: start empty, forget on exit")
    ] = False,
    reset: Annotated[
        bool, typer.Option("--reset", help="delete what the data directory keeps, then start (asks first)")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="with --reset: do not ask")] = False,
    log_file: Annotated[
        str | None, typer.Option(metavar="FILE", show_default=False, help="write the handlers' logs to FILE")
    ] = None,
    tick_seconds: Annotated[
        float,
        typer.Option(metavar="SECONDS", parser=positive_float, help="how often the planner and sweeper run"),
    ] = 1.0,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="how many worker invocations run at once, as the event source mapping's concurrency (up to 4"
            " pollers share the run queues; each hands its batches to invocations of their own)",
        ),
    ] = 300,
    batch_size: Annotated[
        int,
        typer.Option(
            parser=batch_size,
            help="messages per worker invocation, 1 to 10, as the event source mapping's batch size; a"
            " batch's runs go side by side, up to TICKWORK_WORKER_PARALLELISM (default 10)",
        ),
    ] = 10,
    tenant_setting: Annotated[
        list[str] | None,
        typer.Option(
            "--tenant-setting",
            metavar="SETTING=VALUE",
            show_default=False,
            help="a setting of every local tenant, applied at start: api_requests_per_second, max_jobs,"
            " max_concurrent_runs, max_runs_per_second or burst (N, or none for the last three), disabled"
            " (true or false); repeatable; a TICKWORK_LOCAL_TENANTS entry's own settings win",
        ),
    ] = None,
) -> None:
    """Run the whole scheduler on this machine, against moto.

    Run tickwork locally: moto stands in for DynamoDB and SQS, the API is served over HTTP, the planner
    ticks and workers deliver runs."""
    # Imported here: the local stack pulls in moto, which the API client never needs.
    from tickwork_local.stack import (
        TENANTS_VARIABLE,
        TenantSettingsError,
        check_settings,
        parse_settings,
        parse_tenants,
        run_local,
    )

    spec = os.environ.get(TENANTS_VARIABLE)
    try:
        # Each in its bounds; a TICKWORK_LOCAL_TENANTS entry may complete them (a rate for a burst).
        settings = parse_settings(tenant_setting or [], where="--tenant-setting", whole=False)
        if not spec:
            check_settings(settings, where="--tenant-setting")  # the default tenant's, as they are
    except TenantSettingsError as error:
        raise UsageError(str(error), field="--tenant-setting") from None
    try:
        for entry in parse_tenants(spec or ""):
            where = f"{TENANTS_VARIABLE} entry {entry.tenant_id} with --tenant-setting"
            check_settings({**settings, **entry.settings}, where=where)
    except TenantSettingsError as error:
        raise UsageError(str(error), field=TENANTS_VARIABLE) from None
    if data_dir is not None and ephemeral:
        raise UsageError("give --data-dir or --ephemeral, not both")
    chosen_port = local_port(port)
    directory = None if ephemeral else (data_dir or DEFAULT_DATA_DIR)
    if reset and directory is None:
        raise UsageError("--reset wipes the data directory: it cannot go with --ephemeral")
    # One stack per data folder, held for the life of this process: taken before anything else is done.
    held = None
    if directory is not None:
        try:
            held = claim(Path(directory), port=chosen_port, out=sys.stdout)
        except DataDirInUse as error:
            raise CliError(str(error)) from None
    try:
        if port_in_use(host, chosen_port):
            raise CliError(
                f"port {chosen_port} is in use on {host}: choose another with --port or {ENV_PORT}"
            )
        if reset and directory is not None:
            reset_data_dir(Path(directory), confirmed=yes, answer=sys.stdin, out=sys.stdout)
        code = run_local(
            host=host,
            port=chosen_port,
            quiet=quiet,
            data_dir=directory,
            log_file=log_file,
            tick_seconds=tick_seconds,
            workers=workers,
            batch_size=batch_size,
            tenant_settings=settings,
        )
    except TenantSettingsError as error:
        # Settings a tenant kept in the data directory refuse (a burst given below its stored rate).
        raise UsageError(str(error), field="--tenant-setting") from None
    finally:
        if held is not None:
            held.release()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("local", epilog=EPILOG, rich_help_panel="On this machine")(command(api=False)(local))
