"""The Python client (``tickwork_client``): its retries against a loopback stub that answers as scripted, then
every method against the real API handlers behind a real HTTP server (moto)."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tickwork.api.app import build_app
from tickwork.api.schemas import JobOut, RunOut
from tickwork.domain.models import CronSchedule, JobPatch, JobSpec, JobStatus, RunStatus
from tickwork.domain.tenants import MAX_API_REQUESTS_PER_SECOND
from tickwork.targets.envelope import Delivery, envelope_body, signature_header, webhook_headers
from tickwork_client import (
    ApiError,
    Client,
    Conflict,
    InvalidRequest,
    NotFound,
    RateLimited,
    RetryPolicy,
    ServerError,
    Unauthorized,
    UnexpectedResponse,
    Unreachable,
)
from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread

from tests.conftest import TOKENS, seed_tenant
from tests.support.apigw import set_run_status
from tests.support.engine import FakeClock
from tests.support.streams import indexed_first

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
INSTANT = "2026-11-22T09:00:00Z"
JOB = {
    "job_id": "01JOB",
    "name": "daily-report",
    "schedule": {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "UTC"},
    "target": {"type": "http", "url": "https://hooks.example.com/report"},
    "status": "ACTIVE",
    "version": 1,
    "created_at": INSTANT,
    "updated_at": INSTANT,
    "schedule_description": "At 09:00, Monday through Friday, UTC",
}
RUN = {
    "run_id": "01JOB:m:" + "0" * 32,
    "job_id": "01JOB",
    "tenant_id": "acme",
    "scheduled_for": INSTANT,
    "status": "PLANNED",
    "trigger": "manual",
    "created_at": INSTANT,
}
SPEC = {"name": JOB["name"], "schedule": JOB["schedule"], "target": JOB["target"]}


def error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


# --- a stub that answers as scripted ------------------------------------------------------------------------
@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    """Close the connection without answering."""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Stub:
    """A loopback HTTP server that answers each request with the next scripted reply and records it."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stub._lock:
                    stub.seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
                    reply = stub.replies.pop(0) if stub.replies else Reply(500, error("unscripted", "-"))
                if reply.drop:
                    self.close_connection = True
                    return
                payload = json.dumps(reply.body).encode() if reply.body is not None else b""
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_DELETE = _any  # noqa: N815 - http.server's naming

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def keys(self) -> list[str | None]:
        return [seen.headers.get("Idempotency-Key") for seen in self.seen]


class FakeTime:
    """The client's clock and sleep: sleeping moves the clock and is recorded, and takes no time."""

    def __init__(self, now: datetime) -> None:
        self.now = now.timestamp()
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    thread = start_in_thread(server.server)
    yield server
    server.server.shutdown()
    server.server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime(START)


def make_client(url: str, fake_time: FakeTime, **policy: Any) -> Client:
    retries = RetryPolicy(**{"initial_delay": 1.0, "max_delay": 8.0, **policy})
    # draw 0.5: each backoff is half its cap, so the waits show the exponential growth
    return Client(
        url, "tw_token", retries=retries, sleep=fake_time.sleep, clock=fake_time.clock, draw=lambda: 0.5
    )


@pytest.fixture
def client(stub: Stub, fake_time: FakeTime) -> Client:
    return make_client(stub.url, fake_time)


def rate_limited(retry_after: str) -> Reply:
    return Reply(429, error("rate_limited", "slow down"), {"Retry-After": retry_after})


def test_a_429_waits_its_retry_after_then_resends_with_the_same_idempotency_key(
    stub: Stub, client: Client, fake_time: FakeTime
) -> None:
    stub.script(rate_limited("2"), Reply(201, JOB))
    job = client.create_job(SPEC)
    assert isinstance(job, JobOut)
    assert job.job_id == "01JOB"
    assert fake_time.sleeps == [2.0]
    first, second = stub.keys()
    assert first == second
    assert first is not None
    assert uuid.UUID(first).version == 4
    assert stub.seen[0].body == stub.seen[1].body


