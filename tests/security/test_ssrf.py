"""Server-side request forgery: webhook targets in deployed mode (private targets not allowed).

What the API can see in a URL (an address written in any form, a local name, another scheme) is a 400 at
create time naming ``target.url``. What only shows when the worker connects (what a name resolves to, where a
redirect leads) is refused by the worker: the attempt's ``error_code`` is ``target_not_allowed``, the run is
FAILED (permanent), and nothing reaches the address.

Only loopback is ever connected to: names resolve through the runtime's injected resolver, and the
``loopback_only`` fixture stands in for the network, carrying connections to the one made-up public address
(``PUBLIC_ADDRESS``) to a real server on 127.0.0.1 and refusing every other address that is not loopback.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3.util.connection
from tickwork.domain.models import RunStatus
from tickwork.runtime import build_runtime
from tickwork_local.harness import Received, Receiver, Reply

from tests.conftest import TOKENS, item_counts
from tests.integration.conftest import START, Engine
from tests.support.apigw import ApiGateway

PUBLIC_ADDRESS = "93.184.216.34"  # stands for a public host; connections to it go to the hook server
ATTEMPT_REFUSED = "target_not_allowed"


# --- the network: loopback only ---------------------------------------------------------------------------
@dataclass
class Network:
    hook_port: int = 0
    refused: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Network:
    network = Network()
    connect = urllib3.util.connection.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = address
        if host == PUBLIC_ADDRESS and port == network.hook_port:
            return connect(("127.0.0.1", port), *args, **kwargs)
        if host in ("127.0.0.1", "::1", "localhost"):
            return connect(address, *args, **kwargs)
        network.refused.append((host, port))
        raise OSError(f"test network: no route to {host}")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    return network


class HookServer:
    """The loopback receiver, answering each path of ``redirects`` with a 302 there (``{port}`` standing for
    its port) and any other with an empty 200."""

    def __init__(self) -> None:
        self.redirects: dict[str, str] = {}
        self.receiver = Receiver(answer=self.answer)
        self.port = self.receiver.port

    @property
    def requests(self) -> list[str]:
        return [request.path for request in self.receiver.requests]

    def url(self, path: str, host: str = "hooks.public.test") -> str:
        return self.receiver.url(path, host=host)

    def answer(self, request: Received) -> Reply:
        location = self.redirects.get(request.path)
        if location:
            return Reply(302, {"Location": location.format(port=self.port)})
        return Reply(200)


@pytest.fixture
def hooks(loopback_only: Network) -> Iterator[HookServer]:
    server = HookServer()
    loopback_only.hook_port = server.port
    with server.receiver:
        yield server


def resolving(table: dict[str, list[str]]) -> Any:
    """socket.getaddrinfo's shape, answering from ``table``; other names do not resolve."""

    def resolve(host: str, port: int) -> list[tuple[Any, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in table[host]
        ]

    return resolve


@pytest.fixture
def deployed(engine: Engine, loopback_only: Network) -> Engine:
    """The engine with private targets refused, as deployed, and made-up names resolved from a table."""
    settings = engine.runtime.settings.model_copy(update={"allow_private_targets": False})
    engine.runtime = build_runtime(settings, dynamodb=engine.dynamodb, sqs=engine.sqs, metrics=engine.metrics)
    engine.runtime.resolver = resolving(NAMES)
    return engine


def create_due_now(engine: Engine, url: str) -> str:
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()},
        target={"type": "http", "url": url, "timeout_seconds": 2},
        retry={"max_attempts": 3, "initial_delay_seconds": 1},
    ).job
    return job.job_id


def deliver_all(engine: Engine, urls: dict[str, str]) -> dict[str, Any]:
    """Create a job firing now for each URL, deliver them all, and return each one's run."""
    job_ids = {case: create_due_now(engine, url) for case, url in urls.items()}
    engine.tick()
    engine.drain()
    runs = {}
    for case, job_id in job_ids.items():
        (runs[case],) = engine.runs_of("acme", job_id)
    return runs


def refusals(runs: dict[str, Any]) -> dict[str, tuple[RunStatus, list[str | None]]]:
    return {
        case: (run.status, [attempt.error_code for attempt in run.attempts]) for case, run in runs.items()
    }


