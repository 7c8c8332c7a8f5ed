"""REST TOKEN authorizer: ``Bearer <token>`` -> SHA-256 -> tenant, returned in the authorizer context."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerResponse,
    APIGatewayAuthorizerTokenEvent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.domain.tenants import hash_token, parse_bearer
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
    if principal is None or token is None:
        logger.debug("token refused")
        return None
    arn = event.parsed_arn
    policy = APIGatewayAuthorizerResponse(
        principal_id=principal.actor,
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        # Who the token is, nothing that may change: API Gateway keeps this answer for minutes. The API reads
        # the token's item (by this hash) and the tenant on every request, so a token revoked, a tenant
        # disabled or a limit changed meanwhile takes effect at once.
        context={
            "tenant_id": principal.tenant.tenant_id,
            "actor": principal.actor,
            "token_hash": hash_token(token),
        },
    )
    # Results are cached per token, so the policy must cover every route, not just this one. A disabled
    # tenant is allowed here and refused by the API (403 tenant_disabled), so no cached answer outlives an
    # operator's enable or disable.
    policy.allow_all_routes()
    return policy.asdict()
