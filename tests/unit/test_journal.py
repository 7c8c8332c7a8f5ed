"""The local stack's write-ahead journal: the states successful writes left, in order, on disk before the
call returns; replayed over empty tables they give back the same items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from tickwork import tables
from tickwork_local.journal import JOURNAL_FILE, Journal, replay, written_keys
from tickwork_local.moto_dynamodb import stored_item

TABLE = tables.TENANTS.default_name
KEY = tables.TENANTS.partition_key.name


def item(name: str, **more: Any) -> dict[str, Any]:
    key = {KEY: {"S": name}}
    if tables.TENANTS.sort_key is not None:
        key[tables.TENANTS.sort_key.name] = {"S": "x"}
    return {**key, **{k: {"S": v} for k, v in more.items()}}


def scan(client: Any) -> list[dict[str, Any]]:
    return sorted(client.scan(TableName=TABLE)["Items"], key=json.dumps)


@pytest.fixture
def journaled(tmp_path: Path) -> Any:
    with mock_aws():
        session = boto3.session.Session()
        client = session.client("dynamodb")
        client.create_table(**tables.TENANTS.create_table_kwargs())
        syncs: list[int] = []
        journal = Journal(tmp_path, stored_item)
        journal.sync = lambda fd: syncs.append(fd)
        journal.attach(session.events)
        try:
            yield session.client("dynamodb"), journal, syncs
        finally:
            journal.close()


def test_each_successful_write_is_on_disk_before_the_call_returns(journaled: Any, tmp_path: Path) -> None:
    client, _, syncs = journaled
    client.put_item(TableName=TABLE, Item=item("a", colour="red"))
    # the state is in the file, and synced, as soon as put_item has returned
    [state] = list(replay(tmp_path))
    assert state == {
        "table": TABLE,
        "key": item("a"),
        "item": item("a", colour="red"),
    }
    assert len(syncs) == 1


def test_failed_and_read_calls_write_nothing(journaled: Any, tmp_path: Path) -> None:
    client, journal, _ = journaled
    client.put_item(TableName=TABLE, Item=item("a"))
    with pytest.raises(ClientError):
        client.put_item(TableName=TABLE, Item=item("a"), ConditionExpression=f"attribute_not_exists({KEY})")
    client.get_item(TableName=TABLE, Key=item("a"))
    client.scan(TableName=TABLE)
    assert len(list(replay(tmp_path))) == 1
    assert journal.lines == 1


def test_replaying_the_journal_gives_back_the_tables(journaled: Any, tmp_path: Path) -> None:
    client, _, _ = journaled
    client.put_item(TableName=TABLE, Item=item("a", colour="red"))
    client.put_item(TableName=TABLE, Item=item("b"))
    client.update_item(
        TableName=TABLE,
        Key=item("a"),
        UpdateExpression="SET colour = :c",
        ExpressionAttributeValues={":c": {"S": "blue"}},
    )
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": item("c")}},
            {"Delete": {"TableName": TABLE, "Key": item("b")}},
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": item("a"),
                    "ConditionExpression": "colour = :c",
                    "ExpressionAttributeValues": {":c": {"S": "blue"}},
                }
            },
        ]
    )
    client.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": item("d")}}]})
    client.delete_item(TableName=TABLE, Key=item("d"))
    expected = scan(client)
    # Applied to an empty table, once or twice, the states leave the same items
    client.delete_table(TableName=TABLE)
    client.create_table(**tables.TENANTS.create_table_kwargs())
    fresh = boto3.session.Session().client("dynamodb")
    for _ in range(2):
        for state in replay(tmp_path):
            if state["item"] is None:
                fresh.delete_item(TableName=state["table"], Key=state["key"])
            else:
                fresh.put_item(TableName=state["table"], Item=state["item"])
    assert scan(fresh) == expected
    assert [row[KEY]["S"] for row in expected] == ["a", "c"]


def test_a_line_cut_short_by_a_crash_is_left_out(tmp_path: Path) -> None:
    whole = {"table": TABLE, "key": item("a"), "item": item("a")}
    (tmp_path / JOURNAL_FILE).write_bytes(json.dumps(whole).encode() + b"\n" + b'{"table": "tick')
    assert list(replay(tmp_path)) == [whole]
    assert list(replay(tmp_path / "nowhere")) == []


def test_the_keys_each_kind_of_write_touches() -> None:
    put = {"TableName": TABLE, "Item": item("a", colour="red")}
    assert written_keys("PutItem", put) == [(TABLE, item("a"), "write")]
    assert written_keys("UpdateItem", {"TableName": TABLE, "Key": item("b")}) == [(TABLE, item("b"), "write")]
    assert written_keys("DeleteItem", {"TableName": TABLE, "Key": item("c")}) == [(TABLE, item("c"), "write")]
    transaction = {
        "TransactItems": [
            {"Put": put},
            {"ConditionCheck": {"TableName": TABLE, "Key": item("z")}},
        ]
    }
    assert written_keys("TransactWriteItems", transaction) == [
        (TABLE, item("a"), "write"),
        (TABLE, item("z"), "check"),
    ]
    batch = {
        "RequestItems": {TABLE: [{"PutRequest": {"Item": item("p")}}, {"DeleteRequest": {"Key": item("q")}}]}
    }
    assert written_keys("BatchWriteItem", batch) == [(TABLE, item("p"), "write"), (TABLE, item("q"), "write")]
    assert written_keys("GetItem", {"TableName": TABLE, "Key": item("a")}) == []


def test_writers_in_several_threads_share_fsyncs_and_each_returns_only_once_synced(
    journaled: Any, tmp_path: Path
) -> None:
    import threading
    import time

    from tickwork_local.atomic import serialise_dynamodb

    client, journal, syncs = journaled
    serialise_dynamodb(client.meta.events)
    synced_lines: list[int] = []

    def slow_sync(fd: int) -> None:
        time.sleep(0.02)  # a disk's fsync: other writers append meanwhile
        syncs.append(fd)
        synced_lines.append(sum(1 for _ in replay(tmp_path)))

    journal.sync = slow_sync
    returned_unsynced: list[str] = []

    def writer(number: int) -> None:
        for index in range(10):
            name = f"w{number}-{index}"
            client.put_item(TableName=TABLE, Item=item(name))
            on_disk = synced_lines[-1] if synced_lines else 0
            states = [state["key"][KEY]["S"] for state in list(replay(tmp_path))[:on_disk]]
            if name not in states:
                returned_unsynced.append(name)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert returned_unsynced == []
    assert journal.lines == 80
    assert len(syncs) < 80 / 2  # one fsync per write would be 80


def test_an_api_request_counter_is_journaled_without_waiting_for_the_disk(
    journaled: Any, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from tickwork.adapters.tenants import DynamoApiRateLimiter

    client, _, syncs = journaled
    limiter = DynamoApiRateLimiter(client, table=TABLE)
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
    limiter.take("acme", limit=5, now=now)
    limiter.take("acme", limit=5, now=now)
    assert syncs == []  # the calls returned without an fsync of their own
    # the next durable write's fsync covers them, in order
    client.put_item(TableName=TABLE, Item=item(tables.tenant_key("acme")))
    assert len(syncs) == 1
    states = list(replay(tmp_path))
    assert [state["key"][KEY]["S"] for state in states] == [tables.rate_limit_key("acme")] * 2 + [
        tables.tenant_key("acme")
    ]
    assert [state["item"][tables.RATE_COUNT]["N"] for state in states[:2]] == ["1", "2"]