def test_each_call_makes_its_own_idempotency_key(stub: Stub, client: Client) -> None:
    stub.script(Reply(201, JOB), Reply(201, JOB), Reply(202, RUN), Reply(202, RUN))
    client.create_job(SPEC)
    client.create_job(SPEC)
    client.trigger_job("01JOB")
    client.trigger_job("01JOB")
    keys = stub.keys()
    assert None not in keys
    assert len(set(keys)) == 4


def test_a_key_the_caller_gives_is_sent_as_given(stub: Stub, client: Client) -> None:
    stub.script(Reply(503, error("unavailable", "-")), Reply(202, RUN))
    run = client.trigger_job("01JOB", idempotency_key="deploy-42")
    assert isinstance(run, RunOut)
    assert stub.keys() == ["deploy-42", "deploy-42"]


def test_an_http_date_retry_after_is_read_against_the_clock(
    stub: Stub, client: Client, fake_time: FakeTime
) -> None:
    stub.script(rate_limited(format_datetime(START + timedelta(seconds=3), usegmt=True)), Reply(202, RUN))
    client.trigger_job("01JOB")
    assert fake_time.sleeps == [3.0]
    assert len(set(stub.keys())) == 1


def test_5xx_are_retried_with_exponential_backoff(stub: Stub, client: Client, fake_time: FakeTime) -> None:
    stub.script(Reply(503, error("unavailable", "-")), Reply(502, error("bad_gateway", "-")), Reply(200, JOB))
    assert client.get_job("01JOB").name == "daily-report"
    assert fake_time.sleeps == [0.5, 1.0]  # half of 1 s, then half of 2 s
    assert len(stub.seen) == 3


def test_a_400_is_not_retried_and_names_the_field(stub: Stub, client: Client, fake_time: FakeTime) -> None:
    stub.script(
        Reply(400, error("invalid_schedule", "minute: 61 is out of range", "schedule.expression")),
        Reply(201, JOB),
    )
    with pytest.raises(InvalidRequest) as raised:
        client.create_job({**SPEC, "schedule": {"type": "cron", "expression": "61 * * * *"}})
    assert (raised.value.status, raised.value.field) == (400, "schedule.expression")
    assert "schedule.expression" in str(raised.value)
    assert len(stub.seen) == 1
    assert fake_time.sleeps == []


@pytest.mark.parametrize(("status", "kind"), [(404, NotFound), (409, Conflict), (401, Unauthorized)])
def test_other_4xx_are_not_retried(stub: Stub, client: Client, status: int, kind: type[ApiError]) -> None:
    stub.script(Reply(status, error("nope", "no")), Reply(200, JOB))
    with pytest.raises(kind):
        client.get_job("01JOB")
    assert len(stub.seen) == 1


def test_retries_stop_at_max_attempts_and_raise_the_last_error(stub: Stub, fake_time: FakeTime) -> None:
    client = make_client(stub.url, fake_time, max_attempts=3)
    stub.script(
        Reply(503, error("unavailable", "first")),
        Reply(502, error("bad_gateway", "second")),
        Reply(500, error("internal_error", "third")),
        Reply(200, JOB),
    )
    with pytest.raises(ServerError) as raised:
        client.get_job("01JOB")
    assert (raised.value.status, raised.value.message, raised.value.attempts) == (500, "third", 3)
    assert len(stub.seen) == 3
    assert len(fake_time.sleeps) == 2


def test_a_wait_the_total_budget_cannot_hold_is_not_started(stub: Stub, fake_time: FakeTime) -> None:
    client = make_client(stub.url, fake_time, max_total_wait=10)
    stub.script(rate_limited("30"), Reply(200, JOB))
    with pytest.raises(RateLimited) as raised:
        client.get_job("01JOB")
    assert raised.value.retry_after == 30.0
    assert (len(stub.seen), fake_time.sleeps) == (1, [])


