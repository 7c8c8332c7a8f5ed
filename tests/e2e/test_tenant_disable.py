"""Disabling a tenant on a running `tickwork local`: its fires stop within 10 s, its API requests get 403
``tenant_disabled``, and enabling it resumes its jobs under their misfire policies with nothing lost."""

from __future__ import annotations

import itertools
import time
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.conftest import Local, wait_for
from tests.e2e.test_tenant_admin import tenants
from tests.support.engine import Received, Receiver

pytestmark = pytest.mark.e2e

TENANT = "globex"
WORKERS_SEE_A_TENANT_WITHIN = 10.0


def scheduled(request: Received) -> float:
    return datetime.fromisoformat(request.headers["X-Tickwork-Scheduled-For"]).timestamp()


def create(local: Local, receiver: Receiver, path: str, **policy: Any) -> str:
    status, job = local.call(
        "POST",
        "/v1/jobs",
        tenant=TENANT,
        body={
            "name": f"disable{path.replace('/', '-')}-{time.time_ns()}",
            "schedule": {"type": "rate", "every_seconds": 1},
            "target": {"type": "http", "url": receiver.url(path), "timeout_seconds": 5},
            **policy,
        },
    )
    assert status == 201, job
    return str(job["job_id"])


def runs_of(local: Local, job_id: str) -> list[dict[str, Any]]:
    status, page = local.call("GET", f"/v1/jobs/{job_id}/runs?limit=100", tenant=TENANT)
    assert status == 200, page
    return list(page["items"])


def test_a_disabled_tenants_fires_stop_and_enabling_resumes_them_under_their_misfire_policy(
    local: Local, receiver: Receiver
) -> None:
    stamp = time.time_ns()
    backfilled, skipped = f"/disable-backfill-{stamp}", f"/disable-skip-{stamp}"
    backfill_job = create(local, receiver, backfilled, misfire_policy="backfill", backfill_limit=100)
    skip_job = create(local, receiver, skipped, misfire_policy="skip", misfire_grace_seconds=1)
    assert wait_for(lambda: len(receiver.for_path(backfilled)) >= 3, timeout=20)

    disabled = tenants(local, "disable", TENANT)
    try:
        assert disabled.returncode == 0, disabled.stderr
        disabled_by = time.time()
        status, answer = local.call("GET", "/v1/jobs", tenant=TENANT)
        assert (status, answer["error"]["code"]) == (403, "tenant_disabled")

        # Fires stop within the workers' view of the tenant, and stay stopped.
        time.sleep(WORKERS_SEE_A_TENANT_WITHIN + 4)
        late = [
            request.at
            for path in (backfilled, skipped)
            for request in receiver.for_path(path)
            if request.at > disabled_by + WORKERS_SEE_A_TENANT_WITHIN
        ]
        assert late == [], f"{len(late)} calls more than 10 s after the tenant was disabled"
    finally:
        enabled = tenants(local, "enable", TENANT)
    assert enabled.returncode == 0, enabled.stderr
    enabled_at = time.time()
    assert local.call("GET", "/v1/jobs", tenant=TENANT)[0] == 200

    # backfill: every fire of the disabled time runs, once, and the job goes on.
    def backfilled_through_now() -> list[float]:
        fired = sorted(scheduled(request) for request in receiver.for_path(backfilled))
        return fired if fired and fired[-1] > enabled_at + 2 else []

    fired = wait_for(backfilled_through_now, timeout=40)
    assert fired, "the backfill job did not run again after enabling"
    assert len(fired) == len(set(fired)), "a fire ran twice"
    gaps = [round(after - before, 3) for before, after in itertools.pairwise(fired)]
    assert set(gaps) == {1.0}, f"fires lost between {fired[0]} and {fired[-1]}: gaps {sorted(set(gaps))}"

    # skip: the fires of the disabled time are recorded MISSED, none of them is called, and the job goes on.
    went_on = lambda: any(scheduled(r) > enabled_at + 1 for r in receiver.for_path(skipped))  # noqa: E731
    assert wait_for(went_on, timeout=20)
    runs = runs_of(local, skip_job)
    missed = {run["scheduled_for"] for run in runs if run["status"] == "MISSED"}
    assert missed, [(run["scheduled_for"], run["status"]) for run in runs]
    called = {request.headers["X-Tickwork-Scheduled-For"] for request in receiver.for_path(skipped)}
    assert not {datetime.fromisoformat(at).timestamp() for at in missed} & {
        datetime.fromisoformat(at).timestamp() for at in called
    }
    assert local.call("GET", f"/v1/jobs/{backfill_job}", tenant=TENANT)[1]["status"] == "ACTIVE"
    for job_id in (backfill_job, skip_job):
        assert local.call("DELETE", f"/v1/jobs/{job_id}", tenant=TENANT)[0] in (200, 204)
