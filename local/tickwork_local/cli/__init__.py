"""`tickwork`: the command line of the tickwork HTTP API (v1), on Typer and Rich, one module per noun:

- ``jobs`` and ``runs`` (``runs watch``, ``dead-letters``), ``apply`` and ``export`` (jobs as code),
  ``preview`` and ``stats``: the API, through ``tickwork_client.Client``;
- ``local`` (the whole scheduler against moto), ``tenants`` (straight to DynamoDB) and ``receive``
  (a webhook receiver): laptop tools.

``output`` renders: Rich tables on a terminal, plain text in a pipe, JSON or YAML with ``-o``. Importing
this package loads neither tickwork's server code nor boto3: the commands import what they need.
"""

from __future__ import annotations

from tickwork_local.cli.errors import CliError, Unreachable, UsageError
from tickwork_local.cli.local import local_port, port_in_use, reset_data_dir
from tickwork_local.cli.options import MAX_API_REQUESTS_PER_SECOND
from tickwork_local.cli.receive import make_receiver


def main(argv: list[str] | None = None) -> int:
    """Run ``tickwork`` with ``argv`` (default: the process's arguments); returns the exit code."""
    try:
        from tickwork_local.cli.app import main as run
    except ModuleNotFoundError as error:
        if error.name not in ("typer", "rich", "yaml"):
            raise
        import sys

        print(f"error: the tickwork command needs {error.name}: pip install 'tickwork[cli]'", file=sys.stderr)
        return 2
    return run(argv)


__all__ = [
    "MAX_API_REQUESTS_PER_SECOND",
    "CliError",
    "Unreachable",
    "UsageError",
    "local_port",
    "main",
    "make_receiver",
    "port_in_use",
    "reset_data_dir",
]
