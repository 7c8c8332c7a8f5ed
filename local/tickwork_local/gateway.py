"""A stand-in for API Gateway: HTTP requests become REST proxy events, pass the TOKEN authorizer handler,
then the API handler, and the handler's answer becomes the HTTP response.

It does what the deployed API Gateway does (``infra/api.py``) and no more: every method reaches the API (each
route has an ``ANY`` method), bodies arrive base64-encoded exactly as sent (binary media type ``*/*``), query
strings and headers keep every value. HTTP's rules on methods and bodies (405 with ``Allow``, ``OPTIONS``,
``HEAD``, JSON in UTF-8) are the API's own, in ``tickwork.api.protocol``.

Given a :class:`~tickwork_local.console.Console`, it also does what the CloudFront distribution in front of
the deployed API does (``infra/web.py``): GET and HEAD of any path outside ``/v1/`` get the web console's
files; every request under ``/v1/`` reaches the API as before.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from tickwork_local.console import Console, StaticAnswer

# Every method of these paths is public (the authorizer guards every other path).
UNAUTHENTICATED_PATHS = frozenset({"/v1/health"})
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's own limit
UNAUTHORIZED_BODY = {
    "error": {"code": "unauthorized", "message": "missing or invalid bearer token", "field": None}
}


@dataclass
class LambdaContext:
    function_name: str = "tickwork-api"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:tickwork-api"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/tickwork-api"
    log_stream_name: str = "local"
    timeout_ms: int = 29_000

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_ms


@dataclass
class HttpResult:
    status: int
    body: Any
    headers: dict[str, str]


Pairs = Mapping[str, str] | Iterable[tuple[str, str]]


def _single_and_multi(pairs: Pairs | None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """API Gateway's two views of repeated headers or query parameters: the last value, and all of them."""
    items = list(pairs.items() if isinstance(pairs, Mapping) else pairs or ())
    multi: dict[str, list[str]] = {}
    for name, value in items:
        multi.setdefault(name, []).append(value)
    return {name: values[-1] for name, values in multi.items()}, multi


def rest_event(
    method: str,
    path: str,
    *,
    headers: Pairs | None = None,
    query: Pairs | None = None,
    body: str | None = None,
    is_base64_encoded: bool = False,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """A REST API proxy event, shaped like the samples in ``events/``."""
    all_headers, multi_headers = _single_and_multi(headers)
    parameters, multi_parameters = _single_and_multi(query)
    now = datetime.now(UTC)
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": parameters or None,
        "multiValueQueryStringParameters": multi_parameters or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": f"/local{path}",
            "accountId": "000000000000",
            "protocol": "HTTP/1.1",
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"sourceIp": source_ip, "userAgent": all_headers.get("User-Agent")},
            "domainName": "127.0.0.1",
            "apiId": "local",
            "authorizer": None,
        },
        "body": body,
        "isBase64Encoded": is_base64_encoded,
    }


def gateway_error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """An answer of the gateway itself, in the API's error shape (``infra/api.py`` sets the same)."""
    return {"error": {"code": code, "message": message, "field": field}}


Handler = Callable[[dict[str, Any], Any], Any]
REQUEST_ID_HEADER = "x-amzn-RequestId"  # API Gateway's name for it


class HandlerPool:
    """Handler instances that each take one event at a time, as Lambda execution environments do: a request
    takes an idle instance, or a new one when every instance is busy, and gives it back once answered. So
    what a handler keeps per request (the resolver's event, context and route) is never seen by another
    request, and requests still run side by side."""

    def __init__(self, make_handler: Callable[[], Handler], *, name: str = "api"):
        self._make_handler = make_handler
        self._idle: list[Handler] = []
        self._lock = threading.Lock()
        self.name = name
        self.size = 0
        """How many instances exist: the most requests ever in flight at once."""

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self._lock:
            handler = self._idle.pop() if self._idle else None
            if handler is None:
                self.size += 1
                size = self.size
        if handler is None:
            handler = self._make_handler()
            # Like Lambda's INIT line: how far the pool grew, and when.
            logging.getLogger("tickwork").info(
                "handler instance started", extra={"handler": self.name, "instances": size}
            )
        try:
            return handler(event, context)
        finally:
            with self._lock:
                self._idle.append(handler)  # last in, first out: the warmest instance goes next