def test_backoffs_count_against_the_total_budget(stub: Stub, fake_time: FakeTime) -> None:
    client = make_client(stub.url, fake_time, initial_delay=8, max_delay=16, max_total_wait=10)
    stub.script(*[Reply(503, error("unavailable", "-"))] * 5)
    with pytest.raises(ServerError):
        client.get_job("01JOB")
    assert fake_time.sleeps == [4.0]  # the next, 8 s, would end 12 s after the first send
    assert len(stub.seen) == 2


def test_a_request_unsafe_to_repeat_is_not_resent_after_a_5xx(stub: Stub, client: Client) -> None:
    stub.script(Reply(502, error("bad_gateway", "-")), Reply(202, RUN))
    with pytest.raises(ServerError):
        client.retry_run(RUN["run_id"])
    stub.replies.clear()
    stub.script(Reply(503, error("unavailable", "-")), Reply(200, JOB))
    with pytest.raises(ServerError):
        client.update_job("01JOB", {"description": "x"}, version=1)
    assert len(stub.seen) == 2


def test_a_request_unsafe_to_repeat_is_resent_after_a_429(
    stub: Stub, client: Client, fake_time: FakeTime
) -> None:
    stub.script(rate_limited("1"), Reply(202, RUN))
    assert client.retry_run(RUN["run_id"]).run_id == RUN["run_id"]
    assert fake_time.sleeps == [1.0]


def test_a_dropped_connection_is_retried_when_the_request_is_safe_to_repeat(
    stub: Stub, client: Client
) -> None:
    stub.script(Reply(0, drop=True), Reply(200, JOB))
    assert client.get_job("01JOB").job_id == "01JOB"
    stub.script(Reply(0, drop=True), Reply(201, JOB))
    client.create_job(SPEC)
    assert stub.keys()[2] == stub.keys()[3] is not None
    stub.script(Reply(0, drop=True), Reply(202, RUN))
    with pytest.raises(Unreachable, match="cannot reach the API"):
        client.retry_run(RUN["run_id"])
    assert len(stub.seen) == 5


def test_a_refused_connection_is_retried_for_any_request(fake_time: FakeTime) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = make_client(f"http://127.0.0.1:{port}", fake_time, max_attempts=3)
    with pytest.raises(Unreachable) as raised:
        client.retry_run(RUN["run_id"])  # nothing was sent, so even this may go again
    assert raised.value.attempts == 3
    assert len(fake_time.sleeps) == 2


def test_redirects_are_not_followed(stub: Stub, client: Client) -> None:
    stub.script(Reply(307, None, {"Location": f"{stub.url}/elsewhere"}), Reply(200, JOB))
    with pytest.raises(ApiError, match="redirects are not followed") as raised:
        client.get_job("01JOB")
    assert raised.value.status == 307
    assert len(stub.seen) == 1


def test_requests_carry_the_token_and_quote_ids(stub: Stub, client: Client) -> None:
    stub.script(Reply(200, RUN), Reply(200, JOB))
    client.get_run(RUN["run_id"])
    client.get_job("a/b?c")
    assert [seen.path for seen in stub.seen] == [f"/v1/runs/{RUN['run_id']}", "/v1/jobs/a%2Fb%3Fc"]
    assert stub.seen[0].headers["Authorization"] == "Bearer tw_token"
    assert "tw_token" not in repr(client)


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/prod/v1"])
def test_a_base_url_ending_in_v1_is_read_without_it(stub: Stub, fake_time: FakeTime, suffix: str) -> None:
    # Given a base URL copied with the API's /v1 on its end (after a stage path, or not)
    client = make_client(stub.url + suffix, fake_time)
    stub.script(Reply(200, JOB))

    # When a route is called
    client.get_job("01JOB")

    # Then /v1 is in the path once, after the stage path if there is one
    stage = suffix.removesuffix("/").removesuffix("/v1")
    assert [seen.path for seen in stub.seen] == [f"{stage}/v1/jobs/01JOB"]
    assert client.base_url == stub.url + stage


