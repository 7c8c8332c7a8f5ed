"""tickwork local, end to end through real HTTP: jobs fire on time at a loopback receiver."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from tickwork import tables
from tickwork.targets import verify_signature
from tickwork_local.stack import LOCAL_REGION

from tests.e2e.conftest import SIGNING_SECRET, Local, wait_for
from tests.support.engine import Receiver

ON_TIME_SECONDS = 1.0


def job(receiver: Receiver, path: str, schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": f"e2e-{uuid.uuid4().hex[:10]}",
        "schedule": schedule,
        "target": {"type": "http", "url": receiver.url(path), "timeout_seconds": 5},
        **extra,
    }


def test_a_one_time_job_fires_on_time_with_a_valid_signature(local: Local, receiver: Receiver) -> None:
    at = datetime.now(UTC) + timedelta(seconds=3)
    status, created = local.call(
        "POST", "/v1/jobs", body=job(receiver, "/once", {"type": "once", "at": at.isoformat()})
    )
    assert status == 201, created
    (request,) = wait_for(lambda: receiver.for_path("/once"), timeout=8)
    lag = request.at - at.timestamp()
    assert 0 <= lag <= ON_TIME_SECONDS, f"lag {lag:.3f} s"
    timestamp = int(request.headers["X-Tickwork-Signature"].split(",")[0].removeprefix("t="))
    assert verify_signature(
        SIGNING_SECRET, request.headers["X-Tickwork-Signature"], request.body, now_epoch=timestamp
    )
    assert request.json()["job_id"] == created["job_id"]


def test_a_seconds_cron_fires_every_two_seconds_on_time(local: Local, receiver: Receiver) -> None:
    status, created = local.call(
        "POST", "/v1/jobs", body=job(receiver, "/cron", {"type": "cron", "expression": "*/2 * * * * *"})
    )
    assert status == 201, created
    requests = wait_for(
        lambda: len(receiver.for_path("/cron")) >= 3 and receiver.for_path("/cron"), timeout=10
    )
    local.call("DELETE", f"/v1/jobs/{created['job_id']}")
    assert requests, "fewer than 3 fires in 10 s"
    for request in requests[:3]:
        scheduled = datetime.fromisoformat(request.json()["scheduled_for"]).timestamp()
        assert 0 <= request.at - scheduled <= ON_TIME_SECONDS
    runs = local.call("GET", f"/v1/jobs/{created['job_id']}/runs")[1]["items"]
    assert any(run["status"] == "SUCCEEDED" and run["lag_ms"] is not None for run in runs)


def test_pause_resume_and_cancel(local: Local, receiver: Receiver) -> None:
    status, created = local.call(
        "POST", "/v1/jobs", body=job(receiver, "/pausing", {"type": "rate", "every_seconds": 1})
    )
    assert status == 201
    job_id = created["job_id"]
    wait_for(lambda: receiver.for_path("/pausing"), timeout=5)
    status, paused = local.call("POST", f"/v1/jobs/{job_id}/pause", body={"reason": "e2e pause"})
    assert (status, paused["status"], paused["pause"]["reason"]) == (200, "PAUSED", "e2e pause")
    settled = len(wait_for(lambda: receiver.for_path("/pausing"), timeout=1))
    before = len(receiver.for_path("/pausing"))
    assert wait_for(lambda: len(receiver.for_path("/pausing")) > before + 1, timeout=2.5) is False
    assert settled >= 1
    status, resumed = local.call("POST", f"/v1/jobs/{job_id}/resume")
    assert (status, resumed["status"]) == (200, "ACTIVE")
    after_resume = len(receiver.for_path("/pausing"))
    assert wait_for(lambda: len(receiver.for_path("/pausing")) > after_resume, timeout=4)
    status, cancelled = local.call("DELETE", f"/v1/jobs/{job_id}")
    assert (status, cancelled["status"]) == (200, "CANCELLED")
    time_of_cancel = len(receiver.for_path("/pausing"))
    assert wait_for(lambda: len(receiver.for_path("/pausing")) > time_of_cancel + 1, timeout=2.5) is False


def test_trigger_twice_with_one_key_runs_once(local: Local, receiver: Receiver) -> None:
    far = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    _, created = local.call("POST", "/v1/jobs", body=job(receiver, "/trigger", {"type": "once", "at": far}))
    path = f"/v1/jobs/{created['job_id']}/trigger"
    first = local.call("POST", path, headers={"Idempotency-Key": "e2e-key"})
    second = local.call("POST", path, headers={"Idempotency-Key": "e2e-key"})
    assert first[0] == second[0] == 202
    assert first[1]["run_id"] == second[1]["run_id"]
    wait_for(lambda: receiver.for_path("/trigger"), timeout=5)
    assert wait_for(lambda: len(receiver.for_path("/trigger")) > 1, timeout=2) is False
    status, run = local.call("GET", f"/v1/runs/{first[1]['run_id']}")
    assert (status, run["status"], len(run["attempts"])) == (200, "SUCCEEDED", 1)


def test_retries_after_503s_then_a_dead_run_in_the_dead_letter_queue(
    local: Local, receiver: Receiver
) -> None:
    receiver.script["/flaky"] = [503, 503, 200]
    receiver.script["/down"] = [503]
    retry = {"max_attempts": 3, "initial_delay_seconds": 1, "multiplier": 1.0, "jitter": "none"}
    now = datetime.now(UTC).isoformat()
    _, flaky = local.call(
        "POST", "/v1/jobs", body=job(receiver, "/flaky", {"type": "once", "at": now}, retry=retry)
    )
    _, down = local.call(
        "POST", "/v1/jobs", body=job(receiver, "/down", {"type": "once", "at": now}, retry=retry)
    )

    def final_run(job_id: str) -> dict[str, Any] | None:
        items = local.call("GET", f"/v1/jobs/{job_id}/runs")[1]["items"]
        return items[0] if items and items[0]["status"] in {"SUCCEEDED", "DEAD"} else None

    flaky_run = wait_for(lambda: final_run(flaky["job_id"]), timeout=15)
    down_run = wait_for(lambda: final_run(down["job_id"]), timeout=15)
    assert flaky_run is not None, local.call("GET", f"/v1/jobs/{flaky['job_id']}/runs")
    assert flaky_run["status"] == "SUCCEEDED"
    _, detail = local.call("GET", f"/v1/runs/{flaky_run['run_id']}")
    assert [attempt["outcome"] for attempt in detail["attempts"]] == [
        "retryable_error",
        "retryable_error",
        "succeeded",
    ]
    assert {request.headers["Idempotency-Key"] for request in receiver.for_path("/flaky")} == {
        flaky_run["run_id"]
    }
    assert down_run is not None and down_run["status"] == "DEAD"
    sqs = boto3.client(
        "sqs",
        endpoint_url=local.moto_endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    queue_url = sqs.get_queue_url(QueueName=tables.DEAD_RUN_QUEUE.default_name)["QueueUrl"]
    bodies = [
        message["Body"]
        for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    ]
    assert any(down_run["run_id"] in body for body in bodies)


def test_tenants_are_isolated(local: Local, receiver: Receiver) -> None:
    far = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    _, created = local.call("POST", "/v1/jobs", body=job(receiver, "/iso", {"type": "once", "at": far}))
    status, body = local.call("GET", f"/v1/jobs/{created['job_id']}", tenant="globex")
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert local.call("POST", f"/v1/jobs/{created['job_id']}/trigger", tenant="globex")[0] == 404
    listed = local.call("GET", "/v1/jobs", tenant="globex")[1]["items"]
    assert created["job_id"] not in {item["job_id"] for item in listed}


def test_bad_input_is_a_4xx_naming_the_field(local: Local, receiver: Receiver) -> None:
    base = job(receiver, "/bad", {"type": "cron", "expression": "0 * * * *"})
    cases = [
        ({**base, "schedule": {"type": "cron", "expression": "0 25 * * *"}}, 400, "schedule.expression"),
        (
            {**base, "schedule": {"type": "cron", "expression": "0 * * * *", "timezone": "Mars/Olympus"}},
            400,
            "schedule.timezone",
        ),
        ({**base, "payload": "x" * (256 * 1024)}, 413, "payload"),
        ({**base, "colour": "blue"}, 400, "colour"),
    ]
    for body, status, field in cases:
        got_status, got = local.call("POST", "/v1/jobs", body=body)
        assert (got_status, got["error"]["field"]) == (status, field), got
    assert local.call("GET", "/v1/jobs?limit=1")[0] == 200


def test_the_cli_json_output_for_create_list_and_runs(local: Local, receiver: Receiver) -> None:
    import json
    import subprocess

    from tests.e2e.conftest import TOKENS, tickwork_command

    def cli(*args: str) -> Any:
        result = subprocess.run(
            [*tickwork_command(), "--api-url", local.url, "--token", TOKENS["acme"], "--json", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    created = cli(
        "jobs",
        "create",
        "--name",
        f"cli-{uuid.uuid4().hex[:8]}",
        "--rate",
        "1",
        "--url",
        receiver.url("/cli"),
    )
    assert created["status"] == "ACTIVE"
    listed = cli("jobs", "list")
    assert created["job_id"] in {item["job_id"] for item in listed["items"]}
    wait_for(lambda: receiver.for_path("/cli"), timeout=5)
    runs = wait_for(
        lambda: [
            run for run in cli("jobs", "runs", created["job_id"])["items"] if run["status"] == "SUCCEEDED"
        ],
        timeout=5,
    )
    assert runs and runs[0]["job_id"] == created["job_id"]
    # Cancelling asks first; a script confirms with --yes (no terminal to ask on)
    assert cli("jobs", "cancel", created["job_id"], "--yes")["status"] == "CANCELLED"


def test_default_tenant_and_state_kept_across_a_restart(tmp_path: Any, receiver: Receiver) -> None:
    import re

    from tests.e2e.conftest import start_local, stop_local

    # Given a local stack with no tenants configured, keeping its state in a data directory
    first = start_local(tmp_path, tenants=None)
    try:
        banner = "".join(first.output)
        found = re.search(r"tenant default: token (\S+)", banner)
        assert found is not None, banner
        assert "curl -s -X POST" in banner
        token = found.group(1)
        far = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        body = job(receiver, "/kept", {"type": "once", "at": far})
        status, created = first.call("POST", "/v1/jobs", token=token, body=body)
        assert status == 201
    finally:
        assert stop_local(first) < 5
    # When it starts again on the same directory
    second = start_local(tmp_path, tenants=None)
    try:
        # Then the same token works and the job is still there
        assert f"tenant default: token {token}" in "".join(second.output)
        status, kept = second.call("GET", f"/v1/jobs/{created['job_id']}", token=token)
        assert (status, kept["name"]) == (200, created["name"])
    finally:
        stop_local(second)


def test_fires_queued_at_a_stop_follow_the_misfire_policy_after_a_restart(
    tmp_path: Any, receiver: Receiver
) -> None:
    import time

    from tests.e2e.conftest import start_local, stop_local

    # Given one-time jobs whose fires are already in the queue when the stack stops, before their time
    first = start_local(tmp_path, tenants="acme:tw_e2e_acme")
    at = datetime.now(UTC) + timedelta(seconds=4)
    ids = {}
    try:
        for policy in ("fire_once", "skip"):
            body = job(receiver, f"/queued-{policy}", {"type": "once", "at": at.isoformat()})
            status, created = first.call(
                "POST", "/v1/jobs", body={**body, "misfire_policy": policy, "misfire_grace_seconds": 1}
            )
            assert status == 201, created
            ids[policy] = created["job_id"]
    finally:
        stop_local(first)
    # When it starts again on the same directory after their time and grace have passed
    time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds() + 2))
    second = start_local(tmp_path, tenants="acme:tw_e2e_acme")
    try:
        # Then each follows its policy: fire_once runs it once, late; skip records it MISSED; both complete
        def outcome(policy: str) -> tuple[str, list[str]]:
            _, found = second.call("GET", f"/v1/jobs/{ids[policy]}")
            _, runs = second.call("GET", f"/v1/jobs/{ids[policy]}/runs")
            return found["status"], [run["status"] for run in runs["items"]]

        assert wait_for(lambda: outcome("fire_once") == ("COMPLETED", ["SUCCEEDED"]), timeout=10), outcome(
            "fire_once"
        )
        assert wait_for(lambda: outcome("skip") == ("COMPLETED", ["MISSED"]), timeout=10), outcome("skip")
        assert len(receiver.for_path("/queued-fire_once")) == 1
        assert receiver.for_path("/queued-skip") == []
    finally:
        stop_local(second)
