"""What operators see of pool runs through the API: one run with its progress, stage, holder, heartbeat,
lease and checkpoint; a run asked to stop; and each pool's waiting runs in the tenant's stats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork import tables
from tickwork.adapters.dynamo import to_item
from tickwork.api.schemas import RunDetailOut, RunOut

from tests.conftest import TOKENS
from tests.support.apigw import ApiGateway
from tests.support.pool_runs import seed_waiting

ACME = TOKENS["acme"]


def pool_job(api: ApiGateway, name: str, pool: str, token: str = ACME) -> str:
    created = api.request(
        "POST",
        "/v1/jobs",
        token=token,
        body={
            "name": name,
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "target": {"type": "pool", "pool": pool, "heartbeat_timeout_seconds": 30},
        },
    )
    assert created.status == 201, created.body
    job_id: str = created.body["job_id"]
    return job_id


def claim(api: ApiGateway, pool: str, worker_id: str = "gpu-host-1") -> dict[str, Any]:
    claimed = api.request(
        "POST", f"/v1/pools/{pool}/claim", token=ACME, body={"worker_id": worker_id, "wait_seconds": 0}
    )
    assert claimed.status == 200, claimed.body
    [run] = claimed.body["runs"]
    assert isinstance(run, dict)
    return run


def test_one_pool_run_shows_its_progress_stage_holder_heartbeat_lease_and_checkpoint(api: ApiGateway) -> None:
    # Given a pool run claimed by gpu-host-1, which heartbeats with progress, a stage and a checkpoint
    job_id = pool_job(api, "train", "gpu")
    waiting = seed_waiting("acme", job_id, "gpu", waited=timedelta(seconds=30))
    claimed = claim(api, "gpu")
    beat = api.request(
        "POST",
        f"/v1/runs/{waiting.run_id}/heartbeat",
        token=ACME,
        body={
            "lease_token": claimed["lease_token"],
            "progress": 0.25,
            "stage": "epoch 3 of 12",
            "checkpoint": {"epoch": 3, "loss": 0.125},
        },
    )
    assert beat.status == 200, beat.body
    # When the run is read
    shown = api.request("GET", f"/v1/runs/{waiting.run_id}", token=ACME)
    # Then it shows all of it, and never the lease token
    assert shown.status == 200, shown.body
    run = shown.body
    assert (run["status"], run["pool"], run["progress"], run["stage"]) == (
        "RUNNING",
        "gpu",
        0.25,
        "epoch 3 of 12",
    )
    assert run["lease_owner"] == "gpu-host-1"
    assert run["attempts"][-1]["worker_id"] == "gpu-host-1"
    assert run["checkpoint"] == {"epoch": 3, "loss": 0.125}
    assert run["lease_expires_at"] == beat.body["lease_expires_at"]
    heartbeat_at = datetime.fromisoformat(run["heartbeat_at"])
    assert abs(datetime.now(UTC) - heartbeat_at) < timedelta(seconds=10)
    assert datetime.fromisoformat(run["lease_deadline"]) > heartbeat_at
    assert run["cancel_requested"] is False
    assert "lease_token" not in run
    RunDetailOut.model_validate(run)
    # And the run lists leave the checkpoint out
    listed = api.request("GET", f"/v1/jobs/{job_id}/runs", token=ACME)
    assert listed.status == 200, listed.body
    # (the daily fire itself is listed too when the test runs within the planner's horizon of 03:00 UTC)
    [item] = [item for item in listed.body["items"] if item["run_id"] == waiting.run_id]
    assert item["progress"] == 0.25
    assert "checkpoint" not in item
    RunOut.model_validate(item)


def test_a_run_not_in_a_pool_shows_no_checkpoint(api: ApiGateway) -> None:
    created = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={
            "name": "hook",
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "target": {"type": "http", "url": "https://hooks.example.com/run"},
        },
    )
    assert created.status == 201, created.body
    triggered = api.request("POST", f"/v1/jobs/{created.body['job_id']}/trigger", token=ACME)
    assert triggered.status == 202, triggered.body
    shown = api.request("GET", f"/v1/runs/{triggered.body['run_id']}", token=ACME)
    assert shown.status == 200, shown.body
    assert (shown.body["pool"], shown.body["checkpoint"]) == (None, None)


def test_a_running_pool_run_asked_to_stop_shows_it_and_its_worker_hears_it(api: ApiGateway) -> None:
    job_id = pool_job(api, "export", "cpu")
    waiting = seed_waiting("acme", job_id, "cpu", waited=timedelta(seconds=5))
    claimed = claim(api, "cpu", "cpu-host-2")
    cancelled = api.request("POST", f"/v1/runs/{waiting.run_id}/cancel", token=ACME)
    assert cancelled.status == 200, cancelled.body
    assert (cancelled.body["status"], cancelled.body["cancel_requested"]) == ("RUNNING", True)
    shown = api.request("GET", f"/v1/runs/{waiting.run_id}", token=ACME)
    assert shown.body["cancel_requested"] is True
    beat = api.request(
        "POST",
        f"/v1/runs/{waiting.run_id}/heartbeat",
        token=ACME,
        body={"lease_token": claimed["lease_token"]},
    )
    assert beat.body["cancel_requested"] is True


def test_another_tenants_pool_run_is_a_404(api: ApiGateway) -> None:
    job_id = pool_job(api, "train", "gpu")
    waiting = seed_waiting("acme", job_id, "gpu", waited=timedelta(seconds=5))
    for method, path in (("GET", ""), ("POST", "/cancel")):
        answer = api.request(method, f"/v1/runs/{waiting.run_id}{path}", token=TOKENS["globex"])
        assert answer.status == 404, answer.body


def test_the_stats_show_each_pool_of_the_tenant_with_its_waiting_runs_and_oldest_wait(
    api: ApiGateway,
) -> None:
    # Given two pools of acme: gpu with three waiting runs (one of them then claimed), cpu with one; a job
    # moved to a third pool that has none; and globex's own gpu pool with runs of its own
    gpu_job = pool_job(api, "train", "gpu")
    cpu_job = pool_job(api, "export", "cpu")
    moved = pool_job(api, "later", "cpu")
    patched = api.request(
        "PATCH", f"/v1/jobs/{moved}", token=ACME, body={"target": {"type": "pool", "pool": "tpu"}}
    )
    assert patched.status == 200, patched.body
    now = datetime.now(UTC)
    oldest, second, _ = (
        seed_waiting("acme", gpu_job, "gpu", waited=timedelta(seconds=waited), now=now)
        for waited in (300, 120, 60)
    )
    seed_waiting("acme", cpu_job, "cpu", waited=timedelta(seconds=45), now=now)
    assert claim(api, "gpu")["run_id"] == oldest.run_id
    globex_job = pool_job(api, "theirs", "gpu", token=TOKENS["globex"])
    seed_waiting("globex", globex_job, "gpu", waited=timedelta(hours=2), now=now)
    seed_waiting("globex", globex_job, "gpu", waited=timedelta(hours=1), now=now)
    # When acme reads its stats
    stats = api.request("GET", "/v1/stats", token=ACME)
    # Then each of its pools shows, by name, with its waiting runs and how long the oldest has waited
    assert stats.status == 200, stats.body
    pools = {pool["pool"]: pool for pool in stats.body["pools"]}
    assert [pool["pool"] for pool in stats.body["pools"]] == ["cpu", "gpu", "tpu"]
    assert (pools["gpu"]["waiting"], pools["gpu"]["waiting_capped"]) == (2, False)
    assert 120 <= pools["gpu"]["oldest_wait_seconds"] < 130
    assert datetime.fromisoformat(pools["gpu"]["oldest_waiting_since"]) == second.scheduled_for
    assert pools["cpu"]["waiting"] == 1
    assert 45 <= pools["cpu"]["oldest_wait_seconds"] < 55
    assert pools["tpu"] == {
        "pool": "tpu",
        "waiting": 0,
        "waiting_capped": False,
        "oldest_waiting_since": None,
        "oldest_wait_seconds": None,
    }
    # And globex sees its own gpu pool only
    theirs = api.request("GET", "/v1/stats", token=TOKENS["globex"]).body["pools"]
    assert [(pool["pool"], pool["waiting"]) for pool in theirs] == [("gpu", 2)]
    assert theirs[0]["oldest_wait_seconds"] >= 7200


def test_a_tenant_without_pool_jobs_has_no_pools_in_its_stats(api: ApiGateway) -> None:
    stats = api.request("GET", "/v1/stats", token=ACME)
    assert stats.status == 200, stats.body
    assert stats.body["pools"] == []


def test_a_pool_job_from_before_the_tenants_pools_were_kept_joins_them_at_its_next_update(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given a pool job whose pool the tenant's item does not name (the job was created before it kept them)
    job_id = pool_job(api, "old", "legacy")
    dynamodb.update_item(
        TableName=tables.TENANTS.default_name,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key("acme")}),
        UpdateExpression="REMOVE #pools",
        ExpressionAttributeNames={"#pools": tables.TENANT_POOLS},
    )
    assert api.request("GET", "/v1/stats", token=ACME).body["pools"] == []
    # When the job is updated, whatever the change
    patched = api.request("PATCH", f"/v1/jobs/{job_id}", token=ACME, body={"description": "nightly"})
    assert patched.status == 200, patched.body
    # Then its pool shows in the stats
    assert [pool["pool"] for pool in api.request("GET", "/v1/stats", token=ACME).body["pools"]] == ["legacy"]