def test_a_patch_sends_only_its_fields_and_the_version_as_if_match(stub: Stub, client: Client) -> None:
    stub.script(Reply(200, JOB), Reply(200, JOB))
    client.update_job("01JOB", JobPatch(description="weekday report"), version=3)
    client.update_job("01JOB", {"payload": None})  # null resets the payload
    first, second = stub.seen
    assert (first.method, first.json(), first.headers["If-Match"]) == (
        "PATCH",
        {"description": "weekday report"},
        '"3"',
    )
    assert second.json() == {"payload": None}
    assert "If-Match" not in second.headers


def test_an_answer_that_is_not_the_model_is_unexpected(stub: Stub, client: Client) -> None:
    stub.script(Reply(200, {"items": "not a list"}))
    with pytest.raises(UnexpectedResponse, match="JobPage"):
        client.list_jobs()


# --- the real API -------------------------------------------------------------------------------------------
SLOW = "tw_token-for-slowco"


@pytest.fixture
def clock() -> FakeClock:
    """The API's clock and the client's: the client's sleeps move both."""
    return FakeClock(START)


@pytest.fixture
def api_url(dynamodb: Any, clock: FakeClock) -> Iterator[str]:
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    # Room for every request of a test in one rate-limit window (the clock stands still), but for slowco.
    for tenant_id, token in TOKENS.items():
        seed_tenant(dynamodb, tenant_id, token, api_requests_per_second=MAX_API_REQUESTS_PER_SECOND)
    seed_tenant(dynamodb, "slowco", SLOW, api_requests_per_second=1)
    pool = HandlerPool(indexed_first(lambda: build_app(clock=clock).resolve, dynamodb))
    server = serve(Gateway(pool, authorizer_handler), "127.0.0.1", 0)
    thread = start_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def client_of(api_url: str, clock: FakeClock, tenant: str = "acme", token: str | None = None) -> Client:
    return Client(
        api_url,
        token or TOKENS[tenant],
        timeout=10,
        sleep=clock.sleep,
        clock=lambda: clock().timestamp(),
    )


@pytest.fixture
def acme(api_url: str, clock: FakeClock) -> Client:
    return client_of(api_url, clock)


def spec(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "America/New_York"},
        "target": {"type": "http", "url": "https://hooks.example.com/report"},
        **fields,
    }


def test_a_job_through_its_life(acme: Client) -> None:
    created = acme.create_job(spec("daily-report", payload={"report": "daily"}))
    assert (created.status, created.version, created.payload) == (JobStatus.ACTIVE, 1, {"report": "daily"})
    assert created.next_fire_at is not None
    assert acme.get_job(created.job_id) == created

    updated = acme.update_job(created.job_id, JobPatch(description="weekday report"), version=1)
    assert (updated.description, updated.version, updated.payload) == (
        "weekday report",
        2,
        {"report": "daily"},
    )
    with pytest.raises(Conflict) as stale:
        acme.update_job(created.job_id, {"description": "again"}, version=1)
    assert stale.value.field == "version"

    paused = acme.pause_job(created.job_id, reason="maintenance")
    assert paused.status is JobStatus.PAUSED
    assert paused.pause is not None
    assert paused.pause.reason == "maintenance"
    assert acme.resume_job(created.job_id).status is JobStatus.ACTIVE

    run = acme.trigger_job(created.job_id)
    assert (run.job_id, run.trigger) == (created.job_id, "manual")
    assert acme.get_run(run.run_id).run_id == run.run_id

    set_run_status("acme", run.run_id, "DEAD")
    retried = acme.retry_run(run.run_id)
    assert (retried.run_id, retried.manual_retries) == (run.run_id, 1)
    assert retried.status is not RunStatus.DEAD

    cancelled = acme.cancel_job(created.job_id)
    assert cancelled.status is JobStatus.CANCELLED


