"""The local gateway speaks HTTP as the deployed API does: methods a path does not have, HEAD, OPTIONS, and
request bodies that are not JSON in UTF-8.

The real HTTP server of ``tickwork local`` (``tickwork_local.gateway.serve``) runs in this process in front of
the authorizer and API handlers, under moto. Each refusal is checked for its status, its error shape and
that nothing changed.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tickwork.domain.tenants import Tenant
from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread

from tests.conftest import TOKENS, item_counts

ACME = TOKENS["acme"]
JOB = {
    "name": "gateway-probe",
    "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Paris"},
    "target": {"type": "http", "url": "https://hooks.example.com/run"},
}
JOBS_ALLOW = "GET, HEAD, OPTIONS, POST"
JOB_ALLOW = "DELETE, GET, HEAD, OPTIONS, PATCH"
# Headers that differ between any two answers, whatever the method.
PER_ANSWER = {"date", "x-amzn-requestid", "content-length"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None

    def error(self) -> dict[str, Any]:
        body = self.body
        assert isinstance(body, dict) and set(body) == {"error"}, body
        assert {"code", "message", "field"} <= set(body["error"]), body
        assert body["error"]["message"], body
        error: dict[str, Any] = body["error"]
        return error


class Client:
    def __init__(self, port: int):
        self.port = port

    def __call__(
        self,
        method: str,
        path: str,
        *,
        token: str | None = ACME,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = dict(headers or {})
            if token is not None:
                sent["Authorization"] = f"Bearer {token}"
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            raw = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, raw)
        finally:
            connection.close()

    def json(self, method: str, path: str, body: Any = None, **request: Any) -> Answer:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        return self(method, path, body=data, headers=headers, **request)

    def job(self, **changes: Any) -> dict[str, Any]:
        answer = self.json("POST", "/v1/jobs", {**JOB, **changes})
        assert answer.status == 201, answer.body
        job: dict[str, Any] = answer.body
        return job

    def names(self) -> list[str]:
        answer = self("GET", "/v1/jobs")
        assert answer.status == 200, answer.body
        return [job["name"] for job in answer.body["items"]]


@pytest.fixture
def client(tenants: dict[str, Tenant], monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    from functions.api.handler import make_handler
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    server = serve(Gateway(HandlerPool(make_handler), authorizer_handler), "127.0.0.1", 0)
    thread = start_in_thread(server)
    yield Client(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


# --- methods ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("TRACE", "/v1/jobs", JOBS_ALLOW),
        ("CONNECT", "/v1/jobs", JOBS_ALLOW),
        ("PROPFIND", "/v1/jobs", JOBS_ALLOW),
        ("PUT", "/v1/jobs", JOBS_ALLOW),
        ("DELETE", "/v1/jobs", JOBS_ALLOW),
        ("PUT", "/v1/jobs/{job_id}", JOB_ALLOW),
        ("POST", "/v1/jobs/{job_id}", JOB_ALLOW),
        ("GET", "/v1/jobs/{job_id}/trigger", "OPTIONS, POST"),
        ("TRACE", "/v1/health", "GET, HEAD, OPTIONS"),
    ],
)
def test_a_method_the_path_does_not_have_is_a_405_with_allow(
    client: Client, dynamodb: Any, method: str, path: str, allow: str
) -> None:
    # Given a job
    job = client.job()
    before = item_counts(dynamodb)
    # When a method its path does not have is sent, with a body it would otherwise read
    answer = client.json(method, path.format(job_id=job["job_id"]), {"name": "renamed"})
    # Then it is a 405 naming the path's methods, in the error shape, and nothing changed
    assert answer.status == 405, answer.raw
    assert answer.headers["allow"] == allow
    assert answer.headers["content-type"] == "application/json"
    error = answer.error()
    assert error["code"] == "method_not_allowed"
    assert error["field"] is None
    assert method in error["message"] and allow in error["message"]
    assert item_counts(dynamodb) == before
    assert client.names() == ["gateway-probe"]


def test_an_unknown_path_stays_a_404_whatever_the_method(client: Client) -> None:
    for method in ("GET", "TRACE", "PUT", "OPTIONS", "HEAD"):
        answer = client(method, "/v1/nothing-here")
        assert answer.status == 404, (method, answer.raw)
        if method != "HEAD":
            assert answer.error()["code"] == "not_found"


def test_a_405_needs_the_token_like_every_other_answer(client: Client) -> None:
    answer = client("PUT", "/v1/jobs", token=None)
    assert answer.status == 401
    assert answer.error()["code"] == "unauthorized"


@pytest.mark.parametrize("path", ["/v1/jobs/{job_id}", "/v1/jobs", "/v1/jobs/{job_id}/runs", "/v1/stats"])
def test_head_answers_gets_status_and_headers_without_the_body(client: Client, path: str) -> None:
    # Given a job
    job = client.job()
    target = path.format(job_id=job["job_id"])
    # When it is asked with GET and with HEAD
    got = client("GET", target)
    head = client("HEAD", target)
    # Then HEAD has GET's status and headers, and no body
    assert got.status == 200 and got.raw
    assert head.status == got.status
    assert head.raw == b""
    assert {k: v for k, v in head.headers.items() if k not in PER_ANSWER} == {
        k: v for k, v in got.headers.items() if k not in PER_ANSWER
    }
    assert "content-length" not in head.headers  # GET's length is not known without its body


def test_head_refusals_are_gets_refusals_without_the_body(client: Client) -> None:
    missing = client("HEAD", "/v1/jobs/no-such-job")
    assert (missing.status, missing.raw) == (404, b"")
    unauthenticated = client("HEAD", "/v1/jobs", token=None)
    assert (unauthenticated.status, unauthenticated.raw) == (401, b"")
    health = client("HEAD", "/v1/health", token=None)
    assert (health.status, health.raw) == (200, b"")


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/v1/jobs", JOBS_ALLOW),
        ("/v1/jobs/{job_id}", JOB_ALLOW),
        ("/v1/jobs/{job_id}/pause", "OPTIONS, POST"),
        ("/v1/health", "GET, HEAD, OPTIONS"),
    ],
)
def test_options_answers_the_paths_methods(client: Client, path: str, allow: str) -> None:
    job = client.job()
    answer = client("OPTIONS", path.format(job_id=job["job_id"]))
    assert answer.status == 204, answer.raw
    assert answer.headers["allow"] == allow
    assert answer.raw == b""


# --- request bodies --------------------------------------------------------------------------------------
def test_a_multipart_patch_is_refused_and_the_job_is_unchanged(client: Client, dynamodb: Any) -> None:
    # Given a job
    job = client.job()
    before = item_counts(dynamodb)
    # When a PATCH renames it in a multipart form
    boundary = "tickwork-boundary"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nrenamed\r\n--{boundary}--\r\n'
    ).encode()
    answer = client(
        "PATCH",
        f"/v1/jobs/{job['job_id']}",
        body=form,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    # Then it is refused, naming the Content-Type header, and the job reads back as it was
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert (error["code"], error["field"]) == ("unsupported_content_type", "Content-Type")
    assert "multipart/form-data" in error["message"]
    again = client("GET", f"/v1/jobs/{job['job_id']}")
    assert again.body["name"] == "gateway-probe"
    assert again.body["version"] == job["version"]
    assert item_counts(dynamodb) == before


def test_a_body_that_is_not_utf8_is_refused_and_nothing_is_stored(client: Client, dynamodb: Any) -> None:
    # Given the tenant's jobs
    client.job()
    names = client.names()
    before = item_counts(dynamodb)
    # When a job is created with a Latin-1 byte in its description
    body = json.dumps({**JOB, "name": "latin-1"}).encode()[:-1] + b', "description": "caf\xe9"}'
    answer = client("POST", "/v1/jobs", body=body, headers={"Content-Type": "application/json"})
    # Then it is a 400 that says why, and no job was stored (not one with U+FFFD in it)
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert error["code"] == "invalid_json"
    assert "UTF-8" in error["message"]
    assert client.names() == names
    assert item_counts(dynamodb) == before


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",  # no boundary: once a 500
        "application/jsonx",
        "application/json; charset=iso-8859-1",
        None,
    ],
)
@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_a_body_that_is_not_json_is_refused_naming_the_content_type(
    client: Client, dynamodb: Any, content_type: str | None, method: str
) -> None:
    # Given a job
    job = client.job()
    before = item_counts(dynamodb)
    path = "/v1/jobs" if method == "POST" else f"/v1/jobs/{job['job_id']}"
    body = {**JOB, "name": "second"} if method == "POST" else {"name": "renamed"}
    # When a valid JSON body is sent under another media type (or none)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    answer = client(method, path, body=json.dumps(body).encode(), headers=headers)
    # Then it is refused, naming Content-Type, and nothing changed
    assert answer.status == 400, answer.raw
    error = answer.error()
    assert (error["code"], error["field"]) == ("unsupported_content_type", "Content-Type")
    assert "application/json" in error["message"]
    assert item_counts(dynamodb) == before
    assert client.names() == ["gateway-probe"]


def test_json_with_a_utf8_charset_is_accepted(client: Client) -> None:
    body = json.dumps({**JOB, "description": "café"}).encode()
    answer = client(
        "POST", "/v1/jobs", body=body, headers={"Content-Type": "application/json; charset=UTF-8"}
    )
    assert answer.status == 201, answer.raw
    assert answer.body["description"] == "café"


def test_requests_without_a_body_need_no_content_type(client: Client) -> None:
    job = client.job()
    path = f"/v1/jobs/{job['job_id']}"
    assert client("GET", path).status == 200
    assert client("GET", "/v1/jobs?limit=5").status == 200
    triggered = client("POST", f"{path}/trigger")
    assert triggered.status == 202, triggered.raw
    assert client("POST", f"{path}/pause").status == 200
    assert client("POST", f"{path}/resume").status == 200
    assert client("DELETE", path).status == 200


# --- what API Gateway passes on ----------------------------------------------------------------------------
def test_a_percent_encoded_path_parameter_is_decoded(client: Client) -> None:
    # A run id holds colons, which a client may send encoded
    job = client.job()
    run = client("POST", f"/v1/jobs/{job['job_id']}/trigger").body
    encoded = run["run_id"].replace(":", "%3A")
    answer = client("GET", f"/v1/runs/{encoded}")
    assert answer.status == 200, answer.raw
    assert answer.body["run_id"] == run["run_id"]


def test_an_empty_query_value_reaches_the_api(client: Client) -> None:
    # API Gateway passes `cursor=` on as an empty cursor, which is refused; it is not dropped
    answer = client("GET", "/v1/jobs?cursor=")
    assert answer.status == 400, answer.raw
    assert answer.error()["field"] == "cursor"


def test_a_content_length_that_is_not_a_number_is_a_400(client: Client) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", client.port, timeout=30)
    try:
        connection.putrequest("POST", "/v1/jobs")
        connection.putheader("Authorization", f"Bearer {ACME}")
        connection.putheader("Content-Length", "many")
        connection.endheaders()
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 400
    assert body["error"]["field"] == "Content-Length"
