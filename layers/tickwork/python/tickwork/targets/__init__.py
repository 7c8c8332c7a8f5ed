"""Target invokers: deliver one run attempt to a webhook, SQS queue, Lambda function, EventBridge bus or
Step Functions state machine, and classify the outcome for the retry policy."""

from __future__ import annotations

from tickwork.targets.aws import LazyClients, TargetClients
from tickwork.targets.envelope import (
    Delivery,
    envelope_body,
    sign,
    signature_header,
    verify_signature,
    webhook_headers,
)
from tickwork.targets.http import Destination, Resolver, check_redirect, resolve_destination
from tickwork.targets.invoke import invoke
from tickwork.targets.kinds.stepfunctions import execution_name
from tickwork.targets.result import TargetResult, classify_status

__all__ = [
    "Delivery",
    "Destination",
    "LazyClients",
    "Resolver",
    "TargetClients",
    "TargetResult",
    "check_redirect",
    "classify_status",
    "envelope_body",
    "execution_name",
    "invoke",
    "resolve_destination",
    "sign",
    "signature_header",
    "verify_signature",
    "webhook_headers",
]
