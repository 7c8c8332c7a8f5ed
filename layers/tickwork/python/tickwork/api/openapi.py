"""The OpenAPI document of the HTTP API, generated from the resolver's routes and models.

``python -m tickwork.api.openapi docs/openapi.json`` writes it; a test fails when the saved copy is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server

from tickwork.api.app import build_app

TITLE = "tickwork"
VERSION = "1.0.0"
UNAUTHENTICATED_PATHS = frozenset({"/v1/health"})


def openapi_document() -> str:
    app = build_app()
    document = app.get_openapi_json_schema(
        title=TITLE,
        version=VERSION,
        description="A multi-tenant job scheduler on AWS serverless parts.",
        servers=[Server(url="http://127.0.0.1:8000", description="tickwork local")],
        security_schemes={"bearer": HTTPBearer(description="A tenant's API token")},
        security=[{"bearer": []}],
    )
    return json.dumps(_tidy(json.loads(document)), indent=2, sort_keys=True) + "\n"


def _tidy(document: dict[str, Any]) -> dict[str, Any]:
    """Say what the API really answers: validation errors are 400s in tickwork's error shape (Powertools
    documents them as 422 ``HTTPValidationError``), the health route needs no token, and what is optional is
    given or left out: Powertools allows ``null``, which is no value on the wire (``null`` in a header or a
    query string is the text "null") and which the API refuses as a body."""
    for path, operations in document["paths"].items():
        for operation in operations.values():
            _no_null_body(operation)
            for parameter in operation.get("parameters", []):
                if not parameter.get("required"):
                    parameter["schema"] = _without_null(parameter["schema"])
            responses = operation.get("responses", {})
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
            if path in UNAUTHENTICATED_PATHS:
                operation["security"] = []
    schemas = document.get("components", {}).get("schemas", {})
    if "HTTPValidationError" not in json.dumps(document["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
    return document


def _no_null_body(operation: dict[str, Any]) -> None:
    body = operation.get("requestBody")
    if not body or body.get("required"):
        return
    for media in body.get("content", {}).values():
        media["schema"] = _without_null(media.get("schema", {}))


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` becomes X (with the outer keywords kept); any other schema is left as it is."""
    options = schema.get("anyOf", [])
    kept = [option for option in options if option != {"type": "null"}]
    if len(options) != 2 or len(kept) != 1:
        return schema
    return {**{key: value for key, value in schema.items() if key != "anyOf"}, **kept[0]}


def main(argv: list[str]) -> int:
    target = Path(argv[1] if len(argv) > 1 else "docs/openapi.json")
    target.write_text(openapi_document())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
