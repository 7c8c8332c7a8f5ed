"""What the local stack's changes to moto take for granted about moto's internals: the modules, classes,
functions, signatures and attributes they replace, wrap or call. pyproject.toml pins moto to the minor
version they were written against; a moto that breaks one of these fails here, naming the change that
relies on it, rather than somewhere in a run of the local stack.

- ``moto_dynamodb``: table partitions and index partitions kept in order for queries, transactions that save
  the items they touch, item answers as JSON, one size check per item, parsed expressions reused, update
  passes with fixed maps, shape checks once, restored items typed on first use, the walk over a table's
  items for the time to live;
- ``moto_direct``: item and message calls handed to moto's handlers in process;
- ``moto_core``: one class inspection per response class;
- ``moto_sqs``: queue listings, counts and waits without work per message; the journal's view of a queue.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections import defaultdict
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import version
from typing import Any

import pytest

MOTO = version("moto")


def params(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def source(function: Any) -> str:
    return inspect.getsource(function)


def has(owner: Any, *names: str) -> bool:
    missing = [name for name in names if not hasattr(owner, name)]
    assert not missing, f"{owner!r} has no {', '.join(missing)}"
    return True


def attr(path: str) -> Any:
    module, _, name = path.rpartition(":")
    found: Any = import_module(module)
    for part in name.split(".") if name else []:
        found = getattr(found, part)
    return found


# --- checks on moto's code --------------------------------------------------------------------------------
def table_query_signature() -> bool:
    expected = [
        "self",
        "hash_key",
        "range_comparison",
        "range_objs",
        "limit",
        "exclusive_start_key",
        "scan_index_forward",
        "projection_expressions",
        "index_name",
        "consistent_read",
        "filter_expression",
        "hash_key_conditions",
        "range_key_conditions",
        "filter_kwargs",
    ]
    found = params(attr("moto.dynamodb.models.table:Table.query"))
    assert found == expected, f"Table.query takes {found}"
    return True


def table_query_walk() -> bool:
    text = source(attr("moto.dynamodb.models.table:Table.query"))
    for needle in (
        "self.all_items()",  # its candidates, which the change narrows
        "possible_results.sort(key=lambda item: item.range_key)",  # a table query's order
        "possible_results.reverse()",
        "_item_comes_before_dct",  # the exclusive start key skips what comes before it
        "reached_length_limit = len(results) == limit",  # stops at the item after Limit kept ones
        "(result_size + result.size()) > RESULT_SIZE_LIMIT",  # or at 1 MB
        "self._get_last_evaluated_key(",
    ):
        assert needle in text, f"Table.query no longer has {needle!r}"
    assert attr("moto.dynamodb.models.table:RESULT_SIZE_LIMIT") == 1_000_000
    return True


def before_start_key() -> bool:
    text = source(attr("moto.dynamodb.models.table:Table._item_comes_before_dct"))
    assert "== scan_index_forward" in text and "return True" in text
    return True


def backend_query_passes_table_query() -> bool:
    text = source(attr("moto.dynamodb.models:DynamoDBBackend.query"))
    assert "return table.query(" in text and "hash_key_conditions=" in text
    return True


def write_signatures() -> bool:
    table = attr("moto.dynamodb.models.table:Table")
    backend = attr("moto.dynamodb.models:DynamoDBBackend")
    assert params(table.put_item)[:2] == ["self", "item_attrs"]
    assert params(table.delete_item) == ["self", "hash_key", "range_key"]
    assert params(table.get_item)[:3] == ["self", "hash_key", "range_key"]
    assert params(table.all_items) == ["self"]
    assert params(backend.update_item)[:3] == ["self", "table_name", "key"]
    assert params(backend.transact_write_items) == ["self", "transact_items"]
    assert params(backend.get_keys_value) == ["self", "table", "keys"]
    return True


def writes_go_through_put_and_delete() -> bool:
    """Every write that adds or removes an item goes through Table.put_item or Table.delete_item, which the
    change wraps to keep its partitions in order."""
    update = source(attr("moto.dynamodb.models:DynamoDBBackend.update_item"))
    assert "table.put_item(" in update
    transact = source(attr("moto.dynamodb.models:DynamoDBBackend.transact_write_items"))
    assert "self.put_item(" in transact and "self.delete_item(" in transact
    put = source(attr("moto.dynamodb.models.table:Table.put_item"))
    assert "self.items[hash_value][range_value] = item" in put
    delete = source(attr("moto.dynamodb.models.table:Table.delete_item"))
    assert "self.items[hash_key].pop(range_key)" in delete
    return True


def backend_module_names() -> bool:
    module = import_module("moto.dynamodb.models")
    has(module, "copy", "UpdateExpressionParser", "DynamoDBBackend", "dynamodb_backends")
    assert module.copy is not None and hasattr(module.copy, "deepcopy")
    has(import_module("moto.dynamodb.responses"), "UpdateExpressionParser", "DynamoResult", "DynamoHandler")
    has(module.UpdateExpressionParser, "make")
    return True


def item_types() -> bool:
    dynamo_type = import_module("moto.dynamodb.models.dynamo_type")
    has(dynamo_type, "Item", "DynamoType", "LimitedSizeDict")
    assert params(dynamo_type.Item.__init__)[:4] == ["self", "hash_key", "range_key", "attrs"]
    has(dynamo_type.Item, "size", "to_json")
    has(dynamo_type.DynamoType, "cast_value", "compare", "to_json", "size")
    assert isinstance(dynamo_type.LimitedSizeDict(), dict)
    has(import_module("moto.dynamodb.exceptions"), "ItemSizeTooLarge")
    has(import_module("moto.dynamodb.models.utilities"), "DynamoJsonEncoder", "dynamo_to_dict", "bytesize")
    return True


def sort_order_of_types() -> bool:
    """A sort key's order is its ``cast_value``'s, and equality is its type's and ``cast_value``'s."""
    from decimal import Decimal

    from moto.dynamodb.models.dynamo_type import DynamoType

    assert DynamoType({"N": "3.50"}).cast_value == Decimal("3.5")
    assert DynamoType({"S": "a"}).cast_value == "a"
    assert DynamoType({"N": "10"}) > DynamoType({"N": "9"})
    assert DynamoType({"N": "1"}) == DynamoType({"N": "1.0"})
    assert DynamoType({"S": "abc"}).compare("BEGINS_WITH", [DynamoType({"S": "ab"})])
    return True


def dynamo_result() -> bool:
    result = attr("moto.dynamodb.responses:DynamoResult")
    assert params(result.__init__) == ["self", "result"]
    assert params(result.execute_result) == ["self", "context"]
    assert isinstance(inspect.getattr_static(result, "result"), property)
    return True


def condition_parser() -> bool:
    comparisons = import_module("moto.dynamodb.comparisons")
    has(comparisons, "AttributeValue", "ConditionExpressionParser", "OpDefault")
    parser_class = comparisons.ConditionExpressionParser
    has(
        parser_class,
        "parse",
        "_lex_condition_expression",
        "_parse_paths",
        "_apply_functions",
        "_apply_comparator",
        "_apply_in",
        "_apply_between",
        "_apply_parens_and_booleans",
        "_assert_no_redundant_parentheses",
        "_find_literals",
        "_find_expr_attr_values",
        "_make_op_condition",
        "_make_operand",
        "_lookup_expression_attribute_value",
    )
    has(parser_class.Kind, "EXPRESSION_ATTRIBUTE_VALUE")
    parser = parser_class("#a = :v", {"#a": "a"}, {":v": {"S": "x"}})
    has(
        parser,
        "condition_expression",
        "expression_attribute_names",
        "expression_attribute_values",
        "expr_attr_names_found",
        "expr_attr_values_found",
    )
    # the steps of parse that the change repeats, in its order
    text = source(parser_class.parse)
    steps = [
        "_lex_condition_expression",
        "_parse_paths",
        "_apply_functions",
        "_apply_comparator",
        "_apply_in",
        "_apply_between",
        "_apply_parens_and_booleans",
    ]
    positions = [text.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), "ConditionExpressionParser.parse changed"
    return True


def update_traversal() -> bool:
    ast_nodes = import_module("moto.dynamodb.parsing.ast_nodes")
    has(ast_nodes, "DepthFirstTraverser", "Node")
    traverser = ast_nodes.DepthFirstTraverser
    has(traverser, "traverse_node_recursively", "_processing_map", "pre_processing_of_child")
    assert params(traverser.traverse_node_recursively) == ["self", "node", "child_id"]
    return True


def update_validators() -> bool:
    validators = import_module("moto.dynamodb.parsing.validators")
    has(
        validators,
        "ActionCountValidator",
        "OverlappingPathsValidator",
        "UpdateExpressionValidator",
        "UpdateHashRangeKeyValidator",
    )
    validator = validators.UpdateExpressionValidator
    expected = [
        "self",
        "expression",
        "expression_attribute_names",
        "expression_attribute_values",
        "item",
        "table",
    ]
    assert params(validator.__init__) == expected
    text = source(validator.__init__)
    assert "self.processors = self.get_ast_processors()" in text and "self.node_to_validate" in text
    has(validator, "get_ast_processors", "validate")
    return True


def live_table() -> bool:
    """A table and an item as moto holds them."""
    import boto3
    from moto import mock_aws
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="assumed",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-g",
                    "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName="assumed", Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "g": {"S": "x"}})
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        has(backend, "tables", "get_table", "get_keys_value")
        table = backend.get_table("assumed")
        has(
            table,
            "items",
            "hash_key_attr",
            "range_key_attr",
            "range_key_type",
            "global_indexes",
            "table_key_attrs",
        )
        assert isinstance(table.items, defaultdict) and table.items.default_factory is dict
        assert (table.hash_key_attr, table.range_key_attr, table.range_key_type) == ("pk", "sk", "S")
        (index,) = table.global_indexes
        has(index, "name", "schema")
        (partition,) = table.items.values()
        (item,) = partition.values()
        has(item, "hash_key", "range_key", "attrs")
        assert item.to_json()["Attributes"]["sk"] == {"S": "1"}
        assert item.range_key.to_json() == {"S": "1"}
    return True


def core_dispatch() -> bool:
    responses = import_module("moto.core.responses")
    has(responses, "method_names_from_class", "BaseResponse")
    assert "method_names_from_class(" in source(responses.BaseResponse)
    return True


def direct_handlers() -> bool:
    has(import_module("moto.dynamodb.responses"), "DynamoHandler")
    has(import_module("moto.sqs.responses"), "SQSResponse")
    has(import_module("moto.core.models"), "DEFAULT_ACCOUNT_ID")
    base = attr("moto.core.responses:BaseResponse")
    has(base, "call_action", "setup_class")
    set_up = source(base.setup_class)
    names = ["headers", "querystring", "data", "method", "path", "uri", "uri_match", "region"]
    names += ["current_account", "response_headers", "body", "raw_body"]
    missing = [name for name in names if f"self.{name}" not in set_up]
    assert not missing, f"BaseResponse.setup_class no longer sets {missing}"
    assert "self.params" in source(base), "BaseResponse no longer reads self.params"
    return True


def sqs_models() -> bool:
    models = import_module("moto.sqs.models")
    has(models, "Queue", "SQSBackend", "Message", "sqs_backends")
    queue = models.Queue
    for name in (
        "attributes",
        "approximate_number_of_messages",
        "approximate_number_of_messages_delayed",
        "approximate_number_of_messages_not_visible",
        "messages",
    ):
        assert isinstance(inspect.getattr_static(queue, name), property), f"Queue.{name} is not a property"
    assert params(queue.wait_for_messages) == ["self", "timeout"]
    assert params(queue.delete_message) == ["self", "receipt_handle"]
    backend = models.SQSBackend
    assert params(backend.is_message_valid_based_on_retention_period) == ["self", "queue_name", "message"]
    has(backend, "send_message", "get_queue")
    assert params(models.Message.__init__)[:3] == ["self", "message_id", "body"]
    has(import_module("moto.sqs.exceptions"), "ReceiptHandleIsInvalid")
    return True


def live_queue() -> bool:
    import boto3
    from moto import mock_aws
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        url = client.create_queue(QueueName="assumed")["QueueUrl"]
        client.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=1)
        queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_queue("assumed")
        has(queue, "_messages", "_messages_lock", "pending_messages", "_pending_messages", "deleted_messages")
        has(queue, "message_retention_period")
        (message,) = queue._messages
        has(message, "visible_at", "delayed_until", "receipt_handle", "_old_receipt_handles")
        has(message, "all_receipt_handles", "sent_timestamp", "approximate_receive_count", "group_id")
        has(message, "deduplication_id", "id", "body")
        assert hasattr(queue._messages_lock, "wait_for") and hasattr(queue._messages_lock, "notify_all")
    return True


# (the change that relies on it, what it takes for granted, the check)
ASSUMPTIONS: list[tuple[str, str, Callable[[], bool]]] = [
    ("moto_dynamodb table query walk", "Table.query's parameters", table_query_signature),
    ("moto_dynamodb table query walk", "how Table.query walks its candidates", table_query_walk),
    ("moto_dynamodb table query walk", "how a start key skips items", before_start_key),
    (
        "moto_dynamodb table query walk",
        "DynamoDBBackend.query calls Table.query",
        backend_query_passes_table_query,
    ),
    ("moto_dynamodb table query walk", "sort key order and comparisons", sort_order_of_types),
    ("moto_dynamodb partitions and transactions", "the write methods' parameters", write_signatures),
    (
        "moto_dynamodb partitions and transactions",
        "writes add and remove items",
        writes_go_through_put_and_delete,
    ),
    ("moto_dynamodb partitions and transactions", "tables, indexes and items", live_table),
    ("moto_dynamodb no table copies, parsed expressions", "the backend module's names", backend_module_names),
    ("moto_dynamodb item size, restored items", "Item, DynamoType, LimitedSizeDict", item_types),
    ("moto_dynamodb item answers as JSON", "DynamoResult", dynamo_result),
    ("moto_dynamodb parsed conditions", "ConditionExpressionParser", condition_parser),
    ("moto_dynamodb update passes", "DepthFirstTraverser", update_traversal),
    ("moto_dynamodb update shapes", "UpdateExpressionValidator", update_validators),
    ("moto_core class inspection", "method_names_from_class", core_dispatch),
    ("moto_direct handlers", "the response handlers and what setup_class sets", direct_handlers),
    ("moto_sqs queues", "Queue, Message, SQSBackend", sqs_models),
    ("moto_sqs queues, journal", "queues and messages", live_queue),
]


def outcomes() -> dict[str, str | None]:
    """Each check's failure (None: it holds), by its id, as ``check_all`` prints them."""
    return {f"{change}: {assumption}": failure(check) for change, assumption, check in ASSUMPTIONS}


def failure(check: Callable[[], bool]) -> str | None:
    try:
        return None if check() else "the check said no"
    except Exception as error:  # a name, a signature or a behaviour moto no longer has
        return f"{type(error).__name__}: {error}"


@functools.cache
def fresh_outcomes() -> dict[str, str | None]:
    """The checks run in a fresh interpreter: in this one, tests may already have installed the local
    stack's changes, and the checks must read moto's own code, not the changes."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, __file__],
        env={**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found: dict[str, str | None] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(
    ("change", "assumption"),
    [(change, assumption) for change, assumption, _ in ASSUMPTIONS],
    ids=[f"{change}: {assumption}" for change, assumption, _ in ASSUMPTIONS],
)
def test_moto_is_as_the_local_stack_s_changes_take_it(change: str, assumption: str) -> None:
    problem = fresh_outcomes()[f"{change}: {assumption}"]
    if problem is not None:
        pytest.fail(
            f"moto {MOTO}: {assumption} no longer holds, which tickwork_local.{change} relies on: {problem}",
            pytrace=False,
        )


if __name__ == "__main__":
    import json

    print(json.dumps(outcomes()))
