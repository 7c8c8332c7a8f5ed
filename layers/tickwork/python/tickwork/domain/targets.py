"""Checks on where a target points, made when a job is created or changed."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from tickwork.domain.models import HttpTarget
from tickwork.errors import InvalidInput

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def parse_ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address written as a host, in any form a client library accepts (dotted, decimal, hex)."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not host or not all(part.isalnum() for part in host.split(".")):
        return None
    try:
        # The C resolver's reading: accepts 127.1, 0177.0.0.1, 0x7f.1 and 2130706433 as clients do.
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def check_http_target(target: HttpTarget, *, allow_private: bool) -> None:
    """Refuse URLs that name a private, loopback or link-local host outright. Names that resolve to such
    addresses are refused again when the worker connects."""
    if allow_private:
        return
    host = (urlsplit(target.url).hostname or "").rstrip(".").lower()
    address = parse_ip_literal(host)
    if (
        host in _LOCAL_NAMES
        or host.endswith(".localhost")
        or (address is not None and not is_public_address(address))
    ):
        raise InvalidInput(
            f"target host {host!r} is a private, loopback or link-local address",
            field="target.url",
            code="target_not_allowed",
        )
