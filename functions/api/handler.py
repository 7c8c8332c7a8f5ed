"""API Lambda: API Gateway REST proxy events in, the resolver's responses out."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.api.app import build_app
from tickwork.observability import logger, metrics, tracer

app = build_app()


# Never the event: it holds the Authorization header, whatever POWERTOOLS_LOGGER_LOG_EVENT says.
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
# Responses hold tenants' target headers (their credentials): keep them out of X-Ray metadata.
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
