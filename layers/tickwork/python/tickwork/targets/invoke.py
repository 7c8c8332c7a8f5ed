"""Deliver one attempt of a run to its target and classify what happened.

:func:`invoke` never raises for anything the target or the network does: every failure becomes a
:class:`TargetResult` whose ``outcome`` feeds :func:`tickwork.domain.retry.decide_retry`.

Webhooks go out through urllib3 with our own redirect handling, so every hop is checked against the
private-address policy. When private addresses are refused, the host is resolved once with the injected
resolver, every address is checked, and the connection is made to a checked address (with the original name
in ``Host`` and in TLS SNI and certificate checks). Connecting by name instead would resolve a second time,
and a DNS answer that changed in between (DNS rebinding) would slip past the check.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, assert_never
from urllib.parse import urljoin, urlsplit

import boto3
import urllib3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    ParamValidationError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import HTTPError as Urllib3HTTPError
from urllib3.exceptions import LocationValueError, NewConnectionError, SSLError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError

from tickwork.domain.models import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
    Target,
)
from tickwork.domain.retry import OutcomeClass
from tickwork.domain.targets import is_public_address, parse_ip_literal
from tickwork.targets.envelope import Delivery, envelope_body, webhook_headers

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

Resolver = Callable[[str, int], Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]
"""``socket.getaddrinfo``'s shape: ``(host, port) -> [(family, type, proto, canonname, sockaddr), ...]``."""

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_ERROR_BODY_BYTES = 4096
MAX_MESSAGE_CHARS = 500
MAX_CONNECT_SECONDS = 5
REFUSED_CODE = "target_not_allowed"
_DEFAULT_PORTS = {"http": 80, "https": 443}


# --- results ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TargetResult:
    """What one delivery attempt came to. ``error_message`` is short and never holds header values or
    secrets: it is stored on the run and shown to the tenant."""

    outcome: OutcomeClass
    status_code: int | None = None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is OutcomeClass.SUCCESS


def _clip(text: str) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def _success(status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.SUCCESS, status_code=status_code)


def _retryable(code: str, message: str, status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.RETRYABLE, status_code, code, _clip(message))


def _permanent(code: str, message: str, status_code: int | None = None) -> TargetResult:
    return TargetResult(OutcomeClass.PERMANENT, status_code, code, _clip(message))


def _refused(host: str) -> TargetResult:
    return _permanent(REFUSED_CODE, f"target host {host!r} is a private, loopback or link-local address")


def classify_status(status: int) -> OutcomeClass:
    """2xx succeeded; 408, 429 and 5xx may pass if tried again; anything else will not."""
    if 200 <= status < 300:
        return OutcomeClass.SUCCESS
    if status in (408, 429) or 500 <= status < 600:
        return OutcomeClass.RETRYABLE
    return OutcomeClass.PERMANENT


# --- clients ----------------------------------------------------------------------------------------------
class TargetClients(Protocol):
    """Where the AWS invokers get their clients; each is built on first use, if at all."""

    def sqs(self) -> SQSClient: ...

    def lambda_(self) -> LambdaClient: ...

    def events(self) -> EventBridgeClient: ...

    def stepfunctions(self) -> SFNClient: ...


# The run-level retry policy does the real retrying; botocore only smooths over brief blips.
DEFAULT_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=15
)


