"""Webhook delivery: urllib3 with our own redirect handling, so every hop is checked against the
private-address policy.

When private addresses are refused, the host is resolved once with the injected resolver, every address is
checked, and the connection is made to a checked address (with the original name in ``Host`` and in TLS SNI
and certificate checks). Connecting by name instead would resolve a second time, and a DNS answer that
changed in between (DNS rebinding) would slip past the check.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.exceptions import HTTPError as Urllib3HTTPError
from urllib3.exceptions import LocationValueError, NewConnectionError, SSLError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError

from tickwork.domain.models import HttpTarget
from tickwork.domain.retry import OutcomeClass
from tickwork.domain.targets import is_public_address, parse_ip_literal
from tickwork.targets.envelope import Delivery, webhook_headers
from tickwork.targets.result import (
    REFUSED_CODE,
    TargetResult,
    accepted,
    classify_status,
    clip,
    permanent,
    refused,
    retryable,
    success,
)

Resolver = Callable[[str, int], Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]
"""``socket.getaddrinfo``'s shape: ``(host, port) -> [(family, type, proto, canonname, sockaddr), ...]``."""

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_ERROR_BODY_BYTES = 4096
MAX_CONNECT_SECONDS = 5
ACCEPTED = 202
"""The webhook took the attempt on and continues it through the run's heartbeat, complete and fail routes."""
# A workflow task's output (its webhook's 2xx JSON body) is kept up to this size, for its children.
MAX_TASK_OUTPUT_BYTES = 16 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}


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
        return permanent(REFUSED_CODE, f"URL scheme {scheme!r} is not allowed; use http or https")
    try:
        host = (parts.hostname or "").rstrip(".")
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
        port = parts.port or _DEFAULT_PORTS[scheme]
    except (ValueError, UnicodeError):
        return permanent("bad_url", "URL has an invalid host or port")
    if not host:
        return permanent("bad_url", "URL names no host")
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
            return retryable("connection_error", f"could not resolve host {host!r}")
        addresses = []
        for info in infos:
            try:
                # Drop an IPv6 zone ("fe80::1%eth0"): the address alone decides.
                addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except ValueError:
                return refused(host)
        if not addresses:
            return retryable("connection_error", f"could not resolve host {host!r}")
    # Any bad address refuses the host: which one a client picks is not ours to predict.
    if not all(is_public_address(address) for address in addresses):
        return refused(host)
    # IPv4 first: Lambda functions often have no IPv6 route out.
    return str(min(addresses, key=lambda address: address.version))


def check_redirect(
    location: str, base_url: str, *, allow_private: bool, resolver: Resolver
) -> Destination | TargetResult:
    """Where a redirect from ``base_url`` to ``location`` leads, checked like the first URL was."""
    url = urljoin(base_url, location.strip())
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return permanent(REFUSED_CODE, f"redirect to a {scheme!r} URL is not allowed")
    return resolve_destination(url, allow_private=allow_private, resolver=resolver)


@dataclass(frozen=True)
class _Reply:
    status: int
    location: str | None
    excerpt: str
    output: Any = None


@lru_cache(maxsize=1)
def _pool_manager() -> urllib3.PoolManager:
    # Built on first use, shared by every invocation in the process.
    return urllib3.PoolManager(num_pools=32)


def invoke_http(
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
    if delivery.lease_token is not None:
        hidden.append(delivery.lease_token)
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
        reply = _exchange(
            destination, method, payload, headers, timeout, hidden, keep_output=delivery.parents is not None
        )
        if isinstance(reply, TargetResult):
            return reply
        if reply.status not in REDIRECT_STATUSES:
            return _status_result(reply, destination.host)
        if hop == MAX_REDIRECTS:
            return permanent(
                "too_many_redirects",
                f"more than {MAX_REDIRECTS} redirects, the last from {destination.host!r}",
                reply.status,
            )
        if not reply.location:
            return permanent(
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
    if reply.status == ACCEPTED:
        return accepted(reply.status)
    if outcome is OutcomeClass.SUCCESS:
        return replace(success(reply.status), output=reply.output)
    message = f"HTTP {reply.status} from {host!r}" + (f": {reply.excerpt}" if reply.excerpt else "")
    return TargetResult(outcome, reply.status, f"http_{reply.status}", clip(message))


def _exchange(
    destination: Destination,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: urllib3.Timeout,
    hidden: Sequence[str],
    *,
    keep_output: bool = False,
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
        return retryable("connection_error", f"could not connect to {host!r}")
    except Urllib3TimeoutError:
        return retryable("timeout", f"no response from {host!r} within {timeout.read_timeout} s")
    except SSLError:
        return retryable("tls_error", f"TLS handshake with {host!r} failed")
    except LocationValueError:
        return permanent("bad_url", f"URL for {host!r} is not valid")
    except ValueError:
        # A header stored before values were limited to printable ASCII cannot be encoded: it never will be.
        return permanent("invalid_header", "a header of the target cannot be sent")
    except (Urllib3HTTPError, OSError) as error:
        return retryable("connection_error", f"connection to {host!r} failed ({type(error).__name__})")
    try:
        status = response.status
        location = response.headers.get("Location")
        excerpt, output = "", None
        succeeded = classify_status(status) is OutcomeClass.SUCCESS
        if not succeeded and status not in REDIRECT_STATUSES:
            excerpt = _read_excerpt(response, hidden)
        elif succeeded and keep_output and status != ACCEPTED:
            output = _read_output(response)
    finally:
        # Closed rather than drained: a hostile target could send an endless body.
        response.close()
        response.release_conn()
    return _Reply(status, location, excerpt, output)


def _read_output(response: urllib3.BaseHTTPResponse) -> Any:
    """A task's output: its 2xx body if JSON of at most ``MAX_TASK_OUTPUT_BYTES``; else none (a body that is
    not JSON, or larger, is not a result its children could read)."""
    try:
        raw = response.read(MAX_TASK_OUTPUT_BYTES + 1)
    except (Urllib3HTTPError, OSError):
        return None
    if not raw or len(raw) > MAX_TASK_OUTPUT_BYTES:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _read_excerpt(response: urllib3.BaseHTTPResponse, hidden: Sequence[str]) -> str:
    try:
        raw = response.read(MAX_ERROR_BODY_BYTES)
    except (Urllib3HTTPError, OSError):
        return ""  # the status already tells what matters
    text = clip(raw.decode("utf-8", errors="replace"))
    for value in hidden:
        if len(value) >= 4:
            text = text.replace(value, "[redacted]")
    return text
