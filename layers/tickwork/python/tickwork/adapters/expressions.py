"""A small builder for DynamoDB update and condition expressions, so no caller hand-numbers placeholders."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tickwork.adapters.dynamo import to_item


class Update:
    """Collects SET / REMOVE / ADD clauses and conditions, with generated ``#n`` and ``:v`` placeholders."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._set: list[str] = []
        self._remove: list[str] = []
        self._add: list[str] = []
        self._conditions: list[str] = []

    def name(self, attribute: str) -> str:
        placeholder = f"#n{len(self.names)}"
        for existing, name in self.names.items():
            if name == attribute:
                return existing
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder

    def set(self, **attributes: Any) -> Update:
        for attribute, value in attributes.items():
            self._set.append(f"{self.name(attribute)} = {self.value(value)}")
        return self

    def set_many(self, attributes: Mapping[str, Any]) -> Update:
        return self.set(**attributes)

    def set_if_absent(self, **attributes: Any) -> Update:
        for attribute, value in attributes.items():
            name = self.name(attribute)
            self._set.append(f"{name} = if_not_exists({name}, {self.value(value)})")
        return self

    def set_raw(self, clause: str) -> Update:
        self._set.append(clause)
        return self

    def append(self, attribute: str, items: list[Any]) -> Update:
        name = self.name(attribute)
        empty = self.value([])
        self._set.append(f"{name} = list_append(if_not_exists({name}, {empty}), {self.value(items)})")
        return self

    def remove(self, *attributes: str) -> Update:
        self._remove.extend(self.name(attribute) for attribute in attributes)
        return self

    def remove_raw(self, path: str) -> Update:
        """A path built with :meth:`name` (``#a.#b``)."""
        self._remove.append(path)
        return self

    def add(self, attribute: str, amount: int | frozenset[str]) -> Update:
        """A number added to, or strings put in a string set."""
        self._add.append(f"{self.name(attribute)} {self.value(amount)}")
        return self

    def where(self, condition: str) -> Update:
        """A condition built with :meth:`name` and :meth:`value`; several are joined with AND."""
        self._conditions.append(condition)
        return self

    def where_status_in(self, statuses: Iterable[str]) -> Update:
        placeholders = ", ".join(self.value(status) for status in statuses)
        self._conditions.append(f"{self.name('status')} IN ({placeholders})")
        return self

    def expression(self) -> dict[str, Any]:
        clauses = []
        if self._set:
            clauses.append("SET " + ", ".join(self._set))
        if self._remove:
            clauses.append("REMOVE " + ", ".join(self._remove))
        if self._add:
            clauses.append("ADD " + ", ".join(self._add))
        request: dict[str, Any] = {"UpdateExpression": " ".join(clauses)} if clauses else {}
        if self._conditions:
            request["ConditionExpression"] = " AND ".join(f"({c})" for c in self._conditions)
        if self.names:
            request["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            request["ExpressionAttributeValues"] = to_item(self.values)
        return request
