"""A small stand-in for API Gateway: builds REST proxy events from the samples in ``events/``, runs the
TOKEN authorizer, then the API handler, the way API Gateway does."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tickwork_local.gateway import Gateway, HandlerPool, HttpResult, LambdaContext

__all__ = [
    "ApiGateway",
    "HandlerPool",
    "HttpResult",
    "LambdaContext",
    "load_event",
    "rest_event",
    "set_run_status",
]

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


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


class ApiGateway(Gateway):
    """The local stack's gateway, driven with events built from the samples in ``events/``."""

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


def set_run_status(tenant_id: str, run_id: str, status: str) -> None:
    """Put a stored run in ``status`` straight through the store (to set up a DEAD run, say)."""
    from tickwork.app.ports import Expect
    from tickwork.domain.models import RunStatus
    from tickwork.runtime import runtime

    store = runtime().runs
    stored = store.get(tenant_id, run_id)
    assert store.put(stored.model_copy(update={"status": RunStatus(status)}), Expect.at(stored)).ok
