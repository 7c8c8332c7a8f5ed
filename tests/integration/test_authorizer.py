"""The REST TOKEN authorizer: bearer token -> SHA-256 -> tenant, in the authorizer context."""

from __future__ import annotations

from typing import Any

import pytest
from tickwork import tables
from tickwork.domain.tenants import hash_token

from tests.conftest import seed_tenant
from tests.support.apigw import LambdaContext, load_event


@pytest.fixture
def authorize(dynamodb: Any) -> Any:
    from functions.authorizer.handler import lambda_handler

    def call(event: dict[str, Any]) -> Any:
        context: Any = LambdaContext(function_name="tickwork-authorizer")  # a stand-in for Powertools' type
        return lambda_handler(event, context)

    return call


def test_sample_event_is_allowed_for_every_route_with_the_tenant_in_context(
    dynamodb: Any, authorize: Any
) -> None:
    seed_tenant(dynamodb, "acme", "tw_example-token-acme")
    policy = authorize(load_event("authorizer_token.json"))
    assert policy["context"] == {
        "tenant_id": "acme",
        "actor": "acme:default",
        "token_hash": hash_token("tw_example-token-acme"),
    }
    statement = policy["policyDocument"]["Statement"][0]
    assert statement["Effect"] == "Allow"
    # Cached results are reused across routes, so the policy covers them all.
    assert statement["Resource"] == ["arn:aws:execute-api:eu-west-1:123456789012:abc123def4/prod/*/*"]


def test_only_the_hash_of_a_token_is_stored(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", "tw_example-token-acme")
    stored = str(dynamodb.scan(TableName=tables.TENANTS.default_name)["Items"])
    assert "tw_example-token-acme" not in stored
    assert hash_token("tw_example-token-acme") in stored


@pytest.mark.parametrize(
    "header",
    ["Bearer tw_unknown", "", "Bearer ", "Token tw_example-token-acme", "Bearer a b", "Bearer " + "x" * 600],
)
def test_bad_tokens_raise_unauthorized(dynamodb: Any, authorize: Any, header: str) -> None:
    seed_tenant(dynamodb, "acme", "tw_example-token-acme")
    event = load_event("authorizer_token.json")
    event["authorizationToken"] = header
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(event)


def test_a_disabled_tenant_is_refused(dynamodb: Any, authorize: Any) -> None:
    seed_tenant(dynamodb, "acme", "tw_example-token-acme", status="DISABLED")
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(load_event("authorizer_token.json"))


def test_a_deleted_tenant_is_refused(dynamodb: Any, authorize: Any) -> None:
    seed_tenant(dynamodb, "acme", "tw_example-token-acme")
    dynamodb.delete_item(TableName=tables.TENANTS.default_name, Key={"pk": {"S": tables.tenant_key("acme")}})
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(load_event("authorizer_token.json"))
