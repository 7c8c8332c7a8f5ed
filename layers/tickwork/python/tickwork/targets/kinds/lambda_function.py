"""``lambda``: a Lambda function, invoked asynchronously with the envelope."""

from __future__ import annotations

from types import MappingProxyType

from tickwork.domain.models import LAMBDA_ARN, LambdaTarget
from tickwork.domain.targets import AwsTargetPolicy
from tickwork.targets.aws import call_aws
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import DeliveryContext
from tickwork.targets.kinds.aws_base import AwsKind
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult, success


class LambdaKind(AwsKind):
    type = "lambda"
    model = LambdaTarget
    actions = ("lambda:InvokeFunction",)
    arn_service = "lambda"
    summary_field = "function_arn"
    pattern_words = MappingProxyType(
        {
            LAMBDA_ARN: "must be a Lambda function ARN, such as"
            " arn:aws:lambda:eu-west-1:123456789012:function:my-function"
            " (a version or an alias may follow, as in ...:my-function:live)",
        }
    )

    def arn(self, target: LambdaTarget, policy: AwsTargetPolicy) -> tuple[str, str]:
        return target.function_arn, "target.function_arn"

    def deliver(
        self, target: LambdaTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        return call_aws("Lambda", "Invoke", lambda: _invoke(target, body, context))


def _invoke(target: LambdaTarget, body: bytes, context: DeliveryContext) -> TargetResult:
    response = context.clients.lambda_().invoke(
        FunctionName=target.function_arn, InvocationType="Event", Payload=body
    )
    return success(response.get("StatusCode"))


register(LambdaKind())
