"""Eight clients of two tenants at once against `tickwork local`: every answer, every error and every log line
belongs to the request that caused it.

Each client works on its own jobs: create, read, patch, trigger, a create under a name it already took, and a
read of a job another client made (of its own tenant, or of the other tenant). Half the clients keep one
connection open, half open a new one per request, and half send ``Idempotency-Key`` on their creates.
"""

from __future__ import annotations

import http.client
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

TOKENS = {"acme": "tw_concurrent_acme", "globex": "tw_concurrent_globex"}
CLIENTS_PER_TENANT = 4
ROUNDS = 9  # six requests a round: 2 tenants x 4 clients x 9 rounds x 6 = 432 requests
MIN_REQUESTS = 400
MAX_THROTTLED = 5  # sends of one request that get 429 before the client gives up and reports it
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
NAME = re.compile(r"cc-(?:acme|globex)-\d+-\d+-[0-9a-f]{8}")
REQUEST_ID_HEADER = "x-amzn-RequestId"
INSTANCE_STARTED = "handler instance started"
AUDITED = {"create": "job created", "patch": "job updated", "trigger": "job triggered"}


@dataclass
class Exchange:
    """One request and what came back (or the error that came instead)."""

    client: str
    tenant: str
    action: str
    job_id: str | None
    name: str | None
    status: int | None = None
    body: Any = None
    text: str = ""
    request_id: str | None = None
    retry_after: str | None = None
    dropped: str | None = None


@dataclass
class Ledger:
    """Every exchange of the run, and which tenant owns each job made."""

    exchanges: list[Exchange] = field(default_factory=list)
    owner: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, exchange: Exchange) -> None:
        with self.lock:
            self.exchanges.append(exchange)

    def made(self, tenant: str, job_id: str, name: str) -> None:
        with self.lock:
            self.owner[job_id] = tenant
            self.names[job_id] = name

    def jobs_of(self, tenant: str, *, excluding: set[str]) -> list[str]:
        with self.lock:
            return [job for job, owner in self.owner.items() if owner == tenant and job not in excluding]


