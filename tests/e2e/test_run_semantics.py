"""The run semantics of the contract, end to end through the local stack: the HTTP API, the planner loop,
the worker pollers, moto's SQS and DynamoDB, and a webhook receiver on loopback.

Each test is one of the defects the run path v2 fixed (pause, completion, overlap races, held runs, item
size, outages, queued fires after a stop, `end_at`, a resume just before a fire). They run on the wall
clock, so their schedules fire every one or two seconds and the waits are a few seconds long. Fires every
two seconds (``*/2`` in the seconds field) leave a second on each side of a pause, a resume or a restart,
so which fires fell in the gap does not depend on scheduling noise.
"""

from __future__ import annotations

import itertools
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.tenants import Tenant
from tickwork.runtime import runtime
from tickwork_local.stack import LocalStack

from tests.e2e.conftest import in_process_stack, wait_for
from tests.support.engine import Received, Receiver, start_receiver

TENANT, TOKEN = "semantics", "tw_e2e_semantics"
EVERY_TWO_SECONDS = "*/2 * * * * *"
EVERY_SECOND = "* * * * * *"
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_HEADER_BYTES = 16 * 1024
TERMINAL = {"SUCCEEDED", "FAILED", "DEAD", "ABANDONED", "MISSED", "SKIPPED", "CANCELLED"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from in_process_stack(tmp_path_factory, "semantics", TENANT, TOKEN)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


class Api:
    """The stack's HTTP API as one tenant sees it."""

    def __init__(self, stack: LocalStack, token: str = TOKEN):
        self.url = f"http://127.0.0.1:{stack.port}"
        self.token = token

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)  # noqa: S310 - loopback
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def create(self, **spec: Any) -> dict[str, Any]:
        status, job = self("POST", "/v1/jobs", spec)
        assert status == 201, job
        return dict(job)

    def job(self, job_id: str) -> dict[str, Any]:
        status, job = self("GET", f"/v1/jobs/{job_id}")
        assert status == 200, job
        return dict(job)

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of the job, oldest first."""
        runs: list[dict[str, Any]] = []
        path = f"/v1/jobs/{job_id}/runs?limit=100"
        while True:
            status, page = self("GET", path)
            assert status == 200, page
            runs.extend(page["items"])
            if not page.get("next_cursor"):
                return sorted(runs, key=lambda run: run["scheduled_for"])
            path = f"/v1/jobs/{job_id}/runs?limit=100&cursor={page['next_cursor']}"

    def act(self, job_id: str, action: str, body: Any = None) -> dict[str, Any]:
        status, result = self("POST", f"/v1/jobs/{job_id}/{action}", body)
        assert status == 200, result
        return dict(result)


def http(receiver: Receiver, path: str, timeout: int = 10) -> dict[str, Any]:
    return {"type": "http", "url": receiver.url(path), "timeout_seconds": timeout}


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def next_even_second(after: float) -> float:
    """The first whole even second after ``after``: a fire of ``*/2 * * * * *``."""
    return float(math.floor(after / 2) * 2 + 2)


def scheduled(request: Received) -> float:
    return datetime.fromisoformat(request.headers["X-Tickwork-Scheduled-For"]).timestamp()


def fires_between(runs: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    return [run for run in runs if start < datetime.fromisoformat(run["scheduled_for"]).timestamp() < end]


def settled(api: Api, job_id: str) -> bool:
    return not unsettled(api, job_id)


def unsettled(api: Api, job_id: str) -> list[tuple[str, str]]:
    return [
        (run["scheduled_for"], run["status"]) for run in api.runs(job_id) if run["status"] not in TERMINAL
    ]


# --- 1, 6, 7: pauses and outages: the fires in the gap follow the misfire policy ----------------------------
GAP_EXPECTATIONS = [
    # policy, how many of the gap's four fires run afterwards
    pytest.param("skip", 0, id="skip"),
    pytest.param("fire_once", 1, id="fire_once"),
    pytest.param("backfill", 4, id="backfill"),
]


def assert_gap_followed_the_policy(
    api: Api, receiver: Receiver, path: str, job_id: str, gap: tuple[float, float], policy: str, runs: int
) -> None:
    start, end = gap
    calls = [request for request in receiver.for_path(path) if start < scheduled(request) < end]
    fires = fires_between(api.runs(job_id), start, end)
    seen = [(fire["scheduled_for"], fire["status"], fire.get("reason")) for fire in fires]
    assert len(fires) == 4, seen
    # Nothing of the gap ran during it, nor twice
    assert all(request.at >= end for request in calls)
    assert len({scheduled(request) for request in calls}) == len(calls) == runs, seen
    ran = [fire for fire in fires if fire["status"] == "SUCCEEDED"]
    assert len(ran) == runs
    assert all(fire["status"] == "MISSED" for fire in fires if fire not in ran), fires
    if policy == "fire_once":
        # The latest of the gap, at once
        assert ran[0]["scheduled_for"] == fires[-1]["scheduled_for"]
        assert calls[0].at - end < 2
    if policy == "backfill":
        # Oldest first, paced (at most ten a second), none lost. The pace is the worker's: each attempt
        # starts at least 100 ms after the one before (times kept to the millisecond). At the receiver a
        # delivery can be held up on the way, so there the contract's own words are checked: never more
        # than ten calls within a second.
        assert [scheduled(request) for request in calls] == sorted(scheduled(request) for request in calls)
        starts = sorted(datetime.fromisoformat(fire["started_at"]).timestamp() for fire in ran)
        gaps = [after - before for before, after in itertools.pairwise(starts)]
        assert all(between >= 0.099 for between in gaps), gaps
        arrivals = [request.at for request in calls]
        assert all(sum(1 for at in arrivals if first <= at < first + 1) <= 10 for first in arrivals)


def assert_next_fire_ran(receiver: Receiver, path: str, fire: float, policy: str) -> None:
    """The first fire after the gap ran once: on time, or (backfill) right after the gap's fires, in order."""
    calls = receiver.for_path(path)
    (after,) = [request for request in calls if scheduled(request) == fire]
    assert after.at >= fire
    if policy == "backfill":
        assert after.at > max(request.at for request in calls if scheduled(request) < fire)
        assert after.at - fire < 3
    else:
        assert after.at - fire < 1


