"""moto's DynamoDB without its whole-table operations.

moto answers every query by sorting all the items of the table (and, for an index, by testing each of them),
and backs up each table a transaction touches with a deep copy of all of it. Both cost O(table) per call:
with 10,000 jobs a create took tens of milliseconds. The local stack installs three changes:

- each table keeps, per global secondary index, its items' keys grouped by index partition and sorted by
  index sort key (then table key, as moto orders them), updated after every write; an index query then
  hands moto's own query code only the entries its walk reaches, as a table query below (a page of a
  tenant's failures costs its page, not the tenant's 16,000 failures), and moto filters, orders and pages
  them exactly as before;
- each table partition queried keeps its sort keys in order, updated after every write; a table query
  hands moto only the items its walk reaches: from the sort key condition's bound (or the exclusive start
  key) in the query's direction, up to its Limit, and the next item, whose presence is what makes moto
  answer a LastEvaluatedKey. A job's latest run costs O(log n), not a sort of its whole history;
- a transaction saves only the items it touches, and puts them back if it fails;
- the tables themselves are never deep-copied.

Results are moto's own (it still applies every condition to the candidates), so the code under test sees
the same answers; only the work done to find them changes.
"""

from __future__ import annotations

import bisect
import copy
import functools
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_candidates = threading.local()
_installed = False


def _pk(item: Any) -> tuple[Any, ...]:
    return (item.hash_key, item.range_key)


def _sortable(value: Any) -> Any:
    return value.cast_value if value is not None else None


class IndexPartitions:
    """One global secondary index of one table: index partition -> its items' (sort value, key), sorted."""

    def __init__(self, index: Any):
        self.name = index.name
        self.hash_attribute = next(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")
        ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
        self.range_attribute: str | None = ranges[0] if ranges else None
        self.key_attributes = [self.hash_attribute, *ranges]
        self.partitions: dict[Any, list[tuple[Any, ...]]] = {}
        self.entries: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...]]] = {}

    def refresh(self, pk: tuple[Any, ...], item: Any) -> None:
        """Place (or remove) the item with primary key ``pk`` as it now is."""
        old = self.entries.pop(pk, None)
        if old is not None:
            partition = self.partitions[old[0]]
            del partition[bisect.bisect_left(partition, old[1])]
            if not partition:
                del self.partitions[old[0]]
        if item is None or any(not item.attrs.get(name) for name in self.key_attributes):
            return
        partition_key = item.attrs[self.hash_attribute]
        sort_value = _sortable(item.attrs[self.range_attribute]) if self.range_attribute else None
        entry = (sort_value, _sortable(pk[0]), _sortable(pk[1]), pk)
        bisect.insort(self.partitions.setdefault(partition_key, []), entry)
        self.entries[pk] = (partition_key, entry)

    def build(self, items: list[Any]) -> None:
        """Place every item at once (one sort per partition, rather than an insertion per item)."""
        self.partitions.clear()
        self.entries.clear()
        for item in items:
            values = [_attribute(item, name) for name in self.key_attributes]
            if not all(values):
                continue
            pk = _pk(item)
            partition_key = values[0]
            sort_value = _sortable(values[1]) if self.range_attribute else None
            entry = (sort_value, _sortable(pk[0]), _sortable(pk[1]), pk)
            self.partitions.setdefault(partition_key, []).append(entry)
            self.entries[pk] = (partition_key, entry)
        for partition in self.partitions.values():
            partition.sort()


class SortKeys:
    """One table partition's sort keys in order (moto keeps the partition in a dict): their values, to
    bisect, and moto's keys of its items, at the same positions."""

    __slots__ = ("keys", "values")

    def __init__(self, partition: dict[Any, Any]):
        ordered = sorted(partition, key=_sortable)
        self.values = [_sortable(key) for key in ordered]
        self.keys = ordered

    def refresh(self, range_value: Any, present: bool) -> None:
        value = _sortable(range_value)
        position = bisect.bisect_left(self.values, value)
        there = position < len(self.values) and self.values[position] == value
        if present and not there:
            self.values.insert(position, value)
            self.keys.insert(position, range_value)
        elif there and not present:
            del self.values[position]
            del self.keys[position]


def _sort_keys(table: Any, hash_value: Any, partition: dict[Any, Any]) -> SortKeys:
    """The partition's sort keys, built at its first query and kept by every write after it (built again
    should anything have changed the partition's items without them)."""
    partitions: dict[Any, SortKeys] | None = table.__dict__.get("_tickwork_partitions")
    if partitions is None:
        partitions = table.__dict__["_tickwork_partitions"] = {}
    found = partitions.get(hash_value)
    if found is None or len(found.keys) != len(partition):
        found = partitions[hash_value] = SortKeys(partition)
    return found


