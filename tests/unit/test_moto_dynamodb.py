"""moto's DynamoDB as the local stack runs it (``tickwork_local.moto_dynamodb``): queries see only their
partition, transactions save only the items they touch, and every answer is the one the same data gives
when worked out by hand from a full scan."""

from __future__ import annotations

import random
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import Item
from tickwork import tables
from tickwork_local import moto_dynamodb

TABLE = tables.JOBS.default_name


@pytest.fixture
def client() -> Any:
    moto_dynamodb.install()
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(**tables.JOBS.create_table_kwargs())
        yield dynamodb


def job(number: int, *, shard: int | None, due: int | None, tenant: str = "acme") -> dict[str, Any]:
    item: dict[str, Any] = {
        tables.JOBS_PK: {"S": f"{tenant}#job-{number:05d}"},
        tables.JOBS_SK: {"S": tables.JOB_SK},
        tables.JOB_TENANT: {"S": tenant},
        tables.JOB_ID: {"S": f"job-{number:05d}"},
        "status": {"S": "ACTIVE"},
    }
    if shard is not None and due is not None:
        item[tables.DUE_SHARD] = {"N": str(shard)}
        item[tables.DUE_AT] = {"N": str(due)}
    return item


def due_query(client: Any, shard: int, **condition: Any) -> list[str]:
    """Every page of a due-index query, as the planner runs it, with a small page size."""
    found, start = [], None
    while True:
        kwargs: dict[str, Any] = {
            "TableName": TABLE,
            "IndexName": tables.DUE_INDEX,
            "KeyConditionExpression": f"#s = :s AND {condition['expression']}",
            "ExpressionAttributeNames": {"#s": tables.DUE_SHARD, "#d": tables.DUE_AT},
            "ExpressionAttributeValues": {":s": {"N": str(shard)}, **condition["values"]},
            "Limit": 7,
            "ScanIndexForward": condition.get("forward", True),
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = client.query(**kwargs)
        found += [item[tables.JOBS_PK]["S"] for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            return found


def by_hand(client: Any, shard: int, lowest: int, highest: int, *, forward: bool = True) -> list[str]:
    items = client.scan(TableName=TABLE)["Items"]
    chosen = [
        item
        for item in items
        if tables.DUE_SHARD in item
        and int(item[tables.DUE_SHARD]["N"]) == shard
        and lowest <= int(item[tables.DUE_AT]["N"]) <= highest
    ]
    chosen.sort(
        key=lambda item: (int(item[tables.DUE_AT]["N"]), item[tables.JOBS_PK]["S"]), reverse=not forward
    )
    return [item[tables.JOBS_PK]["S"] for item in chosen]


def test_index_queries_answer_as_a_full_scan_would_after_random_writes(client: Any) -> None:
    rng = random.Random(7)
    for round_number in range(600):
        number = rng.randrange(150)
        action = rng.random()
        if action < 0.45:
            placed = rng.random() < 0.8
            client.put_item(
                TableName=TABLE,
                Item=job(
                    number,
                    shard=rng.randrange(3) if placed else None,
                    due=rng.randrange(50) if placed else None,
                ),
            )
        elif action < 0.75:
            key = {tables.JOBS_PK: {"S": f"acme#job-{number:05d}"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
            if rng.random() < 0.5:
                client.update_item(
                    TableName=TABLE,
                    Key=key,
                    UpdateExpression="SET #d = :d, #s = :s",
                    ExpressionAttributeNames={"#d": tables.DUE_AT, "#s": tables.DUE_SHARD},
                    ExpressionAttributeValues={
                        ":d": {"N": str(rng.randrange(50))},
                        ":s": {"N": str(rng.randrange(3))},
                    },
                )
            else:  # the planner's way to take a job off the index
                client.update_item(
                    TableName=TABLE,
                    Key=key,
                    UpdateExpression="REMOVE #d, #s",
                    ExpressionAttributeNames={"#d": tables.DUE_AT, "#s": tables.DUE_SHARD},
                )
        elif action < 0.9:
            client.delete_item(
                TableName=TABLE,
                Key={tables.JOBS_PK: {"S": f"acme#job-{number:05d}"}, tables.JOBS_SK: {"S": tables.JOB_SK}},
            )
        else:
            client.batch_write_item(
                RequestItems={TABLE: [{"PutRequest": {"Item": job(number, shard=1, due=round_number % 50)}}]}
            )
        if round_number % 50 == 49:
            for shard in range(3):
                cut = rng.randrange(50)
                low, high = sorted((rng.randrange(50), rng.randrange(50)))
                # (key condition, its values, the lowest and highest due time it keeps)
                cases: list[tuple[str, dict[str, Any], int, int]] = [
                    ("#d <= :a", {":a": {"N": str(cut)}}, -1, cut),
                    ("#d < :a", {":a": {"N": str(cut)}}, -1, cut - 1),
                    ("#d >= :a", {":a": {"N": str(cut)}}, cut, 99),
                    ("#d > :a", {":a": {"N": str(cut)}}, cut + 1, 99),
                    ("#d = :a", {":a": {"N": str(cut)}}, cut, cut),
                    ("#d BETWEEN :a AND :b", {":a": {"N": str(low)}, ":b": {"N": str(high)}}, low, high),
                ]
                for expression, values, lowest, highest in cases:
                    for forward in (True, False):
                        condition = {"expression": expression, "values": values, "forward": forward}
                        expected = by_hand(client, shard, lowest, highest, forward=forward)
                        assert due_query(client, shard, **condition) == expected


def test_table_queries_see_their_partition_only(client: Any) -> None:
    for number in range(40):
        client.put_item(TableName=TABLE, Item=job(number, shard=0, due=number))
        client.put_item(
            TableName=TABLE,
            Item={tables.JOBS_PK: {"S": f"acme#job-{number:05d}"}, tables.JOBS_SK: {"S": tables.LANE_SK}},
        )
    found = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "acme#job-00007"}},
    )["Items"]
    assert [item[tables.JOBS_SK]["S"] for item in found] == [tables.JOB_SK, tables.LANE_SK]
    assert (
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "nobody"}},
        )["Items"]
        == []
    )


