"""``pool``: a run waits in a pool of the tenant's own workers, which claim it and report on it through the
pool routes (``tickwork.app.pools``). Nothing is called: the worker Lambda hands the run to its pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tickwork.domain.pools import POOL_NAME, PoolTarget
from tickwork.domain.targets import AwsTargetPolicy
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import CheckContext, DeliveryContext
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult, permanent


class PoolKind:
    type = "pool"
    model = PoolTarget
    actions: tuple[str, ...] = ()
    arn_service = None
    payload_limit = None
    pattern_words = MappingProxyType(
        {POOL_NAME: "must be 1-64 lowercase letters, digits or -, starting with a letter or digit"}
    )

    def arn(self, target: PoolTarget, policy: AwsTargetPolicy) -> tuple[str, str] | None:
        return None

    def validate(self, target: PoolTarget, context: CheckContext) -> None:
        """A pool is the tenant's own: nothing of the deployment's to allow."""

    def deliver(
        self, target: PoolTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        # The worker hands a pool run to its pool before any call: reaching here is a fault, not retried.
        return permanent("pool_not_callable", "a pool run is claimed by its pool's workers, never called")

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        return f"{show(target.get('type'))} {show(target.get('pool'))}"


POOL_KIND = register(PoolKind())
