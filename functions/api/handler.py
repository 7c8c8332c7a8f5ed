"""API Lambda: API Gateway REST proxy events in, the resolver's responses out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from tickwork.api.app import build_app
from tickwork.observability import logger, metrics, tracer

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_handler() -> Handler:
    """The handler of one execution environment, with a resolver of its own.

    The resolver keeps the request it is resolving (event, context, route) on itself, so it serves one event
    at a time, as each Lambda environment does. Anything that runs handlers on threads (the local gateway,
    tests) takes one of these per concurrent request, never the module's ``lambda_handler``.
    """
    app = build_app()

    # Never the event: it holds the Authorization header, whatever POWERTOOLS_LOGGER_LOG_EVENT says.
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
    # Responses hold tenants' target headers (their credentials): keep them out of X-Ray metadata.
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return app.resolve(event, context)

    handler: Handler = handle
    return handler


lambda_handler = make_handler()
