"""`tickwork receive`: a webhook receiver that prints each delivery and checks its signature."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from tickwork_local.cli.errors import CliError
from tickwork_local.cli.options import OutputOption, examples, rfc3339
from tickwork_local.cli.output import text
from tickwork_local.cli.session import command

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

MAX_RECEIVED_BYTES = 16 * 1024 * 1024  # far above any tickwork envelope; stops a runaway sender
EPILOG = examples(
    "tickwork receive --port 9000 --secret <signing secret>",
    "tickwork receive --status 500        # watch tickwork retry",
    "tickwork receive -o json | jq .lag_ms",
)


def describe_delivery(
    body: bytes, headers: Mapping[str, str], received: datetime, secret: str | None, method: str, path: str
) -> dict[str, Any]:
    """What one webhook request says: the envelope's fields, the lag, and whether its signature holds."""
    from tickwork.targets.envelope import verify_signature

    headers = {name.lower(): value for name, value in headers.items()}  # HTTP header names ignore case
    try:
        envelope = json.loads(body)
    except ValueError:
        envelope = None
    envelope = envelope if isinstance(envelope, dict) else {}
    scheduled_for = envelope.get("scheduled_for") or headers.get("x-tickwork-scheduled-for")
    lag_ms = None
    if isinstance(scheduled_for, str):
        try:
            lag = received - datetime.fromisoformat(scheduled_for)
            lag_ms = round(lag.total_seconds() * 1000)
        except (ValueError, TypeError):
            lag_ms = None
    record: dict[str, Any] = {
        "received_at": rfc3339(received),
        "method": method,
        "path": path,
        "job_id": envelope.get("job_id"),
        "run_id": envelope.get("run_id") or headers.get("x-tickwork-run-id"),
        "attempt": envelope.get("attempt") or headers.get("x-tickwork-attempt"),
        "scheduled_for": scheduled_for,
        "lag_ms": lag_ms,
        "fencing_token": headers.get("x-tickwork-fencing-token"),
    }
    if secret is not None:
        header = headers.get("x-tickwork-signature")
        if not header:
            record["signature"] = "missing"
        else:
            valid = verify_signature(secret, header, body, now_epoch=int(received.timestamp()))
            record["signature"] = "verified" if valid else "invalid"
    if "payload" in envelope:
        record["payload"] = envelope["payload"]
    else:
        record["body"] = body[:500].decode("utf-8", errors="replace")
    return record


def delivery_line(record: Mapping[str, Any]) -> str:
    parts = [
        text(record["received_at"]),
        f"{text(record['method'])} {text(record['path'])}",
        f"run={text(record['run_id'])}",
        f"attempt={text(record['attempt'])}",
        f"scheduled_for={text(record['scheduled_for'])}",
        f"lag_ms={text(record['lag_ms'])}",
    ]
    signature = record.get("signature")
    if signature == "verified":
        parts.append("signature verified")
    elif signature == "invalid":
        parts.append("signature INVALID")
    elif signature == "missing":
        parts.append("signature MISSING")
    if "payload" in record:
        parts.append(f"payload={text(record['payload'])}")
    else:
        parts.append(f"body={text(record.get('body'))}")
    return "  ".join(parts)


def make_receiver(
    host: str,
    port: int,
    secret: str | None,
    status: int,
    out: TextIO = sys.stdout,
    *,
    as_json: bool = False,
) -> ThreadingHTTPServer:
    """A webhook receiver that prints one line per request (JSON lines with ``as_json``) and answers
    ``status``. The caller runs ``serve_forever`` and closes it."""
    # Imported here: `tickwork --help` has no use for an HTTP server.
    import threading
    from http.server import BaseHTTPRequestHandler

    from tickwork_local.gateway import Server

    lock = threading.Lock()  # deliveries arrive on many threads; keep their lines whole

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _deliver(self) -> None:
            received = datetime.now(UTC)
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_RECEIVED_BYTES:
                self._answer(413)
                return
            body = self.rfile.read(length)
            record = describe_delivery(
                body,
                dict(self.headers.items()),
                received,
                secret,
                self.command,
                self.path,
            )
            line = json.dumps(record, ensure_ascii=False) if as_json else delivery_line(record)
            with lock:
                out.write(line + "\n")
                out.flush()
            self._answer(status)

        def do_GET(self) -> None:
            self._answer(200, b"tickwork receiver: send deliveries with POST\n")

        do_POST = do_PUT = do_PATCH = _deliver  # noqa: N815 - http.server's naming

        def _answer(self, code: int, payload: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(payload)))
            if payload:
                self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per delivery is printed by _deliver

    server = Server((host, port), Receiver)
    server.daemon_threads = True
    return server


def receive(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to listen on")] = 9000,
    secret: Annotated[
        str | None,
        typer.Option(show_default=False, help="the tenant's signing secret, to check X-Tickwork-Signature"),
    ] = None,
    status: Annotated[
        int,
        typer.Option(
            min=200, max=599, help="HTTP status to answer with (500 makes tickwork retry, 400 fails the run)"
        ),
    ] = 200,
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="the same as -o json")] = False,
    output: OutputOption = None,
) -> None:
    """Run a webhook receiver that prints each delivery.

    Run a small webhook receiver: print each delivery (time received, run id, attempt, scheduled_for,
    lag, payload) and, with --secret, whether its X-Tickwork-Signature verifies. Every request is answered
    with --status. With -o json, each delivery is one JSON object per line. Ctrl-C stops it."""
    from tickwork_local.cli.session import Session

    lines = as_json or Session(ctx, output).output.machine
    try:
        server = make_receiver(host, port, secret, status, as_json=lines)
    except OSError as error:
        raise CliError(f"cannot listen on {host}:{port}: {error.strerror}", code="cannot_listen") from None
    bound_host, bound_port = server.server_address[:2]
    checking = "checking signatures" if secret else "not checking signatures (no --secret)"
    print(
        f"tickwork receive: listening on http://{bound_host!s}:{bound_port}/ (any path), answering {status},"
        f" {checking}; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("receive", epilog=EPILOG, rich_help_panel="On this machine")(command(api=False)(receive))
