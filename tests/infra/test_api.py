"""The REST API: every route of docs/openapi.json, the authorizer on all but health, logs, tracing, limits."""

from __future__ import annotations

import json
from typing import Any

from infra.api import ANY_METHOD, GATEWAY_ERRORS, HEALTH_PATH, api_routes
from tests.infra.conftest import Synthesized


def _paths(synthesized: Synthesized) -> dict[str, str]:
    """Logical id of each API resource -> its full path."""
    resources = synthesized.of_type("AWS::ApiGateway::Resource")
    root_ids = {"Fn::GetAtt": [synthesized.logical_id(synthesized.stack.api.rest_api), "RootResourceId"]}

    def path_of(logical_id: str) -> str:
        properties = resources[logical_id]["Properties"]
        parent: Any = properties["ParentId"]
        prefix = "" if parent == root_ids else path_of(parent["Ref"])
        return f"{prefix}/{properties['PathPart']}"

    return {logical_id: path_of(logical_id) for logical_id in resources}


def _methods(synthesized: Synthesized) -> dict[tuple[str, str], dict[str, Any]]:
    paths = _paths(synthesized)
    return {
        (paths[method["Properties"]["ResourceId"]["Ref"]], method["Properties"]["HttpMethod"]): method[
            "Properties"
        ]
        for method in synthesized.of_type("AWS::ApiGateway::Method").values()
    }


def test_every_route_is_deployed(default_stack: Synthesized) -> None:
    expected = {(path, method) for path, methods in api_routes().items() for method in methods}
    # Each path also takes ANY: the API answers its other methods (HEAD, OPTIONS, 405 with Allow).
    expected |= {(path, ANY_METHOD) for path in api_routes()}
    assert set(_methods(default_stack)) == expected
    assert (HEALTH_PATH, "GET") in expected and ("/v1/jobs", "POST") in expected


def test_request_bodies_reach_the_api_as_sent(default_stack: Synthesized) -> None:
    # Base64-encoded whatever their Content-Type, so the API can refuse a body that is not UTF-8 JSON.
    default_stack.template.has_resource_properties("AWS::ApiGateway::RestApi", {"BinaryMediaTypes": ["*/*"]})


def test_the_authorizer_guards_every_route_but_health(default_stack: Synthesized) -> None:
    authorizer = default_stack.logical_id(default_stack.stack.api.authorizer)
    for (path, method), properties in _methods(default_stack).items():
        if path == HEALTH_PATH:
            assert properties["AuthorizationType"] == "NONE", method
            assert "AuthorizerId" not in properties
        else:
            assert properties["AuthorizationType"] == "CUSTOM", (path, method)
            assert properties["AuthorizerId"] == {"Ref": authorizer}
        assert properties["Integration"]["Type"] == "AWS_PROXY"


def test_token_authorizer_reads_the_authorization_header_and_caches(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {
            "Type": "TOKEN",
            "IdentitySource": "method.request.header.Authorization",
            "AuthorizerResultTtlInSeconds": default_stack.stack.config.authorizer_cache_seconds,
        },
    )


def test_stage_traces_throttles_and_writes_json_access_logs(synthesized: Synthesized) -> None:
    config = synthesized.stack.config
    (stage,) = synthesized.of_type("AWS::ApiGateway::Stage").values()
    properties = stage["Properties"]
    assert properties["StageName"] == config.stage
    assert properties["TracingEnabled"] is True
    (settings,) = properties["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == config.api_rate_limit
    assert settings["ThrottlingBurstLimit"] == config.api_burst_limit
    access_logs = synthesized.logical_id(synthesized.stack.api.access_logs)
    assert properties["AccessLogSetting"]["DestinationArn"] == {"Fn::GetAtt": [access_logs, "Arn"]}
    fields = json.loads(properties["AccessLogSetting"]["Format"])
    assert {"requestId", "status", "httpMethod", "resourcePath"} <= set(fields)
    retention = synthesized.resources[access_logs]["Properties"]["RetentionInDays"]
    assert retention == config.log_retention_days


def test_gateway_refusals_use_the_tickwork_error_shape(default_stack: Synthesized) -> None:
    responses = {
        response["Properties"]["ResponseType"]: response["Properties"]
        for response in default_stack.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    assert len(responses) == len(GATEWAY_ERRORS)
    unauthorized = responses["UNAUTHORIZED"]
    assert unauthorized["StatusCode"] == "401"
    template = unauthorized["ResponseTemplates"]["application/json"]
    rendered = json.loads(template.replace("$context.error.messageString", '"Unauthorized"'))
    assert rendered == {"error": {"code": "unauthorized", "message": "Unauthorized"}}
    assert responses["THROTTLED"]["StatusCode"] == "429"
    assert responses["THROTTLED"]["ResponseParameters"] == {"gatewayresponse.header.Retry-After": "'1'"}


def test_api_url_and_tenants_table_are_outputs(default_stack: Synthesized) -> None:
    outputs = default_stack.document["Outputs"]
    assert {"ApiUrl", "TenantsTableName", "DeadRunQueueUrl", "AlarmTopicArn"} <= set(outputs)
    assert outputs["TenantsTableName"]["Value"] == {
        "Ref": default_stack.logical_id(default_stack.stack.storage.tenants)
    }
