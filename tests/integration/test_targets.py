"""Target invokers against real endpoints: a local HTTP server on 127.0.0.1, and AWS services under moto.

Only the DNS resolver is injected (to say what a made-up name resolves to); every HTTP request really goes
over a socket to the local server, and every AWS call really goes through botocore.
"""

from __future__ import annotations

import io
import json
import socket
import ssl
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws
from tickwork.domain.models import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
)
from tickwork.domain.retry import OutcomeClass
from tickwork.targets import (
    Delivery,
    Destination,
    LazyClients,
    TargetResult,
    check_redirect,
    envelope_body,
    execution_name,
    invoke,
    sign,
    signature_header,
    verify_signature,
    webhook_headers,
)
from tickwork_local.harness import Received, Receiver, Reply

REGION = "eu-west-1"
ACCOUNT = "123456789012"
NOW = 1_767_225_605
SECRET = "whsec-test-secret"
JOB_ID = "01JGZ4M8Q3V5XKQ1T7B2N6C9DE"
DELIVERY = Delivery(
    job_id=JOB_ID,
    run_id=f"{JOB_ID}:1767225600000",
    scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
    attempt=2,
    fencing_token=7,
    payload={"report": "daily", "note": "café ✓"},
    tenant_secret=SECRET,
)
EXPECTED_BODY = (
    '{"job_id":"01JGZ4M8Q3V5XKQ1T7B2N6C9DE","run_id":"01JGZ4M8Q3V5XKQ1T7B2N6C9DE:1767225600000",'
    '"scheduled_for":"2026-01-01T00:00:00Z","attempt":2,"payload":{"report":"daily","note":"café ✓"}}'
).encode()
REFUSAL = "private, loopback or link-local"


# --- a real HTTP server -----------------------------------------------------------------------------------
def _script(port: int) -> dict[str, Reply]:
    def to(location: str, status: int = 302) -> Reply:
        return Reply(status, {"Location": location})

    return {
        "/ok": Reply(200, body=b'{"accepted": true}'),
        "/no-content": Reply(204),
        "/unavailable": Reply(503, body=b"upstream down"),
        "/throttled": Reply(429, {"Retry-After": "10"}),
        "/request-timeout": Reply(408),
        "/missing": Reply(404, body=b"no such hook"),
        "/bad": Reply(400, body=b'{"error": "bad"}'),
        "/slow": Reply(200, delay=1.5),
        "/redirect": to("/ok"),
        "/see-other": to("/ok", 303),
        "/permanent": to("/ok", 308),
        "/to-localhost": to(f"http://localhost:{port}/ok", 307),
        "/loop": to("/loop"),
        "/no-location": Reply(302),
        "/to-ftp": to("ftp://127.0.0.1/file"),
        "/to-not-modified": Reply(304),
        "/noisy": Reply(400, body=b"\x00\x1b[31m" + b"line\r\n" * 2000),
    }


def _echo(request: Received) -> Reply | None:
    """``/echo`` answers 500 with the request headers, as some debugging endpoints do."""
    if request.path != "/echo":
        return None
    return Reply(500, body=json.dumps(request.headers).encode())


@pytest.fixture
def server() -> Iterator[Receiver]:
    """The paths of ``_script`` on HTTP/1.1; any other path is a 404."""
    with Receiver(default=Reply(404), answer=_echo, protocol_version="HTTP/1.1") as receiver:
        receiver.replies.update(_script(receiver.port))
        yield receiver


def http_target(url: str, **fields: Any) -> HttpTarget:
    return HttpTarget(type="http", url=url, **fields)


def call_http(target: HttpTarget, *, allow_private: bool = True, **kwargs: Any) -> TargetResult:
    return invoke(
        target,
        DELIVERY,
        clients=LazyClients(region=REGION),
        allow_private=allow_private,
        now_epoch=NOW,
        **kwargs,
    )


def resolving(table: dict[str, list[str]]) -> Any:
    """A stand-in for socket.getaddrinfo that answers from ``table`` and refuses any other name."""

    def resolve(host: str, port: int) -> list[tuple[Any, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in address else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (address, port),
            )
            for address in table[host]
        ]

    return resolve


