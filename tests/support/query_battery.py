"""A battery of Query requests over table partitions, with writes and deletes between its rounds; prints
each answer (or error) as JSON lines.

Run as a script it uses moto as released; imported, ``run`` uses whatever moto the caller set up. The local
stack's changes to moto must give the same lines (``tests/unit/test_moto_dynamodb.py``): the same Items,
Count, ScannedCount and LastEvaluatedKey for every sort key condition, direction, Limit, exclusive start
key and filter, and for every page of a paginated query."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

TEXT = "battery-text"  # string sort keys, as the runs table's
NUMBER = "battery-number"  # number sort keys
BASE = 1_700_000_000_000
BIG = "x" * 200_000  # five such items fill a 1 MB page

# Sort key conditions: (expression, values) with :a and :b as the bounds.
TEXT_BOUNDS = [
    str(BASE - 5),  # below every key
    str(BASE),  # the first key
    str(BASE + 7_000),  # a key
    str(BASE + 7_500),  # between keys
    str(BASE + 7_000) + "#",  # a manual run's key shares the prefix
    str(BASE + 39_000),  # the last history key
    ":",  # above every history key, below the pointers
    "m#",  # the pointers' prefix
    "z",  # above every key
]
NUMBER_BOUNDS = ["-1000", "-2.5", "0", "3", "3.5", "17", "58", "1e3"]
PREFIXES = ["", "1", "17000000000", str(BASE + 7_000), "m#", "m#a", "q"]


def _conditions(bounds: list[str], kind: str) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = [("", {})]
    for operator in ("=", "<", "<=", ">", ">="):
        for bound in bounds:
            found.append((f" AND #sk {operator} :a", {":a": {kind: bound}}))
    for low in bounds[::3]:
        for high in bounds[1::3]:
            found.append((" AND #sk BETWEEN :a AND :b", {":a": {kind: low}, ":b": {kind: high}}))
    if kind == "S":
        for prefix in PREFIXES:
            if prefix:
                found.append((" AND begins_with(#sk, :a)", {":a": {"S": prefix}}))
    return found


def _outcome(call: Any) -> Any:
    try:
        answer = call()
    except Exception as error:
        response = getattr(error, "response", {}).get("Error", {})
        return {"error": [type(error).__name__, response.get("Code"), response.get("Message")]}
    answer.pop("ResponseMetadata", None)
    return answer


def _line(request: dict[str, Any], outcome: Any) -> str:
    return json.dumps({"request": request, "answer": outcome}, sort_keys=True, default=str)


def _pages(client: Any, request: dict[str, Any], lines: list[str], most: int = 200) -> None:
    """Every page of a query, each answer a line, following LastEvaluatedKey."""
    request = dict(request)
    for _ in range(most):
        outcome = _outcome(lambda: client.query(**request))
        lines.append(_line(request, outcome))
        start = outcome.get("LastEvaluatedKey") if isinstance(outcome, dict) else None
        if not start:
            return
        request["ExclusiveStartKey"] = start


def _create(client: Any) -> None:
    for name, kind in ((TEXT, "S"), (NUMBER, "N")):
        client.create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": kind},
            ],
            BillingMode="PAY_PER_REQUEST",
        )


def _text_item(partition: str, key: str, number: int, **extra: Any) -> dict[str, Any]:
    item = {
        "pk": {"S": partition},
        "sk": {"S": key},
        "status": {"S": "SUCCEEDED" if number % 3 else "FAILED"},
        "n": {"N": str(number)},
    }
    item.update(extra)
    return item


def _seed(client: Any) -> None:
    for number in range(40):
        client.put_item(TableName=TEXT, Item=_text_item("t/job", str(BASE + number * 1_000), number))
    for number in (7, 12, 30):
        manual = f"{BASE + number * 1_000}#{number:02x}"
        client.put_item(TableName=TEXT, Item=_text_item("t/job", manual, number + 100))
        client.put_item(
            TableName=TEXT,
            Item={"pk": {"S": "t/job"}, "sk": {"S": f"m#{number:02x}"}, "run_sk": {"S": manual}},
        )
    for number in range(5):
        client.put_item(TableName=TEXT, Item=_text_item("t/other", str(BASE + number * 1_000), number))
    # Large items: pages end at 1 MB, inside and beyond a condition's range.
    for number in range(9):
        item = _text_item("t/big", str(BASE + number * 1_000), number, blob={"S": BIG})
        client.put_item(TableName=TEXT, Item=item)
    for value in ("-7", "-2.5", "0", "1", "3", "3.5", "10", "17", "42", "58", "100"):
        client.put_item(TableName=NUMBER, Item={"pk": {"S": "n"}, "sk": {"N": value}, "n": {"N": value}})


def _query(table: str, partition: str, condition: str, values: dict[str, Any], **more: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk" + condition,
        "ExpressionAttributeNames": {"#pk": "pk", **({"#sk": "sk"} if "#sk" in condition else {})},
        "ExpressionAttributeValues": {":pk": {"S": partition}, **values},
    }
    request.update(more)
    if "FilterExpression" in more:
        request["ExpressionAttributeNames"]["#st"] = "status"
    return request


def _round(client: Any, lines: list[str]) -> None:
    for table, partition, bounds, kind in (
        (TEXT, "t/job", TEXT_BOUNDS, "S"),
        (NUMBER, "n", NUMBER_BOUNDS, "N"),
    ):
        for condition, values in _conditions(bounds, kind):
            for forward in (True, False):
                for limit in (None, 1, 4):
                    more: dict[str, Any] = {"ScanIndexForward": forward}
                    if limit is not None:
                        more["Limit"] = limit
                    # a Limit of 1 as the worker asks for the latest run: two pages of it
                    most = 2 if limit == 1 else 200
                    _pages(client, _query(table, partition, condition, values, **more), lines, most)
    # Filters (applied after the Limit), counts, projections, consistent reads
    for condition, values in _conditions(TEXT_BOUNDS[1:7:2], "S"):
        for forward in (True, False):
            filtered = {**values, ":st": {"S": "FAILED"}}
            for limit in (None, 2, 5):
                more = {"ScanIndexForward": forward, "FilterExpression": "#st = :st"}
                if limit is not None:
                    more["Limit"] = limit
                _pages(client, _query(TEXT, "t/job", condition, filtered, **more), lines)
            request = _query(TEXT, "t/job", condition, values, ScanIndexForward=forward, Select="COUNT")
            _pages(client, request, lines)
            request = _query(
                TEXT, "t/job", condition, values, ScanIndexForward=forward, Limit=4, ProjectionExpression="n"
            )
            _pages(client, request, lines)
    # Exclusive start keys made by hand: a key that is not stored, one outside the range, another
    # partition's, one without its sort key
    starts = [
        {"pk": {"S": "t/job"}, "sk": {"S": str(BASE + 7_500)}},
        {"pk": {"S": "t/job"}, "sk": {"S": str(BASE - 1)}},
        {"pk": {"S": "t/job"}, "sk": {"S": "zz"}},
        {"pk": {"S": "t/job"}, "sk": {"S": "m#0c"}},
        {"pk": {"S": "t/other"}, "sk": {"S": str(BASE + 2_000)}},
        {"pk": {"S": "t/job"}},
    ]
    for start in starts:
        for condition, values in _conditions(TEXT_BOUNDS[2:6], "S")[::3]:
            for forward in (True, False):
                for limit in (None, 2):
                    more = {"ScanIndexForward": forward, "ExclusiveStartKey": start}
                    if limit is not None:
                        more["Limit"] = limit
                    _pages(client, _query(TEXT, "t/job", condition, values, **more), lines)
    # Pages that end at 1 MB, with the condition's range ending before the partition does
    for condition, values in (
        ("", {}),
        (" AND #sk < :a", {":a": {"S": str(BASE + 4_000)}}),
        (" AND #sk > :a", {":a": {"S": str(BASE + 4_000)}}),
        (" AND #sk BETWEEN :a AND :b", {":a": {"S": str(BASE + 1_000)}, ":b": {"S": str(BASE + 4_500)}}),
        (" AND #sk BETWEEN :a AND :b", {":a": {"S": str(BASE + 2_000)}, ":b": {"S": str(BASE + 6_000)}}),
    ):
        for forward in (True, False):
            for limit in (None, 4, 5, 6):
                more = {"ScanIndexForward": forward, "ProjectionExpression": "pk, sk"}
                if limit is not None:
                    more["Limit"] = limit
                _pages(client, _query(TEXT, "t/big", condition, values, **more), lines)
    # Partitions with nothing in them; the legacy interface
    _pages(client, _query(TEXT, "nobody", " AND #sk < :a", {":a": {"S": "z"}}, Limit=2), lines)
    for operator, bounds in (("BETWEEN", TEXT_BOUNDS[1:3]), ("BEGINS_WITH", ["m#"]), ("LT", [":"])):
        for forward in (True, False):
            request = {
                "TableName": TEXT,
                "KeyConditions": {
                    "pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "t/job"}]},
                    "sk": {"ComparisonOperator": operator, "AttributeValueList": [{"S": b} for b in bounds]},
                },
                "ScanIndexForward": forward,
                "Limit": 3,
            }
            _pages(client, request, lines)
            request["QueryFilter"] = {
                "status": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "FAILED"}]}
            }
            _pages(client, request, lines)


def _change(client: Any, step: int) -> None:
    """Writes and deletes between rounds, through every write call."""
    for number in range(step, 40, 5):
        client.delete_item(
            TableName=TEXT, Key={"pk": {"S": "t/job"}, "sk": {"S": str(BASE + number * 1_000)}}
        )
    for number in range(40 + step * 3, 43 + step * 3):
        client.put_item(TableName=TEXT, Item=_text_item("t/job", str(BASE + number * 1_000), number))
    client.put_item(TableName=TEXT, Item=_text_item("t/job", str(BASE - 500 * (step + 1)), -step))
    client.update_item(
        TableName=TEXT,
        Key={"pk": {"S": "t/job"}, "sk": {"S": f"{BASE + 7_000 + step}"}},
        UpdateExpression="SET #st = :st",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":st": {"S": "FAILED"}},
    )
    client.batch_write_item(
        RequestItems={
            TEXT: [
                {"PutRequest": {"Item": _text_item("t/job", f"{BASE + 20_000 + step}#b", 7)}},
                {
                    "DeleteRequest": {
                        "Key": {"pk": {"S": "t/job"}, "sk": {"S": str(BASE + (step + 1) * 1_000)}}
                    }
                },
            ],
            NUMBER: [
                {"PutRequest": {"Item": {"pk": {"S": "n"}, "sk": {"N": str(5 + step)}, "n": {"N": "1"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "n"}, "sk": {"N": "3.5" if step == 0 else "17"}}}},
            ],
        }
    )
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TEXT, "Item": _text_item("t/job", f"{BASE + 33_000}#t{step}", 9)}},
            {"Delete": {"TableName": TEXT, "Key": {"pk": {"S": "t/job"}, "sk": {"S": f"m#{12:02x}"}}}},
        ]
    )
    with contextlib.suppress(Exception):  # a transaction that fails puts back what it touched
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TEXT, "Item": _text_item("t/job", f"{BASE + 3_500}#x{step}", 1)}},
                {
                    "Delete": {
                        "TableName": TEXT,
                        "Key": {"pk": {"S": "t/job"}, "sk": {"S": str(BASE + 39_000)}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    client.delete_item(
        TableName=TEXT, Key={"pk": {"S": "t/big"}, "sk": {"S": str(BASE + (4 + step) * 1_000)}}
    )


def run(client: Any) -> list[str]:
    _create(client)
    _seed(client)
    lines: list[str] = []
    for step in range(2):
        lines.append(json.dumps({"round": step}))
        _round(client, lines)
        _change(client, step)
    lines.append(json.dumps({"round": "last"}))
    _round(client, lines)
    return lines


if __name__ == "__main__":
    import boto3
    from moto import mock_aws

    with mock_aws():
        for line in run(boto3.client("dynamodb", region_name="us-east-1")):
            sys.stdout.write(line + "\n")
