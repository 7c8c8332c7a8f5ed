"""Idempotency-Key on create: a retried create returns the first response and stores one job."""

from __future__ import annotations

from typing import Any

from tickwork import tables

from tests.conftest import TOKENS, scan_all
from tests.support.apigw import ApiGateway

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]
BODY = {
    "name": "billing-sync",
    "schedule": {"type": "cron", "expression": "*/5 * * * *"},
    "target": {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/billing"},
}


def job_items(dynamodb: Any) -> list[dict[str, Any]]:
    return [
        item
        for item in scan_all(dynamodb, tables.JOBS.default_name)
        if item[tables.JOBS_SK]["S"] == tables.JOB_SK
    ]


def test_same_key_returns_the_same_job_and_creates_one_item(api: ApiGateway, dynamodb: Any) -> None:
    headers = {"Idempotency-Key": "create-billing-sync"}
    first = api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers)
    second = api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers)
    assert (first.status, second.status) == (201, 201)
    assert second.body == first.body
    assert len(job_items(dynamodb)) == 1
    idempotency_records = scan_all(dynamodb, tables.IDEMPOTENCY.default_name)
    assert len(idempotency_records) == 1
    assert idempotency_records[0]["status"]["S"] == "COMPLETED"


def test_same_key_with_a_different_body_is_422(api: ApiGateway, dynamodb: Any) -> None:
    headers = {"Idempotency-Key": "create-billing-sync"}
    assert api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers).status == 201
    changed = {**BODY, "description": "a different request"}
    response = api.request("POST", "/v1/jobs", token=ACME, body=changed, headers=headers)
    assert response.status == 422
    assert response.body["error"]["code"] == "idempotency_key_reused"
    assert response.body["error"]["field"] == "Idempotency-Key"
    assert len(job_items(dynamodb)) == 1


def test_keys_are_scoped_per_tenant(api: ApiGateway, dynamodb: Any) -> None:
    headers = {"Idempotency-Key": "same-key"}
    acme = api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers)
    globex = api.request("POST", "/v1/jobs", token=GLOBEX, body=BODY, headers=headers)
    assert (acme.status, globex.status) == (201, 201)
    assert acme.body["job_id"] != globex.body["job_id"]
    assert len(job_items(dynamodb)) == 2


def test_a_failed_create_is_not_remembered(api: ApiGateway, dynamodb: Any) -> None:
    # Given a name already taken without a key
    assert api.request("POST", "/v1/jobs", token=ACME, body=BODY).status == 201
    headers = {"Idempotency-Key": "after-conflict"}
    # When a keyed create conflicts, the conflict is not stored as the key's answer
    assert api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers).status == 409
    # Then, once the name is free, the same key creates the job
    existing = api.request("GET", "/v1/jobs", token=ACME).body["items"][0]
    api.request("DELETE", f"/v1/jobs/{existing['job_id']}", token=ACME)
    assert api.request("POST", "/v1/jobs", token=ACME, body=BODY, headers=headers).status == 201


def test_trigger_key_reused_on_another_job_is_422(api: ApiGateway) -> None:
    one = api.request("POST", "/v1/jobs", token=ACME, body=BODY).body
    two = api.request("POST", "/v1/jobs", token=ACME, body={**BODY, "name": "other"}).body
    headers = {"Idempotency-Key": "trigger-1"}
    assert api.request("POST", f"/v1/jobs/{one['job_id']}/trigger", token=ACME, headers=headers).status == 202
    response = api.request("POST", f"/v1/jobs/{two['job_id']}/trigger", token=ACME, headers=headers)
    assert response.status == 422
    assert response.body["error"]["code"] == "idempotency_key_reused"
