"""Every route of the design's table, through the authorizer and the API handler, under moto."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork import tables

from tests.conftest import TOKENS, item_counts, scan_all
from tests.support.apigw import ApiGateway, LambdaContext, load_event, set_run_status
from tests.unit.test_cron_syntax import REFUSED

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]


def job_body(name: str = "nightly", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Paris"},
        "target": {"type": "http", "url": "https://hooks.example.com/run"},
        "payload": {"kind": "nightly"},
    }
    body.update(overrides)
    return body


def create(api: ApiGateway, token: str = ACME, **overrides: Any) -> dict[str, Any]:
    response = api.request("POST", "/v1/jobs", token=token, body=job_body(**overrides))
    assert response.status == 201, response.body
    body: dict[str, Any] = response.body
    return body


def soon(seconds: int) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


# --- create, get, list --------------------------------------------------------------------------------------
def test_sample_create_event_creates_the_job(api: ApiGateway) -> None:
    # Given the sample event from events/, sent with acme's token
    event = load_event("api_create_job.json")
    # When it goes through the authorizer and the handler
    response = api.send(event, authorization=f"Bearer {ACME}")
    # Then the job exists with the design's defaults filled in
    assert response.status == 201
    assert response.body["name"] == "daily-report"
    assert response.body["status"] == "ACTIVE"
    assert response.body["misfire_grace_seconds"] == 60
    assert response.body["backfill_limit"] == 100
    assert response.body["delivery"] == "at_least_once"
    assert response.body["schedule"]["dst"] == {"gap": "shift", "overlap": "once"}
    assert response.body["next_fire_at"].endswith("Z")
    fetched = api.request("GET", f"/v1/jobs/{response.body['job_id']}", token=ACME)
    assert fetched.body["payload"] == json.loads(event["body"])["payload"]


def test_sample_bad_schedule_event_is_refused(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    response = api.send(load_event("api_create_job_bad_schedule.json"), authorization=f"Bearer {ACME}")
    assert response.status == 400
    assert response.body["error"]["code"] == "invalid_schedule"
    assert response.body["error"]["field"] == "schedule.expression"
    assert item_counts(dynamodb) == before


@pytest.mark.parametrize(("expression", "message"), REFUSED, ids=[case[0] for case in REFUSED])
def test_every_refused_cron_expression_is_a_400_naming_schedule_expression(
    api: ApiGateway, dynamodb: Any, expression: str, message: str
) -> None:
    before = item_counts(dynamodb)
    schedule = {"type": "cron", "expression": expression}
    response = api.request("POST", "/v1/jobs", token=ACME, body=job_body(schedule=schedule))
    assert response.status == 400
    refusal = {
        "code": "invalid_schedule",
        "message": f"schedule.expression: {message}",
        "field": "schedule.expression",
    }
    assert response.body["error"] == {**refusal, "details": [refusal]}
    assert item_counts(dynamodb) == before


def test_get_returns_next_fire_and_last_run(api: ApiGateway) -> None:
    # Given a job due every 10 s, so its first fires are planned at once
    job = create(api, schedule={"type": "rate", "every_seconds": 10})
    # When it is read back
    response = api.request("GET", f"/v1/jobs/{job['job_id']}", token=ACME)
    # Then it shows its next fire and an ETag with its version
    assert response.status == 200
    next_fire = datetime.fromisoformat(response.body["next_fire_at"])
    assert datetime.now(UTC) < next_fire <= datetime.now(UTC) + timedelta(seconds=11)
    assert response.headers["ETag"] == '"1"'
    assert response.body["last_run"] is None
    assert response.body["schedule_description"] == "Every 10 seconds"


def test_create_plans_fires_inside_the_horizon(api: ApiGateway) -> None:
    # A fire sent to the run queue is not stored until a worker records it; the API shows it ENQUEUED.
    job = create(api, schedule={"type": "once", "at": soon(10)})
    runs = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME)
    assert [run["status"] for run in runs.body["items"]] == ["ENQUEUED"]
    assert runs.body["items"][0]["run_id"].startswith(f"{job['job_id']}:")


def test_create_with_a_taken_name_is_409(api: ApiGateway, dynamodb: Any) -> None:
    create(api, name="unique")
    before = item_counts(dynamodb)
    response = api.request("POST", "/v1/jobs", token=ACME, body=job_body(name="unique"))
    assert response.status == 409
    assert response.body["error"] == {
        "code": "name_taken",
        "message": response.body["error"]["message"],
        "field": "name",
    }
    assert item_counts(dynamodb) == before


def test_names_are_unique_per_tenant_only(api: ApiGateway) -> None:
    create(api, token=ACME, name="shared-name")
    assert api.request("POST", "/v1/jobs", token=GLOBEX, body=job_body(name="shared-name")).status == 201


def test_list_is_newest_first_and_paginates(api: ApiGateway) -> None:
    names = [f"job-{i}" for i in range(5)]
    for name in names:
        create(api, name=name)
    first = api.request("GET", "/v1/jobs", token=ACME, query={"limit": "2"})
    assert [item["name"] for item in first.body["items"]] == ["job-4", "job-3"]
    second = api.request(
        "GET", "/v1/jobs", token=ACME, query={"limit": "2", "cursor": first.body["next_cursor"]}
    )
    assert [item["name"] for item in second.body["items"]] == ["job-2", "job-1"]
    third = api.request(
        "GET", "/v1/jobs", token=ACME, query={"limit": "2", "cursor": second.body["next_cursor"]}
    )
    assert [item["name"] for item in third.body["items"]] == ["job-0"]
    assert third.body["next_cursor"] is None


def test_list_gives_each_jobs_last_run_as_get_does(api: ApiGateway) -> None:
    # Given two jobs, one triggered twice (its latest run set DEAD) and one never run
    ran, idle = create(api, name="ran")["job_id"], create(api, name="idle")["job_id"]
    api.request("POST", f"/v1/jobs/{ran}/trigger", token=ACME, headers={"Idempotency-Key": "first"})
    latest = api.request("POST", f"/v1/jobs/{ran}/trigger", token=ACME, headers={"Idempotency-Key": "second"})
    set_run_status("acme", latest.body["run_id"], "DEAD")

    # When the jobs are listed
    listed = api.request("GET", "/v1/jobs", token=ACME)

    # Then each job carries the same last_run (a run summary) as the job's own route
    by_id = {item["job_id"]: item for item in listed.body["items"]}
    assert by_id[ran]["last_run"]["run_id"] == latest.body["run_id"]
    assert by_id[ran]["last_run"]["status"] == "DEAD"
    assert by_id[idle]["last_run"] is None
    for job_id, item in by_id.items():
        assert item == api.request("GET", f"/v1/jobs/{job_id}", token=ACME).body


def test_list_filters_by_status_and_hides_cancelled_by_default(api: ApiGateway) -> None:
    active, paused, cancelled = (create(api, name=name)["job_id"] for name in ("a", "p", "c"))
    api.request("POST", f"/v1/jobs/{paused}/pause", token=ACME, body={})
    api.request("DELETE", f"/v1/jobs/{cancelled}", token=ACME)

    def ids(query: dict[str, str]) -> set[str]:
        return {
            item["job_id"] for item in api.request("GET", "/v1/jobs", token=ACME, query=query).body["items"]
        }

    assert ids({}) == {active, paused}
    assert ids({"status": "PAUSED"}) == {paused}
    assert ids({"status": "CANCELLED"}) == {cancelled}


# --- patch --------------------------------------------------------------------------------------------------
def test_patch_changes_only_the_given_fields_and_recomputes_next_fire(api: ApiGateway, dynamodb: Any) -> None:
    job = create(
        api,
        schedule={"type": "cron", "expression": "0 3 1 1 *", "timezone": "Europe/Paris"},
        retry={"max_attempts": 7, "jitter": "equal"},
        tags={"team": "a"},
    )
    response = api.request(
        "PATCH",
        f"/v1/jobs/{job['job_id']}",
        token=ACME,
        body={"schedule": {"expression": "*/15 * * * *"}, "retry": {"max_attempts": 3}},
    )
    assert response.status == 200, response.body
    updated = response.body
    assert updated["schedule"] == {**job["schedule"], "expression": "*/15 * * * *"}
    assert updated["retry"] == {**job["retry"], "max_attempts": 3}
    untouched = {
        "name",
        "target",
        "payload",
        "tags",
        "misfire_policy",
        "overlap_policy",
        "delivery",
        "created_at",
    }
    assert {key: updated[key] for key in untouched} == {key: job[key] for key in untouched}
    assert updated["version"] == job["version"] + 1
    next_fire = datetime.fromisoformat(updated["next_fire_at"])
    assert next_fire.minute % 15 == 0
    assert datetime.now(UTC) < next_fire <= datetime.now(UTC) + timedelta(minutes=15)
    # and the stored planning cursor moved to the new schedule
    (item,) = [
        i
        for i in scan_all(dynamodb, tables.JOBS.default_name)
        if i["pk"]["S"] == tables.job_key("acme", job["job_id"]) and i["sk"]["S"] == tables.JOB_SK
    ]
    cursor = datetime.fromtimestamp(int(item[tables.DUE_AT]["N"]) / 1000, UTC)
    assert cursor.minute % 15 == 0
    assert cursor <= datetime.now(UTC) + timedelta(minutes=15 + 15)  # the horizon, and one period ahead


def test_patch_can_switch_schedule_type(api: ApiGateway) -> None:
    job = create(api)
    response = api.request(
        "PATCH",
        f"/v1/jobs/{job['job_id']}",
        token=ACME,
        body={"schedule": {"type": "rate", "every_seconds": 3600}},
    )
    assert response.status == 200, response.body
    assert response.body["schedule"]["type"] == "rate"
    assert "expression" not in response.body["schedule"]


def test_patch_with_a_stale_version_is_409_and_changes_nothing(api: ApiGateway) -> None:
    job = create(api)
    path = f"/v1/jobs/{job['job_id']}"
    assert api.request("PATCH", path, token=ACME, body={"description": "v2", "version": 1}).status == 200
    stale = api.request("PATCH", path, token=ACME, body={"description": "v3", "version": 1})
    assert stale.status == 409
    assert stale.body["error"]["code"] == "version_conflict"
    stale_header = api.request(
        "PATCH", path, token=ACME, body={"description": "v3"}, headers={"If-Match": '"1"'}
    )
    assert stale_header.status == 409
    current = api.request("GET", path, token=ACME).body
    assert (current["description"], current["version"]) == ("v2", 2)


def test_patch_rename_moves_the_name(api: ApiGateway) -> None:
    job = create(api, name="old-name")
    assert (
        api.request("PATCH", f"/v1/jobs/{job['job_id']}", token=ACME, body={"name": "new-name"}).status == 200
    )
    assert api.request("POST", "/v1/jobs", token=ACME, body=job_body(name="old-name")).status == 201
    assert api.request("POST", "/v1/jobs", token=ACME, body=job_body(name="new-name")).status == 409


def test_patch_of_a_cancelled_job_is_409(api: ApiGateway) -> None:
    job = create(api)
    api.request("DELETE", f"/v1/jobs/{job['job_id']}", token=ACME)
    response = api.request("PATCH", f"/v1/jobs/{job['job_id']}", token=ACME, body={"description": "x"})
    assert response.status == 409
    assert response.body["error"]["code"] == "invalid_state"


# --- pause, resume, cancel ----------------------------------------------------------------------------------
def test_pause_stores_reason_time_and_actor_and_leaves_the_due_index(api: ApiGateway, dynamodb: Any) -> None:
    job = create(api)
    response = api.request(
        "POST", f"/v1/jobs/{job['job_id']}/pause", token=ACME, body={"reason": "vendor outage"}
    )
    assert response.status == 200
    assert response.body["status"] == "PAUSED"
    assert response.body["pause"]["reason"] == "vendor outage"
    assert response.body["pause"]["paused_by"] == "acme:default"
    assert datetime.fromisoformat(response.body["pause"]["paused_at"]) <= datetime.now(UTC)
    assert response.body["next_fire_at"] is None
    stored = [
        item for item in scan_all(dynamodb, tables.JOBS.default_name) if item["sk"]["S"] == tables.JOB_SK
    ]
    assert tables.DUE_SHARD not in stored[0]


def test_pause_without_a_body_works(api: ApiGateway) -> None:
    job = create(api)
    response = api.request("POST", f"/v1/jobs/{job['job_id']}/pause", token=ACME)
    assert response.status == 200
    assert response.body["pause"]["reason"] is None


def test_resume_plans_missed_fires_by_the_misfire_policy(api: ApiGateway) -> None:
    # Given a job every 10 s that was paused, with its cursor in the past
    job = create(
        api,
        schedule={"type": "rate", "every_seconds": 10},
        misfire_policy="fire_once",
        misfire_grace_seconds=0,
    )
    api.request("POST", f"/v1/jobs/{job['job_id']}/pause", token=ACME)
    # When it is resumed
    response = api.request("POST", f"/v1/jobs/{job['job_id']}/resume", token=ACME)
    # Then it is active again and its cursor moved past the horizon
    assert response.status == 200
    assert response.body["status"] == "ACTIVE"
    assert response.body["pause"] is None
    runs = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME, query={"limit": "100"}).body[
        "items"
    ]
    assert runs and all(run["status"] in {"ENQUEUED", "MISSED"} for run in runs)


def test_cancel_cancels_planned_runs_and_frees_the_name(api: ApiGateway) -> None:
    job = create(api, name="to-cancel", schedule={"type": "rate", "every_seconds": 60})
    response = api.request("DELETE", f"/v1/jobs/{job['job_id']}", token=ACME)
    assert response.status == 200
    assert response.body["status"] == "CANCELLED"
    runs = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME).body["items"]
    assert runs and {run["status"] for run in runs} == {"CANCELLED"}
    assert {run["reason"] for run in runs} == {"job_cancelled"}
    assert api.request("POST", "/v1/jobs", token=ACME, body=job_body(name="to-cancel")).status == 201
    assert api.request("DELETE", f"/v1/jobs/{job['job_id']}", token=ACME).status == 200  # idempotent
    assert api.request("POST", f"/v1/jobs/{job['job_id']}/resume", token=ACME).status == 409


# --- trigger, runs, retry -----------------------------------------------------------------------------------
def test_trigger_with_the_same_key_gives_the_same_run(api: ApiGateway, dynamodb: Any) -> None:
    job = create(api)
    path = f"/v1/jobs/{job['job_id']}/trigger"
    first = api.request("POST", path, token=ACME, headers={"Idempotency-Key": "k-1"})
    again = api.request("POST", path, token=ACME, headers={"Idempotency-Key": "k-1"})
    other = api.request("POST", path, token=ACME, headers={"Idempotency-Key": "k-2"})
    assert (first.status, again.status, other.status) == (202, 202, 202)
    assert first.body["run_id"] == again.body["run_id"] != other.body["run_id"]
    assert first.body["trigger"] == "manual"
    assert first.body["status"] == "ENQUEUED"
    manual = [
        item
        for item in scan_all(dynamodb, tables.RUNS.default_name)
        if item.get("trigger", {}).get("S") == "manual"
    ]
    assert len(manual) == 2


def test_trigger_without_a_key_makes_a_new_run_each_time(api: ApiGateway) -> None:
    job = create(api)
    path = f"/v1/jobs/{job['job_id']}/trigger"
    assert (
        api.request("POST", path, token=ACME).body["run_id"]
        != api.request("POST", path, token=ACME).body["run_id"]
    )


def test_get_run_returns_it_with_attempts(api: ApiGateway) -> None:
    job = create(api)
    run = api.request("POST", f"/v1/jobs/{job['job_id']}/trigger", token=ACME).body
    response = api.request("GET", f"/v1/runs/{run['run_id']}", token=ACME)
    assert response.status == 200
    assert response.body["run_id"] == run["run_id"]
    assert response.body["attempts"] == []


def test_runs_history_paginates_newest_first(api: ApiGateway) -> None:
    job = create(api, schedule={"type": "rate", "every_seconds": 30})
    pages: list[list[dict[str, Any]]] = []
    query = {"limit": "4"}
    while True:
        page = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME, query=query).body
        pages.append(page["items"])
        if not page["next_cursor"]:
            break
        query = {"limit": "4", "cursor": page["next_cursor"]}
    assert [len(items) for items in pages] == [4] * 7 + [2]  # every 30 s over the 15-minute horizon
    times = [run["scheduled_for"] for items in pages for run in items]
    assert times == sorted(times, reverse=True)
    assert len(set(times)) == len(times)


@pytest.mark.parametrize("status", ["FAILED", "DEAD", "ABANDONED"])
def test_retry_reopens_a_finished_run(api: ApiGateway, dynamodb: Any, status: str) -> None:
    from tickwork.app.ports import Expect
    from tickwork.domain.models import RunStatus
    from tickwork.runtime import runtime

    job = create(api)
    run = api.request("POST", f"/v1/jobs/{job['job_id']}/trigger", token=ACME).body
    stored = runtime().runs.get("acme", run["run_id"])
    assert runtime().runs.put(stored.model_copy(update={"status": RunStatus(status)}), Expect.at(stored)).ok
    response = api.request("POST", f"/v1/runs/{run['run_id']}/retry", token=ACME)
    assert response.status == 202
    assert response.body["status"] == "ENQUEUED"
    assert response.body["run_id"] == run["run_id"]


def test_retry_of_a_run_still_planned_is_409(api: ApiGateway) -> None:
    job = create(api)
    run = api.request("POST", f"/v1/jobs/{job['job_id']}/trigger", token=ACME).body
    response = api.request("POST", f"/v1/runs/{run['run_id']}/retry", token=ACME)
    assert response.status == 409
    assert response.body["error"]["code"] == "invalid_state"


# --- preview, stats, health ---------------------------------------------------------------------------------
def test_schedule_preview_returns_fire_times_and_stores_nothing(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    response = api.request(
        "POST",
        "/v1/schedule-preview",
        token=ACME,
        body={
            "schedule": {"type": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
            "after": "2025-03-08T12:00:00-05:00",
            "count": 2,
        },
    )
    assert response.status == 200
    assert response.body == {
        "fire_times": ["2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"],
        "fires": [
            # 02:30 does not exist on 9 March in New York: the fire moves to the end of the gap
            {"at": "2025-03-09T07:00:00Z", "excluded": None, "dst": "shifted", "starts_by": None},
            {"at": "2025-03-10T06:30:00Z", "excluded": None, "dst": None, "starts_by": None},
        ],
        "description": "At 02:30, America/New_York",
    }
    assert item_counts(dynamodb) == before


def test_stats_counts_jobs_and_recent_runs(api: ApiGateway) -> None:
    # An hour away, past the horizon, so none of its fires is queued whatever the time of day (the nightly
    # job's 03:00 Paris fire is queued at create from 01:45 UTC in winter)
    create(api, name="a", schedule={"type": "once", "at": soon(3600)})
    paused = create(api, name="b")
    api.request("POST", f"/v1/jobs/{paused['job_id']}/pause", token=ACME)
    api.request("POST", f"/v1/jobs/{paused['job_id']}/trigger", token=ACME)
    response = api.request("GET", "/v1/stats", token=ACME)
    assert response.status == 200
    assert response.body["jobs"]["ACTIVE"] == 1
    assert response.body["jobs"]["PAUSED"] == 1
    assert response.body["runs"]["ENQUEUED"] == 1  # the manual run, sent
    assert response.body["queue_depth"] == 1
    assert set(response.body["trigger_lag_ms"]) == {"p50", "p95", "p99"}


def test_health_needs_no_token(api: ApiGateway) -> None:
    response = api.send(load_event("api_health.json"), authorization=None)
    assert (response.status, response.body) == (200, {"status": "ok"})


# --- authentication -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token", "Basic dXNlcjpwYXNz", "Bearer", "tw_token-for-acme"]
)
def test_requests_without_a_valid_token_are_401(api: ApiGateway, authorization: str | None) -> None:
    event = load_event("api_list_jobs.json")
    response = api.send(event, authorization=authorization)
    assert response.status == 401
    assert response.body["error"]["code"] == "unauthorized"


def test_handler_refuses_an_event_without_authorizer_context(api: ApiGateway) -> None:
    event = load_event("api_list_jobs.json")
    event["requestContext"]["authorizer"] = None
    response = api.api_handler(event, LambdaContext())
    assert response["statusCode"] == 401
    assert json.loads(response["body"])["error"]["code"] == "unauthorized"


def test_tenant_comes_from_the_authorizer_not_the_body(api: ApiGateway) -> None:
    response = api.request("POST", "/v1/jobs", token=ACME, body={**job_body(), "tenant_id": "globex"})
    assert response.status == 400
    assert response.body["error"]["code"] == "unknown_field"
    job = create(api)
    assert api.request("GET", f"/v1/jobs/{job['job_id']}", token=GLOBEX).status == 404


def test_the_tenant_job_quota_is_enforced(dynamodb: Any) -> None:
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler
    from tests.conftest import seed_tenant

    # Given a tenant allowed one job
    seed_tenant(dynamodb, "small", "tw_small", max_jobs=1)
    api = ApiGateway(api_handler.lambda_handler, authorizer_handler.lambda_handler)
    first = api.request("POST", "/v1/jobs", token="tw_small", body=job_body(name="one"))
    assert first.status == 201
    # When it asks for a second
    before = item_counts(dynamodb)
    second = api.request("POST", "/v1/jobs", token="tw_small", body=job_body(name="two"))
    # Then it is refused and nothing is stored; cancelling frees the slot
    assert second.status == 429
    assert second.body["error"]["code"] == "quota_exceeded"
    assert item_counts(dynamodb) == before
    api.request("DELETE", f"/v1/jobs/{first.body['job_id']}", token="tw_small")
    assert api.request("POST", "/v1/jobs", token="tw_small", body=job_body(name="two")).status == 201


def test_a_body_that_is_not_json_is_refused(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    response = api.request(
        "POST", "/v1/jobs", token=ACME, raw_body="name=x", headers={"Content-Type": "text/plain"}
    )
    assert response.status == 400
    assert response.body["error"]["code"] == "unsupported_content_type"
    assert response.body["error"]["field"] == "Content-Type"
    assert item_counts(dynamodb) == before


def test_patching_the_schedule_shows_only_the_new_schedules_fires(api: ApiGateway) -> None:
    # Given a job every 60 s, whose fires of the next 15 minutes were sent, and a manual run
    job = create(api, schedule={"type": "rate", "every_seconds": 60})
    manual = api.request("POST", f"/v1/jobs/{job['job_id']}/trigger", token=ACME).body
    planned = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME).body["items"]
    assert len([run for run in planned if run["trigger"] == "schedule"]) == 15
    # When it becomes every 120 s from a start that keeps every other fire
    first_fire = min(run["scheduled_for"] for run in planned if run["trigger"] == "schedule")
    response = api.request(
        "PATCH",
        f"/v1/jobs/{job['job_id']}",
        token=ACME,
        body={"schedule": {"every_seconds": 120, "start_at": first_fire}},
    )
    assert response.status == 200, response.body
    # Then the fires in flight shown are the new schedule's; the old schedule's others, already sent, are
    # cancelled by the worker when they arrive (schedule_changed). The manual run goes on.
    runs = api.request("GET", f"/v1/jobs/{job['job_id']}/runs", token=ACME).body["items"]
    scheduled = sorted(run["scheduled_for"] for run in runs if run["trigger"] == "schedule")
    first = datetime.fromisoformat(first_fire)
    assert scheduled and all(
        (datetime.fromisoformat(at) - first).total_seconds() % 120 == 0 for at in scheduled
    )
    assert {run["run_id"]: run["status"] for run in runs}[manual["run_id"]] == "ENQUEUED"


def test_aws_targets_outside_the_allowed_patterns_are_refused(
    api: ApiGateway, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickwork.runtime import runtime

    monkeypatch.setenv("TICKWORK_ALLOWED_TARGET_ARNS", "arn:aws:sqs:eu-west-1:123456789012:orders-*")
    monkeypatch.setenv("TICKWORK_AWS_REGION", "eu-west-1")
    monkeypatch.setenv("TICKWORK_AWS_ACCOUNT_ID", "123456789012")
    runtime.cache_clear()
    job = {"name": "to-queue", "schedule": {"type": "rate", "every_seconds": 3600}, "payload": {}}
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/{}"

    before = item_counts(dynamodb)
    refused = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={**job, "target": {"type": "sqs", "queue_url": queue.format("payments")}},
    )
    assert refused.status == 400
    assert refused.body["error"]["code"] == "target_not_allowed"
    assert refused.body["error"]["field"] == "target.queue_url"
    assert item_counts(dynamodb) == before

    allowed = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={**job, "target": {"type": "sqs", "queue_url": queue.format("orders-1")}},
    )
    assert allowed.status == 201


def test_webhook_timeouts_beyond_the_worker_budget_are_refused(
    api: ApiGateway, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickwork.runtime import runtime

    monkeypatch.setenv("TICKWORK_MAX_TARGET_TIMEOUT_SECONDS", "110")
    runtime.cache_clear()
    job = {"name": "slow-hook", "schedule": {"type": "rate", "every_seconds": 3600}}

    def create(timeout: int) -> Any:
        target = {"type": "http", "url": "https://example.com/hook", "timeout_seconds": timeout}
        return api.request("POST", "/v1/jobs", token=ACME, body={**job, "target": target})

    before = item_counts(dynamodb)
    refused = create(111)
    assert refused.status == 400
    assert refused.body["error"]["field"] == "target.timeout_seconds"
    assert item_counts(dynamodb) == before
    assert create(110).status == 201


# --- exclusions and jitter ----------------------------------------------------------------------------------
def test_a_job_with_holidays_excluded_and_jitter_reads_back_as_given_and_in_words(api: ApiGateway) -> None:
    schedule = {
        "type": "cron",
        "expression": "0 9 * * 1-5",
        "timezone": "America/New_York",
        "exclude": {"holidays": "US-NY", "date_ranges": [{"start": "2026-12-24", "end": "2027-01-01"}]},
    }
    job = create(api, schedule=schedule, jitter_seconds=300)
    fetched = api.request("GET", f"/v1/jobs/{job['job_id']}", token=ACME).body
    assert fetched["jitter_seconds"] == 300
    assert fetched["schedule"]["exclude"] == {
        "dates": [],
        "date_ranges": [{"start": "2026-12-24", "end": "2027-01-01"}],
        "windows": [],
        "holidays": ["US-NY"],
        "timezone": None,
    }
    assert fetched["schedule_description"] == (
        "At 09:00, Monday through Friday, America/New_York,"
        " except on US-NY holidays and 2026-12-24 to 2027-01-01"
    )


@pytest.mark.parametrize(
    ("exclude", "field", "says"),
    [
        ({"holidays": ["Narnia"]}, "schedule.exclude.holidays.0", "unknown holiday calendar Narnia"),
        ({"holidays": ["US-XX"]}, "schedule.exclude.holidays.0", "US has no subdivision XX"),
        ({"dates": ["25/12/2026"]}, "schedule.exclude.dates.0", "YYYY-MM-DD"),
        ({"windows": ["* 24 * * *"]}, "schedule.exclude.windows.0", "hour value 24 is out of range"),
        ({"windows": ["* * 25 12 *"]}, "schedule.exclude", "excludes every fire"),
    ],
)
def test_a_bad_exclusion_is_a_4xx_naming_its_field_and_stores_nothing(
    api: ApiGateway, dynamodb: Any, exclude: dict[str, Any], field: str, says: str
) -> None:
    before = item_counts(dynamodb)
    schedule = {"type": "cron", "expression": "0 9 25 12 *", "exclude": exclude}
    response = api.request("POST", "/v1/jobs", token=ACME, body=job_body(schedule=schedule))
    assert 400 <= response.status < 500, response.body
    assert response.body["error"]["field"] == field
    assert says in response.body["error"]["message"]
    assert item_counts(dynamodb) == before


def test_preview_shows_excluded_fires_with_their_reason_and_each_fires_latest_start(api: ApiGateway) -> None:
    response = api.request(
        "POST",
        "/v1/schedule-preview",
        token=ACME,
        body={
            "schedule": {
                "type": "cron",
                "expression": "0 9 * * *",
                "timezone": "America/New_York",
                "exclude": {"holidays": "US-NY", "windows": ["* * * * SAT,SUN"]},
            },
            "after": "2026-11-24T00:00:00Z",
            "count": 3,
            "jitter_seconds": 600,
        },
    )
    assert response.status == 200, response.body
    body = response.body
    # Tuesday 24, Wednesday 25, (Thanksgiving 26), Friday 27, (the weekend), Monday 30 November
    assert body["fire_times"] == ["2026-11-24T14:00:00Z", "2026-11-25T14:00:00Z", "2026-11-27T14:00:00Z"]
    assert [(fire["at"], fire["excluded"]) for fire in body["fires"]] == [
        ("2026-11-24T14:00:00Z", None),
        ("2026-11-25T14:00:00Z", None),
        ("2026-11-26T14:00:00Z", "excluded: holiday Thanksgiving Day (US-NY)"),
        ("2026-11-27T14:00:00Z", None),
    ]
    assert [fire["starts_by"] for fire in body["fires"] if fire["excluded"] is None] == [
        "2026-11-24T14:10:00Z",
        "2026-11-25T14:10:00Z",
        "2026-11-27T14:10:00Z",
    ]
    assert body["fires"][2]["starts_by"] is None
    assert "except on US-NY holidays" in body["description"]


def test_preview_marks_both_copies_of_a_repeated_hour(api: ApiGateway) -> None:
    response = api.request(
        "POST",
        "/v1/schedule-preview",
        token=ACME,
        body={
            "schedule": {
                "type": "cron",
                "expression": "30 1 * * *",
                "timezone": "America/New_York",
                "dst": {"overlap": "all"},
            },
            "after": "2026-10-31T12:00:00Z",
            "count": 3,
        },
    )
    assert response.status == 200, response.body
    assert [(fire["at"], fire["dst"]) for fire in response.body["fires"]] == [
        ("2026-11-01T05:30:00Z", "repeated"),
        ("2026-11-01T06:30:00Z", "repeated"),
        ("2026-11-02T06:30:00Z", None),
    ]
