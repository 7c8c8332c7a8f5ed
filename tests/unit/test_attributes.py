"""Items to and from DynamoDB's typed attributes: the same as boto3's TypeSerializer and TypeDeserializer."""

from __future__ import annotations

import random
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from tickwork.adapters.dynamo import _plain, from_attribute, from_item, to_attribute, to_item

serializer, deserializer = TypeSerializer(), TypeDeserializer()


class Colour(StrEnum):
    RED = "red"


SAMPLES: list[Any] = [
    "",
    "text",
    "ünïcødé ✓",
    0,
    -1,
    2**63,
    -(2**70),
    True,
    False,
    None,
    {},
    [],
    (),
    {"nested": {"deeper": [1, "two", None, False, {"x": []}]}},
    ["a", ["b", ["c"]]],
    ("tuple", 1),
    Colour.RED,
    Decimal("1.5"),
    Decimal("10"),
    b"bytes",
    {"a", "b"},
    {1, 2},
    {b"x"},
]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["str", "int", "bool", "none"] + (["dict", "list"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return "".join(rng.choice("abcé✓ 0{}\"'") for _ in range(rng.randint(0, 8)))
    if kind == "int":
        return rng.randint(-(10**20), 10**20)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "dict":
        return {f"k{n}": random_value(rng, depth + 1) for n in range(rng.randint(0, 4))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


@pytest.mark.parametrize("value", SAMPLES, ids=repr)
def test_a_value_becomes_the_attribute_boto3_makes(value: Any) -> None:
    assert to_attribute(value) == serializer.serialize(value)


def test_random_items_match_boto3_both_ways() -> None:
    rng = random.Random(20261126)
    for _ in range(2000):
        value = random_value(rng)
        attribute = to_attribute(value)
        assert attribute == serializer.serialize(value)
        assert from_attribute(attribute) == _plain(deserializer.deserialize(attribute))
        assert from_attribute(attribute) == value


def test_floats_are_refused_as_boto3_refuses_them() -> None:
    with pytest.raises(TypeError):
        serializer.serialize(1.5)
    with pytest.raises(TypeError):
        to_attribute(1.5)


@pytest.mark.parametrize(
    ("attribute", "plain"),
    [
        ({"N": "5"}, 5),
        ({"N": "-0"}, 0),
        ({"N": "1.0"}, 1),
        ({"N": "1E+3"}, 1000),
        ({"N": "2.5"}, 2.5),
        ({"N": "-0.125"}, -0.125),
        ({"S": "x"}, "x"),
        ({"BOOL": False}, False),
        ({"NULL": True}, None),
        ({"L": [{"N": "1.50"}, {"M": {"a": {"N": "7"}}}]}, [1.5, {"a": 7}]),
        ({"NS": ["1", "2.5"]}, {1, 2.5}),
        ({"SS": ["a"]}, {"a"}),
        ({"B": b"raw"}, Binary(b"raw")),
    ],
)
def test_an_attribute_becomes_the_plain_value(attribute: dict[str, Any], plain: Any) -> None:
    assert from_attribute(attribute) == plain
    assert from_attribute(attribute) == _plain(deserializer.deserialize(attribute))  # type: ignore[arg-type]
    assert type(from_attribute(attribute)) is type(plain)


def test_items_leave_out_none_at_the_top_level_only() -> None:
    item = to_item({"pk": "t/j", "sk": 1, "gone": None, "kept": {"inner": None}})
    assert item == {"pk": {"S": "t/j"}, "sk": {"N": "1"}, "kept": {"M": {"inner": {"NULL": True}}}}
    assert from_item(item) == {"pk": "t/j", "sk": 1, "kept": {"inner": None}}
