"""`tickwork tenants create`: a tenant written straight to the tenants table (no API route makes one)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from typing import Annotated

import typer

from tickwork_local.cli.errors import CliError, Unreachable, UsageError
from tickwork_local.cli.options import MAX_API_REQUESTS_PER_SECOND, OutputOption, examples
from tickwork_local.cli.session import Session, command

app = typer.Typer(
    name="tenants",
    help="Administer tenants in DynamoDB (not through the API).",
    no_args_is_help=True,
    epilog=examples(
        "tickwork tenants create initech",
    ),
)

CREATE_EPILOG = examples(
    "tickwork tenants create acme",
    "tickwork tenants create initech --display-name Initech --api-requests-per-second 100 -o json",
    before="Against tickwork local, point boto3 at the moto endpoint its banner prints (AWS_ENDPOINT_URL,"
    " AWS_DEFAULT_REGION=us-east-1, AWS_ACCESS_KEY_ID=local, AWS_SECRET_ACCESS_KEY=local).",
)


@app.command("create", epilog=CREATE_EPILOG)
@command
def create(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", show_default=False, help="the tenant id: 1-63 lowercase letters, digits, - or _"
        ),
    ],
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
    # Imported here: only this command needs boto3 and the domain models, and they are slow to load.
    import boto3
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )
    from pydantic import ValidationError
    from tickwork.adapters.tenants import DynamoTenantStore
    from tickwork.config import Settings
    from tickwork.domain.tenants import (
        DEFAULT_API_REQUESTS_PER_SECOND,
        TENANT_ID_PATTERN,
        Tenant,
        new_signing_secret,
        new_token,
    )
    from tickwork.errors import NotFound

    if not re.fullmatch(TENANT_ID_PATTERN, name):
        raise UsageError(
            f"tenant id {name!r} is not valid: use 1 to 63 lowercase letters, digits, '-' or '_',"
            f" starting with a letter or digit (pattern {TENANT_ID_PATTERN})"
        )
    try:
        settings = Settings.from_env(os.environ)
    except ValidationError as error:
        raise UsageError(f"bad TICKWORK_* setting in the environment: {error}") from None
    try:
        store = DynamoTenantStore(boto3.client("dynamodb"), table=settings.tenants_table)
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
            max_jobs=max_jobs or settings.default_max_jobs,
            max_concurrent_runs=max_concurrent_runs,
            api_requests_per_second=api_requests_per_second or DEFAULT_API_REQUESTS_PER_SECOND,
            signing_secret=new_signing_secret(),
            created_at=datetime.now(UTC),
        )
        token = new_token()
        store.put(tenant, token=token)
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
