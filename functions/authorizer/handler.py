"""REST TOKEN authorizer: ``Bearer <token>`` -> SHA-256 -> tenant, returned in the authorizer context."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes import event_source
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
@tracer.capture_lambda_handler
@event_source(data_class=APIGatewayAuthorizerTokenEvent)
def lambda_handler(event: APIGatewayAuthorizerTokenEvent, context: LambdaContext) -> dict[str, Any]:
    token = parse_bearer(event.authorization_token)
    principal = runtime().tenants.by_token(token) if token else None
    if principal is None:
        logger.info("token refused")
        raise Exception(UNAUTHORIZED)
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
