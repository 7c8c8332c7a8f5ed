"""Conversions between plain values and DynamoDB's typed attribute values, and opaque page cursors."""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from tickwork.errors import InvalidInput

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# DynamoDB cancels one of two transactions that touch the same item at once (a tenant's job count, when
# many of its one-time jobs complete together): tried again this many times, with jitter.
TRANSACTION_TRIES = 6

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Typed attributes for every value that is not None."""
    return {key: to_attribute(value) for key, value in values.items() if value is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: from_attribute(value) for key, value in item.items()}


# boto3's TypeSerializer tries each DynamoDB type in turn with isinstance checks, and was a third of the
# worker's own CPU per run. tickwork's items hold JSON-like values: those are converted by their exact type,
# exactly as boto3 would convert them, and anything else (Decimal, bytes, sets; floats, which boto3
# refuses) is left to boto3.
def to_attribute(value: Any) -> dict[str, Any]:
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is int:
        return {"N": str(value)}
    if kind is bool:
        return {"BOOL": value}
    if kind is dict:
        return {"M": {key: to_attribute(item) for key, item in value.items()}}
    if kind is list or kind is tuple:
        return {"L": [to_attribute(item) for item in value]}
    if value is None:
        return {"NULL": True}
    return dict(_serializer.serialize(value))


def from_attribute(attribute: Mapping[str, Any]) -> Any:
    """A plain value: numbers as int when whole, else float; maps and lists of plain values."""
    if "S" in attribute:
        return attribute["S"]
    if "N" in attribute:
        try:
            return int(attribute["N"])
        except ValueError:
            return _plain(Decimal(attribute["N"]))
    if "M" in attribute:
        return {key: from_attribute(item) for key, item in attribute["M"].items()}
    if "L" in attribute:
        return [from_attribute(item) for item in attribute["L"]]
    if "BOOL" in attribute:
        return attribute["BOOL"]
    if "NULL" in attribute:
        return None
    return _plain(_deserializer.deserialize(attribute))  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def encode_cursor(key: Mapping[str, Any]) -> str:
    raw = json.dumps(from_item(key), separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, *, expected: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The start key a cursor stands for; refused unless it has exactly ``fields`` and matches ``expected``
    (the caller's tenant and job), so a cursor can never open another tenant's pages."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor") from error
    if (
        not isinstance(decoded, dict)
        or set(decoded) != set(fields)
        or any(decoded.get(key) != value for key, value in expected.items())
        or not all(isinstance(value, str | int) and not isinstance(value, bool) for value in decoded.values())
    ):
        raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor")
    return to_item(decoded)


def update_if(client: Any, **request: Any) -> bool:
    """A conditional ``UpdateItem``: True when it was applied, False when its condition did not hold."""
    try:
        client.update_item(**request)
    except ClientError as error:
        if is_conditional_failure(error):
            return False
        raise
    return True


def is_conditional_failure(error: Exception) -> bool:
    code = getattr(error, "response", {}).get("Error", {}).get("Code")
    return bool(code == "ConditionalCheckFailedException")


def transact(
    client: DynamoDBClient, items: Sequence[Any], *, sleep: Callable[[float], None] = time.sleep
) -> None:
    """TransactWriteItems, tried again while it only conflicted with another transaction. A condition that
    failed, or any other error, is raised at once."""
    for attempt in range(TRANSACTION_TRIES):
        try:
            client.transact_write_items(TransactItems=list(items))
            return
        except ClientError as error:
            if attempt == TRANSACTION_TRIES - 1 or not _conflicted(error):
                raise
        sleep(random.uniform(0, 0.01 * 2**attempt))  # noqa: S311 - jitter, not security


def _conflicted(error: ClientError) -> bool:
    code = error.response.get("Error", {}).get("Code")
    if code == "TransactionConflictException":
        return True
    codes = cancellation_codes(error)
    return (
        code == "TransactionCanceledException"
        and "TransactionConflict" in codes
        and ("ConditionalCheckFailed" not in codes)
    )


def cancellation_codes(error: Exception) -> list[str]:
    """The per-item reasons of a cancelled transaction, in request order."""
    response = getattr(error, "response", {})
    reasons = response.get("CancellationReasons") or []
    return [reason.get("Code", "None") or "None" for reason in reasons]
