"""`tickwork tenants`: tenants administered straight in the tenants table (no API route reads or writes one:
a tenant's settings are the operator's, never its own token's).

Every command reads and writes the table with boto3: AWS credentials and region come from the environment,
``AWS_ENDPOINT_URL`` points at a local stack's moto (its banner prints the endpoint), and
``TICKWORK_TENANTS_TABLE`` names the table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwork_local.cli.errors import CliError, Unreachable, UsageError
from tickwork_local.cli.options import (
    MAX_API_REQUESTS_PER_SECOND,
    MAX_BURST,
    MAX_RUNS_PER_SECOND,
    CursorOption,
    OutputOption,
    examples,
)
from tickwork_local.cli.output import Format, Output
from tickwork_local.cli.session import Session, command

if TYPE_CHECKING:
    from tickwork.adapters.tenants import DynamoTenantStore
    from tickwork.app.tenant_switch import TenantSwitch
    from tickwork.config import Settings
    from tickwork.domain.tenants import Tenant, TenantRecord

LOCAL_HINT = (
    "Against tickwork local, point boto3 at the moto endpoint its banner prints (AWS_ENDPOINT_URL,"
    " AWS_DEFAULT_REGION=us-east-1, AWS_ACCESS_KEY_ID=local, AWS_SECRET_ACCESS_KEY=local); against a"
    " deployment, use AWS credentials that may read and write its tenants table (TICKWORK_TENANTS_TABLE,"
    " the stack's TenantsTableName output)."
)

app = typer.Typer(
    name="tenants",
    help="Administer tenants in DynamoDB (not through the API).",
    no_args_is_help=True,
    epilog=examples(
        "tickwork tenants create initech",
        "tickwork tenants list",
        "tickwork tenants update initech --api-requests-per-second 200",
        "tickwork tenants disable initech",
        "tickwork tenants rotate-token initech",
        before=LOCAL_HINT,
    ),
)

# The flag that sets each setting, for errors that name what the user typed.
FLAGS = {
    "name": "--display-name",
    "max_jobs": "--max-jobs",
    "max_concurrent_runs": "--max-concurrent-runs",
    "max_runs_per_second": "--max-runs-per-second",
    "burst": "--burst",
    "api_requests_per_second": "--api-requests-per-second",
    "disabled": "disable/enable",
}
NO_LIMIT = "none"
# The settings `update` takes as N or none.
LIMITS = frozenset({"max_concurrent_runs", "max_runs_per_second", "burst"})
# The shown columns of `tenants list`, and the extra ones of -o wide.
COLUMNS = ("TENANT", "STATE", "JOBS", "MAX_CONCURRENT_RUNS", "RUNS_PER_SECOND", "API_RPS")
WIDE_COLUMNS = ("NAME", "CREATED_AT")


# --- arguments and options ----------------------------------------------------------------------------------
def limit_or_none(text: str) -> str:
    """A whole number of at least 1, or ``none`` to remove the limit (given back as text: Typer's parsers
    keep the option's type, and None would read as "not given")."""
    value = text.strip().lower()
    if value in (NO_LIMIT, "unlimited"):
        return NO_LIMIT
    if not value.isdigit() or int(value) < 1:
        raise typer.BadParameter(
            f"{text!r} is not a whole number of at least 1, or {NO_LIMIT!r} for no limit"
        )
    return str(int(value))


TenantArgument = Annotated[
    str,
    typer.Argument(
        metavar="NAME", show_default=False, help="the tenant id: 1-63 lowercase letters, digits, - or _"
    ),
]
DisplayNameOption = Annotated[
    str | None, typer.Option("--display-name", show_default=False, help="a human name for the tenant")
]
MaxJobsOption = Annotated[
    int | None,
    typer.Option("--max-jobs", metavar="N", min=1, show_default=False, help="most jobs the tenant may have"),
]
ApiRateOption = Annotated[
    int | None,
    typer.Option(
        "--api-requests-per-second",
        metavar="N",
        min=1,
        max=MAX_API_REQUESTS_PER_SECOND,
        show_default=False,
        help=f"API requests the tenant may make per second, over all its tokens, beyond which it gets 429"
        f" (at most {MAX_API_REQUESTS_PER_SECOND})",
    ),
]


# --- the table ----------------------------------------------------------------------------------------------
@contextmanager
def tenant_store() -> Iterator[DynamoTenantStore]:
    """The tenants table of the environment's AWS account (or local stack), with AWS's errors as the CLI's:
    no region or credentials is a usage error, no answer exit 3, a refusal exit 1."""
    from tickwork.adapters.tenants import DynamoTenantStore

    with tables() as (client, settings):
        yield DynamoTenantStore(client, table=settings.tenants_table)


@contextmanager
def tenant_switch() -> Iterator[TenantSwitch]:
    """Disabling and enabling a tenant, which pauses and resumes its jobs: the tenants and jobs tables."""
    from tickwork.adapters.jobs import DynamoJobStore, planners_shard_count
    from tickwork.adapters.tenants import DynamoTenantStore
    from tickwork.app.tenant_switch import TenantSwitch

    with tables() as (client, settings):
        # A resumed job is written into the due index under the planners' shard count, not this shell's.
        shards = planners_shard_count(client, tenants_table=settings.tenants_table) or settings.due_shards
        yield TenantSwitch(
            tenants=DynamoTenantStore(client, table=settings.tenants_table),
            jobs=DynamoJobStore(
                client,
                table=settings.jobs_table,
                tenants_table=settings.tenants_table,
                due_shards=shards,
            ),
            clock=lambda: datetime.now(UTC),
        )


@contextmanager
def tables() -> Iterator[tuple[Any, Settings]]:
    """A DynamoDB client and the environment's settings (the tables' names), with AWS's errors as the
    CLI's. Imported here: only these commands need boto3 and the domain models, and they are slow to
    load."""
    import boto3
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )
    from pydantic import ValidationError
    from tickwork.config import Settings

    try:
        settings = Settings.from_env(os.environ)
    except ValidationError as error:
        raise UsageError(f"bad TICKWORK_* setting in the environment: {error}") from None
    try:
        yield boto3.client("dynamodb"), settings
    except (NoRegionError, NoCredentialsError) as error:
        raise UsageError(
            f"{error} (set AWS_DEFAULT_REGION and credentials, or AWS_ENDPOINT_URL for local)"
        ) from None
    except EndpointConnectionError as error:
        raise Unreachable(f"cannot reach DynamoDB: {error}") from None
    except ClientError as error:
        info = error.response.get("Error", {})
        code, message = info.get("Code", "client_error"), info.get("Message", str(error))
        raise CliError(f"{message} (table {settings.tenants_table})", code=code) from None
    except BotoCoreError as error:
        raise CliError(str(error), code="aws_error") from None