def test_a_failed_transaction_leaves_items_and_index_as_they_were(client: Any) -> None:
    client.put_item(TableName=TABLE, Item=job(1, shard=0, due=5))
    client.put_item(TableName=TABLE, Item=job(2, shard=0, due=6))
    before = sorted(client.scan(TableName=TABLE)["Items"], key=str)
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": job(3, shard=0, due=1)}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {
                            tables.JOBS_PK: {"S": "acme#job-00001"},
                            tables.JOBS_SK: {"S": tables.JOB_SK},
                        },
                        "UpdateExpression": "SET #d = :d",
                        "ExpressionAttributeNames": {"#d": tables.DUE_AT},
                        "ExpressionAttributeValues": {":d": {"N": "2"}},
                    }
                },
                {
                    "Delete": {
                        "TableName": TABLE,
                        "Key": {
                            tables.JOBS_PK: {"S": "acme#job-00002"},
                            tables.JOBS_SK: {"S": tables.JOB_SK},
                        },
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": {
                            tables.JOBS_PK: {"S": "acme#job-00009"},
                            tables.JOBS_SK: {"S": tables.JOB_SK},
                        },
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert sorted(client.scan(TableName=TABLE)["Items"], key=str) == before
    condition = {"expression": "#d <= :a", "values": {":a": {"N": "100"}}}
    assert due_query(client, 0, **condition) == ["acme#job-00001", "acme#job-00002"]


def test_a_transaction_copies_the_items_it_touches_not_the_table(client: Any, monkeypatch: Any) -> None:
    client.batch_write_item(
        RequestItems={
            TABLE: [{"PutRequest": {"Item": job(number, shard=0, due=number)}} for number in range(25)]
        }
    )
    for start in range(25, 2000, 25):
        client.batch_write_item(
            RequestItems={
                TABLE: [{"PutRequest": {"Item": job(n, shard=0, due=n)}} for n in range(start, start + 25)]
            }
        )
    copies = []
    original = Item.__deepcopy__

    def counted(self: Item, memo: dict[int, Any]) -> Item:
        copies.append(self)
        return original(self, memo)

    monkeypatch.setattr(Item, "__deepcopy__", counted)
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": job(5000, shard=0, due=1)}},
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": {tables.JOBS_PK: {"S": "acme#job-00001"}, tables.JOBS_SK: {"S": tables.JOB_SK}},
                    "UpdateExpression": "SET #d = :d",
                    "ExpressionAttributeNames": {"#d": tables.DUE_AT},
                    "ExpressionAttributeValues": {":d": {"N": "2"}},
                }
            },
        ]
    )
    # moto on its own deep-copies all 2,000 items of the table; here the two touched items (and the
    # updated item's own copy that moto keeps for streams)
    assert len(copies) <= 4


