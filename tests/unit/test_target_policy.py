"""Which AWS targets a deployment lets jobs name: the same ARN patterns as the worker's IAM policy."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter
from tickwork.domain.models import HttpTarget, Target
from tickwork.domain.targets import AwsTargetPolicy, check_aws_target, check_http_target, target_arn
from tickwork.errors import InvalidInput

POLICY = AwsTargetPolicy(
    patterns=(
        "arn:aws:sqs:eu-west-1:123456789012:orders-*",
        "arn:aws:lambda:eu-west-1:123456789012:function:report",
        "arn:aws:events:eu-west-1:123456789012:event-bus/default",
        "arn:aws:states:*:123456789012:stateMachine:billing-?",
    ),
    region="eu-west-1",
    account="123456789012",
)
TARGETS: Any = TypeAdapter(Target)


@pytest.mark.parametrize(
    ("target", "arn"),
    [
        (
            {"type": "sqs", "queue_url": "https://sqs.us-east-2.amazonaws.com/210987654321/q"},
            "arn:aws:sqs:us-east-2:210987654321:q",
        ),
        (
            {"type": "sqs", "queue_url": "http://localhost:4566/123456789012/q"},
            "arn:aws:sqs:eu-west-1:123456789012:q",
        ),
        (
            {"type": "eventbridge", "event_bus_name": "default", "detail_type": "t"},
            "arn:aws:events:eu-west-1:123456789012:event-bus/default",
        ),
        (
            {
                "type": "lambda",
                "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:report",
            },
            "arn:aws:lambda:eu-west-1:123456789012:function:report",
        ),
    ],
)
def test_each_target_resolves_to_its_arn(target: dict[str, Any], arn: str) -> None:
    assert target_arn(TARGETS.validate_python(target), POLICY)[0] == arn


@pytest.mark.parametrize(
    "target",
    [
        {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders-eu"},
        {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:report"},
        {"type": "eventbridge", "event_bus_name": "default", "detail_type": "t"},
        {
            "type": "stepfunctions",
            "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:billing-1",
        },
    ],
)
def test_targets_matching_a_pattern_are_allowed(target: dict[str, Any]) -> None:
    check_aws_target(TARGETS.validate_python(target), POLICY)


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (
            {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/payments"},
            "target.queue_url",
        ),
        (
            {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/999999999999/orders-x"},
            "target.queue_url",
        ),
        (
            {"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:report:prod"},
            "target.function_arn",
        ),
        ({"type": "eventbridge", "event_bus_name": "audit", "detail_type": "t"}, "target.event_bus_name"),
        (
            {
                "type": "stepfunctions",
                "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:billing-12",
            },
            "target.state_machine_arn",
        ),
    ],
)
def test_targets_outside_every_pattern_are_refused_naming_the_field(
    target: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_aws_target(TARGETS.validate_python(target), POLICY)
    assert refused.value.field == field
    assert refused.value.code == "target_not_allowed"


def test_no_patterns_allow_no_aws_target_and_no_policy_allows_any() -> None:
    target = TARGETS.validate_python({"type": "eventbridge", "event_bus_name": "default", "detail_type": "t"})
    with pytest.raises(InvalidInput):
        check_aws_target(target, AwsTargetPolicy(patterns=(), region="eu-west-1", account="123456789012"))
    check_aws_target(target, None)


# --- webhook hosts given as IP literals -------------------------------------------------------------------
@pytest.mark.parametrize(
    "host",
    [
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::a00:1",  # NAT64 local-use prefix
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "fec0::1",  # site-local
        "::ffff:a9fe:a9fe",  # IPv4-mapped 169.254.169.254
    ],
)
def test_ipv6_literals_carrying_a_private_ipv4_address_are_refused_at_create(host: str) -> None:
    target = TypeAdapter(Target).validate_python({"type": "http", "url": f"http://[{host}]/hook"})
    assert isinstance(target, HttpTarget)

    with pytest.raises(InvalidInput) as refused:
        check_http_target(target, allow_private=False)

    assert (refused.value.code, refused.value.field) == ("target_not_allowed", "target.url")


@pytest.mark.parametrize(
    "host", ["64:ff9b::5db8:d822", "2002:5db8:d822::1", "2606:2800:220:1:248:1893:25c8:1946"]
)
def test_ipv6_literals_carrying_a_public_address_are_allowed(host: str) -> None:
    target = TypeAdapter(Target).validate_python({"type": "http", "url": f"http://[{host}]/hook"})
    assert isinstance(target, HttpTarget)

    check_http_target(target, allow_private=False)