def never_resolve(host: str, port: int) -> list[tuple[Any, ...]]:
    raise AssertionError(f"an IP literal must not be resolved, got {host!r}")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- envelope and signature -------------------------------------------------------------------------------
def test_envelope_is_compact_utf8_json_with_the_run_fields() -> None:
    assert envelope_body(DELIVERY) == EXPECTED_BODY


def test_secret_is_not_in_the_delivery_repr() -> None:
    assert SECRET not in repr(DELIVERY)


def test_sign_is_hex_hmac_sha256_of_timestamp_dot_body() -> None:
    # A fixed vector, so a change to the scheme breaks receivers' code visibly here first.
    assert sign("whsec-test", "1767225605", b'{"a":1}') == (
        "8a80be15f268409e56a9473c97ddb37d1c8f841c3ba0f97e9efc0c4632dc745d"
    )
    assert signature_header("whsec-test", 1767225605, b'{"a":1}') == (
        "t=1767225605,v1=8a80be15f268409e56a9473c97ddb37d1c8f841c3ba0f97e9efc0c4632dc745d"
    )


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (NOW, True),
        (NOW + 300, True),
        (NOW - 300, True),
        (NOW + 301, False),  # too old: a replay
        (NOW - 301, False),  # too far in the future
    ],
)
def test_verify_signature_enforces_the_tolerance(now: int, expected: bool) -> None:
    header = signature_header(SECRET, NOW, EXPECTED_BODY)
    assert verify_signature(SECRET, header, EXPECTED_BODY, now_epoch=now) is expected


def test_verify_signature_refuses_a_wrong_secret_and_a_tampered_body() -> None:
    header = signature_header(SECRET, NOW, EXPECTED_BODY)
    assert not verify_signature("another-secret", header, EXPECTED_BODY, now_epoch=NOW)
    assert not verify_signature(SECRET, header, EXPECTED_BODY.replace(b"daily", b"dai1y"), now_epoch=NOW)


def test_verify_signature_accepts_any_of_several_v1_entries() -> None:
    good = sign(SECRET, str(NOW), EXPECTED_BODY)
    assert verify_signature(SECRET, f"t={NOW},v1={'0' * 64},v1={good}", EXPECTED_BODY, now_epoch=NOW)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        f"t={NOW}",
        "v1=abcdef",
        f"t=abc,v1={'0' * 64}",
        f"t={NOW},v1=",
        f"t=-{NOW},v1={'0' * 64}",
        f"t=\u00b2,v1={'0' * 64}",  # a Unicode digit that int() refuses
        f"t={NOW};v1={'0' * 64}",
        f"t={NOW},v0={'0' * 64}",
    ],
)
def test_verify_signature_refuses_malformed_headers(header: str | None) -> None:
    assert not verify_signature(SECRET, header, EXPECTED_BODY, now_epoch=NOW)


# --- webhooks: what is sent -------------------------------------------------------------------------------
def test_webhook_sends_the_envelope_and_every_header(server: Receiver) -> None:
    target = http_target(server.url("/ok"), headers={"X-Api-Key": "k-123", "Accept": "application/json"})

    result = call_http(target)

    assert result == TargetResult(OutcomeClass.SUCCESS, status_code=200)
    [request] = server.requests
    assert (request.method, request.path, request.body) == ("POST", "/ok", EXPECTED_BODY)
    headers = request.headers
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"] == "tickwork/1"
    assert headers["Idempotency-Key"] == DELIVERY.run_id
    assert headers["X-Tickwork-Run-Id"] == DELIVERY.run_id
    assert headers["X-Tickwork-Attempt"] == "2"
    assert headers["X-Tickwork-Scheduled-For"] == "2026-01-01T00:00:00Z"
    assert headers["X-Tickwork-Fencing-Token"] == "7"
    assert headers["X-Tickwork-Signature"].startswith(f"t={NOW},v1=")
    assert headers["Content-Length"] == str(len(EXPECTED_BODY))
    assert headers["Host"] == f"127.0.0.1:{server.port}"
    assert headers["X-Api-Key"] == "k-123"
    assert headers["Accept"] == "application/json"
    assert headers == {**headers, **webhook_headers(DELIVERY, EXPECTED_BODY, now_epoch=NOW)}