EVERY_TYPE: dict[str, Any] = {
    "text": {"S": "héllo"},
    "number": {"N": "12.5"},
    "blob": {"B": b"\x00\xffbytes"},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "texts": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2"]},
    "blobs": {"BS": [b"\x01", b"\x02"]},
    "nested": {"M": {"list": {"L": [{"S": "x"}, {"N": "3"}, {"M": {"deep": {"B": b"\x10"}}}]}}},
}


def _every_type_item(number: int) -> dict[str, Any]:
    return {**job(number, shard=0, due=number), **EVERY_TYPE}


def test_item_answers_are_written_as_json_with_every_attribute_type_intact(
    client: Any, monkeypatch: Any
) -> None:
    from moto.core.serialize import JSONSerializer

    serialized: list[Any] = []
    original = JSONSerializer.serialize

    def counted(self: Any, result: Any) -> Any:
        serialized.append(result)
        return original(self, result)

    monkeypatch.setattr(JSONSerializer, "serialize", counted)
    key = {tables.JOBS_PK: {"S": "acme#job-00007"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    item = _every_type_item(7)
    client.put_item(TableName=TABLE, Item=item)
    assert client.get_item(TableName=TABLE, Key=key)["Item"] == item
    assert client.query(
        TableName=TABLE,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": tables.JOBS_PK},
        ExpressionAttributeValues={":pk": key[tables.JOBS_PK]},
        ReturnConsumedCapacity="TOTAL",
    )["Items"] == [item]
    assert client.scan(TableName=TABLE)["Items"] == [item]
    assert client.batch_get_item(RequestItems={TABLE: {"Keys": [key]}})["Responses"][TABLE] == [item]
    assert client.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": key}}])[
        "Responses"
    ] == [{"Item": item}]
    updated = client.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET #n = #n + :one",
        ExpressionAttributeNames={"#n": "number"},
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert updated == {**item, "number": {"N": "13.5"}}
    assert client.delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD")["Attributes"] == updated
    assert "Item" not in client.get_item(TableName=TABLE, Key=key)
    assert serialized == []  # none of these took moto's shape-walking serializer
    # An error still takes moto's path, with its code and message.
    with pytest.raises(ClientError) as failed:
        client.put_item(
            TableName=TABLE,
            Item=item,
            ConditionExpression="attribute_exists(#pk)",
            ExpressionAttributeNames={"#pk": tables.JOBS_PK},
        )
    assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_a_cached_expression_is_evaluated_with_each_request_s_own_values(client: Any) -> None:
    key = {tables.JOBS_PK: {"S": "acme#job-00001"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    client.put_item(TableName=TABLE, Item={**job(1, shard=0, due=1), "count": {"N": "0"}})
    update = {
        "TableName": TABLE,
        "Key": key,
        "UpdateExpression": "SET #c = #c + :step, #s = :next",
        "ConditionExpression": "#s = :expected AND #c < :limit",
        "ExpressionAttributeNames": {"#c": "count", "#s": "status"},
        "ReturnValues": "ALL_NEW",
    }
    steps = [("ACTIVE", "PAUSED", "5"), ("PAUSED", "ACTIVE", "7")]
    for expected, following, step in steps:
        answer = client.update_item(
            **update,
            ExpressionAttributeValues={
                ":step": {"N": step},
                ":next": {"S": following},
                ":expected": {"S": expected},
                ":limit": {"N": "100"},
            },
        )["Attributes"]
        assert answer["status"] == {"S": following}
    assert answer["count"] == {"N": "12"}
    for _ in range(2):  # a refusal is never cached as a success, nor a success as a refusal
        with pytest.raises(ClientError) as refused:
            client.update_item(
                **update,
                ExpressionAttributeValues={
                    ":step": {"N": "1"},
                    ":next": {"S": "X"},
                    ":expected": {"S": "ACTIVE"},
                    ":limit": {"N": "12"},
                },
            )
        assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    for _ in range(2):
        with pytest.raises(ClientError) as malformed:
            client.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET = :v",
                ExpressionAttributeValues={":v": {"N": "1"}},
            )
        assert malformed.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize(
    ("condition", "values", "expected"),
    [
        ("#d <= :x", {":x": {"N": "4"}}, 5),
        ("#d < :x", {":x": {"N": "4"}}, 4),
        ("#d = :x", {":x": {"N": "1500"}}, 1),
        ("#d >= :x", {":x": {"N": "1995"}}, 5),
        ("#d > :x", {":x": {"N": "1995"}}, 4),
        ("#d BETWEEN :x AND :y", {":x": {"N": "10"}, ":y": {"N": "12"}}, 3),
    ],
)
def test_an_index_query_hands_moto_only_the_items_in_its_sort_key_range(
    client: Any, monkeypatch: Any, condition: str, values: dict[str, Any], expected: int
) -> None:
    for start in range(0, 2000, 25):
        client.batch_write_item(
            RequestItems={
                TABLE: [{"PutRequest": {"Item": job(n, shard=0, due=n)}} for n in range(start, start + 25)]
            }
        )
    handed: list[int] = []
    original = moto_dynamodb._query_candidates

    def counted(*args: Any) -> Any:
        candidates = original(*args)
        handed.append(-1 if candidates is None else len(candidates))
        return candidates

    monkeypatch.setattr(moto_dynamodb, "_query_candidates", counted)
    found = due_query(client, 0, expression=condition, values=values)
    assert len(found) == expected
    # Every page is answered from the candidates in range, never from the shard's 2,000 items.
    assert handed and all(0 <= count <= expected for count in handed)


def test_items_loaded_in_bulk_answer_queries_as_items_put_one_by_one(client: Any) -> None:
    items = [job(number, shard=number % 3, due=(number * 7919) % 1000) for number in range(600)]
    moto_dynamodb.load_items(TABLE, items)
    assert len(client.scan(TableName=TABLE)["Items"]) == 600
    for shard in range(3):
        expected = sorted(
            (int(item[tables.DUE_AT]["N"]), item[tables.JOBS_PK]["S"])
            for item in items
            if item[tables.DUE_SHARD]["N"] == str(shard) and int(item[tables.DUE_AT]["N"]) <= 500
        )
        found = due_query(client, shard, expression="#d <= :x", values={":x": {"N": "500"}})
        assert found == [pk for _, pk in expected]
    # A write after the bulk load moves the item in the index as usual.
    client.put_item(TableName=TABLE, Item=job(1, shard=2, due=1))
    assert "acme#job-00001" in due_query(client, 2, expression="#d <= :x", values={":x": {"N": "1"}})


def test_restored_items_are_typed_when_first_used_and_saved_as_they_are_until_then(client: Any) -> None:
    import copy
    import threading

    nested = {
        "M": {"list": {"L": [{"N": "1"}, {"S": "two"}, {"M": {"x": {"BOOL": True}}}]}, "n": {"NULL": True}}
    }
    items = [{**job(number, shard=0, due=number), "extra": nested} for number in range(50)]
    moto_dynamodb.load_items(TABLE, copy.deepcopy(items))
    table = moto_dynamodb._backend().get_table(TABLE)
    stored = {item.hash_key.value: item for item in moto_dynamodb._every_item(table)}

    def untyped() -> set[str]:
        return {pk for pk, item in stored.items() if moto_dynamodb._saved_form(item) is not None}

    assert len(untyped()) == 50
    # an index query types only what it answers with; its answers are the saved items
    found = due_query(client, 0, expression="#d <= :x", values={":x": {"N": "2"}})
    assert found == ["acme#job-00000", "acme#job-00001", "acme#job-00002"]
    key = {tables.JOBS_PK: {"S": "acme#job-00003"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    assert client.get_item(TableName=TABLE, Key=key)["Item"] == items[3]
    assert len(untyped()) >= 46
    # a write types the item first; the snapshot then has the change, and the others as saved
    client.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET #e.#l[0] = :v",
        ExpressionAttributeNames={"#e": "extra", "#l": "list"},
        ExpressionAttributeValues={":v": {"N": "10"}},
    )
    saved = {item[tables.JOBS_PK]["S"]: item for item in moto_dynamodb.stored_items(TABLE)}
    assert saved["acme#job-00003"]["extra"]["M"]["list"]["L"][0] == {"N": "10"}
    assert all(saved[item[tables.JOBS_PK]["S"]] == item for item in items if item is not items[3])
    # a failed transaction puts back a restored item it had touched
    refused_key = {tables.JOBS_PK: {"S": "acme#job-00010"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    with pytest.raises(ClientError):
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": refused_key,
                        "UpdateExpression": "SET colour = :c",
                        "ExpressionAttributeValues": {":c": {"S": "red"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": key,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert client.get_item(TableName=TABLE, Key=refused_key)["Item"] == items[10]
    # threads typing the same item at once all see one set of attributes
    item = stored["acme#job-00020"]
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(id(item.attrs))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1 and moto_dynamodb._saved_form(item) is None


def test_the_item_size_limit_is_moto_s_checked_once_per_item(client: Any) -> None:
    base = job(1, shard=0, due=1)
    base_size = sum(len(name) + len(next(iter(value.values()))) for name, value in base.items())
    fits = {**base, "payload": {"S": "x" * (405000 - base_size - len("payload"))}}
    client.put_item(TableName=TABLE, Item=fits)
    too_large = {**base, "payload": {"S": "x" * (405001 - base_size - len("payload"))}}
    with pytest.raises(ClientError) as refused:
        client.put_item(TableName=TABLE, Item=too_large)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "size" in refused.value.response["Error"]["Message"].lower()


def test_an_update_s_shape_is_checked_again_when_its_names_change(client: Any) -> None:
    key = {tables.JOBS_PK: {"S": "acme#job-00001"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    client.put_item(TableName=TABLE, Item=job(1, shard=0, due=1))
    update = {"TableName": TABLE, "Key": key, "UpdateExpression": "SET #a = :v"}
    for _ in range(2):  # the second time, the shape checks of this expression and names are skipped
        client.update_item(
            **update,
            ExpressionAttributeNames={"#a": "colour"},
            ExpressionAttributeValues={":v": {"S": "red"}},
        )
    # The same expression naming a key attribute is refused, as moto refuses it on its own.
    with pytest.raises(ClientError) as refused:
        client.update_item(
            **update,
            ExpressionAttributeNames={"#a": tables.JOBS_PK},
            ExpressionAttributeValues={":v": {"S": "x"}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "part of the key" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as overlapping:
        client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET #a = :v, #b = :v",
            ExpressionAttributeNames={"#a": "colour", "#b": "colour"},
            ExpressionAttributeValues={":v": {"S": "x"}},
        )
    assert "overlap" in overlapping.value.response["Error"]["Message"].lower()
    assert client.get_item(TableName=TABLE, Key=key)["Item"]["colour"] == {"S": "red"}


def test_a_condition_parsed_once_is_built_again_with_each_request_s_names_and_values(client: Any) -> None:
    key = {tables.JOBS_PK: {"S": "acme#job-00001"}, tables.JOBS_SK: {"S": tables.JOB_SK}}
    client.put_item(
        TableName=TABLE, Item={**job(1, shard=0, due=1), "count": {"N": "3"}, "colour": {"S": "red"}}
    )

    def holds(condition: str, names: dict[str, str], values: dict[str, Any]) -> bool:
        try:
            client.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #t = :t",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#t": "touched", **names},
                ExpressionAttributeValues={":t": {"S": "yes"}, **values},
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    condition = "#a = :v"
    # the same expression: other values, another attribute, another type of value
    assert holds(condition, {"#a": "colour"}, {":v": {"S": "red"}})
    assert not holds(condition, {"#a": "colour"}, {":v": {"S": "blue"}})
    assert holds(condition, {"#a": "count"}, {":v": {"N": "3"}})
    assert not holds(condition, {"#a": "count"}, {":v": {"N": "4"}})
    assert not holds(condition, {"#a": "count"}, {":v": {"S": "3"}})
    assert holds("#a BETWEEN :low AND :high", {"#a": "count"}, {":low": {"N": "1"}, ":high": {"N": "3"}})
    assert not holds("#a BETWEEN :low AND :high", {"#a": "count"}, {":low": {"N": "4"}, ":high": {"N": "9"}})
    # updates naming other attributes each time share their condition's tree, each with its own values
    for number in range(3):
        answer = client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET #x = :t",
            ConditionExpression="#a = :v OR #a = :w",
            ExpressionAttributeNames={"#x": f"touched-{number}", "#a": "colour"},
            ExpressionAttributeValues={":t": {"N": str(number)}, ":v": {"S": "red"}, ":w": {"S": "none"}},
            ReturnValues="UPDATED_NEW",
        )
        assert answer["Attributes"] == {f"touched-{number}": {"N": str(number)}}
    assert not holds("#a = :v OR #a = :w", {"#a": "colour"}, {":v": {"S": "blue"}, ":w": {"S": "none"}})
    # the same in a transaction's condition check
    check = {"TableName": TABLE, "Key": key, "ConditionExpression": condition}
    client.transact_write_items(
        TransactItems=[
            {
                "ConditionCheck": {
                    **check,
                    "ExpressionAttributeNames": {"#a": "colour"},
                    "ExpressionAttributeValues": {":v": {"S": "red"}},
                }
            }
        ]
    )
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        **check,
                        "ExpressionAttributeNames": {"#a": "colour"},
                        "ExpressionAttributeValues": {":v": {"S": "green"}},
                    }
                }
            ]
        )
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    # refusals of the request itself, each twice: never cached as a success
    for _ in range(2):
        with pytest.raises(ClientError) as unused:
            holds(condition, {"#a": "colour"}, {":v": {"S": "red"}, ":spare": {"S": "x"}})
        assert "unused" in unused.value.response["Error"]["Message"].lower()
        with pytest.raises(ClientError) as malformed:
            holds("((#a = :v))", {"#a": "colour"}, {":v": {"S": "red"}})
        assert malformed.value.response["Error"]["Code"] == "ValidationException"
    assert client.get_item(TableName=TABLE, Key=key)["Item"]["count"] == {"N": "3"}


def test_updates_answer_as_moto_as_released_answers_them() -> None:
    """The same battery of updates, on moto as released (a fresh interpreter) and on moto with the local
    stack's changes: the same items after each, the same errors."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support import update_battery

    root = Path(__file__).resolve().parents[2]
    released = subprocess.run(
        [sys.executable, "-m", "tests.support.update_battery"],
        cwd=root,
        env={
            **os.environ,
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    moto_dynamodb.install()
    with mock_aws():
        changed = update_battery.run(boto3.client("dynamodb", region_name="us-east-1"))
    assert len(released) == 2 * len(update_battery.STEPS)
    assert changed == released


def _compared_with_released(battery: Any, at_least: int) -> None:
    """Run ``battery`` on moto as released (its module in a fresh interpreter, run meanwhile) and on moto with
    the local stack's changes, and compare every line of their answers."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    released = subprocess.Popen(
        [sys.executable, "-m", battery.__name__],
        cwd=root,
        env={
            **os.environ,
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
        stdout=subprocess.PIPE,
        text=True,
    )
    moto_dynamodb.install()
    with mock_aws():
        changed = battery.run(boto3.client("dynamodb", region_name="us-east-1"))
    output, _ = released.communicate(timeout=600)
    assert released.returncode == 0
    expected = output.splitlines()
    assert len(expected) > at_least
    mismatched = [(mine, theirs) for mine, theirs in zip(changed, expected, strict=False) if mine != theirs]
    assert not mismatched[:3]
    assert len(changed) == len(expected)


def test_table_queries_answer_as_moto_as_released_answers_them() -> None:
    """The same battery of queries, with writes and deletes between its rounds, on moto as released (a
    fresh interpreter, run meanwhile) and on moto with the local stack's changes: the same Items, Count,
    ScannedCount and LastEvaluatedKey on every page, the same errors."""
    from tests.support import query_battery

    _compared_with_released(query_battery, 5_000)


def test_index_queries_answer_as_moto_as_released_answers_them() -> None:
    """The same battery of queries over the failures, attention and due indexes (ties in their sort keys),
    with writes and deletes between its rounds that move items in and out of them, on moto as released (a
    fresh interpreter, run meanwhile) and on moto with the local stack's changes: the same Items, Count,
    ScannedCount and LastEvaluatedKey on every page, the same errors."""
    from tests.support import index_battery

    _compared_with_released(index_battery, 20_000)


def test_an_index_query_hands_moto_only_the_entries_its_walk_reaches(client: Any, monkeypatch: Any) -> None:
    """A page of a tenant's failures, newest first, and the page after its cursor: a page and one entry
    each, not the index partition."""
    runs = tables.RUNS.default_name
    client.create_table(**tables.RUNS.create_table_kwargs(stream=False))
    items = [
        {
            tables.RUNS_PK: {"S": f"acme#job-{n % 50:02d}"},
            tables.RUNS_SK: {"S": f"{n:013d}"},
            tables.FAILURE_TENANT: {"S": "acme"},
            tables.FAILURE_AT: {"S": f"{n:013d}#run-{n}"},
            "status": {"S": "DEAD" if n % 2 else "FAILED"},
        }
        for n in range(3000)
    ]
    moto_dynamodb.load_items(runs, items)
    handed: list[int] = []
    original = moto_dynamodb._query_candidates

    def counted(*args: Any) -> Any:
        candidates = original(*args)
        handed.append(-1 if candidates is None else len(candidates))
        return candidates

    monkeypatch.setattr(moto_dynamodb, "_query_candidates", counted)
    low, high = tables.history_bounds(None, None)
    request: dict[str, Any] = {
        "TableName": runs,
        "IndexName": tables.FAILURES_INDEX,
        "KeyConditionExpression": "#t = :t AND #a BETWEEN :low AND :high",
        "FilterExpression": "#s = :s",
        "ExpressionAttributeNames": {"#t": tables.FAILURE_TENANT, "#a": tables.FAILURE_AT, "#s": "status"},
        "ExpressionAttributeValues": {
            ":t": {"S": "acme"},
            ":low": {"S": low},
            ":high": {"S": high},
            ":s": {"S": "DEAD"},
        },
        "ScanIndexForward": False,
        "Limit": 100,
    }
    first = client.query(**request)
    second = client.query(**request, ExclusiveStartKey=first["LastEvaluatedKey"])
    assert [item["sk"]["S"] for item in first["Items"] + second["Items"]] == [
        f"{n:013d}" for n in range(2999, 2799, -2)
    ]
    assert second["LastEvaluatedKey"][tables.FAILURE_AT] == {"S": f"{2800:013d}#run-2800"}
    assert handed == [101, 101]


def test_a_table_query_hands_moto_only_the_items_its_walk_reaches(client: Any, monkeypatch: Any) -> None:
    """A job's latest run, a page of its newest, a page after a cursor: a few items each, not its history."""
    partition = "acme#job-history"
    for start in range(0, 3000, 25):
        client.batch_write_item(
            RequestItems={
                TABLE: [
                    {
                        "PutRequest": {
                            "Item": {tables.JOBS_PK: {"S": partition}, tables.JOBS_SK: {"S": f"{n:013d}"}}
                        }
                    }
                    for n in range(start, start + 25)
                ]
            }
        )
    handed: list[int] = []
    original = moto_dynamodb._walk_candidates

    def counted(*args: Any) -> Any:
        candidates = original(*args)
        handed.append(-1 if candidates is None else len(candidates))
        return candidates

    monkeypatch.setattr(moto_dynamodb, "_walk_candidates", counted)

    def query(condition: str, values: dict[str, Any], **more: Any) -> dict[str, Any]:
        answer: dict[str, Any] = client.query(
            TableName=TABLE,
            KeyConditionExpression="#pk = :pk AND " + condition,
            ExpressionAttributeNames={"#pk": tables.JOBS_PK, "#sk": tables.JOBS_SK},
            ExpressionAttributeValues={":pk": {"S": partition}, **values},
            **more,
        )
        return answer

    latest = query("#sk < :end", {":end": {"S": f"{2500:013d}"}}, ScanIndexForward=False, Limit=1)
    assert [item[tables.JOBS_SK]["S"] for item in latest["Items"]] == [f"{2499:013d}"]
    page = query("#sk < :end", {":end": {"S": ":"}}, ScanIndexForward=False, Limit=20)
    assert len(page["Items"]) == 20 and page["LastEvaluatedKey"][tables.JOBS_SK] == {"S": f"{2980:013d}"}
    after = query(
        "#sk < :end",
        {":end": {"S": ":"}},
        ScanIndexForward=False,
        Limit=20,
        ExclusiveStartKey=page["LastEvaluatedKey"],
    )
    assert after["Items"][0][tables.JOBS_SK] == {"S": f"{2979:013d}"}
    between = query("#sk BETWEEN :a AND :b", {":a": {"S": f"{10:013d}"}, ":b": {"S": f"{12:013d}"}})
    assert [item[tables.JOBS_SK]["S"] for item in between["Items"]] == [f"{n:013d}" for n in (10, 11, 12)]
    prefix = query("begins_with(#sk, :p)", {":p": {"S": f"{150:012d}"}}, Limit=4)
    assert [item[tables.JOBS_SK]["S"] for item in prefix["Items"]] == [f"{n:013d}" for n in range(1500, 1504)]
    # Each query was handed its page and the next item, never the partition's 3,000
    assert handed == [2, 21, 21, 3, 5]