# --- 1. refused when the job is created -------------------------------------------------------------------
CREATE_TIME = [
    ("http://10.0.0.1/hook", "10/8"),
    ("http://10.255.255.254:8080/hook", "10/8, its top"),
    ("http://172.16.0.1/hook", "172.16/12"),
    ("http://172.31.255.254/hook", "172.16/12, its top"),
    ("http://192.168.0.1/hook", "192.168/16"),
    ("http://127.0.0.1/hook", "loopback"),
    ("http://127.1/hook", "loopback, short form"),
    ("http://127.255.255.254/hook", "loopback, all of 127/8"),
    ("http://0.0.0.0/hook", "this host"),
    ("http://0/hook", "this host, one number"),
    ("http://169.254.169.254/latest/meta-data/", "link-local: the instance metadata service"),
    ("http://[fe80::1]/hook", "IPv6 link-local"),
    ("http://[::1]/hook", "IPv6 loopback"),
    ("http://[::]/hook", "IPv6 unspecified"),
    ("http://[fd00::1]/hook", "IPv6 unique-local"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "the metadata service over IPv6"),
    ("http://[::ffff:127.0.0.1]/hook", "IPv4-mapped loopback"),
    ("http://[::ffff:169.254.169.254]/hook", "IPv4-mapped link-local"),
    ("http://[::ffff:a00:1]/hook", "IPv4-mapped 10/8, hex"),
    ("http://100.64.0.1/hook", "CGNAT 100.64/10"),
    ("http://2130706433/hook", "127.0.0.1, decimal"),
    ("http://0x7f000001/hook", "127.0.0.1, hex"),
    ("http://0x7f.0.0.1/hook", "127.0.0.1, hex first part"),
    ("http://0177.0.0.1/hook", "127.0.0.1, octal"),
    ("http://017700000001/hook", "127.0.0.1, one octal number"),
    ("http://3232235521/hook", "192.168.0.1, decimal"),
    ("http://localhost/hook", "localhost"),
    ("http://LOCALHOST./hook", "localhost, upper case with a trailing dot"),
    ("http://api.localhost/hook", "a .localhost name"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://255.255.255.255/hook", "broadcast"),
    ("http://198.18.0.1/hook", "benchmarking 198.18/15"),
    # IPv4 carried inside IPv6, which a NAT64 translator or a 6to4 relay would deliver to.
    ("http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", "NAT64 of 169.254.169.254"),
    ("http://[64:ff9b::a00:1]/hook", "NAT64 of 10.0.0.1"),
    ("http://[2002:a00:1::1]/hook", "6to4 of 10.0.0.1"),
    ("http://[::127.0.0.1]/hook", "IPv4-compatible 127.0.0.1"),
    ("http://[fec0::1]/hook", "IPv6 site-local"),
]


def create(api: ApiGateway, url: str) -> Any:
    body = {
        "name": "probe",
        "schedule": {"type": "rate", "every_seconds": 60},
        "target": {"type": "http", "url": url},
    }
    return api.request("POST", "/v1/jobs", token=TOKENS["acme"], body=body)


def test_the_api_refuses_a_private_address_in_the_url_whatever_its_form(
    api: ApiGateway, dynamodb: Any
) -> None:
    before = item_counts(dynamodb)
    answers = {case: create(api, url) for url, case in CREATE_TIME}
    refused = {
        case: (r.status, r.body["error"]["code"], r.body["error"]["field"]) for case, r in answers.items()
    }
    assert refused == {case: (400, ATTEMPT_REFUSED, "target.url") for _, case in CREATE_TIME}
    assert item_counts(dynamodb) == before


def test_the_api_refuses_other_schemes(api: ApiGateway, dynamodb: Any) -> None:
    urls = [
        "ftp://hooks.example.com/x",
        "file:///etc/passwd",
        "gopher://hooks.example.com:70/_x",
        "dict://h:11211/",
    ]
    before = item_counts(dynamodb)
    answers = {url: create(api, url) for url in urls}
    assert {url: (r.status, r.body["error"]["field"]) for url, r in answers.items()} == dict.fromkeys(
        urls, (400, "target.url")
    )
    assert item_counts(dynamodb) == before


def test_the_api_refuses_a_private_address_in_an_update_too(api: ApiGateway) -> None:
    created = api.request(
        "POST",
        "/v1/jobs",
        token=TOKENS["acme"],
        body={
            "name": "probe",
            "schedule": {"type": "rate", "every_seconds": 60},
            "target": {"type": "http", "url": "https://hooks.example.com/x"},
        },
    ).body
    response = api.request(
        "PATCH",
        f"/v1/jobs/{created['job_id']}",
        token=TOKENS["acme"],
        body={"target": {"type": "http", "url": "http://169.254.169.254/latest/meta-data/"}},
    )
    assert (response.status, response.body["error"]["field"]) == (400, "target.url")
    kept = api.request("GET", f"/v1/jobs/{created['job_id']}", token=TOKENS["acme"]).body
    assert kept["target"]["url"] == "https://hooks.example.com/x"


# --- 2. refused when the worker connects ------------------------------------------------------------------
NAMES: dict[str, list[str]] = {
    "hooks.public.test": [PUBLIC_ADDRESS],
    "localhost": ["127.0.0.1", "::1"],
    "loopback.test": ["127.0.0.1"],
    "ten.test": ["10.0.0.5"],
    "home.test": ["192.168.1.10"],
    "docker.test": ["172.17.0.1"],
    "metadata.test": ["169.254.169.254"],
    "v6-loopback.test": ["::1"],
    "v6-ula.test": ["fd00::1"],
    "v6-link.test": ["fe80::1%eth0"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "cgnat.test": ["100.64.0.1"],
    "zero.test": ["0.0.0.0"],  # noqa: S104 - an answer to refuse, not a bind
    # One private address among public ones is enough: the client could pick any of them.
    "mixed.test": [PUBLIC_ADDRESS, "10.0.0.5"],
    "mixed-v6.test": ["2606:2800:220:1:248:1893:25c8:1946", "::1"],
    # IPv4 inside IPv6 forms that the standard library calls global.
    "nat64.test": ["64:ff9b::a00:5"],
    "nat64-loopback.test": ["64:ff9b::7f00:1"],
    "nat64-local.test": ["64:ff9b:1::a9fe:a9fe"],
    "sixtofour.test": ["2002:a9fe:a9fe::1"],
    "compat.test": ["::7f00:1"],
    "site-local.test": ["fec0::1"],
}
# localhost is refused by name when a job is created; it resolves here for the redirect cases.
RESOLVED_PRIVATE = [name for name in NAMES if name not in ("hooks.public.test", "localhost")]


def test_names_resolving_to_private_addresses_fail_their_runs_and_reach_nothing(
    deployed: Engine, loopback_only: Network, hooks: HookServer
) -> None:
    # Given one job per name, each resolving (only) to a private, loopback or link-local address
    runs = deliver_all(deployed, {name: hooks.url("/hook", host=name) for name in RESOLVED_PRIVATE})
    # Then every run failed for good on its one attempt, refused, naming the host
    assert refusals(runs) == {name: (RunStatus.FAILED, [ATTEMPT_REFUSED]) for name in RESOLVED_PRIVATE}
    assert all(name in (runs[name].attempts[0].error_message or "") for name in RESOLVED_PRIVATE)
    # And nothing was connected to: not the hook server, no other address, not the engine's receiver
    assert hooks.requests == [] and loopback_only.refused == []
    assert deployed.receiver.requests == []


REDIRECTS = {
    "/to-loopback": "http://127.0.0.1:{port}/hook",
    "/to-loopback-name": "http://localhost:{port}/hook",
    "/to-ten": "http://10.0.0.5/hook",
    "/to-metadata": "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "/to-v6-loopback": "http://[::1]:{port}/hook",
    "/to-mapped": "http://[::ffff:7f00:1]:{port}/hook",
    "/to-decimal": "http://2130706433:{port}/hook",
    "/to-octal": "http://0177.0.0.1:{port}/hook",
    "/to-resolving-name": "http://home.test/hook",
    "/to-nat64": "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    "/to-relative-host": "//metadata.test/latest/meta-data/",
    "/to-ftp": "ftp://hooks.public.test/file",
    "/to-file": "file:///etc/passwd",
    "/to-gopher": "gopher://127.0.0.1:6379/_INFO",
}


def test_redirects_from_a_public_host_to_private_ones_fail_their_runs(
    deployed: Engine, loopback_only: Network, hooks: HookServer
) -> None:
    # Given a public-looking host (its first hop is allowed) whose answers are 302s to private places
    hooks.redirects.update(REDIRECTS)
    # When the worker delivers a job to each path
    runs = deliver_all(deployed, {path: hooks.url(path) for path in REDIRECTS})
    # Then each first hop was made once, no redirect was followed, and every run failed for good
    assert sorted(hooks.requests) == sorted(REDIRECTS)
    assert refusals(runs) == {path: (RunStatus.FAILED, [ATTEMPT_REFUSED]) for path in REDIRECTS}
    assert loopback_only.refused == []
    assert deployed.receiver.requests == []


def test_a_redirect_between_public_hosts_is_followed(
    deployed: Engine, loopback_only: Network, hooks: HookServer
) -> None:
    # The control: the same path with a public next hop succeeds, so the refusals above are the check's.
    hooks.redirects["/to-public"] = "http://hooks.public.test:{port}/landed"
    runs = deliver_all(deployed, {"public": hooks.url("/to-public")})
    assert runs["public"].status is RunStatus.SUCCEEDED
    assert hooks.requests == ["/to-public", "/landed"]


def test_dns_rebinding_cannot_swap_the_checked_address(
    deployed: Engine, loopback_only: Network, hooks: HookServer
) -> None:
    # A name that answers public first and private afterwards: the worker resolves once and connects to the
    # address it checked, so the second answer is never used.
    answers = iter([[PUBLIC_ADDRESS], ["127.0.0.1"], ["127.0.0.1"]])
    seen: list[str] = []

    def rebinding(host: str, port: int) -> list[tuple[Any, ...]]:
        seen.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in next(answers)]

    deployed.runtime.resolver = rebinding
    run = deliver_all(deployed, {"rebind": hooks.url("/hook", host="rebind.test")})["rebind"]
    assert run.status is RunStatus.SUCCEEDED
    assert seen == ["rebind.test"]
    assert hooks.requests == ["/hook"]  # reached through the checked (public) address
    assert deployed.receiver.requests == []


def test_local_mode_allows_loopback_targets(engine: Engine) -> None:
    # The engine fixture runs as `tickwork local` does: there, and only there, loopback targets work.
    assert engine.runtime.settings.allow_private_targets is True
    runs = deliver_all(engine, {"local": engine.http("/local")["url"]})
    assert runs["local"].status is RunStatus.SUCCEEDED
    assert len(engine.receiver.for_path("/local")) == 1
