"""REST TOKEN authorizer: ``Bearer <token>`` -> SHA-256 -> tenant, returned in the authorizer context."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerResponse,
    APIGatewayAuthorizerTokenEvent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.domain.tenants import parse_bearer
from tickwork.observability import logger, tracer
from tickwork.runtime import runtime

# API Gateway answers 401 only when an authorizer raises exactly this.
UNAUTHORIZED = "Unauthorized"


# Never the event: it holds the token, whatever POWERTOOLS_LOGGER_LOG_EVENT says.
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    policy: dict[str, Any] | None = authorize(event, context)
    if policy is None:
        # Raised outside the tracer, which would log each refused token as an error with its traceback.
        raise Exception(UNAUTHORIZED)
    return policy


@tracer.capture_lambda_handler
def authorize(raw_event: dict[str, Any], context: LambdaContext) -> dict[str, Any] | None:
    """The policy for the token's tenant, or None when the token is no tenant's."""
    event = APIGatewayAuthorizerTokenEvent(raw_event)
    token = parse_bearer(event.authorization_token)
    principal = runtime().tenants.by_token(token) if token else None
    if principal is None:
        logger.debug("token refused")
        return None
    arn = event.parsed_arn
    policy = APIGatewayAuthorizerResponse(
        principal_id=principal.actor,
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        # The API counts requests against this limit without reading the tenant again.
        context={
            "tenant_id": principal.tenant.tenant_id,
            "actor": principal.actor,
            "api_requests_per_second": principal.tenant.api_requests_per_second,
        },
    )
    # Results are cached per token, so the policy must cover every route, not just this one.
    policy.allow_all_routes()
    return policy.asdict()