class Gateway:
    """Runs the authorizer, then the API handler, for one event. Either may be called from many threads at
    once: give it a :class:`HandlerPool` for a handler that keeps per-request state."""

    def __init__(self, api_handler: Handler, authorizer_handler: Handler):
        self.api_handler = api_handler
        self.authorizer_handler = authorizer_handler

    def authorize(self, authorization: str | None, method: str, path: str) -> dict[str, Any] | None:
        """The authorizer's context, or None when it refused (API Gateway answers 401)."""
        if not authorization:
            return None
        event = {
            "type": "TOKEN",
            "authorizationToken": authorization,
            "methodArn": f"arn:aws:execute-api:us-east-1:000000000000:local/local/{method}{path}",
        }
        try:
            policy = self.authorizer_handler(event, LambdaContext(function_name="tickwork-authorizer"))
        except Exception as error:
            if str(error) == "Unauthorized":
                return None
            raise
        if policy["policyDocument"]["Statement"][0]["Effect"] != "Allow":
            return None
        return {"principalId": policy["principalId"], **policy.get("context", {})}

    def send(self, event: dict[str, Any], *, authorization: str | None) -> HttpResult:
        method, path = event["httpMethod"], event["path"]
        if path not in UNAUTHENTICATED_PATHS:
            context = self.authorize(authorization, method, path)
            if context is None:
                return HttpResult(
                    401,
                    UNAUTHORIZED_BODY,
                    {
                        "Content-Type": "application/json",
                        REQUEST_ID_HEADER: event["requestContext"]["requestId"],
                    },
                )
            event["requestContext"]["authorizer"] = context
        response = self.api_handler(event, LambdaContext())
        raw = response.get("body")
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, ", ".join(values))
        # The id the API logs as correlation_id, so that a client can find its request in the logs.
        headers[REQUEST_ID_HEADER] = event["requestContext"]["requestId"]
        return HttpResult(response["statusCode"], json.loads(raw) if raw else None, headers)


class Server(ThreadingHTTPServer):
    """Every HTTP server of the local stack and its tools: the API, the loopback webhook receiver and
    `tickwork receive`."""

    # Room for bursts of new connections: with the default backlog of 5 the kernel drops a burst's sixth
    # connection attempt, and its client tries again only a second later.
    request_queue_size = 128


def serve(
    gateway: Gateway,
    host: str,
    port: int,
    *,
    ready: Callable[[], bool] = lambda: True,
    console: Console | None = None,
) -> Server:
    """A real HTTP server in front of the gateway; started by the caller with ``serve_forever``. With
    ``console``, it serves the web console at every path outside ``/v1/``."""

    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __getattr__(self, name: str) -> Any:
            # http.server answers 501 to a method without a do_<METHOD>; API Gateway hands every method to
            # the API, which answers 405 with Allow to the ones a path does not have.
            if name.startswith("do_"):
                return self._handle
            raise AttributeError(name)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length < 0:
                    raise ValueError(length)
            except ValueError:
                self.close_connection = True  # the body's end is unknown
                error = gateway_error(
                    "invalid_request", "Content-Length is not a byte count", "Content-Length"
                )
                self._reply(HTTPStatus.BAD_REQUEST, error, {})
                return
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # the body is left unread
                error = gateway_error("payload_too_large", "request body over 10 MiB")
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, error, {})
                return
            raw = self.rfile.read(length) if length else b""
            if console is not None and console.serves(self.command, parts.path):
                self._send_static(console.answer(parts.path))
                return
            if parts.path in UNAUTHENTICATED_PATHS and not ready():
                self._reply(HTTPStatus.SERVICE_UNAVAILABLE, {"status": "starting"}, {})
                return
            event = rest_event(
                self.command,
                parts.path,
                headers=self.headers.items(),
                query=parse_qsl(parts.query, keep_blank_values=True),
                # As API Gateway with binary media type */* sends it: the bytes as received, base64-encoded.
                body=base64.b64encode(raw).decode() if raw else None,
                is_base64_encoded=bool(raw),
                source_ip=self.client_address[0],
            )
            try:
                result = gateway.send(event, authorization=self.headers.get("Authorization"))
            except Exception:  # the API handler answers every client error itself; this is a bug
                logging.getLogger("tickwork").exception(
                    "the API failed", extra={"correlation_id": event["requestContext"]["requestId"]}
                )
                result = HttpResult(
                    500,
                    gateway_error("internal_error", "internal error"),
                    {REQUEST_ID_HEADER: event["requestContext"]["requestId"]},
                )
            self._reply(result.status, result.body, result.headers)

        def _reply(self, status: int, body: Any, headers: Mapping[str, str]) -> None:
            payload = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            sent = set()
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
                    sent.add(name.lower())
            if payload and "content-type" not in sent:
                self.send_header("Content-Type", "application/json")
            # HEAD answers GET's status and headers without the body; the API sends none to measure, so no
            # Content-Length (which would have to be GET's). 204 and 304 never carry one.
            if self.command != "HEAD" and status not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED):
                self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and payload:
                self.wfile.write(payload)

        def _send_static(self, answer: StaticAnswer) -> None:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = Server((host, port), RequestHandler)
    server.daemon_threads = True
    return server


def start_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="tickwork-http", daemon=True
    )
    thread.start()
    return thread
