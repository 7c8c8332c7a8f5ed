"""The cost meter against capacity units worked out by hand from DynamoDB's published rules.

Sizes: an attribute costs its name's bytes plus its value's (a string's UTF-8 bytes; a number about one byte
per two digits, plus one). One WRU writes 1 KB; one RRU reads 4 KB strongly consistent, half that eventually
consistent; a transaction doubles; a query pays for what it evaluates, not what it returns.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from tickwork import tables

from bench._cost_meter import Meter, Tally, item_size

JOBS = tables.JOBS.default_name
RUNS = tables.RUNS.default_name


def key_of(name: str) -> dict[str, Any]:
    return {tables.RUNS_PK: {"S": name}, tables.RUNS_SK: {"S": "0"}}


def sized(key: str, total: int, **extra: dict[str, str]) -> dict[str, Any]:
    """A runs-table item of exactly ``total`` bytes: its key plus a padding attribute ``p``."""
    item: dict[str, Any] = {**key_of(key), **extra}
    room = total - item_size(item) - len("p")
    item["p"] = {"S": "x" * room}
    assert item_size(item) == total
    return item


@pytest.fixture
def metered(dynamodb: Any) -> tuple[Any, Tally]:
    meter = Meter(boto3.client("dynamodb", region_name="eu-west-1"))
    meter.attach(dynamodb)
    return dynamodb, meter.tally


def test_writes_cost_a_unit_per_kilobyte_of_the_larger_item_and_failed_conditions_pay_too(
    metered: tuple[Any, Tally],
) -> None:
    client, tally = metered
    client.put_item(TableName=RUNS, Item=sized("a", 1500))  # 2 WRU
    client.put_item(TableName=RUNS, Item=sized("b", 1024))  # exactly 1 KB: 1 WRU
    client.put_item(TableName=RUNS, Item=sized("b", 1025))  # replaces it, 1025 B: 2 WRU
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(  # fails on the 1.5 KB item it checked: still 2 WRU
            TableName=RUNS,
            Item=sized("a", 100),
            ConditionExpression="attribute_not_exists(pk)",
        )
    client.update_item(  # 1.5 KB before, about 100 B after: the larger, 2 WRU
        TableName=RUNS,
        Key=key_of("a"),
        UpdateExpression="REMOVE p",
    )
    client.delete_item(TableName=RUNS, Key=key_of("b"))  # 1025 B: 2 WRU
    assert tally.total("wru") == 2 + 1 + 2 + 2 + 2 + 2


def test_a_transaction_costs_twice_per_item(metered: tuple[Any, Tally]) -> None:
    client, tally = metered
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": RUNS, "Item": sized("t1", 900)}},  # 1 WRU, doubled
            {"Put": {"TableName": RUNS, "Item": sized("t2", 2100)}},  # 3 WRU, doubled
        ]
    )
    assert tally.wru["dynamodb.TransactWriteItems"] == 2 * (1 + 3)


def test_index_writes_count_per_entry_and_twice_when_a_key_moves(metered: tuple[Any, Tally]) -> None:
    client, tally = metered
    key = {tables.JOBS_PK: {"S": "acme"}, tables.JOBS_SK: {"S": "job#1"}}
    due = {tables.DUE_SHARD: {"N": "3"}, tables.DUE_AT: {"N": "1795000000000"}}
    client.put_item(TableName=JOBS, Item={**key, **due, "spec": {"S": "x" * 50}})  # into the due index: 1
    client.update_item(  # `spec` is not in the KEYS_ONLY index: 0
        TableName=JOBS,
        Key=key,
        UpdateExpression="SET spec = :s",
        ExpressionAttributeValues={":s": {"S": "y"}},
    )
    client.update_item(  # the index's sort key moves: a delete and a put, 2
        TableName=JOBS,
        Key=key,
        UpdateExpression="SET #at = :at",
        ExpressionAttributeNames={"#at": tables.DUE_AT},
        ExpressionAttributeValues={":at": {"N": "1795000060000"}},
    )
    client.update_item(  # out of the sparse index: 1
        TableName=JOBS,
        Key=key,
        UpdateExpression="REMOVE #shard",
        ExpressionAttributeNames={"#shard": tables.DUE_SHARD},
    )
    assert tally.total("index_wru") == 1 + 0 + 2 + 1
    assert tally.total("wru") == 4  # each table write of the small item: 1


def test_reads_pay_for_whole_items_whatever_the_projection_and_for_missing_items(
    metered: tuple[Any, Tally],
) -> None:
    client, tally = metered
    client.put_item(TableName=RUNS, Item=sized("big", 6000))
    client.put_item(TableName=RUNS, Item=sized("small", 1000))
    tally.rru.clear()
    # Strongly consistent, projected to one attribute: the whole 6,000 B item, 2 RRU
    client.get_item(TableName=RUNS, Key=key_of("big"), ConsistentRead=True, ProjectionExpression="pk")
    # Eventually consistent: half, 1 RRU
    client.get_item(TableName=RUNS, Key=key_of("big"))
    # A missing item: the minimum, 1 RRU
    client.get_item(TableName=RUNS, Key=key_of("none"), ConsistentRead=True)
    # A batch of one small item and one missing item, consistent: 1 + 1
    client.batch_get_item(
        RequestItems={
            RUNS: {
                "Keys": [key_of("small"), key_of("gone")],
                "ConsistentRead": True,
            }
        }
    )
    assert tally.rru["dynamodb.GetItem"] == 2 + 1 + 1
    assert tally.rru["dynamodb.BatchGetItem"] == 2


def test_a_query_pays_for_every_item_it_evaluates_before_its_filter(metered: tuple[Any, Tally]) -> None:
    client, tally = metered
    # Ten items of 1,000 B in one partition of the jobs table; one of them matches the filter
    for index in range(10):
        item = {
            tables.JOBS_PK: {"S": "acme"},
            tables.JOBS_SK: {"S": f"job#{index:02d}"},
            "status": {"S": "PAUSED" if index == 7 else "ACTIVE"},
        }
        item["p"] = {"S": "x" * (1000 - item_size(item) - 1)}
        assert item_size(item) == 1000
        client.put_item(TableName=JOBS, Item=item)
    tally.rru.clear()
    response = client.query(
        TableName=JOBS,
        KeyConditionExpression="pk = :t AND begins_with(sk, :job)",
        FilterExpression="#s = :paused",
        ProjectionExpression="sk",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":t": {"S": "acme"}, ":job": {"S": "job#"}, ":paused": {"S": "PAUSED"}},
        ConsistentRead=True,
    )
    assert len(response["Items"]) == 1
    # 10,000 B evaluated, rounded up once to 3 units of 4 KB, strongly consistent
    assert tally.rru["dynamodb.Query"] == 3
    # With Limit=4 it evaluates four items (4,000 B): 1 unit, eventually consistent: 0.5
    client.query(
        TableName=JOBS,
        KeyConditionExpression="pk = :t",
        FilterExpression="#s = :paused",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":t": {"S": "acme"}, ":paused": {"S": "PAUSED"}},
        Limit=4,
    )
    assert tally.rru["dynamodb.Query"] == 3 + 0.5


def test_an_index_query_pays_for_the_index_entries_it_evaluates(metered: tuple[Any, Tally]) -> None:
    client, tally = metered
    # Forty jobs with 3 KB of spec each, all due in shard 0: the KEYS_ONLY index holds only their keys
    for index in range(40):
        client.put_item(
            TableName=JOBS,
            Item={
                tables.JOBS_PK: {"S": "acme"},
                tables.JOBS_SK: {"S": f"job#{index:02d}"},
                tables.DUE_SHARD: {"N": "0"},
                tables.DUE_AT: {"N": str(1795000000000 + index)},
                "spec": {"S": "x" * 3000},
            },
        )
    tally.rru.clear()
    client.query(
        TableName=JOBS,
        IndexName=tables.DUE_INDEX,
        KeyConditionExpression="#shard = :s",
        ExpressionAttributeNames={"#shard": tables.DUE_SHARD},
        ExpressionAttributeValues={":s": {"N": "0"}},
    )
    entry = len("pk") + len("acme") + len("sk") + len("job#00") + len(tables.DUE_SHARD) + 2
    entry += len(tables.DUE_AT) + 8  # a 13-digit number: 7 bytes and 1
    # 40 entries of about 50 B: well under 4 KB, one unit, and index reads are eventually consistent
    assert 40 * entry < 4096
    assert tally.rru["dynamodb.Query"] == 0.5
