"""Deliver one attempt of a run to its target and classify what happened.

:func:`invoke` never raises for anything the target or the network does: every failure becomes a
:class:`TargetResult` whose ``outcome`` feeds :func:`tickwork.domain.retry.decide_retry`. Each kind of target
has its module: ``http`` (webhooks, with the private-address checks) and ``aws``.
"""

from __future__ import annotations

import socket

from tickwork.domain.models import HttpTarget, Target
from tickwork.targets.aws import TargetClients, invoke_aws
from tickwork.targets.envelope import Delivery, envelope_body
from tickwork.targets.http import Resolver, invoke_http
from tickwork.targets.result import TargetResult, permanent


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
        return permanent("invalid_payload", f"payload cannot be encoded as JSON: {error}")
    if isinstance(target, HttpTarget):
        return invoke_http(
            target, delivery, body, allow_private=allow_private, now_epoch=now_epoch, resolver=resolver
        )
    return invoke_aws(target, delivery, body, clients)
