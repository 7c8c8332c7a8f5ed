"""Checks on where a target points, made when a job is created or changed."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from pydantic import BaseModel

from tickwork.domain.models import MAX_AWS_PAYLOAD_BYTES, HttpTarget, JobSpec, payload_size
from tickwork.errors import InvalidInput, PayloadTooLarge

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


# IPv6 forms that carry an IPv4 address for a translator or a tunnel to reach, which the standard library
# (3.11) calls global: NAT64's well-known prefix, its local-use prefix, and the deprecated IPv4-compatible
# and site-local ranges.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NEVER_PUBLIC = (
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("fec0::/10"),
)


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Global unicast, and so is any IPv4 address inside it that IPv4-mapping, NAT64 or 6to4 delivers to."""
    if isinstance(address, ipaddress.IPv4Address):
        return address.is_global and not address.is_multicast
    if address.ipv4_mapped is not None:
        return is_public_address(address.ipv4_mapped)
    if not address.is_global or address.is_multicast or any(address in net for net in _NEVER_PUBLIC):
        return False
    embedded = [address.sixtofour]
    if address in _NAT64:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF))
    return all(is_public_address(inner) for inner in embedded if inner is not None)


def check_payload_fits(spec: JobSpec, limit: int | None) -> None:
    """A target kind with a payload ``limit`` receives the payload inside the envelope, in one message: an AWS
    target in one of at most 256 KiB."""
    if limit is None:
        return
    size = payload_size(spec.payload)
    if size > limit:
        why = " (256 KiB less room for the envelope)" if limit == MAX_AWS_PAYLOAD_BYTES else ""
        raise PayloadTooLarge(
            f"payload is {size} bytes once serialized; a {spec.target.type} target takes at most "
            f"{limit}{why}",
            field="payload",
        )


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


_SQS_HOST = re.compile(r"^sqs\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


@dataclass(frozen=True)
class AwsTargetPolicy:
    """The AWS targets jobs may name in deployed mode: ARN patterns with ``*`` and ``?`` wildcards, the same
    patterns the worker's IAM policy allows. No patterns means no AWS target at all."""

    patterns: tuple[str, ...]
    region: str
    account: str
    partition: str = "aws"


def sqs_queue_arn(queue_url: str, policy: AwsTargetPolicy) -> str:
    """The ARN of the queue at ``queue_url``; a URL without the region in its host is in the deployment's."""
    url = urlsplit(queue_url)
    host = _SQS_HOST.match(url.hostname or "")
    account, name = url.path.strip("/").split("/", 1)
    region = host["region"] if host else policy.region
    return f"arn:{policy.partition}:sqs:{region}:{account}:{name}"


def event_bus_arn(bus: str, policy: AwsTargetPolicy) -> str:
    """The ARN of an event bus given by name (in the deployment's account and region) or by ARN."""
    if bus.startswith("arn:"):
        return bus
    return f"arn:{policy.partition}:events:{policy.region}:{policy.account}:event-bus/{bus}"


def check_arn_allowed(arn: str, field: str, policy: AwsTargetPolicy | None) -> None:
    """Refuse an AWS target outside the allowed patterns, rather than let every run of it fail on IAM."""
    if policy is None:
        return
    if not any(fnmatchcase(arn, pattern) for pattern in policy.patterns):
        raise InvalidInput(
            f"target {arn} is not among this deployment's allowed target ARNs",
            field=field,
            code="target_not_allowed",
        )


def target_arn(target: BaseModel, policy: AwsTargetPolicy) -> tuple[str, str]:
    """The ARN a target resolves to, and the request field that names it, as its kind says."""
    from tickwork.targets.registry import kind_of  # the kinds build on this module

    resolved = kind_of(target).arn(target, policy)
    if resolved is None:
        raise ValueError(f"a {target.type} target is not named by an ARN")  # type: ignore[attr-defined]
    return resolved


def check_aws_target(target: BaseModel, policy: AwsTargetPolicy | None) -> None:
    """Refuse an AWS target outside the allowed patterns, rather than let every run of it fail on IAM."""
    if policy is None:
        return
    check_arn_allowed(*target_arn(target, policy), policy)
