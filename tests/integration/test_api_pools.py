"""The pool routes at the edge: every field checked with a 4xx naming it and nothing stored, the routes wired
to the pool service, and a pool job accepted by the job routes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import TOKENS, item_counts
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]
RUN_ID = "01KBXW8Y2Q7Z3M4N5P6R7S8T9V:1795888800000"


def soon() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).isoformat()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"worker_id": "w1", "max_runs": 11}, "max_runs"),
        ({"worker_id": "w1", "max_runs": 0}, "max_runs"),
        ({"worker_id": "w1", "wait_seconds": 21}, "wait_seconds"),
        ({"worker_id": "w1", "wait_seconds": -1}, "wait_seconds"),
        ({}, "worker_id"),
        ({"worker_id": "w1", "shards": 2}, "shards"),
    ],
)
def test_a_claim_out_of_range_is_refused_naming_the_field(
    api: ApiGateway, dynamodb: Any, body: dict[str, Any], field: str
) -> None:
    before = item_counts(dynamodb)
    result = api.request("POST", "/v1/pools/gpu/claim", token=ACME, body=body)
    assert result.status == 400, result.body
    assert result.body["error"]["field"] == field
    assert item_counts(dynamodb) == before


def test_an_empty_pool_answers_no_runs_after_its_wait(api: ApiGateway) -> None:
    result = api.request(
        "POST", "/v1/pools/gpu/claim", token=ACME, body={"worker_id": "w1", "wait_seconds": 0}
    )
    assert result.status == 200, result.body
    assert result.body == {"runs": []}


def test_a_pool_name_outside_the_pattern_is_refused_in_tickworks_words(api: ApiGateway) -> None:
    result = api.request("POST", "/v1/pools/GPU_1/claim", token=ACME, body={"worker_id": "w1"})
    assert result.status == 400, result.body
    assert result.body["error"]["field"] == "pool"
    assert result.body["error"]["message"] == (
        "pool must be 1-64 lowercase letters, digits or -, starting with a letter or digit"
    )


@pytest.mark.parametrize(
    ("route", "body", "field", "status"),
    [
        ("heartbeat", {}, "lease_token", 400),
        ("heartbeat", {"lease_token": "1.x", "progress": 1.5}, "progress", 400),
        ("heartbeat", {"lease_token": "1.x", "stage": "s" * 201}, "stage", 400),
        ("heartbeat", {"lease_token": "1.x", "checkpoint": {"s": "x" * 65_536}}, "checkpoint", 413),
        ("complete", {}, "lease_token", 400),
        ("complete", {"lease_token": "1.x", "output": {"s": "x" * 16_384}}, "output", 413),
        ("fail", {"lease_token": "1.x"}, "error", 400),
        ("fail", {"lease_token": "1.x", "error": {"code": ""}}, "error.code", 400),
    ],
)
def test_a_workers_call_out_of_range_is_refused_naming_the_field(
    api: ApiGateway, dynamodb: Any, route: str, body: dict[str, Any], field: str, status: int
) -> None:
    before = item_counts(dynamodb)
    result = api.request("POST", f"/v1/runs/{RUN_ID}/{route}", token=ACME, body=body)
    assert result.status == status, result.body
    assert result.body["error"]["field"] == field
    assert item_counts(dynamodb) == before


@pytest.mark.parametrize("route", ["heartbeat", "complete", "cancel"])
def test_a_call_about_an_unknown_run_is_a_404(api: ApiGateway, route: str) -> None:
    body = None if route == "cancel" else {"lease_token": "1.abcdefghijklmnopqrstuv"}
    result = api.request("POST", f"/v1/runs/{RUN_ID}/{route}", token=ACME, body=body)
    assert result.status == 404, result.body


def test_a_pool_job_is_accepted_and_a_bad_pool_name_refused(api: ApiGateway, dynamodb: Any) -> None:
    job = {
        "name": "train",
        "schedule": {"type": "once", "at": soon()},
        "target": {"type": "pool", "pool": "gpu-a", "heartbeat_timeout_seconds": 30},
    }
    created = api.request("POST", "/v1/jobs", token=ACME, body=job)
    assert created.status == 201, created.body
    assert created.body["target"] == {
        "type": "pool",
        "pool": "gpu-a",
        "heartbeat_timeout_seconds": 30,
        "timeout_seconds": 3600,
    }
    before = item_counts(dynamodb)
    bad = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={
            **job,
            "name": "bad",
            "target": {"type": "pool", "pool": "GPU", "heartbeat_timeout_seconds": 5},
        },
    )
    assert bad.status == 400, bad.body
    assert bad.body["error"]["field"].startswith("target.")
    assert item_counts(dynamodb) == before
