"""The client's retry arithmetic and its error mapping, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import Message
from email.utils import format_datetime

import pytest
from tickwork_client.errors import (
    ApiError,
    Conflict,
    InvalidRequest,
    LeaseLost,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
    api_error,
)
from tickwork_client.retry import RetryPolicy, parse_retry_after, retryable_status

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        (None, None),
        ("", None),
        ("2", 2.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        (http_date(NOW + timedelta(seconds=3)), 3.0),
        (http_date(NOW - timedelta(seconds=30)), 0.0),  # already past: go now
        ("Sun, 22 Nov 2026 09:00:05 -0000", None),  # not an HTTP date: its zone is unknown
        ("-1", None),
        ("1.5", None),
        ("soon", None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date(header: str | None, wait: float | None) -> None:
    assert parse_retry_after(header, now=NOW.timestamp()) == wait


@pytest.mark.parametrize(
    ("retry", "draw", "wait"),
    [
        (1, 0.0, 0.0),
        (1, 0.5, 0.25),
        (1, 0.999, 0.4995),
        (2, 0.5, 0.5),
        (3, 0.5, 1.0),
        (4, 1.0, 4.0),
        (5, 1.0, 5.0),  # capped at max_delay
        (500, 1.0, 5.0),  # no overflow however many retries
    ],
)
def test_backoff_is_full_jitter_under_an_exponential_cap(retry: int, draw: float, wait: float) -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=5.0)
    assert policy.backoff(retry, draw) == pytest.approx(wait)


@pytest.mark.parametrize(
    "fields", [{"max_attempts": 0}, {"initial_delay": -1}, {"max_delay": -1}, {"max_total_wait": -0.1}]
)
def test_a_policy_that_cannot_work_is_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"max_attempts|negative"):
        RetryPolicy(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "repeatable", "retry"),
    [
        (429, False, True),  # refused before the route ran: nothing happened
        (429, True, True),
        (500, True, True),
        (502, True, True),
        (503, True, True),
        (504, True, True),
        (500, False, False),  # may have done the work: a repeat would do it again
        (503, False, False),
        (400, True, False),
        (401, True, False),
        (404, True, False),
        (409, True, False),
        (422, True, False),
    ],
)
def test_which_answers_are_sent_again(status: int, repeatable: bool, retry: bool) -> None:
    assert retryable_status(status, repeatable=repeatable) is retry


def headers(**values: str) -> Message:
    message = Message()
    for name, value in values.items():
        message[name.replace("_", "-")] = value
    return message


ERROR = b'{"error": {"code": "invalid_schedule", "message": "bad minute", "field": "schedule.expression"}}'


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, InvalidRequest),
        (413, InvalidRequest),
        (422, InvalidRequest),
        (401, Unauthorized),
        (403, Unauthorized),
        (404, NotFound),
        (409, Conflict),
        (429, RateLimited),
        (500, ServerError),
        (503, ServerError),
        (418, ApiError),
    ],
)
def test_each_status_has_its_exception(status: int, kind: type[ApiError]) -> None:
    error = api_error(status, ERROR, headers())
    assert type(error) is kind
    assert (error.status, error.code, error.field) == (status, "invalid_schedule", "schedule.expression")


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (409, "lease_lost", LeaseLost),  # a Conflict of its own: the worker stops, nothing else does
        (409, "version_conflict", Conflict),
        (500, "lease_lost", ServerError),  # the code picks the exception only under its own status
        (400, "lease_lost", InvalidRequest),
    ],
)
def test_some_codes_have_their_own_exception(status: int, code: str, kind: type[ApiError]) -> None:
    body = b'{"error": {"code": "%s", "message": "-"}}' % code.encode()
    assert type(api_error(status, body, headers())) is kind


def test_the_message_names_the_field_and_the_request() -> None:
    error = api_error(400, ERROR, headers(x_amzn_RequestId="req-1"))
    assert str(error) == "HTTP 400 invalid_schedule: bad minute (field: schedule.expression)"
    assert error.request_id == "req-1"


def test_a_field_the_message_already_names_is_not_repeated() -> None:
    body = b'{"error": {"code": "missing_field", "message": "name: Field required", "field": "name"}}'
    assert str(api_error(400, body, headers())) == "HTTP 400 missing_field: name: Field required"


def test_details_are_kept() -> None:
    body = (
        b'{"error": {"code": "unknown_field", "message": "unknown field \'x\'", "field": "x",'
        b' "details": [{"code": "unknown_field", "message": "unknown field \'x\'", "field": "x"},'
        b' {"code": "missing_field", "message": "name: Field required", "field": "name"}]}}'
    )
    error = api_error(400, body, headers())
    assert [detail.field for detail in error.details] == ["x", "name"]


def test_rate_limited_carries_the_wait() -> None:
    error = api_error(429, b"{}", headers(), retry_after=2.0)
    assert isinstance(error, RateLimited)
    assert error.retry_after == 2.0


@pytest.mark.parametrize(
    ("status", "body", "found", "code", "message"),
    [
        (403, b'{"message": "Forbidden"}', headers(), "forbidden", "Forbidden"),  # API Gateway's own
        (502, b"<html>Bad Gateway</html>", headers(), "bad_gateway", "<html>Bad Gateway</html>"),
        (504, b"", headers(), "gateway_timeout", "HTTP 504"),
        (599, b"", headers(), "http_599", "HTTP 599"),
        (
            307,
            b"",
            headers(Location="https://elsewhere.example/v1/jobs"),
            "temporary_redirect",
            "redirected to https://elsewhere.example/v1/jobs; redirects are not followed",
        ),
    ],
)
def test_answers_not_in_the_api_shape_keep_what_they_say(
    status: int, body: bytes, found: Message, code: str, message: str
) -> None:
    error = api_error(status, body, found)
    assert (error.code, error.message, error.field) == (code, message, None)
