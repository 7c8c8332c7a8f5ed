"""A tenant can never read, change or trigger another tenant's jobs or runs: every id route is a 404."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import TOKENS, item_counts
from tests.support.apigw import ApiGateway, set_run_status

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]


@pytest.fixture
def acme_job_and_run(api: ApiGateway, dynamodb: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    job = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={
            "name": "acme-private",
            "schedule": {"type": "rate", "every_seconds": 3600},
            "target": {"type": "http", "url": "https://acme.example.com/hook"},
            "payload": {"secret": "acme-only"},
        },
    ).body
    run = api.request("POST", f"/v1/jobs/{job['job_id']}/trigger", token=ACME).body
    # A DEAD run, so that even the retry route would act if isolation failed.
    set_run_status("acme", run["run_id"], "DEAD")
    return job, run


ROUTES = [
    ("GET", "/v1/jobs/{job_id}", None),
    ("PATCH", "/v1/jobs/{job_id}", {"description": "taken over"}),
    ("DELETE", "/v1/jobs/{job_id}", None),
    ("POST", "/v1/jobs/{job_id}/pause", {"reason": "hostile"}),
    ("POST", "/v1/jobs/{job_id}/resume", None),
    ("POST", "/v1/jobs/{job_id}/trigger", None),
    ("GET", "/v1/jobs/{job_id}/runs", None),
    ("GET", "/v1/runs/{run_id}", None),
    ("POST", "/v1/runs/{run_id}/retry", None),
]


@pytest.mark.parametrize(("method", "template", "body"), ROUTES)
def test_other_tenant_gets_404_and_changes_nothing(
    api: ApiGateway,
    dynamodb: Any,
    acme_job_and_run: tuple[dict[str, Any], dict[str, Any]],
    method: str,
    template: str,
    body: Any,
) -> None:
    # Given acme's job and run
    job, run = acme_job_and_run
    path = template.format(job_id=job["job_id"], run_id=run["run_id"])
    before_counts = item_counts(dynamodb)
    before_job = api.request("GET", f"/v1/jobs/{job['job_id']}", token=ACME).body
    before_run = api.request("GET", f"/v1/runs/{run['run_id']}", token=ACME).body
    # When globex calls the route with acme's ids
    response = api.request(method, path, token=GLOBEX, body=body)
    # Then it is a plain 404 that leaks nothing, and acme's data is untouched
    assert response.status == 404
    assert response.body["error"]["code"] == "not_found"
    text = str(response.body)
    assert "acme" not in text and "secret" not in text and "hook" not in text
    assert item_counts(dynamodb) == before_counts
    assert api.request("GET", f"/v1/jobs/{job['job_id']}", token=ACME).body == before_job
    assert api.request("GET", f"/v1/runs/{run['run_id']}", token=ACME).body == before_run


def test_other_tenant_lists_and_stats_show_none_of_it(
    api: ApiGateway, acme_job_and_run: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    assert api.request("GET", "/v1/jobs", token=GLOBEX).body["items"] == []
    stats = api.request("GET", "/v1/stats", token=GLOBEX).body
    assert sum(stats["jobs"].values()) == 0
    assert sum(stats["runs"].values()) == 0