@contextmanager
def tickwork_errors() -> Iterator[None]:
    """tickwork's refusals as the CLI's: a tenant not found or changed meanwhile exits 1, a setting refused
    is a usage error naming its flag."""
    from pydantic import ValidationError
    from tickwork.errors import Conflict, NotFound

    try:
        yield
    except NotFound as error:
        raise CliError(error.message, code="not_found", field="tenant") from None
    except Conflict as error:
        raise CliError(error.message, code=error.code, field=error.field) from None
    except ValidationError as error:
        raise refused_setting(error) from None


def refused_setting(error: Any) -> UsageError:
    """A pydantic refusal of a setting, naming the flag that set it (``burst`` -> ``--burst``)."""
    first = error.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else None
    message = str(first["msg"]).removeprefix("Value error, ")
    flag = FLAGS.get(field or "", field)
    return UsageError(f"{field}: {message}" if field else message, code="invalid_setting", field=flag)


def check_tenant_id(tenant_id: str) -> None:
    from tickwork.domain.tenants import TENANT_ID_PATTERN

    if not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
        raise UsageError(
            f"tenant id {tenant_id!r} is not valid: use 1 to 63 lowercase letters, digits, '-' or '_',"
            f" starting with a letter or digit (pattern {TENANT_ID_PATTERN})"
        )


# --- printing -----------------------------------------------------------------------------------------------
def tenant_document(tenant: Tenant, job_count: int | None = None) -> dict[str, Any]:
    """A tenant as the commands print it: its settings, never its signing secret."""
    document = tenant.model_dump(mode="json", exclude={"signing_secret"})
    if job_count is not None:
        document["job_count"] = job_count
    return document


def record_document(record: TenantRecord) -> dict[str, Any]:
    return tenant_document(record.tenant, record.job_count)


def limit_text(value: Any) -> str:
    return "-" if value is None else str(value)


def throttle_text(document: Mapping[str, Any]) -> str:
    """``10 (burst 20)``, ``10`` (the burst is the rate), or ``-`` (no throttle)."""
    rate, burst = document.get("max_runs_per_second"), document.get("burst")
    if rate is None:
        return "-"
    return f"{rate} (burst {burst})" if burst is not None else str(rate)


def state_cell(document: Mapping[str, Any]) -> tuple[str, str]:
    if document.get("disabled"):
        since = document.get("disabled_at")
        return (f"disabled since {since}" if since else "disabled", "bold red")
    if document.get("status", "ACTIVE") != "ACTIVE":
        return (str(document["status"]).lower(), "red")
    return ("enabled", "green")


