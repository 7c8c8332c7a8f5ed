"""Counts AWS calls by service and operation with botocore event hooks, and DynamoDB capacity units.

moto does not report size-based consumed capacity, so the units follow DynamoDB's published rules:

- writes: ceil(size / 1 KB) WRU per item, the larger of the item before and after for an update; a write
  whose condition failed still costs the size of the item it checked (at least 1); every item of a
  ``TransactWriteItems`` (a condition check too) costs twice that;
- reads: ceil(size / 4 KB) RRU per item for a strongly consistent ``GetItem``, half for an eventually
  consistent one (every index query is), twice in a transaction; the size is the whole item, whatever a
  projection returns; a missing item still costs the minimum, in a ``BatchGetItem`` too;
- a query or scan pays for every item (or index entry) it evaluates, before its filter and projection,
  summed and rounded up once: the meter replays the request without them to see those items;
- global secondary indexes: a write that puts an item into an index, removes it, or changes its projected
  attributes costs ceil(entry / 1 KB) WRU there too, twice when an index key changes (delete + put); an
  index entry is its projected attributes plus 100 bytes.

To see the item before and after each write, and what a read evaluated, the meter uses a second, unmetered
client on the same backend.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tickwork import tables
from tickwork_local.journal import written_keys

KB = 1024
INDEX_OVERHEAD = 100
_BY_NAME = {definition.default_name: definition for definition in tables.ALL_TABLES}


# --- sizes ------------------------------------------------------------------------------------------------
def _number_size(text: str) -> int:
    digits = Decimal(text).normalize().as_tuple().digits
    return math.ceil(len(digits) / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return _number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode()) for v in inner)
    if kind == "NS":
        return sum(_number_size(v) for v in inner)
    if kind == "BS":
        return sum(len(v) for v in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / (4 * KB)))
    return float(units) if consistent else units / 2


# --- indexes ----------------------------------------------------------------------------------------------
def _index_keys(index: tables.IndexDefinition) -> list[str]:
    return [a.name for a in (index.partition_key, index.sort_key) if a is not None]


def _table_keys(definition: tables.TableDefinition) -> list[str]:
    return [a.name for a in (definition.partition_key, definition.sort_key) if a is not None]


def _entry(
    definition: tables.TableDefinition, index: tables.IndexDefinition, item: dict[str, Any] | None
) -> dict[str, Any] | None:
    if not item or any(key not in item for key in _index_keys(index)):
        return None
    if index.projection == "ALL":
        return dict(item)
    names = set(_index_keys(index)) | set(_table_keys(definition))
    if index.projection == "INCLUDE":
        names |= set(index.non_key_attributes)
    return {name: item[name] for name in names if name in item}


def index_write_units(table: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, int]:
    """WRU per index for a write that turned ``old`` into ``new`` (None: no item)."""
    definition = _BY_NAME.get(table)
    units: dict[str, int] = {}
    if definition is None:
        return units
    for index in definition.indexes:
        before, after = _entry(definition, index, old), _entry(definition, index, new)
        cost = 0
        if before is None and after is not None:
            cost = write_units(item_size(after) + INDEX_OVERHEAD)
        elif before is not None and after is None:
            cost = write_units(item_size(before) + INDEX_OVERHEAD)
        elif before is not None and after is not None and before != after:
            moved = any(before.get(key) != after.get(key) for key in _index_keys(index))
            cost = write_units(item_size(after) + INDEX_OVERHEAD)
            if moved:
                cost += write_units(item_size(before) + INDEX_OVERHEAD)
        if cost:
            units[index.name] = cost
    return units


# --- the meter --------------------------------------------------------------------------------------------
@dataclass
class Tally:
    """Requests, DynamoDB table WRU/RRU and index WRU, per ``service.Operation``."""

    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    wru: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rru: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    index_wru: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    item_bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Largest item written, per table: the hot path should stay under 1 KB."""

    def total(self, what: str, service: str | None = None) -> float:
        values: dict[str, float] = getattr(self, what)
        return sum(v for k, v in values.items() if service is None or k.startswith(f"{service}."))

    def snapshot(self) -> Tally:
        copy = Tally()
        for name in ("requests", "wru", "rru", "index_wru", "item_bytes"):
            getattr(copy, name).update(getattr(self, name))
        return copy

    def minus(self, earlier: Tally) -> Tally:
        delta = Tally()
        for name in ("requests", "wru", "rru", "index_wru"):
            mine, theirs, out = getattr(self, name), getattr(earlier, name), getattr(delta, name)
            for key, value in mine.items():
                if value - theirs.get(key, 0):
                    out[key] = value - theirs.get(key, 0)
        delta.item_bytes.update(self.item_bytes)
        return delta