def test_the_received_signature_verifies_and_a_tampered_body_does_not(server: Receiver) -> None:
    call_http(http_target(server.url("/ok")))

    [request] = server.requests
    signature = request.headers["X-Tickwork-Signature"]
    assert verify_signature(SECRET, signature, request.body, now_epoch=NOW + 5)
    assert not verify_signature(SECRET, signature, request.body + b" ", now_epoch=NOW + 5)


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_webhook_uses_the_targets_method(server: Receiver, method: str) -> None:
    assert call_http(http_target(server.url("/ok"), method=method)).ok
    assert [(r.method, r.body) for r in server.requests] == [(method, EXPECTED_BODY)]


# --- webhooks: classification -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "outcome", "status", "code"),
    [
        ("/ok", OutcomeClass.SUCCESS, 200, None),
        ("/no-content", OutcomeClass.SUCCESS, 204, None),
        ("/unavailable", OutcomeClass.RETRYABLE, 503, "http_503"),
        ("/throttled", OutcomeClass.RETRYABLE, 429, "http_429"),
        ("/request-timeout", OutcomeClass.RETRYABLE, 408, "http_408"),
        ("/missing", OutcomeClass.PERMANENT, 404, "http_404"),
        ("/bad", OutcomeClass.PERMANENT, 400, "http_400"),
        ("/to-not-modified", OutcomeClass.PERMANENT, 304, "http_304"),
    ],
)
def test_status_codes_are_classified(
    server: Receiver, path: str, outcome: OutcomeClass, status: int, code: str | None
) -> None:
    result = call_http(http_target(server.url(path)))

    assert (result.outcome, result.status_code, result.error_code) == (outcome, status, code)
    assert len(server.requests) == 1


def test_error_message_quotes_the_start_of_the_response(server: Receiver) -> None:
    result = call_http(http_target(server.url("/missing")))
    assert result.error_message == "HTTP 404 from '127.0.0.1': no such hook"


def test_error_message_is_short_and_free_of_control_characters(server: Receiver) -> None:
    result = call_http(http_target(server.url("/noisy")))

    assert result.error_message is not None
    assert len(result.error_message) <= 500
    assert result.error_message.isprintable()


def test_error_message_never_repeats_header_values_the_target_echoes(server: Receiver) -> None:
    result = call_http(http_target(server.url("/echo"), headers={"X-Api-Key": "sk-live-0123456789"}))

    assert result.outcome is OutcomeClass.RETRYABLE
    assert result.error_message is not None
    assert "X-Api-Key" in result.error_message  # the echo did make it into the excerpt
    assert "sk-live-0123456789" not in result.error_message
    signature = server.requests[0].headers["X-Tickwork-Signature"]
    assert signature.split("v1=")[1] not in result.error_message
    assert "[redacted]" in result.error_message


@pytest.mark.parametrize("value", ["\U0001f600", "\u0436\u0443\u043a"])
def test_a_header_that_cannot_be_sent_is_permanent_and_nothing_is_sent(server: Receiver, value: str) -> None:
    # Stored before header values were limited to printable ASCII: the model would refuse it now.
    target = http_target(server.url("/ok")).model_copy(update={"headers": {"X-Note": value}})

    result = call_http(target)

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "invalid_header")
    assert value not in (result.error_message or "")
    assert server.requests == []


def test_a_slow_target_times_out_and_is_retryable(server: Receiver) -> None:
    started = time.monotonic()
    result = call_http(http_target(server.url("/slow"), timeout_seconds=1))

    assert (result.outcome, result.error_code) == (OutcomeClass.RETRYABLE, "timeout")
    assert time.monotonic() - started < 1.4
    assert [r.path for r in server.requests] == ["/slow"]