def show_tenant(output: Output, document: Mapping[str, Any]) -> None:
    if output.machine:
        output.document(dict(document))
        return
    jobs = f"{document.get('job_count', '-')} of {document['max_jobs']}"
    output.fields(
        [
            ("tenant_id", document["tenant_id"]),
            ("name", document["name"]),
            ("state", state_cell(document)),
            ("jobs", jobs),
            ("max_concurrent_runs", limit_text(document.get("max_concurrent_runs"))),
            ("max_runs_per_second", throttle_text(document)),
            ("api_requests_per_second", str(document["api_requests_per_second"])),
            ("created_at", str(document["created_at"])),
        ]
    )


def show_tenants(output: Output, documents: list[dict[str, Any]], next_cursor: str | None) -> None:
    if output.machine:
        output.document({"items": documents, "next_cursor": next_cursor})
        return
    rows = [
        [
            document["tenant_id"],
            state_cell(document),
            f"{document['job_count']}/{document['max_jobs']}",
            limit_text(document.get("max_concurrent_runs")),
            throttle_text(document),
            str(document["api_requests_per_second"]),
            *((document["name"], str(document["created_at"])) if output.wide else ()),
        ]
        for document in documents
    ]
    headers = (*COLUMNS, *WIDE_COLUMNS) if output.wide else COLUMNS
    output.table(headers, rows, empty="no tenants")
    if next_cursor:
        output.note(f"more tenants: add --cursor {next_cursor} for the next page, or leave out --limit")


# --- create -------------------------------------------------------------------------------------------------
@app.command(
    "create",
    epilog=examples(
        "tickwork tenants create acme",
        "tickwork tenants create initech --display-name Initech --api-requests-per-second 100 -o json",
        before=LOCAL_HINT,
    ),
)
@command
def create(
    ctx: typer.Context,
    name: TenantArgument,
    display_name: Annotated[
        str | None, typer.Option(show_default=False, help="a human name for the tenant (default NAME)")
    ] = None,
    max_jobs: Annotated[
        int | None,
        typer.Option(
            metavar="N", min=1, show_default=False, help="most jobs the tenant may have (default 10000)"
        ),
    ] = None,
    max_concurrent_runs: Annotated[
        int | None,
        typer.Option(
            "--max-concurrent-runs",
            "--max-in-flight",
            metavar="N",
            min=1,
            show_default=False,
            help="most runs running at once (default: no limit; --max-in-flight is its older name)",
        ),
    ] = None,
    api_requests_per_second: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=1,
            max=MAX_API_REQUESTS_PER_SECOND,
            show_default=False,
            help=f"API requests the tenant may make per second, beyond which it gets 429 (default 50, at most"
            f" {MAX_API_REQUESTS_PER_SECOND})",
        ),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Create a tenant and print its API token once.

    The tenant gets a fresh API token and webhook signing secret, written straight to the tenants
    table with boto3: AWS credentials and region come from the environment, AWS_ENDPOINT_URL points at a
    local stack's moto, TICKWORK_TENANTS_TABLE names the table. The token is printed once: only its hash is
    stored."""
    session = Session(ctx, output)
    check_tenant_id(name)
    from tickwork.config import Settings
    from tickwork.domain.tenants import DEFAULT_API_REQUESTS_PER_SECOND, Tenant, new_signing_secret, new_token
    from tickwork.errors import NotFound

    with tenant_store() as store:
        try:
            store.get(name)
        except NotFound:
            pass
        else:
            # Writing again would replace the signing secret that the tenant's receivers check.
            raise CliError(f"tenant {name!r} already exists", code="conflict", field="tenant_id")
        tenant = Tenant(
            tenant_id=name,
            name=display_name or name,
            max_jobs=max_jobs or Settings.from_env(os.environ).default_max_jobs,
            max_concurrent_runs=max_concurrent_runs,
            api_requests_per_second=api_requests_per_second or DEFAULT_API_REQUESTS_PER_SECOND,
            signing_secret=new_signing_secret(),
            created_at=datetime.now(UTC),
        )
        token = new_token()
        store.put(tenant, token=token)
    # The token is shown this once: only its SHA-256 hash is stored.
    document = {"tenant_id": tenant.tenant_id, "token": token, "signing_secret": tenant.signing_secret}
    if session.output.machine:
        session.output.document(document)
        return
    session.output.line(f"created tenant {tenant.tenant_id}")
    session.output.fields(
        [
            ("tenant_id", tenant.tenant_id),
            ("token", (f"{token}   (shown once: store it now)", "bold")),
            ("signing_secret", tenant.signing_secret),
        ]
    )


# --- list and get -------------------------------------------------------------------------------------------
@app.command(
    "list",
    epilog=examples(
        "tickwork tenants list",
        "tickwork tenants list -o wide",
        "tickwork tenants list -o json | jq -r '.items[] | select(.disabled) | .tenant_id'",
        "tickwork tenants list --limit 20 --cursor acme",
        before=LOCAL_HINT,
    ),
)
@command
def list_tenants(
    ctx: typer.Context,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            min=1,
            max=1000,
            show_default=False,
            help="one page of at most N tenants, in the table's order (default: every tenant, by id)",
        ),
    ] = None,
    cursor: CursorOption = None,
    output: OutputOption = None,
) -> None:
    """List the tenants with their settings and job counts.

    Every tenant, sorted by id; with --limit, one page in the table's order and the cursor of the next.
    The tenants table is read with a Scan: it holds a few items per tenant, and only an operator lists
    it. Signing secrets and tokens are never shown."""
    session = Session(ctx, output)
    if cursor is not None and limit is None:
        raise UsageError("--cursor goes with --limit: without it every tenant is listed", field="--cursor")
    with tenant_store() as store:
        if limit is None:
            records = sorted(store.iter_tenants(), key=lambda record: record.tenant.tenant_id)
            next_cursor = None
        else:
            page = store.list_tenants(limit=limit, cursor=cursor)
            records, next_cursor = page.items, page.next_cursor
    show_tenants(session.output, [record_document(record) for record in records], next_cursor)


@app.command(
    "get",
    epilog=examples("tickwork tenants get acme", "tickwork tenants get acme -o json", before=LOCAL_HINT),
)
@command
def get(ctx: typer.Context, name: TenantArgument, output: OutputOption = None) -> None:
    """Show one tenant's settings and job count (never its signing secret or tokens)."""
    session = Session(ctx, output)
    check_tenant_id(name)
    with tenant_store() as store, tickwork_errors():
        record = store.record(name)
    show_tenant(session.output, record_document(record))


