"""Deliver one attempt of a run to its target and classify what happened.

:func:`invoke` never raises for anything the target or the network does: every failure becomes a
:class:`TargetResult` whose ``outcome`` feeds :func:`tickwork.domain.retry.decide_retry`. Each kind of target
has its module in :mod:`tickwork.targets.kinds`, found by ``type`` in :mod:`tickwork.targets.registry`.
"""

from __future__ import annotations

import socket

from pydantic import BaseModel

from tickwork.targets.aws import TargetClients
from tickwork.targets.envelope import Delivery, envelope_body
from tickwork.targets.http import Resolver
from tickwork.targets.kind import DeliveryContext
from tickwork.targets.registry import kind_of
from tickwork.targets.result import TargetResult, permanent


def invoke(
    target: BaseModel,
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
    context = DeliveryContext(
        clients=clients, allow_private=allow_private, now_epoch=now_epoch, resolver=resolver
    )
    return kind_of(target).deliver(target, delivery, body, context)