def test_a_refused_connection_is_retryable() -> None:
    result = call_http(http_target(f"http://127.0.0.1:{closed_port()}/hook"))
    assert (result.outcome, result.error_code) == (OutcomeClass.RETRYABLE, "connection_error")


def test_a_name_that_does_not_resolve_is_retryable() -> None:
    result = call_http(http_target("http://gone.test/hook"), allow_private=False, resolver=resolving({}))
    assert (result.outcome, result.error_code) == (OutcomeClass.RETRYABLE, "connection_error")


def _self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime(2020, 1, 1, tzinfo=UTC))
        .not_valid_after(datetime(2100, 1, 1, tzinfo=UTC))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_an_untrusted_certificate_is_a_retryable_tls_error_and_sni_names_the_host(tmp_path: Path) -> None:
    cert_path, key_path = _self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server_names: list[str | None] = []
    context.sni_callback = lambda _socket, name, _context: server_names.append(name)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept_one() -> None:
            connection, _ = listener.accept()
            with connection, suppress(ssl.SSLError, OSError):
                context.wrap_socket(connection, server_side=True).close()

        thread = threading.Thread(target=accept_one, daemon=True)
        thread.start()
        result = call_http(http_target(f"https://localhost:{port}/ok"))
        thread.join(timeout=5)

    assert (result.outcome, result.error_code) == (OutcomeClass.RETRYABLE, "tls_error")
    assert server_names == ["localhost"]


# --- webhooks: redirects ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/redirect", "/permanent"])
def test_a_redirect_is_followed_with_the_same_method_and_body(server: Receiver, path: str) -> None:
    result = call_http(http_target(server.url(path), headers={"X-Api-Key": "k-123"}))

    assert result == TargetResult(OutcomeClass.SUCCESS, status_code=200)
    first, second = server.requests
    assert [(r.method, r.path) for r in server.requests] == [("POST", path), ("POST", "/ok")]
    assert second.body == first.body == EXPECTED_BODY
    assert second.headers["X-Tickwork-Signature"] == first.headers["X-Tickwork-Signature"]
    assert second.headers["X-Api-Key"] == "k-123"  # same origin: the tenant's headers go along


def test_see_other_becomes_a_get_without_body(server: Receiver) -> None:
    result = call_http(http_target(server.url("/see-other")))

    assert result.ok
    assert [(r.method, r.path, r.body) for r in server.requests] == [
        ("POST", "/see-other", EXPECTED_BODY),
        ("GET", "/ok", b""),
    ]
    assert "Content-Type" not in server.requests[1].headers
    assert server.requests[1].headers["Idempotency-Key"] == DELIVERY.run_id


def test_the_tenants_headers_do_not_follow_a_redirect_to_another_host(server: Receiver) -> None:
    result = call_http(http_target(server.url("/to-localhost"), headers={"X-Api-Key": "k-123"}))

    assert result.ok
    _, second = server.requests
    assert second.headers["Host"] == f"localhost:{server.port}"
    assert "X-Api-Key" not in second.headers
    assert second.headers["X-Tickwork-Run-Id"] == DELIVERY.run_id
    assert second.body == EXPECTED_BODY


def test_more_than_three_redirects_is_permanent(server: Receiver) -> None:
    result = call_http(http_target(server.url("/loop")))

    assert (result.outcome, result.error_code, result.status_code) == (
        OutcomeClass.PERMANENT,
        "too_many_redirects",
        302,
    )
    assert len(server.requests) == 4  # the request and three redirects


def test_a_redirect_without_location_is_permanent(server: Receiver) -> None:
    result = call_http(http_target(server.url("/no-location")))
    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "bad_redirect")


def test_a_redirect_to_another_scheme_is_refused_even_when_private_targets_are_allowed(
    server: Receiver,
) -> None:
    result = call_http(http_target(server.url("/to-ftp")))

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_allowed")
    assert [r.path for r in server.requests] == ["/to-ftp"]


