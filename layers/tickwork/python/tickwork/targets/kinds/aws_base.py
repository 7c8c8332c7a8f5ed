"""What the AWS kinds share: a payload limit of one AWS message, and the ARN allow-list check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tickwork.domain.models import MAX_AWS_PAYLOAD_BYTES
from tickwork.domain.targets import AwsTargetPolicy, check_arn_allowed
from tickwork.targets.kind import CheckContext


class AwsKind:
    """A target named by an ARN that jobs may name only when ``allowed_target_arns`` matches it."""

    payload_limit: int | None = MAX_AWS_PAYLOAD_BYTES
    summary_field: str = ""
    """The field the CLI shows after the type."""

    def arn(self, target: Any, policy: AwsTargetPolicy) -> tuple[str, str] | None:
        raise NotImplementedError

    def validate(self, target: Any, context: CheckContext) -> None:
        if context.aws_targets is None:
            return
        resolved = self.arn(target, context.aws_targets)
        assert resolved is not None  # an AWS kind always resolves to an ARN
        check_arn_allowed(*resolved, context.aws_targets)

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        if self.summary_field not in target:
            return show(target.get("type"))
        return f"{show(target.get('type'))} {show(target[self.summary_field])}"
