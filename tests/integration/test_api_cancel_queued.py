"""``POST /v1/runs/{run_id}/cancel`` for a fire still in the queue, through the API under moto: the run the
API shows ENQUEUED is CANCELLED at once (200), its message is absorbed when a worker takes it, and a fire
not shown is a 404."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.domain.models import RunMessage, scheduled_run_id
from tickwork.runtime import runtime

from tests.conftest import TOKENS
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]


def test_a_queued_fire_is_cancelled_at_once_through_the_api(api: ApiGateway, dynamodb: Any) -> None:
    at = (datetime.now(UTC) + timedelta(seconds=30)).replace(microsecond=0)
    job = {
        "name": "queued-report",
        "schedule": {"type": "once", "at": at.isoformat()},
        "target": {"type": "http", "url": "https://hooks.example.com/x"},
    }
    created = api.request("POST", "/v1/jobs", token=ACME, body=job)
    assert created.status == 201, created.body
    job_id = created.body["job_id"]
    run_id = scheduled_run_id(job_id, at)
    shown = api.request("GET", f"/v1/runs/{run_id}", token=ACME)
    assert (shown.status, shown.body["status"]) == (200, "ENQUEUED"), shown.body

    cancelled = api.request("POST", f"/v1/runs/{run_id}/cancel", token=ACME)

    assert (cancelled.status, cancelled.body["status"]) == (200, "CANCELLED"), cancelled.body
    again = api.request("GET", f"/v1/runs/{run_id}", token=ACME)
    assert again.body["status"] == "CANCELLED"
    # The message, when it comes at the fire's time, is absorbed.
    worker = runtime().worker(clock=lambda: at + timedelta(seconds=1))
    note = worker.handle(RunMessage(tenant_id="acme", run_id=run_id))
    assert note.startswith("duplicate"), note
    twice = api.request("POST", f"/v1/runs/{run_id}/cancel", token=ACME)
    assert twice.status == 409, twice.body
    other = api.request("POST", f"/v1/runs/{run_id}/cancel", token=TOKENS["globex"])
    assert other.status == 404, other.body
    later = scheduled_run_id(job_id, at + timedelta(days=1))
    assert api.request("POST", f"/v1/runs/{later}/cancel", token=ACME).status == 404