# --- webhooks: private addresses --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "resolver", "host"),
    [
        ("http://169.254.169.254/latest/meta-data/", never_resolve, "169.254.169.254"),
        ("http://10.0.0.1/hook", never_resolve, "10.0.0.1"),
        ("http://[::1]:{port}/ok", never_resolve, "::1"),
        ("http://127.0.0.1:{port}/ok", never_resolve, "127.0.0.1"),
        ("http://2130706433:{port}/ok", never_resolve, "2130706433"),  # 127.0.0.1 in decimal
        ("http://hook.test:{port}/ok", resolving({"hook.test": ["127.0.0.1"]}), "hook.test"),
        ("http://mapped.test:{port}/ok", resolving({"mapped.test": ["::ffff:127.0.0.1"]}), "mapped.test"),
        # One bad address among good ones is enough: the client could pick any of them.
        (
            "http://mixed.test:{port}/ok",
            resolving({"mixed.test": ["93.184.216.34", "127.0.0.1"]}),
            "mixed.test",
        ),
    ],
)
def test_private_targets_are_refused_before_any_request(
    server: Receiver, url: str, resolver: Any, host: str
) -> None:
    result = call_http(http_target(url.format(port=server.port)), allow_private=False, resolver=resolver)

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_allowed")
    assert result.error_message == f"target host {host!r} is a {REFUSAL} address"
    assert server.requests == []


PUBLIC = resolving(
    {
        "public.test": ["93.184.216.34"],
        "dual.test": ["2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34"],
        "rebind.test": ["169.254.169.254"],
        "internal.test": ["192.168.1.10"],
    }
)


@pytest.mark.parametrize(
    ("location", "url", "address", "host_header"),
    [
        ("/next?x=1", "http://public.test/next?x=1", "93.184.216.34", "public.test"),
        ("https://public.test:8443/a", "https://public.test:8443/a", "93.184.216.34", "public.test:8443"),
        ("//dual.test/b", "http://dual.test/b", "93.184.216.34", "dual.test"),  # IPv4 first
        ("http://93.184.216.34/c", "http://93.184.216.34/c", "93.184.216.34", "93.184.216.34"),
    ],
)
def test_check_redirect_allows_public_hosts_and_pins_the_checked_address(
    location: str, url: str, address: str, host_header: str
) -> None:
    destination = check_redirect(location, "http://public.test/start", allow_private=False, resolver=PUBLIC)

    assert isinstance(destination, Destination)
    assert (destination.url, destination.address, destination.host_header) == (url, address, host_header)


@pytest.mark.parametrize(
    "location",
    [
        "http://10.0.0.1/x",
        "http://127.0.0.1:8080/x",
        "http://[fe80::1]/x",
        "http://[::ffff:10.0.0.1]/x",
        "http://0x7f.1/x",
        "http://rebind.test/latest/meta-data/",
        "//internal.test/x",
        "ftp://public.test/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
    ],
)
def test_check_redirect_refuses_private_hosts_and_other_schemes(location: str) -> None:
    result = check_redirect(location, "http://public.test/start", allow_private=False, resolver=PUBLIC)

    assert isinstance(result, TargetResult)
    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_allowed")


def test_check_redirect_skips_the_address_check_when_private_targets_are_allowed() -> None:
    destination = check_redirect(
        "http://10.0.0.1/x", "http://public.test/", allow_private=True, resolver=never_resolve
    )
    assert isinstance(destination, Destination)
    assert destination.address is None


# --- AWS targets ------------------------------------------------------------------------------------------
@pytest.fixture
def aws() -> Iterator[LazyClients]:
    with mock_aws():
        yield LazyClients(region=REGION)


def call_aws(target: Any, clients: Any, delivery: Delivery = DELIVERY) -> TargetResult:
    return invoke(
        target, delivery, clients=clients, allow_private=False, now_epoch=NOW, resolver=never_resolve
    )


