"""A battery of UpdateItem requests, run in order on one item; prints each answer (or error) as JSON lines.

Run as a script it uses moto as released; imported, ``run`` uses whatever moto the caller set up. The local
stack's changes to moto must give the same lines (``tests/unit/test_moto_dynamodb.py``)."""

from __future__ import annotations

import json
import sys
from typing import Any

TABLE = "battery"
KEY = {"pk": {"S": "item"}}

# (update expression, condition or None, names, values)
STEPS: list[tuple[str, str | None, dict[str, str], dict[str, Any]]] = [
    (
        "SET #n = :one, #s = :s, #m = :m, #l = :l",
        None,
        {"#n": "n", "#s": "s", "#m": "m", "#l": "l"},
        {
            ":one": {"N": "1"},
            ":s": {"S": "a"},
            ":m": {"M": {"x": {"N": "2"}, "deep": {"M": {}}}},
            ":l": {"L": [{"N": "1"}, {"S": "two"}]},
        },
    ),
    ("SET #n = #n + :two", "#n = :one", {"#n": "n"}, {":two": {"N": "2"}, ":one": {"N": "1"}}),
    ("SET #n = #n - :one", None, {"#n": "n"}, {":one": {"N": "1"}}),
    ("SET #m.#x = #m.#x * :one", None, {"#m": "m", "#x": "x"}, {":one": {"N": "1"}}),
    ("SET #m.#d.#k = :v", None, {"#m": "m", "#d": "deep", "#k": "k"}, {":v": {"S": "deep value"}}),
    ("SET #m.#missing.#k = :v", None, {"#m": "m", "#missing": "nope", "#k": "k"}, {":v": {"S": "x"}}),
    ("SET #l = list_append(#l, :more)", None, {"#l": "l"}, {":more": {"L": [{"BOOL": True}]}}),
    ("SET #l = list_append(:first, #l)", None, {"#l": "l"}, {":first": {"L": [{"NULL": True}]}}),
    ("SET #l[1] = :v", None, {"#l": "l"}, {":v": {"S": "replaced"}}),
    ("REMOVE #l[0]", None, {"#l": "l"}, {}),
    (
        "SET #c = if_not_exists(#c, :zero) + :one",
        None,
        {"#c": "counter"},
        {":zero": {"N": "0"}, ":one": {"N": "1"}},
    ),
    (
        "SET #c = if_not_exists(#c, :zero) + :one",
        None,
        {"#c": "counter"},
        {":zero": {"N": "0"}, ":one": {"N": "1"}},
    ),
    (
        "ADD #ss :more, #a :five",
        None,
        {"#ss": "tags", "#a": "added"},
        {":more": {"SS": ["x", "y"]}, ":five": {"N": "5"}},
    ),
    ("DELETE #ss :gone", None, {"#ss": "tags"}, {":gone": {"SS": ["x"]}}),
    ("SET #s = #s + :one", None, {"#s": "s"}, {":one": {"N": "1"}}),
    ("SET #pk = :v", None, {"#pk": "pk"}, {":v": {"S": "other"}}),
    ("SET #a = :v, #a = :w", None, {"#a": "dup"}, {":v": {"S": "1"}, ":w": {"S": "2"}}),
    ("SET #m = :v, #m.#x = :w", None, {"#m": "m", "#x": "x"}, {":v": {"M": {}}, ":w": {"N": "1"}}),
    ("SET #n = :v", "#s = :no", {"#n": "n", "#s": "s"}, {":v": {"N": "100"}, ":no": {"S": "not a"}}),
    ("SET #n = :v", None, {"#n": "n"}, {":v": {"N": "7"}, ":unused": {"S": "x"}}),
    ("SET #n = :v", None, {"#n": "n", "#unused": "u"}, {":v": {"N": "8"}}),
    ("SET #e = :empty", None, {"#e": "empty"}, {":empty": {"S": ""}}),
    (
        "REMOVE #m.#d, #c SET #s = :b",
        None,
        {"#m": "m", "#d": "deep", "#c": "counter", "#s": "s"},
        {":b": {"S": "b"}},
    ),
    ("SET #x = #absent", None, {"#x": "x", "#absent": "absent"}, {}),
]


def run(client: Any) -> list[str]:
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.put_item(TableName=TABLE, Item=KEY)
    lines = []
    for _ in range(2):  # each request twice: the second comes from the local stack's caches
        for expression, condition, names, values in STEPS:
            request: dict[str, Any] = {"UpdateExpression": expression, "ExpressionAttributeNames": names}
            if values:
                request["ExpressionAttributeValues"] = values
            if condition:
                request["ConditionExpression"] = condition
            try:
                answer = client.update_item(TableName=TABLE, Key=KEY, ReturnValues="ALL_NEW", **request)
                outcome: Any = {"ok": answer.get("Attributes")}
            except Exception as error:
                response = getattr(error, "response", {}).get("Error", {})
                outcome = {"error": [type(error).__name__, response.get("Code"), response.get("Message")]}
            lines.append(json.dumps(outcome, sort_keys=True, default=str))
    return lines


if __name__ == "__main__":
    import boto3
    from moto import mock_aws

    with mock_aws():
        for line in run(boto3.client("dynamodb", region_name="us-east-1")):
            sys.stdout.write(line + "\n")