class LazyClients:
    """Builds each boto3 client the first time it is asked for and keeps it. ``endpoint_url`` points every
    client at one endpoint (moto in local mode). Safe to share between threads: a boto3 session must not
    build clients in two threads at once, so building is serialised (the clients themselves are safe)."""

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        config: Config | None = None,
        session: boto3.session.Session | None = None,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self.config = config or DEFAULT_CLIENT_CONFIG
        self._session = session
        self._clients: dict[str, Any] = {}
        self._building = threading.Lock()

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._building:
                client = self._clients.get(service)
                if client is None:
                    if self._session is None:
                        self._session = boto3.session.Session()
                    client = self._clients[service] = self._session.client(
                        service,  # type: ignore[call-overload]
                        region_name=self.region,
                        endpoint_url=self.endpoint_url,
                        config=self.config,
                    )
        return client

    def sqs(self) -> SQSClient:
        client: SQSClient = self._client("sqs")
        return client

    def lambda_(self) -> LambdaClient:
        client: LambdaClient = self._client("lambda")
        return client

    def events(self) -> EventBridgeClient:
        client: EventBridgeClient = self._client("events")
        return client

    def stepfunctions(self) -> SFNClient:
        client: SFNClient = self._client("stepfunctions")
        return client


# --- entry point ------------------------------------------------------------------------------------------
def invoke(
    target: Target,
    delivery: Delivery,
    *,
    clients: TargetClients,
    allow_private: bool,
    now_epoch: int,
    resolver: Resolver = socket.getaddrinfo,
) -> TargetResult:
    """Deliver ``delivery`` to ``target`` once (following webhook redirects) and classify the outcome."""
    try:
        body = envelope_body(delivery)
    except (TypeError, ValueError) as error:
        # Stored payloads were validated, so this is a defect; retrying would fail the same way.
        return _permanent("invalid_payload", f"payload cannot be encoded as JSON: {error}")
    if isinstance(target, HttpTarget):
        return _invoke_http(
            target, delivery, body, allow_private=allow_private, now_epoch=now_epoch, resolver=resolver
        )
    if isinstance(target, SqsTarget):
        return _call_aws("SQS", "SendMessage", lambda: _send_sqs(target, delivery, body, clients))
    if isinstance(target, LambdaTarget):
        return _call_aws("Lambda", "Invoke", lambda: _invoke_lambda(target, body, clients))
    if isinstance(target, EventBridgeTarget):
        return _call_aws("EventBridge", "PutEvents", lambda: _put_event(target, body, clients))
    if isinstance(target, StepFunctionsTarget):
        return _call_aws(
            "Step Functions", "StartExecution", lambda: _start_execution(target, delivery, body, clients)
        )
    assert_never(target)


# --- http -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Destination:
    """One checked hop: the URL, and the address to connect to. ``address`` is None when private targets
    are allowed, and then urllib3 resolves ``host`` itself."""

    url: str
    scheme: str
    host: str
    port: int
    address: str | None
    request_target: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == _DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


