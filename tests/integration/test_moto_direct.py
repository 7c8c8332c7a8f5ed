"""The local stack's direct calls into moto's DynamoDB give what moto's usual HTTP emulation gives.

Two clients against the same moto, one through the direct path and one the usual way, make the same calls on
twin tables; every answer and every error (code, message, modelled fields) must be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from tickwork_local.harness import moto_aws
from tickwork_local.moto_direct import ITEM_OPERATIONS, direct_calls

REGION = "us-east-1"


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any]]:
    with moto_aws():
        usual = boto3.client("dynamodb", region_name=REGION)
        session = boto3.session.Session(region_name=REGION)
        direct_calls(session._session.get_component("event_emitter"))
        direct = session.client("dynamodb")
        for name in ("twin-usual", "twin-direct"):
            usual.create_table(
                TableName=name,
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
                        "IndexName": "by_g",
                        "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        yield usual, direct


def _strip(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "ResponseMetadata"}


Step = Callable[[Any, str], dict[str, Any]]


def _outcome(step: Step, client: Any, table: str) -> tuple[str, Any]:
    try:
        return "ok", _strip(step(client, table))
    except ClientError as error:
        response: dict[str, Any] = dict(error.response)
        return "error", (type(error).__name__, _strip(response), error.operation_name)


STEPS: list[tuple[str, Step]] = [
    (
        "put",
        lambda c, t: c.put_item(
            TableName=t, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "g": {"S": "x"}, "n": {"N": "1"}}
        ),
    ),
    ("put another", lambda c, t: c.put_item(TableName=t, Item={"pk": {"S": "a"}, "sk": {"S": "2"}})),
    (
        "put failing its condition, with the item",
        lambda c, t: c.put_item(
            TableName=t,
            Item={"pk": {"S": "a"}, "sk": {"S": "1"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
    ),
    (
        "get",
        lambda c, t: c.get_item(TableName=t, Key={"pk": {"S": "a"}, "sk": {"S": "1"}}, ConsistentRead=True),
    ),
    ("get missing", lambda c, t: c.get_item(TableName=t, Key={"pk": {"S": "zz"}, "sk": {"S": "1"}})),
    (
        "update with a condition",
        lambda c, t: c.update_item(
            TableName=t,
            Key={"pk": {"S": "a"}, "sk": {"S": "1"}},
            UpdateExpression="SET #n = #n + :one, tags = :tags",
            ConditionExpression="#n = :was",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":was": {"N": "1"}, ":tags": {"SS": ["b", "a"]}},
            ReturnValues="ALL_NEW",
        ),
    ),
    (
        "update failing its condition",
        lambda c, t: c.update_item(
            TableName=t,
            Key={"pk": {"S": "a"}, "sk": {"S": "1"}},
            UpdateExpression="SET n = :n",
            ConditionExpression="n = :was",
            ExpressionAttributeValues={":n": {"N": "9"}, ":was": {"N": "1"}},
        ),
    ),
    (
        "bad expression",
        lambda c, t: c.update_item(
            TableName=t, Key={"pk": {"S": "a"}, "sk": {"S": "1"}}, UpdateExpression="SET"
        ),
    ),
    (
        "missing table",
        lambda c, t: c.get_item(TableName=t + "-gone", Key={"pk": {"S": "a"}, "sk": {"S": "1"}}),
    ),
    (
        "query one page",
        lambda c, t: c.query(
            TableName=t,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "a"}},
            Limit=1,
        ),
    ),
    (
        "query from a key",
        lambda c, t: c.query(
            TableName=t,
            KeyConditionExpression="pk = :p AND sk > :s",
            ExpressionAttributeValues={":p": {"S": "a"}, ":s": {"S": "1"}},
            ScanIndexForward=False,
        ),
    ),
    (
        "query an index",
        lambda c, t: c.query(
            TableName=t,
            IndexName="by_g",
            KeyConditionExpression="g = :g",
            ExpressionAttributeValues={":g": {"S": "x"}},
        ),
    ),
    (
        "transaction cancelled",
        lambda c, t: c.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": t, "Item": {"pk": {"S": "b"}, "sk": {"S": "1"}}}},
                {
                    "ConditionCheck": {
                        "TableName": t,
                        "Key": {"pk": {"S": "a"}, "sk": {"S": "2"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        ),
    ),
    (
        "transaction",
        lambda c, t: c.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": t, "Item": {"pk": {"S": "c"}, "sk": {"S": "1"}}}},
                {"Delete": {"TableName": t, "Key": {"pk": {"S": "a"}, "sk": {"S": "2"}}}},
            ]
        ),
    ),
    (
        "batch write",
        lambda c, t: c.batch_write_item(
            RequestItems={
                t: [{"PutRequest": {"Item": {"pk": {"S": "d"}, "sk": {"S": str(i)}}}} for i in range(5)]
            }
        ),
    ),
    (
        "batch get",
        lambda c, t: c.batch_get_item(
            RequestItems={t: {"Keys": [{"pk": {"S": "d"}, "sk": {"S": str(i)}} for i in range(3)]}}
        ),
    ),
    (
        "delete returning the item",
        lambda c, t: c.delete_item(
            TableName=t, Key={"pk": {"S": "c"}, "sk": {"S": "1"}}, ReturnValues="ALL_OLD"
        ),
    ),
    ("scan", lambda c, t: c.scan(TableName=t, FilterExpression="attribute_exists(g)")),
]


def _same_order(answer: tuple[str, Any]) -> tuple[str, Any]:
    """Batch answers list items in no set order, on AWS as in moto: compared as sorted lists."""
    kind, body = answer
    if kind == "ok" and "Responses" in body:
        body = {**body, "Responses": {"twin": sorted(map(repr, next(iter(body["Responses"].values()))))}}
    return kind, body


def test_every_item_operation_answers_as_the_usual_way(clients: tuple[Any, Any]) -> None:
    usual, direct = clients
    sent: list[str] = []
    direct.meta.events.register("before-send.dynamodb", lambda request, **_: sent.append(request.url))
    kinds = set()
    for name, step in STEPS:
        expected = _same_order(_outcome(step, usual, "twin-usual"))
        got = _same_order(_outcome(step, direct, "twin-direct"))
        got_text = repr(got).replace("twin-direct", "twin-usual")
        assert got_text == repr(expected), name
        kinds.add(got[0])
    assert kinds == {"ok", "error"}
    assert sent == [], "an item operation went over moto's HTTP emulation"


def test_the_steps_cover_the_operations_the_stack_sends_directly() -> None:
    names = {
        "put": "PutItem",
        "get": "GetItem",
        "update": "UpdateItem",
        "delete": "DeleteItem",
        "query": "Query",
        "scan": "Scan",
        "batch get": "BatchGetItem",
        "batch write": "BatchWriteItem",
        "transaction": "TransactWriteItems",
    }
    covered = {
        operation for label, operation in names.items() if any(step.startswith(label) for step, _ in STEPS)
    }
    assert covered == ITEM_OPERATIONS - {"TransactGetItems"}


def test_a_failure_inside_moto_is_an_error_answer_not_an_exception_out_of_the_hook(
    clients: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local stack's lock is released on ``after-call``: an exception raised from the hook would skip
    it and hang every later call."""
    from moto.dynamodb.responses import DynamoHandler

    _, direct = clients

    def broken(self: Any) -> Any:
        raise RuntimeError("a bug in moto")

    monkeypatch.setattr(DynamoHandler, "get_item", broken)
    released: list[int] = []
    direct.meta.events.register("after-call.dynamodb", lambda **_: released.append(1))
    with pytest.raises(ClientError) as raised:
        direct.get_item(TableName="twin-direct", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert released == [1]


# Values moto makes up per call (ids, receipt handles, clocks): compared by their presence, not their value.
_MADE_UP = {"MessageId", "ReceiptHandle", "SentTimestamp", "ApproximateFirstReceiveTimestamp", "RequestId"}


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<made up>" if k in _MADE_UP else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _message_steps(client: Any, url: str) -> list[tuple[str, Any]]:
    """The message calls a worker and a planner make, and their errors, in order; the answers masked."""
    answers: list[tuple[str, Any]] = []

    def step(name: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            answer = call()
            answers.append((name, ("ok", _masked(_strip(answer)))))
            return answer
        except ClientError as error:
            response: dict[str, Any] = dict(error.response)
            answers.append((name, ("error", type(error).__name__, _masked(_strip(response)))))
            return {}

    step("send", lambda: client.send_message(QueueUrl=url, MessageBody='{"run_id": "j:1"}'))
    step(
        "send a batch",
        lambda: client.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": f'{{"n": {i}}}', "DelaySeconds": 0} for i in range(3)],
        ),
    )
    step("send to a missing queue", lambda: client.send_message(QueueUrl=url + "-gone", MessageBody="x"))
    received = step(
        "receive",
        lambda: client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["ApproximateReceiveCount"]
        ),
    )
    step("receive too many", lambda: client.receive_message(QueueUrl=url, MaxNumberOfMessages=11))
    handles = [message["ReceiptHandle"] for message in received.get("Messages", [])]
    assert len(handles) == 4
    step(
        "change visibility",
        lambda: client.change_message_visibility(QueueUrl=url, ReceiptHandle=handles[0], VisibilityTimeout=0),
    )
    step("delete", lambda: client.delete_message(QueueUrl=url, ReceiptHandle=handles[1]))
    step("delete a bad handle", lambda: client.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle"))
    step(
        "delete a batch",
        lambda: client.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[2:])]
        ),
    )
    step("receive again", lambda: client.receive_message(QueueUrl=url, MaxNumberOfMessages=10))
    return answers


