"""Transactions that conflict with another on the same item are tried again; a failed condition is not."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from tickwork.adapters.dynamo import TRANSACTION_TRIES, transact

ITEMS: list[Any] = [
    {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "a"}},
            "UpdateExpression": "SET #n = :v",
            "ExpressionAttributeNames": {"#n": "n"},
            "ExpressionAttributeValues": {":v": {"N": "1"}},
        }
    },
    {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "tenant"}},
            "UpdateExpression": "SET #n = :v",
            "ExpressionAttributeNames": {"#n": "n"},
            "ExpressionAttributeValues": {":v": {"N": "1"}},
        }
    },
]


def client_answering(*codes: list[str] | None) -> tuple[Any, Stubber]:
    """A DynamoDB client whose TransactWriteItems answers in turn: cancelled with these reasons, or (None)
    done."""
    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    for reasons in codes:
        if reasons is None:
            stubber.add_response("transact_write_items", {}, {"TransactItems": ITEMS})
        else:
            stubber.add_client_error(
                "transact_write_items",
                service_error_code="TransactionCanceledException",
                http_status_code=400,
                service_message="Transaction cancelled",
                response_meta={},
                modeled_fields={"CancellationReasons": [{"Code": code} for code in reasons]},
            )
    stubber.activate()
    return client, stubber


def test_a_transaction_that_conflicted_is_tried_again_until_it_goes_through() -> None:
    client, stubber = client_answering(["None", "TransactionConflict"], ["TransactionConflict", "None"], None)
    slept: list[float] = []
    transact(client, ITEMS, sleep=slept.append)
    stubber.assert_no_pending_responses()
    assert len(slept) == 2


def test_a_failed_condition_is_raised_at_once() -> None:
    client, stubber = client_answering(["ConditionalCheckFailed", "None"])
    with pytest.raises(ClientError):
        transact(client, ITEMS, sleep=lambda _: None)
    stubber.assert_no_pending_responses()


def test_conflicts_past_the_last_try_are_raised() -> None:
    client, stubber = client_answering(*[["TransactionConflict", "None"]] * TRANSACTION_TRIES)
    with pytest.raises(ClientError):
        transact(client, ITEMS, sleep=lambda _: None)
    stubber.assert_no_pending_responses()