@pytest.mark.parametrize(("policy", "runs"), GAP_EXPECTATIONS)
def test_fires_that_fell_in_a_pause_follow_the_misfire_policy_on_resume(
    stack: LocalStack, receiver: Receiver, policy: str, runs: int
) -> None:
    api = Api(stack)
    path = f"/pause-{policy}"
    job = api.create(
        name=f"pause-{policy}",
        schedule={"type": "cron", "expression": EVERY_TWO_SECONDS},
        target=http(receiver, path),
        misfire_policy=policy,
        misfire_grace_seconds=1,
    )
    # Given a job firing every two seconds, paused half a second after a fire for four fires
    first = next_even_second(time.time() + 1)
    assert wait_for(lambda: any(scheduled(r) == first for r in receiver.for_path(path)), timeout=5)
    sleep_until(first + 0.5)
    api.act(job["job_id"], "pause", {"reason": "maintenance"})
    # When it is resumed a second and a half after the gap's last fire (past its grace)
    sleep_until(first + 9.5)
    resumed = time.time()  # before the request: the gap's fires may run before its answer comes back
    api.act(job["job_id"], "resume")
    sleep_until(resumed + 3.5)
    api.act(job["job_id"], "pause", {"reason": "done"})
    assert wait_for(lambda: settled(api, job["job_id"]), timeout=10), unsettled(api, job["job_id"])
    # Then the gap's fires followed the policy, and the fire after the resume ran on time
    assert_gap_followed_the_policy(api, receiver, path, job["job_id"], (first + 0.5, resumed), policy, runs)
    assert_next_fire_ran(receiver, path, first + 10, policy)


