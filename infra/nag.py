"""cdk-nag findings reviewed and accepted: each is acknowledged on one resource, with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from infra.api import HEALTH_PATH
from infra.stack import TickworkStack
from infra.web import ConsoleStack

PACK = "AwsSolutions::"


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{PACK}AwsSolutions-{rule}", reason=reason))


def suppress_reviewed_findings(stack: TickworkStack) -> None:
    for function in (
        stack.api_function,
        stack.authorizer_function,
        stack.planner_function,
        *stack.worker_functions,
        stack.indexer_function,
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
    acknowledge(
        stack.indexer_function.role,
        "IAM5[Resource::*]",
        "The stream's event source mapping needs dynamodb:ListStreams, which supports no resource-level "
        "permissions; reading records is granted on the runs table's stream alone.",
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


# The wildcards of the grant that BucketDeployment gives its function on the bucket it copies from (the CDK
# assets bucket) and the one it copies to (the console bucket), and the invalidation it makes.
DEPLOYMENT_WILDCARDS = (
    "Action::s3:GetBucket*",
    "Action::s3:GetObject*",
    "Action::s3:List*",
    "Action::s3:Abort*",
    "Action::s3:DeleteObject*",
)


def suppress_console_findings(stack: ConsoleStack) -> None:
    console = stack.console
    distribution = console.distribution
    acknowledge(
        distribution,
        "CFR1",
        "The console is a sign-in page and static files, and the API under /v1/ is reachable worldwide "
        "directly as well; restricting countries is a deployment's policy, not tickwork's.",
    )
    acknowledge(
        distribution,
        "CFR2",
        "As for the API stage (APIG3): the per-tenant limits and API Gateway's throttling protect the API; "
        "attach a WAF web ACL to the distribution where the account policy asks for one.",
    )
    acknowledge(
        distribution,
        "CFR3",
        "The distribution serves the console's public static files; every API call through it is logged by "
        "the API stage's JSON access logs, with the caller's address.",
    )
    acknowledge(
        distribution,
        "CFR4",
        "With the default *.cloudfront.net certificate CloudFront sets the viewer TLS policy itself; a "
        "custom domain with an ACM certificate takes TLSv1.2_2021. Origins are reached over TLS 1.2 only.",
    )
    acknowledge(
        console.bucket,
        "S1",
        "The bucket holds only the console's build, written by the deployment and read only by CloudFront "
        "through origin access control; CloudTrail records the deployment's writes.",
    )
    policy = console.deployment_role.node.find_child("DefaultPolicy")
    bucket = console.bucket.node.default_child
    assert isinstance(bucket, s3.CfnBucket)
    for finding in (
        *DEPLOYMENT_WILDCARDS,
        f"Resource::<{stack.get_logical_id(bucket)}.Arn>/*",
        "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
    ):
        acknowledge(
            policy,
            f"IAM5[{finding}]",
            "BucketDeployment's grant to copy the console build from the CDK assets bucket into the console "
            "bucket, objects under both, and nothing else.",
        )
    acknowledge(
        policy,
        "IAM5[Resource::*]",
        "BucketDeployment grants cloudfront:CreateInvalidation and GetInvalidation on every distribution; "
        "its function runs only during a deployment, to invalidate the console's index.html.",
    )
    for child in stack.node.children:
        if child.node.id.startswith("Custom::CDKBucketDeployment"):
            handler = child.node.default_child
            if isinstance(handler, lambda_.CfnFunction):
                acknowledge(
                    handler,
                    "L1",
                    "BucketDeployment's own function, whose runtime the CDK chooses with the AWS CLI layer "
                    "it bundles; it runs only during a deployment.",
                )