def test_every_message_operation_answers_as_the_usual_way() -> None:
    with moto_aws():
        usual = boto3.client("sqs", region_name=REGION)
        session = boto3.session.Session(region_name=REGION)
        direct_calls(session._session.get_component("event_emitter"))
        direct = session.client("sqs")
        sent: list[str] = []
        direct.meta.events.register("before-send.sqs", lambda request, **_: sent.append(request.url))
        urls = {name: usual.create_queue(QueueName=name)["QueueUrl"] for name in ("q-usual", "q-direct")}
        expected = _message_steps(usual, urls["q-usual"])
        got = _message_steps(direct, urls["q-direct"])
        assert [name for name, _ in got] == [name for name, _ in expected]
        for (name, answer), (_, wanted) in zip(got, expected, strict=True):
            assert repr(answer).replace("q-direct", "q-usual") == repr(wanted), name
        assert {answer[0] for _, answer in got} == {"ok", "error"}
        assert sent == [], "a message operation went over moto's HTTP emulation"


def test_direct_clients_take_their_endpoint_as_configured_without_the_endpoint_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.regions import EndpointRulesetResolver

    def no_rules(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the endpoint rules were consulted")

    with moto_aws():
        session = boto3.session.Session(region_name=REGION)
        direct_calls(session._session.get_component("event_emitter"))
        dynamodb = session.client("dynamodb")
        sqs = session.client("sqs")
        monkeypatch.setattr(EndpointRulesetResolver, "construct_endpoint", no_rules)
        sent: list[str] = []
        for client in (dynamodb, sqs):
            client.meta.events.register("request-created", lambda request, **_: sent.append(request.url))
        # calls that go the usual way (moto's HTTP emulation) go to the configured endpoint
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        assert sent == [dynamodb.meta.endpoint_url + "/", sqs.meta.endpoint_url + "/"]
        # and calls answered in process need none
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}})
        assert dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})["Item"] == {"pk": {"S": "a"}}
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["hello"]
        assert len(sent) == 2
        # a client of another session still works its endpoint out from the rules
        monkeypatch.undo()
        assert boto3.client("dynamodb", region_name=REGION).meta.endpoint_url.startswith("https://dynamodb.")
