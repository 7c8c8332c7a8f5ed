"""The fault injector itself: it fails exactly the fraction asked for, reproducibly, with the kind asked
for, applies the request or not as each kind means, and never leaves the local stack's DynamoDB lock held.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from tickwork import tables
from tickwork_local.atomic import serialise_dynamodb

from bench._faults import DYNAMODB_WRITES, FaultInjector, FaultRule, Stratified

TABLE = tables.RUNS.default_name


class Died(BaseException):
    pass


def item_key(key: str) -> dict[str, Any]:
    return {tables.RUNS_PK: {"S": key}, tables.RUNS_SK: {"S": "0"}}


def put(client: Any, key: str) -> None:
    client.put_item(TableName=TABLE, Item=item_key(key))


def stored(client: Any, key: str) -> bool:
    return "Item" in client.get_item(TableName=TABLE, Key=item_key(key))


def test_stratified_picks_exactly_one_call_per_block_and_repeats_with_its_seed() -> None:
    first = Stratified(0.1, random.Random(3))
    second = Stratified(0.1, random.Random(3))
    hits = [first.hit() for _ in range(1000)]
    assert sum(hits) == 100
    assert all(sum(hits[block : block + 10]) == 1 for block in range(0, 1000, 10))
    assert hits == [second.hit() for _ in range(1000)]
    assert hits != [Stratified(0.1, random.Random(4)).hit() for _ in range(1000)]


@pytest.mark.parametrize(
    ("kind", "error", "applied"),
    [
        ("throttle", ClientError, False),
        ("internal", ClientError, False),
        ("connection", (ConnectionClosedError, EndpointConnectionError), False),
        ("timeout", ReadTimeoutError, True),
        ("crash_before", Died, False),
        ("crash_after", Died, True),
    ],
)
def test_each_kind_raises_its_error_and_applies_the_write_or_not(
    dynamodb: Any, kind: str, error: Any, applied: bool
) -> None:
    serialise_dynamodb(dynamodb.meta.events)
    injector = FaultInjector([FaultRule("dynamodb", DYNAMODB_WRITES, 1.0, (kind,))], crash=Died)
    injector.install(dynamodb)
    with pytest.raises(error) as raised:
        put(dynamodb, "run-1")
    if kind == "throttle":
        assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert type(raised.value).__name__ == "ProvisionedThroughputExceededException"
    if kind == "internal":
        assert raised.value.response["Error"]["Code"] == "InternalServerError"
    # Reads are never faulted, and the lock is free for another thread
    assert stored(dynamodb, "run-1") is applied
    other = threading.Thread(target=lambda: dynamodb.get_item(TableName=TABLE, Key=item_key("x")))
    other.start()
    other.join(timeout=10)
    assert not other.is_alive()
    assert injector.counts == {kind: 1}
    assert injector.counts_by_call() == {("dynamodb", "PutItem", kind): 1}


def test_a_tenth_of_writes_fail_and_the_injections_name_their_runs(dynamodb: Any) -> None:
    injector = FaultInjector([FaultRule("dynamodb", frozenset({"PutItem"}), 0.1, ("throttle",))], seed=5)
    injector.install(dynamodb)
    run_ids = [f"01JD0000000000000000000000:{1795338900000 + i}" for i in range(50)]
    failed = []
    for run_id in run_ids:
        try:
            put(dynamodb, f"acme/{run_id}")
        except ClientError:
            failed.append(run_id)
    assert len(failed) == 5
    assert injector.faulted_run_ids() == set(failed)
    assert [stored(dynamodb, f"acme/{run_id}") for run_id in failed] == [False] * 5
    # Turned off or uninstalled, it injects nothing
    injector.enabled = False
    put(dynamodb, "acme/after-off")
    injector.enabled = True
    injector.uninstall(dynamodb)
    for index in range(20):
        put(dynamodb, f"acme/after-{index}")
    assert len(injector.injections) == 5


def test_a_partial_batch_failure_sends_some_entries_and_reports_the_others(dynamodb: Any) -> None:
    sqs = boto3.client("sqs", region_name="eu-west-1")
    url = sqs.create_queue(QueueName="runs")["QueueUrl"]
    injector = FaultInjector([FaultRule("sqs", frozenset({"SendMessageBatch"}), 1.0, ("partial",))])
    injector.install(sqs)
    response = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"body-{i}"} for i in range(4)]
    )
    assert sorted(entry["Id"] for entry in response["Successful"]) == ["0", "2"]
    assert sorted(entry["Id"] for entry in response["Failed"]) == ["1", "3"]
    bodies = {
        message["Body"] for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    }
    assert bodies == {"body-0", "body-2"}
    assert injector.counts == {"partial": 1}


def test_unknown_kinds_and_rates_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultRule("dynamodb", DYNAMODB_WRITES, 0.1, ("meteor",))
    with pytest.raises(ValueError, match="rate"):
        FaultRule("dynamodb", DYNAMODB_WRITES, 1.5)