@pytest.mark.parametrize(("policy", "runs"), GAP_EXPECTATIONS)
def test_after_an_outage_queued_and_overdue_fires_follow_the_misfire_policy(
    stack: LocalStack, receiver: Receiver, policy: str, runs: int
) -> None:
    api = Api(stack)
    path = f"/outage-{policy}"
    job = api.create(
        name=f"outage-{policy}",
        schedule={"type": "cron", "expression": EVERY_TWO_SECONDS},
        target=http(receiver, path),
        misfire_policy=policy,
        misfire_grace_seconds=1,
    )
    # Given a job firing every two seconds whose next fires are already in the queue, and the whole stack
    # (planner and workers) down for four fires
    first = next_even_second(time.time() + 1)
    assert wait_for(lambda: any(scheduled(r) == first for r in receiver.for_path(path)), timeout=5)
    sleep_until(first + 0.5)
    assert stack.stop_planner(timeout=10)
    assert stack.stop_workers(timeout=10)
    # When it comes back a second and a half after the outage's last fire
    sleep_until(first + 9.5)
    back = time.time()  # before the start: a restarted worker may deliver before this thread runs again
    stack.start_planner()
    stack.start_workers()
    sleep_until(back + 3.5)
    api.act(job["job_id"], "pause", {"reason": "done"})
    assert wait_for(lambda: settled(api, job["job_id"]), timeout=10), unsettled(api, job["job_id"])
    # Then the overdue fires followed the policy (no burst, none run late under skip), and the next fire
    # ran on time
    assert_gap_followed_the_policy(api, receiver, path, job["job_id"], (first + 0.5, back), policy, runs)
    assert_next_fire_ran(receiver, path, first + 10, policy)


# --- 1, 9: one-time jobs and pauses -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "status", "calls"), [("fire_once", "SUCCEEDED", 1), ("skip", "MISSED", 0)]
)
def test_a_one_time_job_paused_across_its_time_follows_the_policy_on_resume_then_completes(
    stack: LocalStack, receiver: Receiver, policy: str, status: str, calls: int
) -> None:
    api = Api(stack)
    path = f"/paused-once-{policy}"
    at = time.time() + 3
    job = api.create(
        name=f"paused-once-{policy}",
        schedule={"type": "once", "at": iso(at)},
        target=http(receiver, path),
        misfire_policy=policy,
        misfire_grace_seconds=1,
    )
    api.act(job["job_id"], "pause", {"reason": "hold"})
    sleep_until(at + 2.5)
    assert receiver.for_path(path) == []
    api.act(job["job_id"], "resume")
    assert wait_for(lambda: api.job(job["job_id"])["status"] == "COMPLETED", timeout=10)
    (run,) = api.runs(job["job_id"])
    assert run["status"] == status
    time.sleep(1)
    assert len(receiver.for_path(path)) == calls


def test_a_one_time_job_due_just_after_its_resume_runs_once_and_completes(
    stack: LocalStack, receiver: Receiver
) -> None:
    api = Api(stack)
    for attempt in range(5):
        path = f"/resumed-{attempt}"
        at = time.time() + 2.5
        job = api.create(
            name=f"resumed-{attempt}", schedule={"type": "once", "at": iso(at)}, target=http(receiver, path)
        )
        api.act(job["job_id"], "pause", {"reason": "a moment"})
        sleep_until(at - 0.2)
        api.act(job["job_id"], "resume")
        assert wait_for(lambda job=job: api.job(job["job_id"])["status"] == "COMPLETED", timeout=5), attempt
        (run,) = api.runs(job["job_id"])
        assert run["status"] == "SUCCEEDED", (attempt, run)
        (call,) = receiver.for_path(path)
        assert call.at >= at