class Client:
    """One API client: its own tenant, token and (if ``keep_alive``) one connection for all its requests."""

    def __init__(self, local: Local, tenant: str, index: int, *, keep_alive: bool, ledger: Ledger):
        self.host, port = local.url.removeprefix("http://").split(":")
        self.port = int(port)
        self.tenant = tenant
        self.name = f"{tenant}-{index}"
        self.keep_alive = keep_alive
        self.ledger = ledger
        self.connection: http.client.HTTPConnection | None = None

    def call(self, action: str, method: str, path: str, **request: Any) -> Exchange:
        """Send one request (see :meth:`send`); a 429 (the tenant's rate limit, shared by its four clients)
        is recorded and the request sent again after its ``Retry-After``, as a well-behaved client does."""
        for _ in range(MAX_THROTTLED - 1):
            exchange = self.send(action, method, path, **request)
            if exchange.status != 429:
                return exchange
            exchange.action = f"throttled {action}"
            time.sleep(float(exchange.retry_after or 1))
        return self.send(action, method, path, **request)

    def send(
        self,
        action: str,
        method: str,
        path: str,
        *,
        job_id: str | None,
        name: str | None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Exchange:
        exchange = Exchange(self.name, self.tenant, action, job_id, name)
        all_headers = {"Authorization": f"Bearer {TOKENS[self.tenant]}", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self.connection.request(method, path, body=data, headers=all_headers)
            response = self.connection.getresponse()
            exchange.text = response.read().decode()
            exchange.status = response.status
            exchange.request_id = response.getheader(REQUEST_ID_HEADER)
            exchange.retry_after = response.getheader("Retry-After")
            exchange.body = json.loads(exchange.text) if exchange.text else None
            if not self.keep_alive or response.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as error:
            exchange.dropped = f"{type(error).__name__}: {error}"
            self.close()
        self.ledger.record(exchange)
        return exchange

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def work(self, receiver: Receiver, start: threading.Barrier, nonce: str) -> None:
        other_tenant = next(tenant for tenant in TOKENS if tenant != self.tenant)
        mine: set[str] = set()
        start.wait()
        try:
            for round_number in range(ROUNDS):
                name = f"cc-{self.name}-{round_number}-{nonce}"
                spec = {
                    "name": name,
                    "schedule": {"type": "rate", "every_seconds": 86_400},
                    "target": {"type": "http", "url": receiver.url(f"/{name}"), "timeout_seconds": 5},
                    "payload": {"client": self.name, "round": round_number},
                }
                keyed = {"Idempotency-Key": f"create-{name}"} if self.keep_alive else None
                created = self.call(
                    "create", "POST", "/v1/jobs", job_id=None, name=name, body=spec, headers=keyed
                )
                if created.status != 201 or not isinstance(created.body, dict):
                    continue
                job_id = created.job_id = str(created.body.get("job_id"))
                if created.body.get("name") != name:
                    continue  # reported by the checks; nothing of this round can be trusted
                mine.add(job_id)
                self.ledger.made(self.tenant, job_id, name)
                self.call("get", "GET", f"/v1/jobs/{job_id}", job_id=job_id, name=name)
                self.call(
                    "patch", "PATCH", f"/v1/jobs/{job_id}", job_id=job_id, name=name,
                    body={"description": f"patched {name}"},
                )  # fmt: skip
                self.call(
                    "trigger", "POST", f"/v1/jobs/{job_id}/trigger", job_id=job_id, name=name,
                    headers={"Idempotency-Key": f"trigger-{name}"},
                )  # fmt: skip
                self.call("duplicate", "POST", "/v1/jobs", job_id=None, name=name, body=spec)
                # Every other round reads a job of another client of this tenant, the others one of the
                # other tenant's (a 404 that must not name it).
                peek_tenant = self.tenant if round_number % 2 else other_tenant
                others = self.ledger.jobs_of(peek_tenant, excluding=mine)
                if others:
                    peeked = others[-1]
                    action = "peek_own_tenant" if peek_tenant == self.tenant else "peek_other_tenant"
                    self.call(action, "GET", f"/v1/jobs/{peeked}", job_id=peeked, name=None)
        finally:
            self.close()


def problems_of(exchange: Exchange, ledger: Ledger) -> list[str]:
    """What is wrong with one exchange: a drop, a 5xx, an unexpected status, or someone else's data."""
    where = f"{exchange.client} {exchange.action} {exchange.job_id or exchange.name}"
    if exchange.dropped:
        return [f"{where}: connection dropped ({exchange.dropped})"]
    assert exchange.status is not None
    if exchange.status >= 500:
        return [f"{where}: {exchange.status} {exchange.text[:300]}"]
    if exchange.action.startswith("throttled "):
        error = exchange.body.get("error", {}) if isinstance(exchange.body, dict) else {}
        if error.get("code") != "rate_limited" or not (exchange.retry_after or "").isdigit():
            return [f"{where}: a 429 without rate_limited and Retry-After: {exchange.text[:300]}"]
        return []
    expected = {
        "create": 201,
        "get": 200,
        "patch": 200,
        "trigger": 202,
        "duplicate": 409,
        "peek_own_tenant": 200,
        "peek_other_tenant": 404,
    }[exchange.action]
    found: list[str] = []
    if exchange.status != expected:
        found.append(f"{where}: {exchange.status} instead of {expected}: {exchange.text[:300]}")
    if not exchange.request_id:
        found.append(f"{where}: no {REQUEST_ID_HEADER} header")
    # The only job an answer may name is the one its request named (or, for a create, the one it made).
    foreign_ids = set(ULID.findall(exchange.text)) - {exchange.job_id}
    if foreign_ids:
        found.append(f"{where}: the answer names other jobs {sorted(foreign_ids)}: {exchange.text[:300]}")
    allowed_names = {exchange.name} if exchange.name else set()
    if exchange.action == "peek_own_tenant" and exchange.job_id:
        allowed_names = {ledger.names[exchange.job_id]}
    foreign_names = set(NAME.findall(exchange.text)) - allowed_names
    if foreign_names:
        found.append(f"{where}: the answer names other jobs {sorted(foreign_names)}: {exchange.text[:300]}")
    body = exchange.body if isinstance(exchange.body, dict) else {}
    if exchange.status == expected and exchange.action in ("create", "get", "patch", "peek_own_tenant"):
        if body.get("job_id") != exchange.job_id or body.get("name") != (
            exchange.name or ledger.names.get(body.get("job_id", ""))
        ):
            found.append(f"{where}: answered job {body.get('job_id')} {body.get('name')!r}")
        if exchange.action == "patch" and body.get("description") != f"patched {exchange.name}":
            found.append(f"{where}: answered description {body.get('description')!r}")
    run_of_the_job = str(body.get("run_id")).startswith(f"{exchange.job_id}:")
    answered_trigger = exchange.status == expected and exchange.action == "trigger"
    if answered_trigger and (body.get("job_id") != exchange.job_id or not run_of_the_job):
        found.append(f"{where}: answered run {body.get('run_id')} of job {body.get('job_id')}")
    if exchange.status == expected and exchange.action == "duplicate":
        error = body.get("error", {})
        if error.get("code") != "name_taken" or exchange.name not in error.get("message", ""):
            found.append(f"{where}: answered {error}")
    return found


def log_records(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a library's plain-text line
        if isinstance(record, dict):
            yield record


@pytest.fixture(scope="module")
def busy_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """A stack of its own, logging at INFO so that the API's audit lines reach the log file."""
    running = start_local(
        tmp_path_factory.mktemp("tickwork-concurrent"),
        tenants=",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items()),
        environment={"POWERTOOLS_LOG_LEVEL": "INFO"},
    )
    yield running
    stop_local(running)


def test_concurrent_clients_of_two_tenants_each_get_only_their_own_answers(
    busy_local: Local, receiver: Receiver, tmp_path: Path
) -> None:
    # Given eight clients, four per tenant, released together
    ledger = Ledger()
    nonce = uuid.uuid4().hex[:8]
    start = threading.Barrier(len(TOKENS) * CLIENTS_PER_TENANT)
    clients = [
        Client(busy_local, tenant, index, keep_alive=index % 2 == 0, ledger=ledger)
        for tenant, index in itertools.product(TOKENS, range(CLIENTS_PER_TENANT))
    ]
    threads = [
        threading.Thread(target=client.work, args=(receiver, start, nonce), name=client.name)
        for client in clients
    ]

    # When they create, read, patch and trigger at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a client did not finish in 5 minutes"

    # Then every answer is its own request's: no drop, no 5xx, no other request's job in it
    exchanges = ledger.exchanges
    problems = [problem for exchange in exchanges for problem in problems_of(exchange, ledger)]
    assert not problems, f"{len(problems)} of {len(exchanges)} answers are wrong:\n" + "\n".join(
        problems[:40]
    )
    assert len(exchanges) >= MIN_REQUESTS, f"only {len(exchanges)} requests were made"
    assert {exchange.action for exchange in exchanges} >= {"peek_own_tenant", "peek_other_tenant"}

    # And every triggered run reached its own job's webhook, carrying its own job and payload
    triggered = {exchange.body["run_id"]: exchange for exchange in exchanges if exchange.action == "trigger"}

    def delivered() -> dict[str, Any]:
        seen = {}
        for request in list(receiver.requests):
            envelope = request.json()
            if envelope.get("run_id") in triggered:
                seen[envelope["run_id"]] = (request.path, envelope)
        return seen

    deliveries = wait_for(
        lambda: len(delivered()) == len(triggered) and delivered(), timeout=120, interval=0.5
    )
    assert deliveries, f"{len(delivered())} of {len(triggered)} triggered runs reached their webhook"
    for run_id, (path, envelope) in deliveries.items():
        exchange = triggered[run_id]
        assert (path, envelope["job_id"]) == (f"/{exchange.name}", exchange.job_id)
        assert envelope["payload"]["client"] == exchange.client

    # And no log line carries another request's tenant or job
    records = list(log_records(Path(busy_local.log_file)))
    by_request = {exchange.request_id: exchange for exchange in exchanges if exchange.request_id}
    wrong = []
    audited: set[str] = set()
    for record in records:
        requested = by_request.get(str(record.get("correlation_id")))
        if requested is not None:
            if record.get("tenant_id", requested.tenant) != requested.tenant:
                wrong.append(f"{requested.client} {requested.action}: {record}")
            if record.get("job_id", requested.job_id) != requested.job_id:
                wrong.append(f"{requested.client} {requested.action}: {record}")
            if record.get("message") == AUDITED.get(requested.action) and requested.request_id:
                audited.add(requested.request_id)
        job_id = record.get("job_id")
        if job_id in ledger.owner and record.get("tenant_id", ledger.owner[job_id]) != ledger.owner[job_id]:
            wrong.append(f"job {job_id} of {ledger.owner[job_id]}: {record}")
    assert not wrong, f"{len(wrong)} log lines carry another request's tenant or job:\n" + "\n".join(
        wrong[:20]
    )
    expected_audit = {
        exchange.request_id
        for exchange in exchanges
        if exchange.action in AUDITED and exchange.status in (201, 200, 202) and exchange.request_id
    }
    assert expected_audit, "no audited request succeeded"
    assert audited == expected_audit, f"{len(expected_audit - audited)} audited requests left no log line"

    # And requests did overlap: the gateway needed more than one API handler instance
    pool_sizes = [record["instances"] for record in records if record.get("message") == INSTANCE_STARTED]
    assert max(pool_sizes, default=0) > 1, f"the API pool never grew past {max(pool_sizes, default=0)}"

    # And the stack printed no metrics of Powertools' shared set (its counts go to the stack's own sink)
    assert not any('"_aws"' in line for line in busy_local.output)
