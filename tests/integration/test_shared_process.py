"""The API and the worker in one process, on many threads, as the local stack runs them: nothing that one
request or one attempt keeps for itself reaches another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.runtime import runtime
from tickwork.targets import LazyClients

from tests.conftest import TOKENS, seed_tenant
from tests.support.apigw import ApiGateway
from tests.support.engine import Receiver, make_requests_atomic, start_receiver

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


@pytest.fixture
def process(api: ApiGateway, dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> ApiGateway:
    """The API over the process runtime, with run queues, loopback targets allowed, atomic DynamoDB calls."""
    # The clients send as fast as moto answers: let them, so that no answer is a 429 for speed alone.
    for tenant_id, token in TOKENS.items():
        seed_tenant(dynamodb, tenant_id, token, api_requests_per_second=10_000)
    sqs = boto3.client("sqs", region_name="eu-west-1")
    for queue in tables.ALL_QUEUES:
        monkeypatch.setenv(queue.env_var, sqs.create_queue(QueueName=queue.default_name)["QueueUrl"])
    monkeypatch.setenv("TICKWORK_ALLOW_PRIVATE_TARGETS", "true")
    runtime.cache_clear()
    make_requests_atomic(runtime().dynamodb)
    return api


def spec(name: str, url: str, **schedule: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": schedule or {"type": "rate", "every_seconds": 3600},
        "target": {"type": "http", "url": url, "timeout_seconds": 5},
        "payload": {"name": name},
    }


def test_requests_on_threads_each_get_their_own_answer(process: ApiGateway, receiver: Receiver) -> None:
    # Given eight clients of two tenants, each on its own thread
    threads, rounds = 8, 6
    problems: list[str] = []
    barrier = threading.Barrier(threads)

    def client(index: int) -> None:
        token = ACME if index % 2 else GLOBEX
        barrier.wait()
        for round_number in range(rounds):
            name = f"t{index}-r{round_number}"
            created = process.request("POST", "/v1/jobs", token=token, body=spec(name, receiver.url("/x")))
            if created.status != 201 or created.body["name"] != name:
                problems.append(f"{name} create: {created.status} {created.body}")
                continue
            job_id = created.body["job_id"]
            read = process.request("GET", f"/v1/jobs/{job_id}", token=token)
            patched = process.request(
                "PATCH", f"/v1/jobs/{job_id}", token=token, body={"description": f"of {name}"}
            )
            taken = process.request("POST", "/v1/jobs", token=token, body=spec(name, receiver.url("/x")))
            for what, response, status in (("read", read, 200), ("patch", patched, 200)):
                if response.status != status or (response.body["job_id"], response.body["name"]) != (
                    job_id,
                    name,
                ):
                    problems.append(f"{name} {what}: {response.status} {response.body}")
            if patched.status == 200 and patched.body["description"] != f"of {name}":
                problems.append(f"{name} patch: {patched.body['description']}")
            if taken.status != 409 or f"'{name}'" not in taken.body["error"]["message"]:
                problems.append(f"{name} duplicate: {taken.status} {taken.body}")

    # When they create, read, patch and re-create at once
    workers = [threading.Thread(target=client, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    # Then every answer is about the request's own job
    assert not problems, "\n".join(problems[:20])
    for token, parity in ((ACME, 1), (GLOBEX, 0)):
        listed = process.request("GET", "/v1/jobs", token=token, query={"limit": "100"}).body["items"]
        names = {job["name"] for job in listed}
        assert names == {f"t{i}-r{r}" for i in range(threads) if i % 2 == parity for r in range(rounds)}


def test_keyed_creates_of_one_tenant_never_share_an_idempotency_record(
    process: ApiGateway, receiver: Receiver
) -> None:
    """Powertools keeps the first call's key expression on a persistence store for good: one store shared
    by calls with different settings would give every keyed create of a tenant one key."""
    answers = []
    for name, key in (("first", "a"), ("second", "b"), ("first", "a")):
        answers.append(
            process.request(
                "POST",
                "/v1/jobs",
                token=ACME,
                body=spec(name, receiver.url(f"/{name}")),
                headers={"Idempotency-Key": key},
            )
        )
    first, second, again = answers
    assert (first.status, second.status, again.status) == (201, 201, 201)
    assert (first.body["name"], second.body["name"]) == ("first", "second")
    assert second.body["job_id"] != first.body["job_id"]
    assert again.body == first.body


def test_target_clients_built_from_many_threads_at_once_are_one_client_each() -> None:
    clients = LazyClients(region="eu-west-1")
    barrier = threading.Barrier(16)
    built: list[Any] = []

    def build() -> None:
        barrier.wait()
        built.append((clients.sqs(), clients.events()))

    threads = [threading.Thread(target=build) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(built) == 16
    assert len({id(sqs) for sqs, _ in built}) == 1
    assert len({id(events) for _, events in built}) == 1
