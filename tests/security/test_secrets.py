"""No API token, signing secret, signature or credential header value in logs or in what clients get back.

Every log line is captured at DEBUG: tickwork's Powertools logger (JSON, through its own formatter), every
other logger through ``caplog``, and whatever reaches stdout and stderr. The flows are real: the API and the
authorizer through the gateway stand-in, the planner tick, and the worker delivering to a loopback server
that echoes every request header back in a 500.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from tickwork.domain.models import RunStatus
from tickwork.observability import logger
from tickwork_local.harness import Receiver, Reply

from tests.conftest import TOKENS
from tests.integration.conftest import START, Engine
from tests.support.apigw import ApiGateway, rest_event

ACME = TOKENS["acme"]
CREDENTIAL = "hdr-credential-5c1d9e"  # a value a tenant puts in its target's headers
SIGNING_SECRET = "secret-acme"  # the seeded tenant's
ENGINE_TOKEN = "tw_acme"  # the engine fixture's token for acme


@pytest.fixture
def captured(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Iterator[Any]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    level = logger.log_level
    underlying = logging.getLogger(logger.name)
    assert underlying.handlers  # Powertools' own: the one this test stands beside
    underlying.addHandler(handler)
    logger.setLevel("DEBUG")
    caplog.set_level(logging.DEBUG, logger="tickwork")
    caplog.set_level(logging.INFO)

    def text() -> str:
        out, err = capfd.readouterr()
        return "\n".join([stream.getvalue(), caplog.text, out, err])

    try:
        yield text
    finally:
        underlying.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def echo() -> Iterator[Receiver]:
    """A loopback server that answers 500 with every request header it got, as some debug pages do."""
    with Receiver(answer=lambda request: Reply(500, body=json.dumps(request.headers).encode())) as receiver:
        yield receiver


def job_body(url: str = "https://hooks.example.com/x", **target: Any) -> dict[str, Any]:
    return {
        "name": "with-credential",
        "schedule": {"type": "rate", "every_seconds": 3600},
        "target": {"type": "http", "url": url, "headers": {"X-Api-Key": CREDENTIAL}, **target},
    }


def test_api_and_authorizer_logs_and_errors_hold_no_token_or_credential(
    api: ApiGateway, captured: Any
) -> None:
    # When a tenant creates, lists and reads a job, a stranger guesses a token, and the tenant tries to set
    # its own Authorization header on a target
    created = api.request("POST", "/v1/jobs", token=ACME, body=job_body())
    assert created.status == 201
    assert api.request("GET", "/v1/jobs", token=ACME).status == 200
    assert api.request("GET", f"/v1/jobs/{created.body['job_id']}", token=ACME).status == 200
    guessed = api.send(rest_event("GET", "/v1/jobs"), authorization="Bearer tw_guessed-4b7e")
    assert guessed.status == 401
    authorization = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={
            **job_body(),
            "target": {
                "type": "http",
                "url": "https://h.example.com/",
                "headers": {"Authorization": "Bearer tgt-9f3a"},
            },
        },
    )
    missing = api.request("GET", "/v1/jobs/01JGZ4M8Q3V5XKQ1T7B2N6C9DE", token=ACME)

    # Then no log line holds a token, the guessed token, a signing secret or a credential header value
    logs = captured()
    assert logs.strip()  # something was logged: the capture works
    for secret in (ACME, "tw_guessed-4b7e", SIGNING_SECRET, CREDENTIAL, "tgt-9f3a"):
        assert secret not in logs, secret
    # And the refusals tell the client what is wrong without repeating a secret back
    assert authorization.status == 400
    assert authorization.body["error"]["field"].startswith("target.headers")
    assert "tgt-9f3a" not in json.dumps(authorization.body)
    for response in (guessed, missing, authorization):
        text = json.dumps(response.body) + json.dumps(response.headers)
        assert ACME not in text and "tw_guessed-4b7e" not in text and SIGNING_SECRET not in text


def test_the_handlers_never_log_their_event_even_when_asked_to(
    api: ApiGateway, captured: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # POWERTOOLS_LOGGER_LOG_EVENT would make Powertools log each event whole: the authorizer's holds the
    # token, the API's the Authorization header. The handlers turn that off for themselves.
    from functions.api import handler as api_handler
    from functions.authorizer import handler as authorizer_handler

    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    try:
        importlib.reload(authorizer_handler)
        importlib.reload(api_handler)
        gateway = ApiGateway(api_handler.lambda_handler, authorizer_handler.lambda_handler)
        assert gateway.request("POST", "/v1/jobs", token=ACME, body=job_body()).status == 201
        assert gateway.request("GET", "/v1/jobs", token=ACME).status == 200
        logs = captured()
    finally:
        monkeypatch.delenv("POWERTOOLS_LOGGER_LOG_EVENT")
        importlib.reload(authorizer_handler)
        importlib.reload(api_handler)
    assert ACME not in logs
    assert CREDENTIAL not in logs


def test_worker_and_planner_logs_and_stored_errors_hold_no_secret(
    engine: Engine, captured: Any, echo: Receiver
) -> None:
    # Given a job whose target needs a credential header, and answers 500 echoing every header it got
    url = echo.url("/echo")
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()},
        target={"type": "http", "url": url, "headers": {"X-Api-Key": CREDENTIAL}, "timeout_seconds": 5},
        # A retry longer than SQS's longest delay waits for the sweeper, which the fake clock drives.
        retry={"max_attempts": 2, "initial_delay_seconds": 1000, "jitter": "none"},
    ).job
    # When the planner plans it and the worker delivers it twice (a retry, then dead)
    engine.tick()
    engine.drain()
    engine.clock.advance(seconds=1001)
    engine.tick()
    engine.drain()

    # Then the target really got the credential and signed requests
    received = [request.headers for request in echo.requests]
    assert len(received) == 2
    assert all(headers["X-Api-Key"] == CREDENTIAL for headers in received)
    signatures = [headers["X-Tickwork-Signature"] for headers in received]
    (run,) = engine.runs_of("acme", job.job_id)
    assert run.status is RunStatus.DEAD
    # And no attempt's stored message, which the tenant reads, repeats the credential or a signature
    messages = " ".join(attempt.error_message or "" for attempt in run.attempts)
    assert "HTTP 500" in messages and "[redacted]" in messages
    # And no log line holds the credential, a signature, the signing secret or a token
    logs = captured()
    stored = messages + json.dumps(engine.dead_letters())
    for secret in (CREDENTIAL, *signatures, SIGNING_SECRET, ENGINE_TOKEN, ACME):
        assert secret not in logs, secret
        assert secret not in stored, secret


def test_a_job_read_back_shows_its_headers_only_to_its_own_tenant(api: ApiGateway) -> None:
    created = api.request("POST", "/v1/jobs", token=ACME, body=job_body()).body
    # The tenant set the header and may read it back; no other tenant can see the job at all.
    assert created["target"]["headers"] == {"X-Api-Key": CREDENTIAL}
    other = api.request("GET", f"/v1/jobs/{created['job_id']}", token=TOKENS["globex"])
    assert other.status == 404 and CREDENTIAL not in json.dumps(other.body)
    # And the tenant's signing secret is never part of any answer.
    for path in ("/v1/jobs", f"/v1/jobs/{created['job_id']}", "/v1/stats"):
        assert SIGNING_SECRET not in json.dumps(api.request("GET", path, token=ACME).body)
