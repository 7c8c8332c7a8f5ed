"""What a kind of target is to tickwork: the one protocol every place that handles targets goes through.

A kind is named by the ``type`` value of its JSON, and brings its model, the checks made when a job names it,
its delivery, the IAM actions the worker needs to call it, and a one-line description for the CLI. Kinds are
registered in :mod:`tickwork.targets.registry`; the built-in ones live in :mod:`tickwork.targets.kinds`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from tickwork.domain.targets import AwsTargetPolicy
from tickwork.targets.aws import TargetClients
from tickwork.targets.envelope import Delivery
from tickwork.targets.http import Resolver
from tickwork.targets.result import TargetResult

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class CheckContext:
    """What the deployment allows, for checking a target when a job is created or changed."""

    allow_private: bool
    """Webhooks may name private, loopback and link-local hosts (local mode)."""
    aws_targets: AwsTargetPolicy | None
    """The ARN patterns jobs may name; None when every ARN is allowed (local mode)."""
    max_timeout_seconds: int
    """The longest call a target may ask for: the worker must record the outcome before its own timeout."""


@dataclass(frozen=True)
class DeliveryContext:
    """What a delivery may use besides the target and the attempt."""

    clients: TargetClients
    allow_private: bool
    now_epoch: int
    resolver: Resolver


class TargetKind(Protocol[T]):
    """One kind of target, registered under :attr:`type`."""

    @property
    def type(self) -> str:
        """The ``type`` value of the target's JSON, which selects the kind."""
        ...

    @property
    def model(self) -> builtins.type[T]:
        """The pydantic model of the target, with ``type: Literal[<type>]``."""
        ...

    @property
    def actions(self) -> tuple[str, ...]:
        """The IAM actions the worker needs to deliver to targets of this kind; none for a webhook."""
        ...

    @property
    def arn_service(self) -> str | None:
        """The service of the ARNs that name targets of this kind in ``allowed_target_arns``, such as
        ``sqs``; None when no ARN names them."""
        ...

    @property
    def payload_limit(self) -> int | None:
        """The most payload bytes one delivery can carry, if the kind has a limit of its own."""
        ...

    @property
    def pattern_words(self) -> Mapping[str, str]:
        """What a value of each patterned field of the model looks like, in words, for error messages, by
        the pattern (those that are not a plain ``^[chars]{m,n}$``, which are put in words as they are)."""
        ...

    def arn(self, target: T, policy: AwsTargetPolicy) -> tuple[str, str] | None:
        """The ARN the target resolves to and the request field that names it; None without an ARN."""
        ...

    def validate(self, target: T, context: CheckContext) -> None:
        """Refuse a target the deployment will not call, with :class:`~tickwork.errors.InvalidInput`
        (code ``target_not_allowed`` when the target is well formed but not allowed here)."""
        ...

    def deliver(self, target: T, delivery: Delivery, body: bytes, context: DeliveryContext) -> TargetResult:
        """Deliver the envelope ``body`` of ``delivery`` once; never raise for what the target does."""
        ...

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        """The target in a few words, from its JSON, for listings; ``show`` writes one value."""
        ...