# --- 2, 8: completion ---------------------------------------------------------------------------------------
def test_a_job_whose_last_fire_is_missed_or_skipped_completes_and_frees_its_quota(
    stack: LocalStack, receiver: Receiver
) -> None:
    token = "tw_e2e_one_job"
    tenant = Tenant(
        tenant_id="one-job",
        name="One job",
        signing_secret="secret",
        created_at=datetime.now(UTC),
        max_jobs=1,
    )
    DynamoTenantStore(runtime().dynamodb, table=runtime().settings.tenants_table).put(tenant, token=token)
    api = Api(stack, token)
    # A one-time job paused across its time, resumed late under skip: MISSED
    at = time.time() + 2
    missed = api.create(
        name="missed",
        schedule={"type": "once", "at": iso(at)},
        target=http(receiver, "/quota-missed"),
        misfire_policy="skip",
        misfire_grace_seconds=1,
    )
    refused = {"name": "refused", "schedule": {"type": "once", "at": iso(at + 60)}}
    status, body = api("POST", "/v1/jobs", {**refused, "target": http(receiver, "/quota-refused")})
    assert (status, body["error"]["code"]) == (429, "quota_exceeded")
    api.act(missed["job_id"], "pause", {"reason": "hold"})
    sleep_until(at + 2)
    api.act(missed["job_id"], "resume")
    assert wait_for(lambda: api.job(missed["job_id"])["status"] == "COMPLETED", timeout=10)
    assert [run["status"] for run in api.runs(missed["job_id"])] == ["MISSED"]
    # The slot is free: a job whose last fire is SKIPPED (its first still running, overlap skip)
    receiver.delays["/quota-skipped"] = 2.5
    start = next_even_second(time.time() + 1)
    skipped = api.create(
        name="skipped",
        schedule={
            "type": "cron",
            "expression": EVERY_SECOND,
            "start_at": iso(start),
            "end_at": iso(start + 1),
        },
        target=http(receiver, "/quota-skipped"),
        overlap_policy="skip",
    )
    assert wait_for(lambda: api.job(skipped["job_id"])["status"] == "COMPLETED", timeout=10)
    assert wait_for(lambda: settled(api, skipped["job_id"]), timeout=10)
    assert [run["status"] for run in api.runs(skipped["job_id"])] == ["SUCCEEDED", "SKIPPED"]
    # And its slot is free again
    assert (
        api.create(
            name="third",
            schedule={"type": "once", "at": iso(time.time() + 3600)},
            target=http(receiver, "/quota-third"),
        )["status"]
        == "ACTIVE"
    )


def test_a_cron_job_with_an_end_completes_after_its_last_fire_not_before(
    stack: LocalStack, receiver: Receiver
) -> None:
    api = Api(stack)
    path = "/ending"
    start = next_even_second(time.time() + 1)
    job = api.create(
        name="ending",
        schedule={
            "type": "cron",
            "expression": EVERY_SECOND,
            "start_at": iso(start),
            "end_at": iso(start + 3),
        },
        target=http(receiver, path),
    )
    seen: list[tuple[float, str]] = []  # (when the answer came, the status)
    while time.time() < start + 6:
        status = api.job(job["job_id"])["status"]
        seen.append((time.time(), status))
        time.sleep(0.1)
    calls = receiver.for_path(path)
    assert sorted(scheduled(request) for request in calls) == [start, start + 1, start + 2, start + 3]
    last_call = max(request.at for request in calls)
    completed = [at for at, status in seen if status == "COMPLETED"]
    assert completed, seen
    assert min(completed) >= last_call
    assert all(status == "ACTIVE" for at, status in seen if at < last_call)
    assert [run["status"] for run in api.runs(job["job_id"])] == ["SUCCEEDED"] * 4


# --- 3, 4: overlap races and held runs ----------------------------------------------------------------------
def test_a_manual_trigger_while_a_skip_job_runs_is_skipped_never_run_alongside(
    stack: LocalStack, receiver: Receiver
) -> None:
    api = Api(stack)
    path = "/overlap-skip"
    receiver.delays[path] = 1.5
    job = api.create(
        name="overlap-skip",
        schedule={"type": "cron", "expression": "*/3 * * * * *"},
        target=http(receiver, path),
        overlap_policy="skip",
    )
    triggered = []
    for _ in range(3):
        count = len(receiver.for_path(path))
        assert wait_for(lambda count=count: len(receiver.for_path(path)) > count, timeout=5)
        status, run = api("POST", f"/v1/jobs/{job['job_id']}/trigger")
        assert status == 202, run
        triggered.append(run["run_id"])
        sleep_until(receiver.for_path(path)[-1].at + 1.6)
    api.act(job["job_id"], "pause", {"reason": "done"})
    assert wait_for(lambda: settled(api, job["job_id"]), timeout=10), unsettled(api, job["job_id"])
    assert receiver.most_at_once[path] == 1
    statuses = {run["run_id"]: run["status"] for run in api.runs(job["job_id"])}
    assert [statuses[run_id] for run_id in triggered] == ["SKIPPED"] * 3
    calls = [request.headers["X-Tickwork-Run-Id"] for request in receiver.for_path(path)]
    assert not set(calls) & set(triggered)