def test_a_job_spec_model_is_sent_as_given(acme: Client) -> None:
    job = JobSpec(
        name="from-a-model",
        schedule=CronSchedule(type="cron", expression="*/5 * * * *"),
        target={"type": "http", "url": "https://hooks.example.com/x"},  # type: ignore[arg-type]
        misfire_policy="skip",
    )
    created = acme.create_job(job)
    assert (created.name, created.misfire_policy, created.schedule.type) == ("from-a-model", "skip", "cron")


def test_the_same_key_creates_one_job(acme: Client) -> None:
    first = acme.create_job(spec("once-only"), idempotency_key="create-once-only")
    again = acme.create_job(spec("once-only"), idempotency_key="create-once-only")
    assert again.job_id == first.job_id
    with pytest.raises(Conflict):  # a new key is a new request: the name is taken
        acme.create_job(spec("once-only"))


def test_iter_jobs_follows_the_cursor_across_pages(acme: Client, clock: FakeClock) -> None:
    names = []
    for i in range(5):
        names.append(acme.create_job(spec(f"job-{i}")).name)
        clock.advance(seconds=1)
    first_page = acme.list_jobs(limit=2)
    assert len(first_page.items) == 2
    assert first_page.next_cursor
    assert [job.name for job in acme.iter_jobs(page_size=2)] == names[::-1]
    acme.pause_job(acme.list_jobs(limit=1).items[0].job_id)
    assert [job.name for job in acme.iter_jobs(status=JobStatus.PAUSED, page_size=1)] == ["job-4"]


def test_iter_all_runs_lists_the_tenants_dead_letters_across_jobs(acme: Client, clock: FakeClock) -> None:
    jobs = [acme.create_job(spec(f"failing-{i}")).job_id for i in range(2)]
    run_ids = []
    for i in range(4):
        run_ids.append(acme.trigger_job(jobs[i % 2]).run_id)
        clock.advance(seconds=1)
    for run_id, status in zip(run_ids, ["DEAD", "FAILED", "DEAD", "SUCCEEDED"], strict=True):
        set_run_status("acme", run_id, status)
    dead_and_failed = acme.iter_all_runs(status=[RunStatus.DEAD, "FAILED"], page_size=1)
    assert [run.run_id for run in dead_and_failed] == run_ids[2::-1]
    assert [run.run_id for run in acme.iter_all_runs(status="DEAD", job_id=jobs[0])] == run_ids[2::-2]
    assert [run.run_id for run in acme.iter_all_runs(page_size=3)] == run_ids[::-1]
    since = acme.get_run(run_ids[1]).scheduled_for
    assert [run.run_id for run in acme.iter_all_runs(since=since, until=since + timedelta(seconds=2))] == [
        run_ids[2],
        run_ids[1],
    ]


def test_iter_runs_follows_the_cursor_across_pages(acme: Client, clock: FakeClock) -> None:
    job = acme.create_job(spec("triggered"))
    run_ids = []
    for _ in range(3):
        run_ids.append(acme.trigger_job(job.job_id).run_id)
        clock.advance(seconds=1)
    assert len(set(run_ids)) == 3
    assert len(acme.list_runs(job.job_id, limit=2).items) == 2
    assert [run.run_id for run in acme.iter_runs(job.job_id, page_size=2)] == run_ids[::-1]


def test_preview_stats_and_health(acme: Client) -> None:
    preview = acme.preview(
        {"type": "cron", "expression": "0 9 * * *", "timezone": "UTC"}, after=START, count=3
    )
    assert preview.fire_times == [START + timedelta(days=day) for day in (1, 2, 3)]
    assert "09:00" in preview.description
    jittered = acme.preview(
        CronSchedule(type="cron", expression="0 9 * * *"), after=INSTANT, count=1, jitter_seconds=60
    )
    assert jittered.fires[0].starts_by == START + timedelta(days=1, seconds=60)

    acme.create_job(spec("counted"))
    stats = acme.stats()
    assert stats.jobs.get("ACTIVE") == 1
    assert acme.health().status == "ok"