def _indexes(table: Any) -> dict[str, IndexPartitions]:
    found: dict[str, IndexPartitions] | None = table.__dict__.get("_tickwork_indexes")
    if found is None:
        found = {index.name: IndexPartitions(index) for index in table.global_indexes or []}
        every = _every_item(table)
        for index in found.values():
            index.build(every)
        table.__dict__["_tickwork_indexes"] = found
    return found


def _every_item(table: Any) -> list[Any]:
    if table.range_key_attr:
        return [item for partition in table.items.values() for item in partition.values()]
    return list(table.items.values())


def _refresh(table: Any, hash_value: Any, range_value: Any) -> None:
    indexes = _indexes(table)
    partitions: dict[Any, SortKeys] | None = table.__dict__.get("_tickwork_partitions")
    sort_keys = partitions.get(hash_value) if partitions else None
    if not indexes and sort_keys is None:
        return
    item = table.get_item(hash_value, range_value)
    for index in indexes.values():
        index.refresh((hash_value, range_value), item)
    if sort_keys is not None:
        sort_keys.refresh(range_value, item is not None)


def install() -> None:
    """Patch moto's DynamoDB models in this process (once)."""
    global _installed
    if _installed:
        return
    import moto.dynamodb.models as backend_module
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

    class _NoTableCopies:
        """``copy`` as moto's backend module sees it: a Table is never deep-copied (the transaction below
        saves the items it touches instead); anything else is."""

        def __getattr__(self, name: str) -> Any:
            return getattr(copy, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    backend_module.copy = _NoTableCopies()  # type: ignore[assignment,attr-defined]

    original_put, original_delete = Table.put_item, Table.delete_item
    original_all_items, original_query = Table.all_items, Table.query
    original_update = DynamoDBBackend.update_item
    original_transact = DynamoDBBackend.transact_write_items

    def put_item(self: Any, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, item_attrs, *args, **kwargs)
        _refresh(self, item.hash_key, item.range_key)
        return item

    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        try:
            return original_delete(self, hash_key, range_key)
        finally:
            _refresh(self, hash_key, range_key)

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return original_update(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            try:
                hash_value, range_value = self.get_keys_value(table, key)
            except Exception:  # noqa: S110 - a malformed key: moto refused it, nothing was written
                pass
            else:
                _refresh(table, hash_value, range_value)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []
        for entry in transact_items[:100]:
            try:
                body = next(iter(entry.values()))
                table = self.tables[body["TableName"]]
                hash_value, range_value = self.get_keys_value(table, body.get("Key") or body["Item"])
            except Exception:  # noqa: S112 - a malformed entry: moto's own code refuses it below
                continue
            before = table.get_item(hash_value, range_value)
            # its wire form: ten times cheaper than a deep copy, and rebuilt only if the transaction fails
            saved.append((table, hash_value, range_value, before.to_json()["Attributes"] if before else None))
        try:
            original_transact(self, transact_items)
        except Exception:
            for table, hash_value, range_value, before in reversed(saved):
                if before is None:
                    original_delete(table, hash_value, range_value)
                elif range_value is not None:
                    table.items[hash_value][range_value] = Item(hash_value, range_value, before)
                else:
                    table.items[hash_value] = Item(hash_value, range_value, before)
                _refresh(table, hash_value, range_value)
            raise

    def all_items(self: Any) -> list[Any]:
        candidates = getattr(_candidates, "items", None)
        if candidates is None:
            return original_all_items(self)
        return sorted(candidates, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)

    def query(
        self: Any,
        hash_key: Any,
        range_comparison: Any,
        range_objs: Any,
        limit: Any,
        exclusive_start_key: Any,
        scan_index_forward: Any,
        projection_expressions: Any,
        index_name: Any = None,
        consistent_read: Any = False,
        filter_expression: Any = None,
        hash_key_conditions: Any = None,
        range_key_conditions: Any = None,
        **filter_kwargs: Any,
    ) -> Any:
        # moto's Table.query, with the same parameters
        if index_name:
            kwargs = {
                "hash_key_conditions": hash_key_conditions,
                "range_key_conditions": range_key_conditions,
            }
            if not filter_kwargs and isinstance(scan_index_forward, bool):
                kwargs["walk"] = Walk(limit, exclusive_start_key, scan_index_forward)
            found = _query_candidates(self, hash_key, range_comparison, range_objs, index_name, kwargs)
        elif filter_kwargs or not isinstance(scan_index_forward, bool):
            # a legacy QueryFilter (moto counts its matches against the Limit), or a direction moto reads
            # neither way: the whole partition, as before
            found = _query_candidates(self, hash_key, range_comparison, range_objs, None, {})
        else:
            walk = Walk(limit, exclusive_start_key, scan_index_forward)
            found = _walk_candidates(self, hash_key, range_comparison, range_objs, walk)
        _candidates.items = found
        try:
            return original_query(
                self,
                hash_key,
                range_comparison,
                range_objs,
                limit,
                exclusive_start_key,
                scan_index_forward,
                projection_expressions,
                index_name,
                consistent_read,
                filter_expression,
                hash_key_conditions=hash_key_conditions,
                range_key_conditions=range_key_conditions,
                **filter_kwargs,
            )
        finally:
            _candidates.items = None

    _answer_items_as_json()
    _size_items_once()
    _reuse_parsed_expressions(backend_module)
    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    _installed = True


# Operations whose answers hold only items, keys, counts and capacities: plain JSON, as DynamoDB sends them.
_ITEM_OPERATIONS = frozenset(
    {
        "BatchGetItem",
        "BatchWriteItem",
        "DeleteItem",
        "GetItem",
        "PutItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "TransactWriteItems",
        "UpdateItem",
    }
)


def _answer_items_as_json() -> None:
    """moto answers through a serializer that walks the operation's output shape for every attribute value
    (half the time of a GetItem). An item operation's answer is already in DynamoDB's wire format: it is
    written out as JSON directly, as moto did before that serializer; anything else takes moto's path."""
    import json

    from moto.dynamodb.models.utilities import DynamoJsonEncoder, dynamo_to_dict
    from moto.dynamodb.responses import DynamoResult

    def keep_raw(self: Any, result: object) -> None:
        self._raw = result
        self._converted = None

    def result(self: Any) -> object:
        if self._converted is None:
            self._converted = dynamo_to_dict(self._raw)
        return self._converted

    original_execute = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        if context.operation_model.name in _ITEM_OPERATIONS and isinstance(self._raw, dict):
            body = json.dumps(
                {key: value for key, value in self._raw.items() if value is not None}, cls=DynamoJsonEncoder
            )
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original_execute(self, context)

    DynamoResult.__init__ = keep_raw  # type: ignore[method-assign]
    DynamoResult.result = property(result)  # type: ignore[assignment,method-assign]
    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


def _size_items_once() -> None:
    """moto checks an item's 400 KB limit as each attribute goes in, summing every attribute already there:
    quadratic in the attributes, on every write (and a tenth of a second per thousand items restored).
    Sizes only grow as attributes go in, so one check of the whole item refuses exactly what moto refuses."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    def build(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        values = {key: DynamoType(value) for key, value in attrs.items()}
        size = sum(bytesize(key) + value.size() for key, value in values.items())
        if size > 405000:  # moto's own limit (DynamoDB's 400 KB, as measured)
            raise ItemSizeTooLarge
        self.attrs = LimitedSizeDict()
        dict.update(self.attrs, values)

    Item.__init__ = build  # type: ignore[method-assign]


def _reuse_parsed_expressions(backend_module: Any) -> None:
    """moto parses an update expression and lexes a condition expression on every request, character by
    character: a fifth of an UpdateItem. tickwork sends the same few expressions again and again, so each is
    parsed once. moto's validator copies an update's tree before it changes it, and a condition's tokens are
    rebuilt from the cache for each request, so nothing cached is ever altered."""
    import functools

    from moto.dynamodb.comparisons import ConditionExpressionParser

    parser = backend_module.UpdateExpressionParser
    parse_update = functools.lru_cache(maxsize=1024)(parser.make)

    class CachedUpdateExpressionParser(parser):  # type: ignore[misc,valid-type]
        @classmethod
        def make(cls, expression: str) -> Any:
            return parse_update(expression)

    backend_module.UpdateExpressionParser = CachedUpdateExpressionParser
    # moto's response layer parses it too, to check the names and values it uses; it only reads the tree.
    import moto.dynamodb.responses as responses_module

    responses_module.UpdateExpressionParser = CachedUpdateExpressionParser  # type: ignore[attr-defined]

    original_lex = ConditionExpressionParser._lex_condition_expression

    @functools.lru_cache(maxsize=1024)
    def lexed(expression: str) -> tuple[Any, ...]:
        return tuple(original_lex(ConditionExpressionParser(expression, {}, {})))

    def lex(self: Any) -> Any:
        from collections import deque

        return deque(node._replace(children=[]) for node in lexed(self.condition_expression))

    ConditionExpressionParser._lex_condition_expression = lex  # type: ignore[method-assign]
    _reuse_parsed_conditions()
    _traverse_with_fixed_maps()

    _validate_update_shapes_once()


def _reuse_parsed_conditions() -> None:
    """A condition's tree depends only on its expression, its attribute names and the names and types of its
    values: it is parsed once for them, and each request builds its conditions from that tree with its own
    values (moto reads a value only when it builds the condition). A tree is cached only once parsed
    without error, so every malformed expression is still refused as moto refuses it."""
    from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, OpDefault

    parsed: dict[tuple[Any, ...], tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}
    value_kind = ConditionExpressionParser.Kind.EXPRESSION_ATTRIBUTE_VALUE
    original_operand = ConditionExpressionParser._make_operand

    def cache_key(parser: Any) -> tuple[Any, ...] | None:
        # Only the names and values the expression can use: a request's others (an update's, in the same
        # maps) do not change its condition, and often differ from one request to the next.
        expression = parser.condition_expression
        try:
            names = parser.expression_attribute_names or {}
            values = parser.expression_attribute_values or {}
            used_names = tuple(sorted((name, value) for name, value in names.items() if name in expression))
            typed = tuple(
                sorted((name, tuple(value)) for name, value in values.items() if name in expression)
            )
            return (expression, used_names, typed)  # a value by its type only
        except TypeError:  # an unhashable or unsortable name or value: moto will say what is wrong
            return None

    def tree(parser: Any) -> Any:
        # moto's ConditionExpressionParser.parse, up to the tree
        nodes = parser._lex_condition_expression()
        nodes = parser._parse_paths(nodes)
        nodes = parser._apply_functions(nodes)
        nodes = parser._apply_comparator(nodes)
        nodes = parser._apply_in(nodes)
        nodes = parser._apply_between(nodes)
        nodes = parser._apply_parens_and_booleans(nodes)
        node = nodes[0]
        parser._assert_no_redundant_parentheses(node)
        return node

    def parse(self: Any) -> Any:
        if not self.condition_expression:
            return OpDefault(None, None)  # type: ignore[arg-type] # as moto does
        key = cache_key(self)
        entry = parsed.get(key) if key is not None else None
        if entry is None:
            node = tree(self)
            entry = (node, tuple(self._find_literals(node)), tuple(self._find_expr_attr_values(node)))
            if key is not None:
                if len(parsed) > 4096:
                    parsed.clear()
                parsed[key] = entry
        node, names_found, values_found = entry
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return self._make_op_condition(node)

    def make_operand(self: Any, node: Any) -> Any:
        if node.kind == value_kind:  # this request's value, not the one the tree was parsed with
            return AttributeValue(self._lookup_expression_attribute_value(node.text))
        return original_operand(self, node)

    ConditionExpressionParser.parse = parse  # type: ignore[method-assign]
    ConditionExpressionParser._make_operand = make_operand  # type: ignore[method-assign]


def _traverse_with_fixed_maps() -> None:
    """moto makes ten passes over an update's tree, and at every node of every pass builds the pass's map of
    node kinds to handlers afresh (twice) and matches the node against it with ``isinstance`` on abstract
    classes: two fifths of an UpdateItem. The map never changes for a pass, nor a kind's match for a node
    class, so each pass keeps its handlers and each (pass, node class) its match; the traversal is moto's."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]

    is_node: dict[type, bool] = {}
    matches: dict[tuple[type, type], int | None] = {}  # (pass, node class) -> index of its handler

    def handlers(self: Any) -> list[tuple[type, Callable[[Any], Any]]]:
        found: list[tuple[type, Callable[[Any], Any]]] | None = self.__dict__.get("_tickwork_handlers")
        if found is None:
            found = self.__dict__["_tickwork_handlers"] = list(self._processing_map().items())
        return found

    def match(self: Any, node_class: type) -> int | None:
        key = (type(self), node_class)
        if key not in matches:
            kinds = [kind for kind, _ in handlers(self)]
            matches[key] = next((i for i, kind in enumerate(kinds) if issubclass(node_class, kind)), None)
        return matches[key]

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        node_class = type(node)
        if node_class not in is_node:
            is_node[node_class] = issubclass(node_class, Node)
        if is_node[node_class]:
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    self.pre_processing_of_child(node, i)
                    self.traverse_node_recursively(child_node, i)
            index = match(self, node_class)
            if index is not None:
                node = handlers(self)[index][1](node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    DepthFirstTraverser.traverse_node_recursively = traverse_node_recursively


def _validate_update_shapes_once() -> None:
    """Three of the ten passes moto makes over an update expression's tree check only its shape against the
    attribute names and the table's keys (how many actions, no overlapping paths, no key attribute set).
    Their answer is the same every time for the same expression, names and keys, so once one has passed
    they are skipped for it; the passes that read the values and the item run every time."""
    from moto.dynamodb.parsing.validators import (
        ActionCountValidator,
        OverlappingPathsValidator,
        UpdateExpressionValidator,
        UpdateHashRangeKeyValidator,
    )

    shape_checks = (ActionCountValidator, OverlappingPathsValidator, UpdateHashRangeKeyValidator)
    # Keyed by the parsed tree's id; each entry keeps its tree alive, so the id is never another tree's.
    passed: dict[tuple[Any, ...], Any] = {}
    original_processors = UpdateExpressionValidator.get_ast_processors
    original_validate = UpdateExpressionValidator.validate

    def shape_key(validator: Any) -> tuple[Any, ...]:
        return (
            validator._tickwork_expression,
            tuple(sorted((validator.expression_attribute_names or {}).items())),
            tuple(validator.table.table_key_attrs),
        )

    def get_ast_processors(self: Any) -> list[Any]:
        processors = original_processors(self)
        if shape_key(self) in passed:
            processors = [p for p in processors if not isinstance(p, shape_checks)]
        return processors

    def validate(self: Any) -> Any:
        result = original_validate(self)
        if len(passed) > 4096:
            passed.clear()
        passed[shape_key(self)] = self._tickwork_tree
        return result

    # moto deep-copies an update's cached tree on every request, the costliest step of an UpdateItem; a
    # pickled copy of it, unpickled each time, is as fresh and six times cheaper. Each entry keeps its tree
    # alive, so the id is never another tree's.
    pickled: dict[int, tuple[Any, bytes]] = {}

    def fresh_copy(expression: Any) -> Any:
        entry = pickled.get(id(expression))
        if entry is None:
            if len(pickled) > 1024:
                pickled.clear()
            entry = pickled[id(expression)] = (expression, pickle.dumps(expression, pickle.HIGHEST_PROTOCOL))
        return pickle.loads(entry[1])  # noqa: S301 - bytes this process pickled itself

    def init(
        self: Any,
        expression: Any,
        expression_attribute_names: Any,
        expression_attribute_values: Any,
        item: Any,
        table: Any,
    ) -> None:
        # moto's Validator.__init__, with the copy above
        self._tickwork_expression = id(expression)
        self._tickwork_tree = expression
        self.expression_attribute_names = expression_attribute_names
        self.expression_attribute_values = expression_attribute_values
        self.item = item
        self.table = table
        self.processors = self.get_ast_processors()
        self.node_to_validate = fresh_copy(expression)

    UpdateExpressionValidator.__init__ = init  # type: ignore[method-assign]
    UpdateExpressionValidator.get_ast_processors = get_ast_processors  # type: ignore[method-assign]
    UpdateExpressionValidator.validate = validate  # type: ignore[method-assign]


def _query_candidates(
    table: Any, hash_key: Any, comparison: Any, values: Any, index_name: str | None, kwargs: dict[str, Any]
) -> list[Any] | None:
    """A superset of the items a query can return, or None to let moto look at every item."""
    if not index_name:
        if hash_key is None:
            return None
        partition = table.items.get(hash_key)
        if partition is None:
            return []
        return list(partition.values()) if table.range_key_attr else [partition]
    index = _indexes(table).get(index_name)
    if index is None:
        return None
    conditions = dict(kwargs.get("hash_key_conditions") or [])
    partition_key = conditions.get(index.hash_attribute, hash_key)
    if partition_key is None or len(conditions) > 1 or len(kwargs.get("range_key_conditions") or []) > 1:
        return None
    entries = index.partitions.get(partition_key, [])
    walk: Walk | None = kwargs.get("walk")
    reached = _index_walk(table, index, entries, partition_key, comparison, values, walk) if walk else None
    if reached is not None:
        items = [table.get_item(*entries[position][3]) for position in reached]
        if all(item is not None for item in items):
            return items
    # the whole index partition: what moto as released goes through (a legacy QueryFilter counts every
    # item it looks at, and an item beyond the sort key's range can end a page)
    return [item for item in (table.get_item(*entry[3]) for entry in entries) if item is not None]


@dataclass(frozen=True)
class Walk:
    """How a table query goes through its partition: at most ``limit`` items (None: no limit), after the
    exclusive start key (wire form, or None), upwards or downwards."""

    limit: int | None
    exclusive_start_key: dict[str, Any] | None
    forward: bool


# Sort key conditions by the name moto gives them (a key condition expression's operator, or a legacy
# KeyConditions name), as bisect narrows them.
_CONDITIONS = {"=": "EQ", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "BETWEEN": "BETWEEN"}
_CONDITIONS.update({name: name for name in ("EQ", "LT", "LE", "GT", "GE", "BEGINS_WITH")})
_ARITY = {"BETWEEN": 2}
# moto stops a page before an item that would take its items past 1 MB, and no item is larger than this
# (moto's own limit of an item's size, which ``_size_items_once`` keeps).
_RESULT_SIZE_LIMIT = 1_000_000
_LARGEST_ITEM = 405_000


def _condition_range(
    values: list[Any], comparison: str | None, bounds: list[Any], kind: str
) -> tuple[int, int] | None:
    """The positions [low, high) of the sorted ``values`` that meet the sort key condition, or None when
    bisect cannot tell (moto then compares every item, as released)."""
    if comparison is None:
        return 0, len(values)
    name = _CONDITIONS.get(comparison.upper())
    if name is None or len(bounds) != _ARITY.get(name, 1):
        return None
    if name == "BEGINS_WITH":
        if kind not in ("S", "B"):
            return None
        prefix = bounds[0]
        width = len(prefix)
        low = bisect.bisect_left(values, prefix)
        # Cut to the prefix's length, sorted values stay in order: those that begin with it are one run.
        return low, bisect.bisect_right(values, prefix, lo=low, key=lambda value: value[:width])
    low, high = 0, len(values)
    if name in ("EQ", "GE", "BETWEEN"):
        low = bisect.bisect_left(values, bounds[0])
    elif name == "GT":
        low = bisect.bisect_right(values, bounds[0])
    if name in ("EQ", "LE", "BETWEEN"):
        high = bisect.bisect_right(values, bounds[-1])
    elif name == "LT":
        high = bisect.bisect_left(values, bounds[-1])
    return low, max(low, high)


def _walk_candidates(
    table: Any, hash_key: Any, comparison: str | None, range_objs: Any, walk: Walk
) -> list[Any] | None:
    """The items of a table query's partition that moto's walk through it can reach before it stops: a
    superset of what it looks at, in a few items rather than the whole partition; or None to let moto
    look at every item of the table.

    moto goes through the partition in sort key order (reversed for ScanIndexForward=False), skips what
    comes up to the exclusive start key, keeps the items that meet the sort key condition, and stops when it
    reaches an item with ``limit`` items kept (answering a LastEvaluatedKey) or one that would take the page
    past 1 MB. So it needs: the items meeting the condition from the start of the walk, up to ``limit`` of
    them; then the next item of the partition, if any; and the rest of the partition only when the page is
    so large that an item beyond the condition's range could take it past 1 MB."""
    if hash_key is None:
        return None
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if not table.range_key_attr:
        return [partition]
    limit = walk.limit
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        return None
    kind = table.range_key_type
    bound_objs = list(range_objs or [])
    if any(getattr(bound, "type", None) != kind for bound in bound_objs):
        return None
    sort_keys = _sort_keys(table, hash_key, partition)
    values = sort_keys.values
    found = _condition_range(values, comparison, [_sortable(bound) for bound in bound_objs], kind)
    if found is None:
        return None
    low, high = found
    start_key = walk.exclusive_start_key
    if start_key is not None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        try:
            start_hash = DynamoType(start_key[table.hash_key_attr])
            start_range = DynamoType(start_key[table.range_key_attr])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if start_hash != hash_key or start_range.type != kind:
            return None
        # moto skips the items up to the start key, and the start key's own item
        if walk.forward:
            low = max(low, bisect.bisect_right(values, _sortable(start_range)))
        else:
            high = min(high, bisect.bisect_left(values, _sortable(start_range)))
    high = max(low, high)
    if walk.forward:
        stop = high if limit is None else min(high, low + limit)
        positions, beyond = range(low, stop), range(stop, len(values))
    else:
        stop = low if limit is None else max(low, high - limit)
        positions, beyond = range(high - 1, stop - 1, -1), range(stop - 1, -1, -1)
    keys = sort_keys.keys
    kept = [partition[keys[position]] for position in positions]
    if limit is not None and len(kept) == limit:
        beyond = beyond[:1]  # moto stops there, with a LastEvaluatedKey
    elif not kept or sum(item.size() for item in kept) + _LARGEST_ITEM <= _RESULT_SIZE_LIMIT:
        beyond = beyond[:0]  # no item beyond the range can take the page past 1 MB: moto only skips them
    return kept + [partition[keys[position]] for position in beyond]


class _SortValues:
    """An index partition's sort values, as a sequence bisect reads (without copying them out)."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[Any, ...]]):
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, position: int) -> Any:
        return self.entries[position][0]


def _index_walk(
    table: Any,
    index: IndexPartitions,
    entries: list[tuple[Any, ...]],
    partition_key: Any,
    comparison: str | None,
    range_objs: Any,
    walk: Walk,
) -> list[int] | None:
    """The positions in an index partition's ``entries`` of the items moto's walk through it can reach
    before it stops (as ``_walk_candidates`` for a table partition), in the walk's order; or None when
    bisect cannot tell, and moto is handed the whole index partition.

    moto sorts an index query's items by index sort key, then table partition key, then table sort key
    (equal index sort keys are ordered by the table's key), which is the order of ``entries``; it skips
    the items up to and including the exclusive start key in that order (the index's keys and the table's,
    compared in the same order), keeps the items that meet the sort key condition, and stops at the item
    after ``limit`` kept ones, or at one that would take the page past 1 MB. Every item it reaches beyond
    the condition's range is looked at and passed over, so only the first of them, or all of them when the
    page is large, can change its answer."""
    if index.range_attribute is None:
        return None
    limit = walk.limit
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        return None
    types = {definition["AttributeName"]: definition["AttributeType"] for definition in table.attr or []}
    kind = types.get(index.range_attribute)
    bound_objs = list(range_objs or [])
    if kind is None or any(getattr(bound, "type", None) != kind for bound in bound_objs):
        return None
    found = _condition_range(
        _SortValues(entries),  # type: ignore[arg-type]
        comparison,
        [_sortable(bound) for bound in bound_objs],
        kind,
    )
    if found is None:
        return None
    low, high = found
    start_key = walk.exclusive_start_key
    if start_key is not None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        names = [index.hash_attribute, index.range_attribute, table.hash_key_attr]
        expected = [partition_key.type, kind, table.hash_key_type]
        if table.range_key_attr:
            names.append(table.range_key_attr)
            expected.append(table.range_key_type)
        try:
            typed = [DynamoType(start_key[name]) for name in names]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None
        if [value.type for value in typed] != expected or typed[0] != partition_key:
            return None
        start = tuple(_sortable(value) for value in typed[1:])
        if not table.range_key_attr:
            start += (None,)
        position = lambda entry: entry[:3]  # noqa: E731
        if walk.forward:
            low = max(low, bisect.bisect_right(entries, start, key=position))
        else:
            high = min(high, bisect.bisect_left(entries, start, key=position))
    high = max(low, high)
    if walk.forward:
        stop = high if limit is None else min(high, low + limit)
        kept, beyond = range(low, stop), range(stop, len(entries))
    else:
        stop = low if limit is None else max(low, high - limit)
        kept, beyond = range(high - 1, stop - 1, -1), range(stop - 1, -1, -1)
    if limit is not None and len(kept) == limit:
        beyond = beyond[:1]  # moto stops there, with a LastEvaluatedKey
    elif not kept or _size(table, entries, kept) + _LARGEST_ITEM <= _RESULT_SIZE_LIMIT:
        beyond = beyond[:0]  # no item beyond the range can take the page past 1 MB: moto only skips them
    return [*kept, *beyond]


def _size(table: Any, entries: list[tuple[Any, ...]], positions: range) -> int:
    items = (table.get_item(*entries[position][3]) for position in positions)
    return sum(item.size() if item is not None else _RESULT_SIZE_LIMIT for item in items)


def _backend() -> Any:
    import os

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID][os.environ.get("AWS_DEFAULT_REGION", "us-east-1")]


def stored_item(table_name: str, key: dict[str, Any]) -> dict[str, Any] | None:
    """The item with this key as moto stores it now (wire format), read without a request."""
    backend = _backend()
    table = backend.get_table(table_name)
    item = table.get_item(*backend.get_keys_value(table, key))
    return item.to_json()["Attributes"] if item is not None else None


def stored_items(table_name: str) -> list[dict[str, Any]]:
    """Every item of a table as moto stores it now (wire format), read without a request."""
    return [
        _saved_form(item) or item.to_json()["Attributes"]
        for item in _every_item(_backend().get_table(table_name))
    ]


@functools.cache
def _snapshot_items() -> tuple[type, Callable[[dict[str, Any]], Any]]:
    """The class of items loaded from a snapshot, and the function that types a saved value."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict

    new = object.__new__

    def typed(value: dict[str, Any]) -> Any:
        """``DynamoType(value)`` without its checks: the value came from moto's own ``to_json``."""
        ((kind, inner),) = value.items()
        made = new(DynamoType)
        made.type = kind
        if kind == "M":
            made.value = {name: typed(member) for name, member in inner.items()}
        elif kind == "L":
            made.value = [typed(member) for member in inner]
        else:
            made.value = inner
        return made

    class SnapshotItem(Item):
        """An item as a snapshot saved it. Most restored items are not read before the next snapshot, so
        their attributes are typed on first use (a third of a start-up with 10,000 jobs); until then the
        saved form is the item, exactly: any change goes through ``attrs``, which types them first."""

        @property
        def attrs(self) -> Any:
            found = self.__dict__.get("_attrs")
            if found is None:
                with _typing_attributes:
                    found = self.__dict__.get("_attrs")
                    if found is None:
                        found = LimitedSizeDict()
                        dict.update(
                            found, {key: typed(value) for key, value in self.__dict__["_saved"].items()}
                        )
                        self.__dict__["_attrs"] = found
                        del self.__dict__["_saved"]
            return found

        @attrs.setter
        def attrs(self, value: Any) -> None:
            self.__dict__["_attrs"] = value
            self.__dict__.pop("_saved", None)

    return SnapshotItem, typed


_typing_attributes = threading.Lock()


def _saved_form(item: Any) -> dict[str, Any] | None:
    """A restored item's attributes as saved, while nothing has used them (so they are still the item's)."""
    saved: dict[str, Any] | None = item.__dict__.get("_saved")
    return saved


def _attribute(item: Any, name: str) -> Any:
    """``item.attrs.get(name)``, without typing every attribute of an item restored but not yet used."""
    saved = _saved_form(item)
    if saved is None:
        return item.attrs.get(name)
    value = saved.get(name)
    return _snapshot_items()[1](value) if value is not None else None


def load_items(table_name: str, items: list[dict[str, Any]]) -> None:
    """Store many items as they were saved (a snapshot): moto accepted each once, so neither its checks nor
    its size limit run again; their attributes are typed when first used, and the indexes are built
    afterwards in one pass rather than item by item."""
    snapshot_item, typed = _snapshot_items()
    new = object.__new__
    table = _backend().get_table(table_name)
    hash_name, range_name = table.hash_key_attr, table.range_key_attr
    for item in items:
        stored: Any = new(snapshot_item)
        stored.hash_key = typed(item[hash_name])
        stored.range_key = typed(item[range_name]) if range_name else None
        stored.__dict__["_saved"] = item
        if range_name:
            table.items[stored.hash_key][stored.range_key] = stored
        else:
            table.items[stored.hash_key] = stored
    table.__dict__.pop("_tickwork_indexes", None)  # built by the first query, or by ``build_indexes``
    table.__dict__.pop("_tickwork_partitions", None)  # each partition's by its first query


def build_indexes(table_name: str) -> None:
    """Build a table's index partitions now rather than at its first query."""
    _indexes(_backend().get_table(table_name))


def load_item(table_name: str, item: dict[str, Any]) -> None:
    """Store an item as it was saved (no condition, no request, no validation: moto accepted it once):
    restoring a snapshot or a journal."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    table = _backend().get_table(table_name)
    hash_value = DynamoType(item[table.hash_key_attr])
    range_value = DynamoType(item[table.range_key_attr]) if table.range_key_attr else None
    stored = Item(hash_value, range_value, item)
    if range_value is not None:
        table.items[hash_value][range_value] = stored
    else:
        table.items[hash_value] = stored
    _refresh(table, hash_value, range_value)


def drop_item(table_name: str, key: dict[str, Any]) -> None:
    backend = _backend()
    table = backend.get_table(table_name)
    table.delete_item(*backend.get_keys_value(table, key))


class ItemWalk:
    """A walk through one table's items, a few at a time (``walk_items``): it reaches every item that was in
    the table when it started and is still there when reached; an item put meanwhile may be missed."""

    def __init__(self, table_name: str):
        self.table_name = table_name
        self.partitions: list[Any] | None = None  # the table's partition keys when the walk started
        self.index = 0
        self.keys: list[Any] | None = None  # the current partition's sort keys when the walk reached it
        self.position = 0
        self.done = False


def walk_items(
    walk: ItemWalk, count: int, attribute: str
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The next items of the walk, ``count`` looked at at most (without a request: the caller holds the lock
    that keeps writes out meanwhile): each item's key and its ``attribute``, in wire form (None: absent)."""
    table = _backend().get_table(walk.table_name)
    if walk.partitions is None:
        walk.partitions = list(table.items)
    hash_name, range_name = table.hash_key_attr, table.range_key_attr
    found: list[tuple[dict[str, Any], dict[str, Any] | None]] = []

    def entry(item: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        key = {hash_name: item.hash_key.to_json()}
        if range_name:
            key[range_name] = item.range_key.to_json()
        value = _attribute(item, attribute)
        return key, (value.to_json() if value is not None else None)

    looked = 0
    while looked < count and walk.index < len(walk.partitions):
        partition = dict.get(table.items, walk.partitions[walk.index])  # no empty partition made
        if not range_name:
            walk.index += 1
            looked += 1
            if partition is not None:
                found.append(entry(partition))
            continue
        if walk.keys is None:
            walk.keys = list(partition) if partition else []
        while walk.position < len(walk.keys) and looked < count:
            item = partition.get(walk.keys[walk.position]) if partition else None
            walk.position += 1
            looked += 1
            if item is not None:
                found.append(entry(item))
        if walk.position >= len(walk.keys):
            walk.index, walk.keys, walk.position = walk.index + 1, None, 0
    walk.done = walk.index >= len(walk.partitions)
    return found