# --- update, disable, enable --------------------------------------------------------------------------------
@app.command(
    "update",
    epilog=examples(
        "tickwork tenants update acme --api-requests-per-second 200",
        "tickwork tenants update acme --max-runs-per-second 20 --burst 100",
        "tickwork tenants update acme --max-concurrent-runs none --max-jobs 50000",
        before=LOCAL_HINT + " A change reaches the API at its next request and the workers within 10 s.",
    ),
)
@command
def update(
    ctx: typer.Context,
    name: TenantArgument,
    display_name: DisplayNameOption = None,
    max_jobs: MaxJobsOption = None,
    max_concurrent_runs: Annotated[
        str | None,
        typer.Option(
            "--max-concurrent-runs",
            metavar="N|none",
            parser=limit_or_none,
            show_default=False,
            help="most of the tenant's runs running at once; none: no limit",
        ),
    ] = None,
    max_runs_per_second: Annotated[
        str | None,
        typer.Option(
            "--max-runs-per-second",
            metavar="N|none",
            parser=limit_or_none,
            show_default=False,
            help=f"a throttle on the tenant's run starts: runs over it wait, none is dropped (at most"
            f" {MAX_RUNS_PER_SECOND}); none: no throttle",
        ),
    ] = None,
    burst: Annotated[
        str | None,
        typer.Option(
            "--burst",
            metavar="N|none",
            parser=limit_or_none,
            show_default=False,
            help=f"runs the throttle lets start at once after a quiet spell: at least the rate (at most"
            f" {MAX_BURST}); none: the rate",
        ),
    ] = None,
    api_requests_per_second: ApiRateOption = None,
    output: OutputOption = None,
) -> None:
    """Change some of a tenant's settings, and only those.

    The settings not given are left as they are; the new ones are checked against the stored ones (a burst
    is at least the rate). The API applies a change at the tenant's next request, the workers within 10 s.
    The throttle (--max-runs-per-second, --burst) is stored and checked now; the workers' enforcement of
    it follows in a later version."""
    given: dict[str, Any] = {
        "name": display_name,
        "max_jobs": max_jobs,
        "max_concurrent_runs": max_concurrent_runs,
        "max_runs_per_second": max_runs_per_second,
        "burst": burst,
        "api_requests_per_second": api_requests_per_second,
    }
    changes = {
        field: None if value == NO_LIMIT else int(value) if field in LIMITS else value
        for field, value in given.items()
        if value is not None
    }
    if not changes:
        raise UsageError(
            "nothing to change: give at least one of " + ", ".join(FLAGS[field] for field in given),
            field="tenant",
        )
    change(ctx, name, changes, output, f"updated tenant {name}")


