"""``http``: a webhook, POSTed the envelope with tickwork's signed headers (:mod:`tickwork.targets.http`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tickwork.domain.models import HttpTarget
from tickwork.domain.targets import AwsTargetPolicy, check_http_target
from tickwork.errors import InvalidInput
from tickwork.targets.envelope import Delivery
from tickwork.targets.http import invoke_http
from tickwork.targets.kind import CheckContext, DeliveryContext
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult


class HttpKind:
    type = "http"
    model = HttpTarget
    actions: tuple[str, ...] = ()
    arn_service: str | None = None
    payload_limit: int | None = None
    pattern_words: Mapping[str, str] = MappingProxyType({})

    def arn(self, target: HttpTarget, policy: AwsTargetPolicy) -> tuple[str, str] | None:
        return None

    def validate(self, target: HttpTarget, context: CheckContext) -> None:
        check_http_target(target, allow_private=context.allow_private)
        if target.timeout_seconds > context.max_timeout_seconds:
            raise InvalidInput(
                f"target.timeout_seconds may be at most {context.max_timeout_seconds} here",
                field="target.timeout_seconds",
            )

    def deliver(
        self, target: HttpTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        return invoke_http(
            target,
            delivery,
            body,
            allow_private=context.allow_private,
            now_epoch=context.now_epoch,
            resolver=context.resolver,
        )

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        return f"http {show(target.get('method') or 'POST')} {show(target.get('url'))}"


register(HttpKind())
