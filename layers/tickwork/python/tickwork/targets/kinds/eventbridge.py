"""``eventbridge``: an event bus, put one event whose detail is the envelope."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tickwork.domain.models import EVENT_BUS, EventBridgeTarget
from tickwork.domain.targets import AwsTargetPolicy, event_bus_arn
from tickwork.targets.aws import call_aws
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import DeliveryContext
from tickwork.targets.kinds.aws_base import AwsKind
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult, permanent, retryable, success

_EVENTS_RETRYABLE = ("throttl", "internal", "unavailable", "timeout")


class EventBridgeKind(AwsKind):
    type = "eventbridge"
    model = EventBridgeTarget
    actions = ("events:PutEvents",)
    arn_service = "events"
    pattern_words = MappingProxyType(
        {
            EVENT_BUS: "must be an event bus name (letters, digits, '.', '_', '/' and '-', 1 to 256"
            " characters) or an event bus ARN, such as"
            " arn:aws:events:eu-west-1:123456789012:event-bus/my-bus",
        }
    )

    def arn(self, target: EventBridgeTarget, policy: AwsTargetPolicy) -> tuple[str, str]:
        return event_bus_arn(target.event_bus_name, policy), "target.event_bus_name"

    def deliver(
        self, target: EventBridgeTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        return call_aws("EventBridge", "PutEvents", lambda: _put_event(target, body, context))

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        return f"eventbridge {show(target.get('event_bus_name'))} ({show(target.get('detail_type'))})"


def _put_event(target: EventBridgeTarget, body: bytes, context: DeliveryContext) -> TargetResult:
    response = context.clients.events().put_events(
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
        return success()
    entry = (response.get("Entries") or [{}])[0]
    code = entry.get("ErrorCode") or "Unknown"
    message = f"EventBridge PutEvents rejected the event: {code}: {entry.get('ErrorMessage') or ''}"
    if any(marker in code.lower() for marker in _EVENTS_RETRYABLE):
        return retryable("throttled" if "throttl" in code.lower() else "target_unavailable", message)
    return permanent("target_rejected", message)


register(EventBridgeKind())