class Meter:
    """Hooks into the given clients' event systems. ``peek`` is an unmetered DynamoDB client on the same
    backend, used to see items before and after each write."""

    def __init__(self, peek: Any, site_of: Callable[[], str | None] | None = None):
        self.peek = peek
        self.tally = Tally()
        self.site_of = site_of
        """Names the code that makes a request (called on the calling thread before it goes out): each
        request's count and units are then also added up per site in ``by_site``."""
        self.by_site: dict[str, Tally] = defaultdict(Tally)
        self.per_thread: dict[int, Counter[str]] = defaultdict(Counter)
        """Requests per service made on each thread: a worker handles a batch's jobs side by side, and what
        is billed is the longest thread's round trips, not all of them."""
        self._lock = threading.Lock()
        self._pending = threading.local()

    def attach(self, client: Any) -> None:
        service = client.meta.service_model.service_name
        client.meta.events.register(f"provide-client-params.{service}", self._before)
        client.meta.events.register(f"after-call.{service}", self._after)

    # botocore hands every handler these keywords
    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        snapshots: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = []
        if model.service_model.service_name == "dynamodb":
            for table, key, kind in written_keys(model.name, params):
                snapshots.append((table, key, self._get(table, key), kind))
        site = self.site_of() if self.site_of is not None else None
        self._pending.calls = [*getattr(self._pending, "calls", []), (model.name, params, snapshots, site)]

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        calls = getattr(self._pending, "calls", [])
        operation, params, snapshots, site = calls.pop() if calls else (model.name, {}, [], None)
        service = model.service_model.service_name
        name = f"{service}.{operation}"
        tallies = [self.tally] if site is None else [self.tally, self.by_site[site]]
        with self._lock:
            for tally in tallies:
                tally.requests[name] += 1
            self.per_thread[threading.get_ident()][service] += 1
        if service != "dynamodb":
            return
        failed = "Error" in parsed
        transact = operation == "TransactWriteItems"
        for table, key, old, kind in snapshots:
            new = old if failed else self._get(table, key)
            size = max(item_size(old), item_size(new)) if kind != "check" else item_size(old)
            units = write_units(size) * (2 if transact else 1)
            with self._lock:
                for tally in tallies:
                    tally.wru[name] += units
                if new:
                    self.tally.item_bytes[table] = max(self.tally.item_bytes[table], item_size(new))
                if not failed:
                    for cost in index_write_units(table, old, new).values():
                        for tally in tallies:
                            tally.index_wru[name] += cost * (2 if transact else 1)
        reads = _read_units(self.peek, operation, params, parsed)
        if reads:
            with self._lock:
                for tally in tallies:
                    tally.rru[name] += reads

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self.peek.get_item(TableName=table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item


_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def _evaluated_request(params: dict[str, Any]) -> dict[str, Any]:
    """A query or scan that returns every item the original evaluated: no filter, no projection, and only
    the placeholders its key condition uses."""
    request = {
        key: value
        for key, value in params.items()
        if key
        not in (
            "FilterExpression",
            "ProjectionExpression",
            "Select",
            "ExpressionAttributeNames",
            "ExpressionAttributeValues",
            "ReturnConsumedCapacity",
        )
    }
    used = set(_PLACEHOLDER.findall(params.get("KeyConditionExpression", "")))
    names = {k: v for k, v in params.get("ExpressionAttributeNames", {}).items() if k in used}
    values = {k: v for k, v in params.get("ExpressionAttributeValues", {}).items() if k in used}
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    return request


def _evaluated_size(peek: Any, operation: str, params: dict[str, Any]) -> int:
    """Bytes of the items (or index entries) a query or scan page evaluated before its filter."""
    response = getattr(peek, "query" if operation == "Query" else "scan")(**_evaluated_request(params))
    definition = _BY_NAME.get(params["TableName"])
    index = next(
        (i for i in (definition.indexes if definition else ()) if i.name == params.get("IndexName")), None
    )
    total = 0
    for item in response.get("Items", []):
        if index is not None and definition is not None:
            full = peek.get_item(
                TableName=params["TableName"],
                Key={name: item[name] for name in _table_keys(definition)},
                ConsistentRead=True,
            ).get("Item", item)
            total += item_size(_entry(definition, index, full))
        else:
            total += item_size(item)
    return total


def _read_units(peek: Any, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
    if "Error" in parsed:
        return 0.0
    if operation == "GetItem":
        consistent = bool(params.get("ConsistentRead"))
        whole = peek.get_item(TableName=params["TableName"], Key=params["Key"], ConsistentRead=True)
        return read_units(item_size(whole.get("Item")), consistent=consistent)
    if operation == "BatchGetItem":
        total = 0.0
        for table, request in params["RequestItems"].items():
            consistent = bool(request.get("ConsistentRead"))
            for key in request["Keys"]:
                whole = peek.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
                total += read_units(item_size(whole), consistent=consistent)
        return total
    if operation in ("Query", "Scan"):
        consistent = bool(params.get("ConsistentRead")) and "IndexName" not in params
        return read_units(_evaluated_size(peek, operation, params), consistent=consistent)
    return 0.0
