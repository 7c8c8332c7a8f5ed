"""The local gateway serves the web console as CloudFront does on AWS: the built files at every path outside
``/v1/``, ``index.html`` for the console's routes, the security headers on each, and the API untouched.

A stand-in build (a few files in a temporary directory) is served, so these tests need neither Node.js nor
a browser; ``tests/e2e/test_console.py`` drives the real build in Chromium.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tickwork.domain.tenants import Tenant
from tickwork_local.console import SECURITY_HEADERS_FILE, Console, load_security_headers
from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread

from tests.conftest import TOKENS

INDEX = b"<!doctype html><title>tickwork</title><script type=module src=/assets/main-AB12.js></script>"
SCRIPT = b"console.log('tickwork')"
STYLE = b"body{margin:0}"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


class Client:
    def __init__(self, port: int):
        self.port = port

    def __call__(self, method: str, path: str, *, token: str | None = None) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            connection.request(method, path, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, raw)
        finally:
            connection.close()


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A console build as esbuild lays it out, and a file beside it that must never be served."""
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_bytes(INDEX)
    (dist / "assets" / "main-AB12.js").write_bytes(SCRIPT)
    (dist / "assets" / "main-CD34.css").write_bytes(STYLE)
    (dist / "favicon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (tmp_path / "secret.txt").write_text("not for the web")
    return dist


def serving(console: Console) -> Iterator[Client]:
    from functions.api.handler import make_handler
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    server = serve(Gateway(HandlerPool(make_handler), authorizer_handler), "127.0.0.1", 0, console=console)
    thread = start_in_thread(server)
    yield Client(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def client(tenants: dict[str, Tenant], built: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    yield from serving(Console(built, load_security_headers()))


@pytest.fixture
def unbuilt_client(
    tenants: dict[str, Tenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Client]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    yield from serving(Console(tmp_path / "nothing-built", load_security_headers()))


def assert_security_headers(answer: Answer) -> None:
    for name, value in json.loads(SECURITY_HEADERS_FILE.read_text()).items():
        assert answer.headers[name.lower()] == value, name


@pytest.mark.parametrize(
    "path", ["/", "/jobs", "/jobs/new", "/jobs/01JABC", "/runs/01JABC%3A1767225600000", "/health"]
)
def test_console_routes_get_the_index_page(client: Client, path: str) -> None:
    answer = client("GET", path)
    assert answer.status == 200, answer.raw
    assert answer.raw == INDEX
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert answer.headers["cache-control"] == "no-cache"
    assert_security_headers(answer)


@pytest.mark.parametrize(
    ("path", "content", "content_type"),
    [
        ("/assets/main-AB12.js", SCRIPT, "text/javascript; charset=utf-8"),
        ("/assets/main-CD34.css", STYLE, "text/css; charset=utf-8"),
    ],
)
def test_hashed_assets_have_their_content_type_and_are_kept_for_good(
    client: Client, path: str, content: bytes, content_type: str
) -> None:
    answer = client("GET", path)
    assert (answer.status, answer.raw) == (200, content)
    assert answer.headers["content-type"] == content_type
    assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_other_files_are_revalidated(client: Client) -> None:
    answer = client("GET", "/favicon.svg")
    assert answer.status == 200
    assert answer.headers["content-type"] == "image/svg+xml"
    assert answer.headers["cache-control"] == "no-cache"


def test_head_answers_the_headers_of_get_without_the_body(client: Client) -> None:
    got = client("GET", "/assets/main-AB12.js")
    head = client("HEAD", "/assets/main-AB12.js")
    assert head.status == 200 and head.raw == b""
    assert head.headers["content-length"] == got.headers["content-length"] == str(len(SCRIPT))
    assert head.headers["content-type"] == got.headers["content-type"]


@pytest.mark.parametrize(
    "path", ["/missing.js", "/assets/main-0000.css", "/../secret.txt", "/assets/..%2f..%2fsecret.txt"]
)
def test_a_missing_file_or_one_outside_the_build_is_a_404(client: Client, path: str) -> None:
    answer = client("GET", path)
    assert answer.status == 404
    assert b"not for the web" not in answer.raw
    assert_security_headers(answer)


def test_the_api_keeps_every_path_under_v1(client: Client) -> None:
    # Without a token: the authorizer's 401, as before, never the console.
    refused = client("GET", "/v1/jobs")
    assert refused.status == 401
    assert refused.body["error"]["code"] == "unauthorized"
    assert "content-security-policy" not in refused.headers
    # With one: the API's answers, an unknown path included.
    listed = client("GET", "/v1/jobs", token=TOKENS["acme"])
    assert listed.status == 200 and listed.body == {"items": [], "next_cursor": None}
    for path in ("/v1/nothing-here", "/v1/index.html", "/v1/jobs/new"):
        missing = client("GET", path, token=TOKENS["acme"])
        assert missing.status == 404, path
        assert missing.body["error"]["code"] == "not_found", path
    assert client("GET", "/v1/health").status == 200


def test_methods_other_than_get_and_head_still_reach_the_gateway(client: Client) -> None:
    # What the gateway answered before the console: the authorizer refuses a request without a token.
    answer = client("POST", "/jobs")
    assert answer.status == 401
    assert answer.body["error"]["code"] == "unauthorized"


def test_without_a_build_the_console_says_how_to_build_it_and_the_api_answers(unbuilt_client: Client) -> None:
    answer = unbuilt_client("GET", "/jobs")
    assert answer.status == 503
    assert b"make console" in answer.raw
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert unbuilt_client("GET", "/v1/health").status == 200


def test_without_a_console_the_gateway_is_the_api_alone(tenants: dict[str, Tenant]) -> None:
    from functions.api.handler import make_handler
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    server = serve(Gateway(HandlerPool(make_handler), authorizer_handler), "127.0.0.1", 0)
    thread = start_in_thread(server)
    try:
        answer = Client(server.server_address[1])("GET", "/")
        assert answer.status == 401
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_content_security_policy_allows_nothing_inline_and_no_other_origin() -> None:
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in load_security_headers()["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert "unsafe" not in json.dumps(policy)


def test_the_console_to_serve_comes_from_the_environment(tmp_path: Path, built: Path) -> None:
    assert Console.from_environment({"TICKWORK_CONSOLE_DIR": str(built)}).built
    assert not Console.from_environment({"TICKWORK_CONSOLE_DIR": str(tmp_path / "nothing")}).built