@app.command(
    "disable",
    epilog=examples("tickwork tenants disable acme", "tickwork tenants enable acme", before=LOCAL_HINT),
)
@command
def disable(ctx: typer.Context, name: TenantArgument, output: OutputOption = None) -> None:
    """Disable a tenant: its API requests get 403 tenant_disabled and its fires wait; nothing is deleted.

    Each of its active jobs is paused as of now, as `tickwork jobs pause` would, so fires stop within the
    workers' 10 s view of the tenant; a retry due meanwhile waits. Its jobs, runs, tokens and settings are
    kept, and `tickwork tenants enable` resumes exactly the jobs this paused. Run it again if it was
    interrupted: it carries on."""
    switch(ctx, name, output, "disable", f"disabled tenant {name}: its API requests get 403, its fires wait")


@app.command("enable", epilog=examples("tickwork tenants enable acme", before=LOCAL_HINT))
@command
def enable(ctx: typer.Context, name: TenantArgument, output: OutputOption = None) -> None:
    """Enable a disabled tenant: its jobs paused by `disable` resume, and its requests are served again.

    The fires that fell in the disabled time follow each job's misfire policy, as after a pause (skip,
    fire_once or backfill). A job the tenant had paused itself stays paused."""
    switch(ctx, name, output, "enable", f"enabled tenant {name}")


def switch(ctx: typer.Context, name: str, output: Format | None, action: str, done: str) -> None:
    session = Session(ctx, output)
    check_tenant_id(name)
    with tenant_switch() as switcher, tickwork_errors():
        changed = switcher.disable(name) if action == "disable" else switcher.enable(name)
    with tenant_store() as store, tickwork_errors():
        record = store.record(name)
    show_changed(session, tenant_document(changed, record.job_count), done)


def change(ctx: typer.Context, name: str, changes: dict[str, Any], output: Format | None, done: str) -> None:
    """Apply ``changes`` to the tenant and print it as changed."""
    session = Session(ctx, output)
    check_tenant_id(name)
    from tickwork.domain.tenants import TenantChanges

    with tenant_store() as store, tickwork_errors():
        changed = store.update(name, TenantChanges.model_validate(changes))
        record = store.record(name)
    show_changed(session, tenant_document(changed, record.job_count), done)


def show_changed(session: Session, document: dict[str, Any], done: str) -> None:
    if session.output.machine:
        session.output.document(document)
        return
    session.output.line(done)
    show_tenant(session.output, document)


# --- rotate-token -------------------------------------------------------------------------------------------
@app.command(
    "rotate-token",
    epilog=examples(
        "tickwork tenants rotate-token acme",
        "tickwork tenants rotate-token acme -o json | jq -r .token",
        "tickwork tenants rotate-token acme --label ci",
        before=LOCAL_HINT,
    ),
)
@command
def rotate_token(
    ctx: typer.Context,
    name: TenantArgument,
    label: Annotated[
        str,
        typer.Option(
            "--label",
            metavar="LABEL",
            help="which of the tenant's tokens to replace (the actor its requests are recorded as)",
        ),
    ] = "default",
    output: OutputOption = None,
) -> None:
    """Give a tenant a new API token and revoke the old one, at once; print the new token once.

    The new token's SHA-256 hash is written and the old token's hash item deleted in one transaction: the
    old token is refused from its next request (the API checks it on every request, whatever API Gateway's
    authorizer cache holds). Only the hash is stored: write the new token down. The signing secret is
    unchanged."""
    session = Session(ctx, output)
    check_tenant_id(name)
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", label):
        raise UsageError(
            f"label {label!r} is not valid: use 1 to 64 letters, digits, '.', '_' or '-'", field="--label"
        )
    from tickwork.domain.tenants import new_token

    with tenant_store() as store, tickwork_errors():
        rotated = store.rotate_token(name, token=new_token(), label=label)
    document = {
        "tenant_id": rotated.tenant_id,
        "label": rotated.label,
        "token": rotated.token,
        "revoked": rotated.revoked,
    }
    if session.output.machine:
        session.output.document(document)
        return
    session.output.line(f"rotated the {rotated.label} token of tenant {rotated.tenant_id}")
    session.output.fields(
        [
            ("tenant_id", rotated.tenant_id),
            ("label", rotated.label),
            ("token", (f"{rotated.token}   (shown once: store it now)", "bold")),
            (
                "revoked",
                f"{rotated.revoked} old token{'s' if rotated.revoked != 1 else ''}, refused from now",
            ),
        ]
    )
