"""cdk-nag findings reviewed and accepted: each is acknowledged on one resource, with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

from infra.api import HEALTH_PATH
from infra.stack import TickworkStack

PACK = "AwsSolutions::"


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{PACK}AwsSolutions-{rule}", reason=reason))


def suppress_reviewed_findings(stack: TickworkStack) -> None:
    for function in (
        stack.api_function,
        stack.authorizer_function,
        stack.planner_function,
        *stack.worker_functions,
    ):
        acknowledge(
            function.function,
            "L1",
            "Pinned to Python 3.13: the dependencies layer is built for cp313 manylinux arm64 wheels; "
            "moving runtime is a deliberate change together with `make build`.",
        )
        acknowledge(
            function.role,
            "IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions.",
        )
    for worker in stack.worker_functions:
        for pattern in stack.config.allowed_target_arns:
            if "*" in pattern:
                acknowledge(
                    worker.role,
                    f"IAM5[Resource::{pattern}]",
                    "An operator-configured allow-list of target ARNs (allowed_target_arns) the worker may "
                    "call.",
                )

    api = stack.api
    for (path, _method), method in api.methods.items():
        if path == HEALTH_PATH:
            acknowledge(method, "APIG4", "The health check is public by design and returns no tenant data.")
            acknowledge(method, "COG4", "The health check is public by design and returns no tenant data.")
        else:
            acknowledge(
                method,
                "COG4",
                "Tenants are machines holding API tokens, checked by the TOKEN authorizer against SHA-256 "
                "hashes "
                "in the tenants table; a Cognito user pool does not fit machine tokens.",
            )
    acknowledge(
        api.rest_api,
        "APIG2",
        "Bodies and parameters are validated by the api function with the same pydantic models that generate "
        "docs/openapi.json, so every refusal names the field in tickwork's error shape.",
    )
    stage = api.rest_api.deployment_stage
    acknowledge(
        stage,
        "APIG6",
        "JSON access logs are on; execution logging needs an account-wide API Gateway CloudWatch role, which "
        "one application stack should not take over.",
    )
    acknowledge(
        stage,
        "APIG3",
        "Stage throttling and the per-tenant limits protect the API; attach a WAF web ACL where the account "
        "policy asks for one.",
    )
    acknowledge(
        stack.storage.dead_run_queue,
        "SQS3",
        "The dead-run queue is the end of the line for runs that exhausted their retries; it is alarmed on.",
    )