def test_sqs_gets_the_envelope_and_the_run_id(aws: LazyClients) -> None:
    queue_url = aws.sqs().create_queue(QueueName="tenant-queue")["QueueUrl"]

    result = call_aws(SqsTarget(type="sqs", queue_url=queue_url), aws)

    assert result.ok
    [message] = aws.sqs().receive_message(QueueUrl=queue_url, MessageAttributeNames=["All"])["Messages"]
    assert message["Body"].encode() == EXPECTED_BODY
    assert message["MessageAttributes"]["tickwork-run-id"]["StringValue"] == DELIVERY.run_id
    assert message["MessageAttributes"]["tickwork-attempt"]["StringValue"] == "2"


def test_sqs_fifo_drops_a_resent_attempt_but_not_the_next_one(aws: LazyClients) -> None:
    queue_url = aws.sqs().create_queue(QueueName="tenant-queue.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    target = SqsTarget(type="sqs", queue_url=queue_url)

    results = [call_aws(target, aws), call_aws(target, aws), call_aws(target, aws, _attempt(3))]

    assert all(result.ok for result in results)
    messages = aws.sqs().receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert [json.loads(m["Body"])["attempt"] for m in messages] == [2, 3]
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {JOB_ID}


def test_sqs_missing_queue_is_permanent(aws: LazyClients) -> None:
    result = call_aws(
        SqsTarget(type="sqs", queue_url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/gone"), aws
    )

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_found")
    assert result.error_message is not None
    assert result.error_message.startswith("SQS SendMessage failed: ")


def test_an_unreachable_aws_endpoint_is_retryable() -> None:
    clients = LazyClients(
        region=REGION,
        endpoint_url=f"http://127.0.0.1:{closed_port()}",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1),
    )

    result = call_aws(
        SqsTarget(type="sqs", queue_url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q"), clients
    )

    assert (result.outcome, result.error_code) == (OutcomeClass.RETRYABLE, "connection_error")


def _lambda_function(clients: LazyClients) -> str:
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="fn-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("index.py", "def handler(event, context):\n    return event\n")
    function = clients.lambda_().create_function(
        FunctionName="tenant-fn",
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": archive.getvalue()},
    )
    return function["FunctionArn"]


def test_lambda_is_invoked_asynchronously_with_the_envelope() -> None:
    # moto's docker-free Lambda: invocations succeed without running the code.
    with mock_aws(config={"lambda": {"use_docker": False}}):
        clients = LazyClients(region=REGION)
        arn = _lambda_function(clients)
        sent: list[dict[str, Any]] = []
        clients.lambda_().meta.events.register(
            "provide-client-params.lambda.Invoke", lambda params, **_: sent.append(dict(params))
        )

        result = call_aws(LambdaTarget(type="lambda", function_arn=arn), clients)

    assert result == TargetResult(OutcomeClass.SUCCESS, status_code=202)
    [params] = sent
    assert params == {"FunctionName": arn, "InvocationType": "Event", "Payload": EXPECTED_BODY}


def test_lambda_missing_function_is_permanent(aws: LazyClients) -> None:
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:gone"

    result = call_aws(LambdaTarget(type="lambda", function_arn=arn), aws)

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_found")


def test_eventbridge_puts_the_envelope_as_detail(aws: LazyClients) -> None:
    queue_url = aws.sqs().create_queue(QueueName="bus-tap")["QueueUrl"]
    queue_arn = aws.sqs().get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    aws.events().create_event_bus(Name="tenant-bus")
    aws.events().put_rule(Name="tap", EventBusName="tenant-bus", EventPattern='{"source": ["tickwork"]}')
    aws.events().put_targets(Rule="tap", EventBusName="tenant-bus", Targets=[{"Id": "q", "Arn": queue_arn}])
    target = EventBridgeTarget(type="eventbridge", event_bus_name="tenant-bus", detail_type="report.due")

    result = call_aws(target, aws)

    assert result.ok
    [message] = aws.sqs().receive_message(QueueUrl=queue_url)["Messages"]
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("tickwork", "report.due")
    assert event["detail"] == json.loads(EXPECTED_BODY)


def test_eventbridge_missing_bus_is_permanent(aws: LazyClients) -> None:
    target = EventBridgeTarget(type="eventbridge", event_bus_name="gone", detail_type="report.due")

    result = call_aws(target, aws)

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_found")


def _state_machine(clients: LazyClients) -> str:
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    return clients.stepfunctions().create_state_machine(
        name="tenant-flow", definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/flow-role"
    )["stateMachineArn"]


def test_stepfunctions_starts_one_execution_per_attempt(aws: LazyClients) -> None:
    arn = _state_machine(aws)
    target = StepFunctionsTarget(type="stepfunctions", state_machine_arn=arn)

    assert call_aws(target, aws).ok
    executions = aws.stepfunctions().list_executions(stateMachineArn=arn)["executions"]
    assert [e["name"] for e in executions] == [f"{JOB_ID}_1767225600000-a2"]
    described = aws.stepfunctions().describe_execution(executionArn=executions[0]["executionArn"])
    assert described["input"].encode() == EXPECTED_BODY

    assert call_aws(target, aws, _attempt(3)).ok
    assert len(aws.stepfunctions().list_executions(stateMachineArn=arn)["executions"]) == 2


def test_stepfunctions_attempt_already_started_counts_as_success(aws: LazyClients) -> None:
    arn = _state_machine(aws)
    target = StepFunctionsTarget(type="stepfunctions", state_machine_arn=arn)
    assert call_aws(target, aws).ok
    [execution] = aws.stepfunctions().list_executions(stateMachineArn=arn)["executions"]
    # Once the first execution has ended, the same name is refused with ExecutionAlreadyExists.
    aws.stepfunctions().stop_execution(executionArn=execution["executionArn"])

    result = call_aws(target, aws)

    assert result.ok
    assert len(aws.stepfunctions().list_executions(stateMachineArn=arn)["executions"]) == 1


def test_stepfunctions_missing_state_machine_is_permanent(aws: LazyClients) -> None:
    arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:gone"

    result = call_aws(StepFunctionsTarget(type="stepfunctions", state_machine_arn=arn), aws)

    assert (result.outcome, result.error_code) == (OutcomeClass.PERMANENT, "target_not_found")


def _attempt(attempt: int) -> Delivery:
    return Delivery(**{**DELIVERY.__dict__, "attempt": attempt})


@pytest.mark.parametrize(
    ("run_id", "attempt", "expected"),
    [
        ("01JGZ:1767225600000", 1, "01JGZ_1767225600000-a1"),
        ("01JGZ:m:abc123", 12, "01JGZ_m_abc123-a12"),
    ],
)
def test_execution_names_stay_readable_for_plain_run_ids(run_id: str, attempt: int, expected: str) -> None:
    assert execution_name(run_id, attempt) == expected


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("job:1", "job_1"),  # would collide if ':' were simply replaced
        ("job/1", "job.1"),
        ("x" * 100 + "a", "x" * 100 + "b"),  # would collide if simply truncated
    ],
)
def test_execution_names_never_collide_and_fit_the_limit(first: str, second: str) -> None:
    names = {execution_name(first, 1), execution_name(second, 1), execution_name(first, 2)}

    assert len(names) == 3
    for name in names:
        assert len(name) <= 80
        assert all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in name)


