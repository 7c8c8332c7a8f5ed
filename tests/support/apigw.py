"""A small stand-in for API Gateway: builds REST proxy events from the samples in ``events/``, runs the
TOKEN authorizer, then the API handler, the way API Gateway does."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parents[2] / "events"
UNAUTHENTICATED_ROUTES = frozenset({("GET", "/v1/health")})


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


@dataclass
class LambdaContext:
    function_name: str = "tickwork-api"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:tickwork-api"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/tickwork-api"
    log_stream_name: str = "2026/11/22/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@dataclass
class HttpResult:
    status: int
    body: Any
    headers: dict[str, str]


def rest_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A REST proxy event like the samples in ``events/``, for any route."""
    event = copy.deepcopy(load_event("api_get_job.json"))
    all_headers = {k: v for k, v in event["headers"].items() if k != "Authorization"}
    if body is not None or raw_body is not None:
        all_headers["Content-Type"] = "application/json"
    all_headers.update(headers or {})
    event.update(
        httpMethod=method,
        path=path,
        resource=path,
        pathParameters=None,
        headers=all_headers,
        multiValueHeaders={k: [v] for k, v in all_headers.items()},
        queryStringParameters=dict(query) if query else None,
        multiValueQueryStringParameters={k: [v] for k, v in query.items()} if query else None,
        body=raw_body if raw_body is not None else (json.dumps(body) if body is not None else None),
    )
    event["requestContext"].update(httpMethod=method, path=f"/prod{path}", resourcePath=path, authorizer=None)
    return event


class ApiGateway:
    def __init__(self, api_handler: Callable[..., Any], authorizer_handler: Callable[..., Any]):
        self.api_handler = api_handler
        self.authorizer_handler = authorizer_handler

    def authorize(self, authorization: str | None, method: str, path: str) -> dict[str, Any] | None:
        """The authorizer's context, or None when it refused the token (API Gateway answers 401)."""
        if not authorization:
            return None
        event = load_event("authorizer_token.json")
        event["authorizationToken"] = authorization
        event["methodArn"] = f"arn:aws:execute-api:eu-west-1:123456789012:abc123def4/prod/{method}{path}"
        try:
            policy = self.authorizer_handler(event, LambdaContext(function_name="tickwork-authorizer"))
        except Exception as error:
            if str(error) == "Unauthorized":
                return None
            raise
        statement = policy["policyDocument"]["Statement"][0]
        if statement["Effect"] != "Allow":
            return None
        return {"principalId": policy["principalId"], **policy.get("context", {})}

    def send(self, event: dict[str, Any], *, authorization: str | None) -> HttpResult:
        method, path = event["httpMethod"], event["path"]
        if (method, path) not in UNAUTHENTICATED_ROUTES:
            context = self.authorize(authorization, method, path)
            if context is None:
                body = {
                    "error": {
                        "code": "unauthorized",
                        "message": "missing or invalid bearer token",
                        "field": None,
                    }
                }
                return HttpResult(401, body, {"Content-Type": "application/json"})
            event["requestContext"]["authorizer"] = context
        response = self.api_handler(event, LambdaContext())
        raw = response.get("body")
        parsed = json.loads(raw) if raw else None
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.setdefault(name, ", ".join(values))
        return HttpResult(response["statusCode"], parsed, headers)

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None,
        body: Any = None,
        raw_body: str | None = None,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> HttpResult:
        event = rest_event(method, path, body=body, raw_body=raw_body, headers=headers, query=query)
        return self.send(event, authorization=f"Bearer {token}" if token else None)
