"""A webhook that answers 202, through the API under moto: the worker calls a loopback receiver, the call
carries ``X-Tickwork-Lease-Token``, and the pool routes (validated at the edge as for pool runs) continue and
end the run with that token; any other 2xx is plain success, with nothing more written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork import tables
from tickwork.domain.models import RunMessage
from tickwork.runtime import runtime
from tickwork_local.harness import Reply

from tests.conftest import TOKENS, item_counts, scan_all
from tests.support.apigw import ApiGateway
from tests.support.engine import Receiver, start_receiver

ACME = TOKENS["acme"]
TOKEN = re.compile(r"^(?P<fence>[1-9][0-9]*)\.[A-Za-z0-9_-]{22}$")


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    monkeypatch.setenv("TICKWORK_ALLOW_PRIVATE_TARGETS", "true")  # the webhook is on loopback
    runtime.cache_clear()
    yield from start_receiver()


def triggered(api: ApiGateway, receiver: Receiver, path: str) -> str:
    """A webhook job at ``path``, triggered by hand and delivered to a worker: the run's id."""
    job = {
        "name": f"export{path.replace('/', '-')}",
        "schedule": {"type": "once", "at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()},
        "target": {"type": "http", "url": receiver.url(path), "timeout_seconds": 5},
        "payload": {"table": "orders"},
    }
    created = api.request("POST", "/v1/jobs", token=ACME, body=job)
    assert created.status == 201, created.body
    run = api.request("POST", f"/v1/jobs/{created.body['job_id']}/trigger", token=ACME)
    assert run.status == 202, run.body
    run_id: str = run.body["run_id"]
    runtime().worker().handle(RunMessage(tenant_id="acme", run_id=run_id))
    return run_id


def run_item(dynamodb: Any, run_id: str) -> dict[str, Any]:
    [item] = [
        i for i in scan_all(dynamodb, tables.RUNS.default_name) if i.get("run_id", {}).get("S") == run_id
    ]
    return item


def test_a_webhook_answering_202_is_continued_and_completed_through_the_routes(
    api: ApiGateway, dynamodb: Any, receiver: Receiver
) -> None:
    receiver.replies["/hook"] = Reply(202)
    run_id = triggered(api, receiver, "/hook")
    [call] = receiver.for_path("/hook")
    token = call.headers["X-Tickwork-Lease-Token"]
    matched = TOKEN.match(token)
    assert matched is not None, token
    assert matched.group("fence") == call.headers["X-Tickwork-Fencing-Token"]
    shown = api.request("GET", f"/v1/runs/{run_id}", token=ACME)
    assert shown.body["status"] == "RUNNING"
    assert token not in str(shown.body)  # given to the webhook alone

    # The pool routes' checks at the edge, nothing stored by a refused call
    before = item_counts(dynamodb)
    missing = api.request("POST", f"/v1/runs/{run_id}/heartbeat", token=ACME, body={"progress": 0.5})
    assert (missing.status, missing.body["error"]["field"]) == (400, "lease_token")
    wrong = f"{matched.group('fence')}.{'A' * 22}"
    forged = api.request("POST", f"/v1/runs/{run_id}/complete", token=ACME, body={"lease_token": wrong})
    assert (forged.status, forged.body["error"]["code"]) == (409, "lease_lost")
    assert item_counts(dynamodb) == before

    beat = api.request(
        "POST",
        f"/v1/runs/{run_id}/heartbeat",
        token=ACME,
        body={"lease_token": token, "progress": 0.5, "stage": "rows", "checkpoint": {"after": 500}},
    )
    assert beat.status == 200, beat.body
    assert beat.body["cancel_requested"] is False
    done = api.request(
        "POST", f"/v1/runs/{run_id}/complete", token=ACME, body={"lease_token": token, "output": {"rows": 9}}
    )
    assert done.status == 200, done.body
    assert (done.body["status"], done.body["attempts"][0]["outcome"]) == ("SUCCEEDED", "succeeded")
    again = api.request("POST", f"/v1/runs/{run_id}/heartbeat", token=ACME, body={"lease_token": token})
    assert (again.status, again.body["error"]["code"]) == (409, "lease_lost")
    assert len(receiver.requests) == 1


@pytest.mark.parametrize("status", [200, 204])
def test_any_other_2xx_is_plain_success_and_its_token_is_never_stored(
    api: ApiGateway, dynamodb: Any, receiver: Receiver, status: int
) -> None:
    receiver.replies["/hook"] = Reply(status)
    run_id = triggered(api, receiver, "/hook")
    [call] = receiver.for_path("/hook")
    token = call.headers["X-Tickwork-Lease-Token"]
    assert TOKEN.match(token)
    assert api.request("GET", f"/v1/runs/{run_id}", token=ACME).body["status"] == "SUCCEEDED"
    assert "lease_token" not in run_item(dynamodb, run_id)
    refused = api.request("POST", f"/v1/runs/{run_id}/complete", token=ACME, body={"lease_token": token})
    assert (refused.status, refused.body["error"]["code"]) == (409, "lease_lost")