# --- AWS error classification (botocore's Stubber plays the service's answer) -----------------------------
class StubbedClients:
    def __init__(self, service: str) -> None:
        self.client = boto3.client(service, region_name=REGION)  # type: ignore[call-overload]
        self.stubber = Stubber(self.client)

    def sqs(self) -> Any:
        return self.client

    def lambda_(self) -> Any:
        return self.client

    def events(self) -> Any:
        return self.client

    def stepfunctions(self) -> Any:
        return self.client


SQS_TARGET = SqsTarget(type="sqs", queue_url=f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q")
LAMBDA_TARGET = LambdaTarget(type="lambda", function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:fn")
SFN_TARGET = StepFunctionsTarget(
    type="stepfunctions", state_machine_arn=f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:flow"
)
EVENTS_TARGET = EventBridgeTarget(type="eventbridge", event_bus_name="bus", detail_type="report.due")
_TARGETS: dict[str, tuple[Any, str]] = {
    "sqs": (SQS_TARGET, "send_message"),
    "lambda": (LAMBDA_TARGET, "invoke"),
    "stepfunctions": (SFN_TARGET, "start_execution"),
    "events": (EVENTS_TARGET, "put_events"),
}


@pytest.mark.parametrize(
    ("service", "code", "status", "outcome", "error_code"),
    [
        ("sqs", "ThrottlingException", 400, OutcomeClass.RETRYABLE, "throttled"),
        ("sqs", "RequestThrottled", 403, OutcomeClass.RETRYABLE, "throttled"),
        ("sqs", "KMS.ThrottlingException", 400, OutcomeClass.RETRYABLE, "throttled"),
        ("sqs", "ServiceUnavailable", 503, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("sqs", "InternalError", 500, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("sqs", "SomethingNew", 502, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("sqs", "AccessDenied", 403, OutcomeClass.PERMANENT, "access_denied"),
        ("sqs", "KMS.AccessDeniedException", 400, OutcomeClass.PERMANENT, "access_denied"),
        ("sqs", "AWS.SimpleQueueService.NonExistentQueue", 400, OutcomeClass.PERMANENT, "target_not_found"),
        ("sqs", "InvalidParameterValue", 400, OutcomeClass.PERMANENT, "target_rejected"),
        ("lambda", "TooManyRequestsException", 429, OutcomeClass.RETRYABLE, "throttled"),
        ("lambda", "ResourceConflictException", 409, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("lambda", "ServiceException", 500, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("lambda", "ResourceNotFoundException", 404, OutcomeClass.PERMANENT, "target_not_found"),
        ("lambda", "RequestTooLargeException", 413, OutcomeClass.PERMANENT, "target_rejected"),
        ("stepfunctions", "ExecutionLimitExceeded", 400, OutcomeClass.RETRYABLE, "throttled"),
        ("stepfunctions", "StateMachineDoesNotExist", 400, OutcomeClass.PERMANENT, "target_not_found"),
        ("stepfunctions", "ValidationException", 400, OutcomeClass.PERMANENT, "target_rejected"),
        ("stepfunctions", "ExecutionAlreadyExists", 400, OutcomeClass.SUCCESS, None),
        ("events", "InternalFailure", 500, OutcomeClass.RETRYABLE, "target_unavailable"),
        ("events", "AccessDeniedException", 400, OutcomeClass.PERMANENT, "access_denied"),
    ],
)
def test_aws_errors_are_classified(
    service: str, code: str, status: int, outcome: OutcomeClass, error_code: str | None
) -> None:
    clients = StubbedClients(service)
    target, operation = _TARGETS[service]
    clients.stubber.add_client_error(
        operation, service_error_code=code, service_message="stubbed", http_status_code=status
    )

    with clients.stubber:
        result = call_aws(target, clients)

    assert (result.outcome, result.error_code) == (outcome, error_code)
    if outcome is not OutcomeClass.SUCCESS:
        assert result.status_code == status
        assert result.error_message is not None
        assert code in result.error_message


@pytest.mark.parametrize(
    ("entry_code", "outcome", "error_code"),
    [
        ("ThrottlingException", OutcomeClass.RETRYABLE, "throttled"),
        ("InternalFailure", OutcomeClass.RETRYABLE, "target_unavailable"),
        ("InvalidArgument", OutcomeClass.PERMANENT, "target_rejected"),
        ("AccessDeniedException", OutcomeClass.PERMANENT, "target_rejected"),
    ],
)
def test_eventbridge_failed_entries_are_classified(
    entry_code: str, outcome: OutcomeClass, error_code: str
) -> None:
    clients = StubbedClients("events")
    clients.stubber.add_response(
        "put_events",
        {"FailedEntryCount": 1, "Entries": [{"ErrorCode": entry_code, "ErrorMessage": "stubbed"}]},
    )

    with clients.stubber:
        result = call_aws(EVENTS_TARGET, clients)

    assert (result.outcome, result.error_code) == (outcome, error_code)
    assert result.error_message == f"EventBridge PutEvents rejected the event: {entry_code}: stubbed"
