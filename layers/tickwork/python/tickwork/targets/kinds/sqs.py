"""``sqs``: a queue, sent the envelope as one message (kept in order per job and deduplicated on FIFO)."""

from __future__ import annotations

import hashlib
import re
from types import MappingProxyType
from typing import Any

from tickwork.domain.models import SQS_QUEUE_URL, SqsTarget
from tickwork.domain.targets import AwsTargetPolicy, sqs_queue_arn
from tickwork.targets.aws import call_aws
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import DeliveryContext
from tickwork.targets.kinds.aws_base import AwsKind
from tickwork.targets.registry import register
from tickwork.targets.result import TargetResult, success

_SQS_TOKEN = re.compile(r"^[!-~]{1,128}$")


def _sqs_token(value: str) -> str:
    """FIFO group and deduplication ids allow 128 printable ASCII characters."""
    return value if _SQS_TOKEN.match(value) else hashlib.sha256(value.encode()).hexdigest()


class SqsKind(AwsKind):
    type = "sqs"
    model = SqsTarget
    actions = ("sqs:SendMessage",)
    arn_service = "sqs"
    summary_field = "queue_url"
    pattern_words = MappingProxyType(
        {
            SQS_QUEUE_URL: "must be an SQS queue URL, such as"
            " https://sqs.eu-west-1.amazonaws.com/123456789012/my-queue",
        }
    )

    def arn(self, target: SqsTarget, policy: AwsTargetPolicy) -> tuple[str, str]:
        return sqs_queue_arn(target.queue_url, policy), "target.queue_url"

    def deliver(
        self, target: SqsTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        return call_aws("SQS", "SendMessage", lambda: _send(target, delivery, body, context))


def _send(target: SqsTarget, delivery: Delivery, body: bytes, context: DeliveryContext) -> TargetResult:
    extra: dict[str, Any] = {}
    if target.queue_url.endswith(".fifo"):
        # One group per job keeps a job's runs in order; one dedup id per attempt drops a re-sent attempt.
        extra = {
            "MessageGroupId": _sqs_token(delivery.job_id),
            "MessageDeduplicationId": _sqs_token(f"{delivery.run_id}:a{delivery.attempt}"),
        }
    context.clients.sqs().send_message(
        QueueUrl=target.queue_url,
        MessageBody=body.decode(),
        MessageAttributes={
            "tickwork-run-id": {"DataType": "String", "StringValue": delivery.run_id},
            "tickwork-attempt": {"DataType": "Number", "StringValue": str(delivery.attempt)},
        },
        **extra,
    )
    return success()


register(SqsKind())
