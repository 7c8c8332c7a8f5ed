"""``stepfunctions``: a state machine, started with the envelope as input, once per run attempt."""

from __future__ import annotations

import hashlib
import re
from types import MappingProxyType

from botocore.exceptions import ClientError

from tickwork.domain.models import STATE_MACHINE_ARN, StepFunctionsTarget
from tickwork.domain.targets import AwsTargetPolicy
from tickwork.targets.aws import call_aws
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import DeliveryContext
from tickwork.targets.kinds.aws_base import AwsKind
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult, success

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_PLAIN_RUN_ID = re.compile(r"^[A-Za-z0-9:-]+$")
MAX_EXECUTION_NAME = 80


def execution_name(run_id: str, attempt: int) -> str:
    """A Step Functions execution name unique to this run attempt: at most 80 of ``[A-Za-z0-9_-]``.

    Two attempts must never share a name, since a taken name reads as "already started". Turning ``:`` into
    ``_`` loses nothing when the run id has no ``_`` of its own; any other run id gets a hash of itself.
    """
    suffix = f"-a{attempt}"
    safe = _UNSAFE_NAME_CHARS.sub("_", run_id)
    if _PLAIN_RUN_ID.match(run_id) and len(safe) + len(suffix) <= MAX_EXECUTION_NAME:
        return safe + suffix
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
    head = safe[: MAX_EXECUTION_NAME - len(suffix) - len(digest) - 1]
    return f"{head}_{digest}{suffix}"


class StepFunctionsKind(AwsKind):
    type = "stepfunctions"
    model = StepFunctionsTarget
    actions = ("states:StartExecution",)
    arn_service = "states"
    summary_field = "state_machine_arn"
    pattern_words = MappingProxyType(
        {
            STATE_MACHINE_ARN: "must be a Step Functions state machine ARN, such as"
            " arn:aws:states:eu-west-1:123456789012:stateMachine:my-machine",
        }
    )

    def arn(self, target: StepFunctionsTarget, policy: AwsTargetPolicy) -> tuple[str, str]:
        return target.state_machine_arn, "target.state_machine_arn"

    def deliver(
        self, target: StepFunctionsTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        return call_aws(
            "Step Functions", "StartExecution", lambda: _start_execution(target, delivery, body, context)
        )


def _start_execution(
    target: StepFunctionsTarget, delivery: Delivery, body: bytes, context: DeliveryContext
) -> TargetResult:
    try:
        context.clients.stepfunctions().start_execution(
            stateMachineArn=target.state_machine_arn,
            name=execution_name(delivery.run_id, delivery.attempt),
            input=body.decode(),
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            return success()  # this very attempt was started before: a duplicate delivery
        raise
    return success()


register(StepFunctionsKind())
