"""The REST API: the routes of ``docs/openapi.json`` behind a TOKEN authorizer, except ``/v1/health``."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import LOG_RETENTION_DAYS, StageConfig

OPENAPI = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
HEALTH_PATH = "/v1/health"
ANY_METHOD = "ANY"


def api_routes(openapi: Path = OPENAPI) -> dict[str, list[str]]:
    """Path -> HTTP methods, from the document the resolver generates (a test keeps it current)."""
    document = json.loads(openapi.read_text())
    return {path: sorted(method.upper() for method in methods) for path, methods in document["paths"].items()}


# API Gateway's own refusals, rewritten into tickwork's error shape so clients parse one format.
# The defaults keep API Gateway's status code.
GATEWAY_ERRORS: dict[str, tuple[apigateway.ResponseType, str | None, str]] = {
    "Unauthorized": (apigateway.ResponseType.UNAUTHORIZED, "401", "unauthorized"),
    "AccessDenied": (apigateway.ResponseType.ACCESS_DENIED, "401", "unauthorized"),
    "MissingToken": (apigateway.ResponseType.MISSING_AUTHENTICATION_TOKEN, "404", "not_found"),
    "Throttled": (apigateway.ResponseType.THROTTLED, "429", "rate_limited"),
    "TooLarge": (apigateway.ResponseType.REQUEST_TOO_LARGE, "413", "payload_too_large"),
    "Default4xx": (apigateway.ResponseType.DEFAULT_4_XX, None, "bad_request"),
    "Default5xx": (apigateway.ResponseType.DEFAULT_5_XX, None, "gateway_error"),
}


class Api(Construct):
    """API Gateway (REST) with the api function behind a cached TOKEN authorizer."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        handler: lambda_.IFunction,
        authorizer_function: lambda_.IFunction,
        log_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays[LOG_RETENTION_DAYS[config.log_retention_days]],
            encryption_key=log_key,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.rest_api = apigateway.RestApi(
            self,
            "Api",
            rest_api_name=f"tickwork-{config.stage}",
            description="tickwork job scheduler API",
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            # Request bodies reach the API base64-encoded, exactly as sent, whatever their Content-Type: the
            # API itself refuses a body that is not JSON in UTF-8 (tickwork.api.protocol), where API Gateway
            # would pass it on as text with invalid bytes replaced.
            binary_media_types=["*/*"],
            cloud_watch_role=False,
            deploy_options=apigateway.StageOptions(
                stage_name=config.stage,
                tracing_enabled=True,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                metrics_enabled=True,
                access_log_destination=apigateway.LogGroupLogDestination(self.access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        self.authorizer = apigateway.TokenAuthorizer(
            self,
            "Authorizer",
            handler=authorizer_function,
            identity_source=apigateway.IdentitySource.header("Authorization"),
            results_cache_ttl=Duration.seconds(config.authorizer_cache_seconds),
        )
        # One invoke permission for the whole API rather than two per method.
        integration = apigateway.LambdaIntegration(
            handler, proxy=True, allow_test_invoke=False, scope_permission_to_method=False
        )
        self.methods: dict[tuple[str, str], apigateway.Method] = {}
        for path, methods in api_routes().items():
            resource = self.rest_api.root.resource_for_path(path)
            # ANY hands every other method of a route's path (HEAD, OPTIONS, PUT...) to the API, which answers
            # as HTTP says: HEAD as GET without the body, OPTIONS and 405 with Allow (tickwork.api.protocol).
            # Without it API Gateway answers them "Missing Authentication Token" (a 404, below).
            for method in (*methods, ANY_METHOD):
                public = path == HEALTH_PATH
                self.methods[(path, method)] = resource.add_method(
                    method,
                    integration,
                    authorizer=None if public else self.authorizer,
                    authorization_type=(
                        apigateway.AuthorizationType.NONE if public else apigateway.AuthorizationType.CUSTOM
                    ),
                )
        for construct_name, (response_type, status, code) in GATEWAY_ERRORS.items():
            self.rest_api.add_gateway_response(
                construct_name,
                type=response_type,
                status_code=status,
                # messageString is already a quoted JSON string.
                templates={
                    "application/json": (
                        f'{{"error": {{"code": "{code}", "message": $context.error.messageString}}}}'
                    )
                },
                response_headers={"Retry-After": "'1'"} if status == "429" else None,
            )
        self.url = self.rest_api.url