def test_bad_input_names_the_field(acme: Client) -> None:
    with pytest.raises(InvalidRequest) as raised:
        acme.create_job(spec("bad", schedule={"type": "cron", "expression": "61 * * * *"}))
    assert raised.value.field == "schedule.expression"
    assert "schedule.expression" in str(raised.value)
    assert raised.value.attempts == 1


def test_another_tenants_job_is_not_found(api_url: str, clock: FakeClock, acme: Client) -> None:
    job = acme.create_job(spec("private"))
    globex = client_of(api_url, clock, "globex")
    for call in (globex.get_job, globex.pause_job, globex.trigger_job, globex.cancel_job):
        with pytest.raises(NotFound) as raised:
            call(job.job_id)
        assert raised.value.status == 404
    assert acme.get_job(job.job_id).status is JobStatus.ACTIVE


def test_a_wrong_token_is_unauthorized(api_url: str, clock: FakeClock) -> None:
    with pytest.raises(Unauthorized) as raised:
        client_of(api_url, clock, token="tw_wrong").stats()
    assert (raised.value.status, raised.value.attempts) == (401, 1)


def test_the_rate_limit_is_waited_out(api_url: str, clock: FakeClock) -> None:
    slowco = client_of(api_url, clock, token=SLOW)
    slowco.stats()
    slowco.stats()  # over one request a second: refused with Retry-After: 1, then sent again
    assert clock.sleeps == [1.0]


# --- the receiver examples in docs/examples --------------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SECRET = "secret-acme"
Post = Callable[[bytes, Mapping[str, str]], int]
OnEvent = Callable[[dict[str, Any]], None]


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flask_receiver(on_event: OnEvent) -> Post:
    client = load_example("receiver_flask").create_app(SECRET, on_event).test_client()
    return lambda body, headers: int(client.post("/hook", data=body, headers=dict(headers)).status_code)


def fastapi_receiver(on_event: OnEvent) -> Post:
    from fastapi.testclient import TestClient

    client = TestClient(load_example("receiver_fastapi").create_app(SECRET, on_event))
    return lambda body, headers: client.post("/hook", content=body, headers=dict(headers)).status_code


@pytest.mark.parametrize("receiver", [flask_receiver, fastapi_receiver], ids=["flask", "fastapi"])
def test_a_receiver_example_takes_signed_deliveries_once_and_refuses_the_rest(
    receiver: Callable[[OnEvent], Post],
) -> None:
    events: list[dict[str, Any]] = []
    post = receiver(events.append)
    delivery = Delivery(
        job_id="01JOB",
        run_id="01JOB:1795338000000",
        scheduled_for=START,
        attempt=1,
        fencing_token=1,
        payload={"report": "daily"},
        tenant_secret=SECRET,
    )
    body = envelope_body(delivery)
    now = int(time.time())
    headers = webhook_headers(delivery, body, now_epoch=now)  # as the worker sends them

    assert post(body, headers) == 204
    assert post(body, headers) == 204  # a duplicate delivery: answered, not done again
    assert events == [json.loads(body)]

    unsigned = {name: value for name, value in headers.items() if name != "X-Tickwork-Signature"}
    refused = [
        (body.replace(b"daily", b"weekly"), headers),  # tampered body
        (body, {**headers, "X-Tickwork-Signature": signature_header("another-secret", now, body)}),
        (body, {**headers, "X-Tickwork-Signature": signature_header(SECRET, now - 3600, body)}),  # replay
        (body, unsigned),
    ]
    assert [post(*request) for request in refused] == [401] * len(refused)
    assert len(events) == 1