def resolve_destination(url: str, *, allow_private: bool, resolver: Resolver) -> Destination | TargetResult:
    """Parse ``url`` and, unless private targets are allowed, check every address its host stands for."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return _permanent(REFUSED_CODE, f"URL scheme {scheme!r} is not allowed; use http or https")
    try:
        host = (parts.hostname or "").rstrip(".")
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
        port = parts.port or _DEFAULT_PORTS[scheme]
    except (ValueError, UnicodeError):
        return _permanent("bad_url", "URL has an invalid host or port")
    if not host:
        return _permanent("bad_url", "URL names no host")
    request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    address: str | None = None
    if not allow_private:
        checked = _checked_address(host, port, resolver)
        if isinstance(checked, TargetResult):
            return checked
        address = checked
    return Destination(url, scheme, host, port, address, request_target)


def _checked_address(host: str, port: int, resolver: Resolver) -> str | TargetResult:
    literal = parse_ip_literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = resolver(host, port)
        except (OSError, UnicodeError):
            return _retryable("connection_error", f"could not resolve host {host!r}")
        addresses = []
        for info in infos:
            try:
                # Drop an IPv6 zone ("fe80::1%eth0"): the address alone decides.
                addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except ValueError:
                return _refused(host)
        if not addresses:
            return _retryable("connection_error", f"could not resolve host {host!r}")
    # Any bad address refuses the host: which one a client picks is not ours to predict.
    if not all(is_public_address(address) for address in addresses):
        return _refused(host)
    # IPv4 first: Lambda functions often have no IPv6 route out.
    return str(min(addresses, key=lambda address: address.version))


def check_redirect(
    location: str, base_url: str, *, allow_private: bool, resolver: Resolver
) -> Destination | TargetResult:
    """Where a redirect from ``base_url`` to ``location`` leads, checked like the first URL was."""
    url = urljoin(base_url, location.strip())
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return _permanent(REFUSED_CODE, f"redirect to a {scheme!r} URL is not allowed")
    return resolve_destination(url, allow_private=allow_private, resolver=resolver)


@dataclass(frozen=True)
class _Reply:
    status: int
    location: str | None
    excerpt: str


@lru_cache(maxsize=1)
def _pool_manager() -> urllib3.PoolManager:
    # Built on first use, shared by every invocation in the process.
    return urllib3.PoolManager(num_pools=32)


def _invoke_http(
    target: HttpTarget,
    delivery: Delivery,
    body: bytes,
    *,
    allow_private: bool,
    now_epoch: int,
    resolver: Resolver,
) -> TargetResult:
    destination = resolve_destination(target.url, allow_private=allow_private, resolver=resolver)
    if isinstance(destination, TargetResult):
        return destination
    tickwork_headers = webhook_headers(delivery, body, now_epoch=now_epoch)
    # Values a careless receiver might echo back into its error page; kept out of stored messages.
    hidden = [*target.headers.values(), tickwork_headers["X-Tickwork-Signature"]]
    timeout = urllib3.Timeout(
        connect=min(MAX_CONNECT_SECONDS, target.timeout_seconds), read=target.timeout_seconds
    )
    first_origin = destination.origin
    method: str = target.method
    payload: bytes | None = body
    for hop in range(MAX_REDIRECTS + 1):
        headers: dict[str, str] = {}
        # The tenant's own headers may hold credentials meant for the host it named, not another one.
        if destination.origin == first_origin:
            headers.update(target.headers)
        headers.update(tickwork_headers)
        if payload is None:
            del headers["Content-Type"]
        headers["Host"] = destination.host_header
        reply = _exchange(destination, method, payload, headers, timeout, hidden)
        if isinstance(reply, TargetResult):
            return reply
        if reply.status not in REDIRECT_STATUSES:
            return _status_result(reply, destination.host)
        if hop == MAX_REDIRECTS:
            return _permanent(
                "too_many_redirects",
                f"more than {MAX_REDIRECTS} redirects, the last from {destination.host!r}",
                reply.status,
            )
        if not reply.location:
            return _permanent(
                "bad_redirect",
                f"HTTP {reply.status} from {destination.host!r} without a Location",
                reply.status,
            )
        following = check_redirect(
            reply.location, destination.url, allow_private=allow_private, resolver=resolver
        )
        if isinstance(following, TargetResult):
            return following
        if reply.status == 303:
            method, payload = "GET", None
        destination = following
    raise AssertionError("unreachable: the loop returns on its last hop")


def _status_result(reply: _Reply, host: str) -> TargetResult:
    outcome = classify_status(reply.status)
    if outcome is OutcomeClass.SUCCESS:
        return _success(reply.status)
    message = f"HTTP {reply.status} from {host!r}" + (f": {reply.excerpt}" if reply.excerpt else "")
    return TargetResult(outcome, reply.status, f"http_{reply.status}", _clip(message))


def _exchange(
    destination: Destination,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: urllib3.Timeout,
    hidden: Sequence[str],
) -> _Reply | TargetResult:
    host = destination.host
    tls: dict[str, Any] = {}
    if destination.scheme == "https":
        # Connected by address, so name the host for SNI and for the certificate check.
        tls = {"server_hostname": host, "assert_hostname": host}
    try:
        pool = _pool_manager().connection_from_host(
            destination.address or host, port=destination.port, scheme=destination.scheme, pool_kwargs=tls
        )
        response = pool.urlopen(
            method,
            destination.request_target,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
            timeout=timeout,
            preload_content=False,
            release_conn=False,
            assert_same_host=False,
        )
    except NewConnectionError:  # before the timeouts: it subclasses ConnectTimeoutError
        return _retryable("connection_error", f"could not connect to {host!r}")
    except Urllib3TimeoutError:
        return _retryable("timeout", f"no response from {host!r} within {timeout.read_timeout} s")
    except SSLError:
        return _retryable("tls_error", f"TLS handshake with {host!r} failed")
    except LocationValueError:
        return _permanent("bad_url", f"URL for {host!r} is not valid")
    except ValueError:
        # A header stored before values were limited to printable ASCII cannot be encoded: it never will be.
        return _permanent("invalid_header", "a header of the target cannot be sent")
    except (Urllib3HTTPError, OSError) as error:
        return _retryable("connection_error", f"connection to {host!r} failed ({type(error).__name__})")
    try:
        status = response.status
        location = response.headers.get("Location")
        excerpt = ""
        if classify_status(status) is not OutcomeClass.SUCCESS and status not in REDIRECT_STATUSES:
            excerpt = _read_excerpt(response, hidden)
    finally:
        # Closed rather than drained: a hostile target could send an endless body.
        response.close()
        response.release_conn()
    return _Reply(status, location, excerpt)


def _read_excerpt(response: urllib3.BaseHTTPResponse, hidden: Sequence[str]) -> str:
    try:
        raw = response.read(MAX_ERROR_BODY_BYTES)
    except (Urllib3HTTPError, OSError):
        return ""  # the status already tells what matters
    text = _clip(raw.decode("utf-8", errors="replace"))
    for value in hidden:
        if len(value) >= 4:
            text = text.replace(value, "[redacted]")
    return text


# --- aws --------------------------------------------------------------------------------------------------
_THROTTLING = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "ExecutionLimitExceeded",
    }
)
_UNAVAILABLE = frozenset(
    {
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
        "InternalFailure",
        "InternalException",
        "InternalServerError",
        "InternalServiceError",
        "ServiceException",
        "RequestTimeout",
        "RequestTimeoutException",
        "ResourceConflictException",  # Lambda: the function is being updated
        "ResourceNotReadyException",
    }
)
_NOT_FOUND = frozenset(
    {
        "ResourceNotFound",
        "ResourceNotFoundException",
        "NonExistentQueue",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "StateMachineDoesNotExist",
        "StateMachineDeleting",
    }
)


def classify_client_error(error: ClientError, *, service: str, operation: str) -> TargetResult:
    """Throttling and service-side failures may pass later; anything else is the target's configuration
    (missing resource, no permission, invalid input) and will not."""
    details = error.response.get("Error", {})
    code = str(details.get("Code") or "Unknown")
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = f"{service} {operation} failed: {code}: {details.get('Message') or ''}".rstrip(": ")
    if code in _THROTTLING or "throttl" in code.lower() or status == 429:
        return _retryable("throttled", message, status)
    if code in _UNAVAILABLE or (status is not None and status >= 500):
        return _retryable("target_unavailable", message, status)
    if code in _NOT_FOUND:
        return _permanent("target_not_found", message, status)
    if "accessdenied" in code.lower().replace(".", "") or status == 403:
        return _permanent("access_denied", message, status)
    return _permanent("target_rejected", message, status)


def _call_aws(service: str, operation: str, call: Callable[[], TargetResult]) -> TargetResult:
    try:
        return call()
    except ClientError as error:
        return classify_client_error(error, service=service, operation=operation)
    except (ConnectTimeoutError, ReadTimeoutError):
        return _retryable("timeout", f"{service} {operation} timed out")
    except (BotoConnectionError, HTTPClientError) as error:
        return _retryable(
            "connection_error", f"{service} {operation} could not connect ({type(error).__name__})"
        )
    except ParamValidationError as error:
        return _permanent("target_rejected", f"{service} {operation} refused the request: {error}")
    except BotoCoreError as error:
        # Credentials or configuration of this deployment, not the target: worth another try.
        return _retryable("aws_error", f"{service} {operation} failed ({type(error).__name__})")


_SQS_TOKEN = re.compile(r"^[!-~]{1,128}$")


def _sqs_token(value: str) -> str:
    """FIFO group and deduplication ids allow 128 printable ASCII characters."""
    return value if _SQS_TOKEN.match(value) else hashlib.sha256(value.encode()).hexdigest()


def _send_sqs(target: SqsTarget, delivery: Delivery, body: bytes, clients: TargetClients) -> TargetResult:
    extra: dict[str, Any] = {}
    if target.queue_url.endswith(".fifo"):
        # One group per job keeps a job's runs in order; one dedup id per attempt drops a re-sent attempt.
        extra = {
            "MessageGroupId": _sqs_token(delivery.job_id),
            "MessageDeduplicationId": _sqs_token(f"{delivery.run_id}:a{delivery.attempt}"),
        }
    clients.sqs().send_message(
        QueueUrl=target.queue_url,
        MessageBody=body.decode(),
        MessageAttributes={
            "tickwork-run-id": {"DataType": "String", "StringValue": delivery.run_id},
            "tickwork-attempt": {"DataType": "Number", "StringValue": str(delivery.attempt)},
        },
        **extra,
    )
    return _success()


def _invoke_lambda(target: LambdaTarget, body: bytes, clients: TargetClients) -> TargetResult:
    response = clients.lambda_().invoke(
        FunctionName=target.function_arn, InvocationType="Event", Payload=body
    )
    return _success(response.get("StatusCode"))


_EVENTS_RETRYABLE = ("throttl", "internal", "unavailable", "timeout")


def _put_event(target: EventBridgeTarget, body: bytes, clients: TargetClients) -> TargetResult:
    response = clients.events().put_events(
        Entries=[
            {
                "EventBusName": target.event_bus_name,
                "Source": target.source,
                "DetailType": target.detail_type,
                "Detail": body.decode(),
            }
        ]
    )
    if not response.get("FailedEntryCount"):
        return _success()
    entry = (response.get("Entries") or [{}])[0]
    code = entry.get("ErrorCode") or "Unknown"
    message = f"EventBridge PutEvents rejected the event: {code}: {entry.get('ErrorMessage') or ''}"
    if any(marker in code.lower() for marker in _EVENTS_RETRYABLE):
        return _retryable("throttled" if "throttl" in code.lower() else "target_unavailable", message)
    return _permanent("target_rejected", message)


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_PLAIN_RUN_ID = re.compile(r"^[A-Za-z0-9:-]+$")
MAX_EXECUTION_NAME = 80


def execution_name(run_id: str, attempt: int) -> str:
    """A Step Functions execution name unique to this run attempt: at most 80 of ``[A-Za-z0-9_-]``.

    Two attempts must never share a name, since a taken name reads as "already started". Turning ``:`` into
    ``_`` loses nothing when the run id has no ``_`` of its own; any other run id gets a hash of itself.
    """
    suffix = f"-a{attempt}"
    safe = _UNSAFE_NAME_CHARS.sub("_", run_id)
    if _PLAIN_RUN_ID.match(run_id) and len(safe) + len(suffix) <= MAX_EXECUTION_NAME:
        return safe + suffix
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
    head = safe[: MAX_EXECUTION_NAME - len(suffix) - len(digest) - 1]
    return f"{head}_{digest}{suffix}"


def _start_execution(
    target: StepFunctionsTarget, delivery: Delivery, body: bytes, clients: TargetClients
) -> TargetResult:
    try:
        clients.stepfunctions().start_execution(
            stateMachineArn=target.state_machine_arn,
            name=execution_name(delivery.run_id, delivery.attempt),
            input=body.decode(),
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            return _success()  # this very attempt was started before: a duplicate delivery
        raise
    return _success()
