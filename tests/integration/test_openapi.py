"""The saved OpenAPI document matches the resolver: regenerate it with `make openapi`."""

from __future__ import annotations

import json
from pathlib import Path

from tickwork.api.openapi import openapi_document

SAVED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
DESIGN_ROUTES = {
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs"),
    ("get", "/v1/jobs/{job_id}"),
    ("patch", "/v1/jobs/{job_id}"),
    ("post", "/v1/jobs/{job_id}/pause"),
    ("post", "/v1/jobs/{job_id}/resume"),
    ("delete", "/v1/jobs/{job_id}"),
    ("post", "/v1/jobs/{job_id}/trigger"),
    ("get", "/v1/jobs/{job_id}/runs"),
    ("get", "/v1/runs"),
    ("get", "/v1/runs/{run_id}"),
    ("post", "/v1/runs/{run_id}/retry"),
    ("post", "/v1/runs/{run_id}/cancel"),
    ("post", "/v1/pools/{pool}/claim"),
    ("post", "/v1/runs/{run_id}/heartbeat"),
    ("post", "/v1/runs/{run_id}/complete"),
    ("post", "/v1/runs/{run_id}/fail"),
    ("post", "/v1/schedule-preview"),
    ("get", "/v1/stats"),
    ("get", "/v1/health"),
}


def test_saved_document_is_current() -> None:
    assert SAVED.read_text() == openapi_document(), "docs/openapi.json is stale: run `make openapi`"


def test_document_has_every_route_of_the_design() -> None:
    document = json.loads(openapi_document())
    routes = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert routes == DESIGN_ROUTES


def test_error_responses_use_the_error_shape() -> None:
    document = json.loads(openapi_document())
    for operations in document["paths"].values():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                if status.startswith("4"):
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorBody"
                    }


def test_the_resolvers_paths_and_methods_are_the_documents() -> None:
    # The API answers 405, OPTIONS and HEAD from this table; API Gateway deploys the document's routes.
    from tickwork.api.app import OwnRequestResolver, build_app

    app = build_app()
    assert isinstance(app, OwnRequestResolver)
    document = json.loads(SAVED.read_text())
    documented = {
        path: {method.upper() for method in operations} for path, operations in document["paths"].items()
    }
    assert {resource.path: set(resource.methods) for resource in app.resources.resources} == documented
    assert app.resources.find("/v1/jobs/a%3Ab/runs") is not None
    assert app.resources.find("/v1/jobs/a/b") is None


def test_every_operation_documents_its_success_and_the_400_any_route_can_answer() -> None:
    document = json.loads(openapi_document())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            successes = {status for status in statuses if status.startswith("2")}
            assert len(successes) == 1, (method, path, statuses)
            (success,) = successes
            assert operation["responses"][success]["content"]["application/json"]["schema"], (method, path)
            assert "400" in statuses, (method, path)  # a body that is not JSON in UTF-8, on any route
            if path != "/v1/health":
                assert {"401", "403", "429"} <= statuses, (method, path)


def test_an_optional_body_is_an_object_or_nothing() -> None:
    # The API refuses a JSON null body like any body that is not an object.
    document = json.loads(openapi_document())
    body = document["paths"]["/v1/jobs/{job_id}/pause"]["post"]["requestBody"]
    assert not body.get("required")
    assert body["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/PauseRequest"


def test_the_rule_between_max_concurrent_runs_and_overlap_policy_is_in_the_schema() -> None:
    # A schema-valid create is then not refused for it (the fuzz's positive_data_acceptance)
    schema = json.loads(openapi_document())["components"]["schemas"]["JobSpec"]
    assert schema["if"]["required"] == ["max_concurrent_runs"]
    assert schema["then"]["properties"]["overlap_policy"] == {"const": "allow"}