def test_queued_fires_run_one_at_a_time_in_order_and_held_runs_never_reach_the_dead_letter_queue(
    stack: LocalStack, receiver: Receiver
) -> None:
    sqs = boto3.client("sqs")
    queues = {url.rsplit("/", 1)[-1]: url for url in sqs.list_queues()["QueueUrls"]}
    dlq_url = queues["tickwork-runs-dlq"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    # As deployed, with fewer receives allowed: a held run that counted as a failed receive would show
    sqs.set_queue_attributes(
        QueueUrl=queues["tickwork-runs"],
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"})},
    )
    api = Api(stack)
    path = "/overlap-queue"
    receiver.delays[path] = 1.4
    job = api.create(
        name="overlap-queue",
        schedule={"type": "cron", "expression": EVERY_SECOND},
        target=http(receiver, path),
        overlap_policy="queue",
    )
    # A job firing every second whose target takes 1.4 s: fires come due while the last one runs
    time.sleep(14)
    api.act(job["job_id"], "pause", {"reason": "done"})
    assert wait_for(lambda: settled(api, job["job_id"]), timeout=10), unsettled(api, job["job_id"])
    calls = receiver.for_path(path)
    # One at a time, in order, each as the one before ends (not after waiting out a hold)
    assert receiver.most_at_once[path] == 1
    times = [scheduled(request) for request in calls]
    assert times == sorted(times)
    assert len(set(times)) == len(times)
    assert len(calls) >= 7, [request.at for request in calls]
    # Held runs were sent again, never failed: none reached the dead-letter queue
    time.sleep(3)
    attributes = sqs.get_queue_attributes(
        QueueUrl=dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
    assert not {run["status"] for run in api.runs(job["job_id"])} & {"DEAD", "ABANDONED", "FAILED"}


# --- 5: item size -------------------------------------------------------------------------------------------
def test_the_largest_job_is_stored_and_delivered_whole_and_a_larger_one_is_refused_naming_the_field(
    stack: LocalStack, receiver: Receiver
) -> None:
    api = Api(stack)
    payload = {"blob": "x" * (MAX_PAYLOAD_BYTES - len('{"blob":""}'))}
    # Fifty headers of 4 KB each: within each header's limit, over the total
    too_many = {f"x-h{index:02d}": "v" * 4096 for index in range(50)}
    status, refused = api(
        "POST",
        "/v1/jobs",
        {
            "name": "too-big",
            "schedule": {"type": "once", "at": iso(time.time() + 60)},
            "target": {**http(receiver, "/too-big"), "headers": too_many},
            "payload": payload,
        },
    )
    assert status == 413, refused
    assert refused["error"]["field"] == "target.headers"
    assert all(item["name"] != "too-big" for item in api("GET", "/v1/jobs?limit=100")[1]["items"])
    # The largest that fits: the payload at its limit, headers at their total
    headers = {f"x-h{index}": "v" * (MAX_HEADER_BYTES // 4 - 16) for index in range(4)}
    at = time.time() + 2
    job = api.create(
        name="largest",
        schedule={"type": "once", "at": iso(at)},
        target={**http(receiver, "/largest"), "headers": headers},
        payload=payload,
    )
    assert wait_for(lambda: api.job(job["job_id"])["status"] == "COMPLETED", timeout=10)
    (call,) = receiver.for_path("/largest")
    assert call.json()["payload"] == payload
    assert all(call.headers[name] == value for name, value in headers.items())
