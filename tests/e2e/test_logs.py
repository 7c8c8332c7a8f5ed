"""A busy `tickwork local`'s log file, read line by line, at INFO and at DEBUG.

The workload: creates, bad requests (400, 401, 404, 405, 409, 422), a webhook answering 500 then 200, one
that times out, one that always answers 500 (a dead run, and a one-time job that completes with it), one
that answers 404 (a failed run), a pause and a resume, an update, triggers, a cancel, and concurrent
duplicates (the same name, the same Idempotency-Key, a run message delivered twice). Then every line must be
one JSON object whose keys are all documented (``tickwork.observability``, docs/operations.md "Logs"), with
no traceback (each error here is expected), no internal key name and no secret. At INFO only what an
operator acts on appears; at DEBUG the routine lines appear too.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.observability import LOG_KEYS, POWERTOOLS_LOG_KEYS
from tickwork_local.stack import LOCAL_REGION

from tests.e2e.conftest import SIGNING_SECRET, TOKENS, Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

CREDENTIAL = "hdr-credential-7f3a21"  # a value a tenant puts in its target's headers
DUPLICATES = 6  # clients sending the same request at once
# What an operator acts on: changes people made, runs that ended without success, start-up.
OPERATOR_MESSAGES = {
    "job created",
    "job updated",
    "job paused",
    "job resumed",
    "job cancelled",
    "job triggered",
    "run retried",
    "run failed",
    "run dead-lettered",
    "run abandoned",
    "planner tick recorded missed fires",
    "local stack started",
    "handler instance started",
}
ROUTINE_MESSAGES = {
    "planner tick",
    "run started",
    "run succeeded",
    "run attempt failed, retry scheduled",
    "request refused",
}
# Names of the tables' keys and indexes, and of the run item's lease and queue bookkeeping.
INTERNAL_NAMES = {
    tables.JOBS_PK,
    tables.JOBS_SK,
    tables.RUNS_PK,
    tables.RUNS_SK,
    tables.DUE_SHARD,
    tables.ATTENTION_SHARD,
    tables.ATTENTION_AT,
    tables.RUNS_TTL,
    tables.IDEMPOTENCY_TTL,
    tables.SCHEMA_VERSION,
    "fencing_token",
    "lease_owner",
    "lease_expires_at",
    "dead_letter_owed",
    "retry_sent_at",
    "chain_until",
    "holders",
    "signing_secret",
    "token_sha256",
    "ResponseMetadata",
    "Item",
    "Items",
}


@dataclass
class Workload:
    """What the workload did, for the checks to find in the log."""

    job_ids: dict[str, str] = field(default_factory=dict)
    run_ids: dict[str, str] = field(default_factory=dict)
    refused: list[int] = field(default_factory=list)


@dataclass
class BusyLog:
    level: str
    workload: Workload
    raw: list[str]

    @property
    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.raw]

    def about(self, name: str) -> list[dict[str, Any]]:
        return [record for record in self.records if record.get("job_id") == self.workload.job_ids[name]]


def job(
    receiver: Receiver, path: str, schedule: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "name": f"logs-{path.strip('/')}-{uuid.uuid4().hex[:8]}",
        "schedule": schedule or {"type": "rate", "every_seconds": 3600},
        "target": {
            "type": "http",
            "url": receiver.url(path),
            "headers": {"X-Api-Key": CREDENTIAL},
            "timeout_seconds": extra.pop("timeout_seconds", 5),
        },
        "retry": {"max_attempts": 2, "initial_delay_seconds": 0, "max_delay_seconds": 1, "jitter": "none"},
        **extra,
    }


def at_once(count: int, call: Callable[[], tuple[int, Any]]) -> list[tuple[int, Any]]:
    """``call`` from ``count`` threads released together."""
    start = threading.Barrier(count)
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def send() -> None:
        start.wait()
        answer = call()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=send) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def run_workload(local: Local, receiver: Receiver) -> Workload:
    done = Workload()

    def create(name: str, body: dict[str, Any]) -> str:
        status, created = local.call("POST", "/v1/jobs", body=body)
        assert status == 201, created
        done.job_ids[name] = created["job_id"]
        return str(created["job_id"])

    def refuse(expected: int, method: str, path: str, **request: Any) -> None:
        status, answer = local.call(method, path, **request)
        assert status == expected, answer
        done.refused.append(status)

    receiver.script["/flaky"] = [500, 200]
    receiver.script["/down"] = [500]
    receiver.script["/gone"] = [404]
    receiver.delays["/slow"] = 2
    for name, path, extra in (
        ("flaky", "/flaky", {}),
        ("down", "/down", {}),
        ("gone", "/gone", {}),
        ("slow", "/slow", {"timeout_seconds": 1}),
        ("steady", "/steady", {"schedule": {"type": "rate", "every_seconds": 1}}),
    ):
        create(name, job(receiver, path, **extra))
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    create("once", job(receiver, "/down", {"type": "once", "at": soon}))

    # Bad requests
    refuse(400, "POST", "/v1/jobs", body={"name": "no-schedule"})
    refuse(400, "POST", "/v1/jobs", body=job(receiver, "/x", {"type": "cron", "expression": "0 25 * * *"}))
    refuse(404, "GET", "/v1/jobs/01NOSUCHJOB0000000000000000")
    refuse(401, "GET", "/v1/jobs", token="tw_not_a_token")
    refuse(405, "PUT", f"/v1/jobs/{done.job_ids['steady']}", body={})
    taken = local.call("GET", f"/v1/jobs/{done.job_ids['steady']}")[1]["name"]
    refuse(409, "POST", "/v1/jobs", body={**job(receiver, "/x"), "name": taken})
    key = {"Idempotency-Key": f"logs-{uuid.uuid4().hex}"}
    assert local.call("POST", "/v1/jobs", body=job(receiver, "/keyed"), headers=key)[0] == 201
    refuse(422, "POST", "/v1/jobs", body=job(receiver, "/other"), headers=key)

    # Changes people make
    steady = done.job_ids["steady"]
    assert local.call("POST", f"/v1/jobs/{steady}/pause", body={"reason": "maintenance"})[0] == 200
    refuse(409, "PATCH", f"/v1/jobs/{steady}", body={"description": "x"}, headers={"If-Match": '"1"'})
    assert local.call("POST", f"/v1/jobs/{steady}/resume")[0] == 200
    assert local.call("PATCH", f"/v1/jobs/{steady}", body={"description": "every second"})[0] == 200
    for name in ("flaky", "down", "gone", "slow"):
        status, run = local.call("POST", f"/v1/jobs/{done.job_ids[name]}/trigger")
        assert status == 202, run
        done.run_ids[name] = run["run_id"]

    # Concurrent duplicates: one name, one Idempotency-Key, one run message twice
    same_name = job(receiver, "/steady")
    statuses = sorted(
        status for status, _ in at_once(DUPLICATES, lambda: local.call("POST", "/v1/jobs", body=same_name))
    )
    assert statuses == [201] + [409] * (DUPLICATES - 1), statuses
    done.refused.extend(statuses[1:])
    trigger_key = {"Idempotency-Key": f"logs-{uuid.uuid4().hex}"}
    triggered = at_once(
        DUPLICATES, lambda: local.call("POST", f"/v1/jobs/{steady}/trigger", headers=trigger_key)
    )
    assert {status for status, _ in triggered} <= {202, 409}, triggered
    done.refused.extend(status for status, _ in triggered if status == 409)

    def run_ended(name: str) -> Callable[[], str | None]:
        def status() -> str | None:
            now = local.call("GET", f"/v1/runs/{done.run_ids[name]}")[1]["status"]
            return str(now) if now in {"SUCCEEDED", "FAILED", "DEAD"} else None

        return status

    def once_completed() -> dict[str, Any] | None:
        shown: dict[str, Any] = local.call("GET", f"/v1/jobs/{done.job_ids['once']}")[1]
        return shown if shown["status"] == "COMPLETED" else None

    expected = {"flaky": "SUCCEEDED", "down": "DEAD", "gone": "FAILED", "slow": "DEAD"}
    for name, outcome in expected.items():
        assert wait_for(run_ended(name), timeout=30) == outcome, name
    once = wait_for(once_completed, timeout=30)
    assert once and once["last_run"]["status"] == "DEAD", once
    sqs = boto3.client(
        "sqs",
        endpoint_url=local.moto_endpoint,
        region_name=LOCAL_REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    queue_url = sqs.get_queue_url(QueueName=tables.RUN_QUEUE.default_name)["QueueUrl"]
    message = json.dumps({"tenant_id": "acme", "run_id": done.run_ids["flaky"]})
    sqs.send_message(QueueUrl=queue_url, MessageBody=message, MessageGroupId="acme")
    assert local.call("DELETE", f"/v1/jobs/{steady}")[0] == 200
    time.sleep(2)  # the duplicate delivery, and a tick or two more
    return done


@pytest.fixture(scope="module", params=["INFO", "DEBUG"])
def busy_log(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BusyLog:
    level: str = request.param
    with Receiver() as receiver:
        local = start_local(
            tmp_path_factory.mktemp(f"logs-{level.lower()}"),
            tenants=",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items()),
            environment={"POWERTOOLS_LOG_LEVEL": level},
        )
        try:
            workload = run_workload(local, receiver)
        finally:
            stop_local(local)
    raw = [line for line in Path(local.log_file).read_text().splitlines() if line.strip()]
    return BusyLog(level, workload, raw)


def test_every_line_is_one_json_object(busy_log: BusyLog) -> None:
    for line in busy_log.raw:
        assert isinstance(json.loads(line), dict), line


def test_no_line_carries_a_traceback_for_an_expected_error(busy_log: BusyLog) -> None:
    for line in busy_log.raw:
        assert "Traceback" not in line, line
        record = json.loads(line)
        assert not {"exception", "exception_name", "stack_trace"} & record.keys(), line
        assert record["level"] in {"DEBUG", "INFO"}, line  # nothing here needs attention


def test_every_key_is_documented_and_none_is_internal(busy_log: BusyLog) -> None:
    documented = LOG_KEYS | POWERTOOLS_LOG_KEYS
    for line in busy_log.raw:
        assert json.loads(line).keys() <= documented, line
        assert not [name for name in INTERNAL_NAMES if f'"{name}":' in line], line


def test_no_secret_reaches_the_log(busy_log: BusyLog) -> None:
    text = "\n".join(busy_log.raw)
    for secret in (*TOKENS.values(), SIGNING_SECRET, CREDENTIAL, "tw_not_a_token", "Bearer "):
        assert secret not in text, secret


def test_at_info_only_what_an_operator_acts_on_appears(busy_log: BusyLog) -> None:
    records = busy_log.records
    messages = {record["message"] for record in records if record["level"] == "INFO"}
    assert messages <= OPERATOR_MESSAGES, messages - OPERATOR_MESSAGES
    if busy_log.level == "INFO":
        assert {record["level"] for record in records} == {"INFO"}
    # The audit lines and the runs that ended badly are all there, each with what to search by
    assert {
        "job created",
        "job paused",
        "job resumed",
        "job updated",
        "job triggered",
        "job cancelled",
    } <= messages
    for record in records:
        if record["message"].startswith("job "):
            assert record["tenant_id"] == "acme" and record["actor"], record
            assert record["job_id"] and record["correlation_id"], record
    ends = {
        name: [(r["message"], r.get("error_code")) for r in busy_log.about(name) if r["level"] == "INFO"]
        for name in ("down", "slow", "gone", "once")
    }
    assert ("run dead-lettered", "http_500") in ends["down"], ends
    assert ("run dead-lettered", "timeout") in ends["slow"], ends
    assert ("run failed", "http_404") in ends["gone"], ends
    assert ("run dead-lettered", "http_500") in ends["once"], ends


@pytest.mark.parametrize("busy_log", ["DEBUG"], indirect=True)  # routine lines are DEBUG
def test_at_debug_the_routine_lines_appear_too(busy_log: BusyLog) -> None:
    records = busy_log.records
    assert {record["message"] for record in records if record["level"] == "DEBUG"} <= ROUTINE_MESSAGES | {
        "token refused",
        "run ended",
        "more fires were excluded than are recorded",
    }
    flaky = [(r["message"], r.get("attempt"), r.get("error_code")) for r in busy_log.about("flaky")]
    assert ("run attempt failed, retry scheduled", 1, "http_500") in flaky, flaky
    assert ("run succeeded", 2, None) in flaky, flaky
    assert any(record["message"] == "planner tick" for record in records)
    # Each refused request once, under its request id (a 401 is the authorizer's "token refused"; a 429 of
    # the tenant's rate limit is waited out by the client)
    refused = [r for r in records if r["message"] == "request refused" and r["status_code"] != 429]
    assert sorted(record["status_code"] for record in refused) == sorted(
        status for status in busy_log.workload.refused if status != 401
    ), refused
    assert all(record["correlation_id"] for record in refused)
