"""moto's SQS as the local stack runs it (``tickwork_local.moto_sqs``): the same answers, without a pass over
every queued message on each send, and a waiting receive that wakes when a held-back message shows."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends
from tickwork_local import moto_core, moto_sqs


@pytest.fixture
def sqs() -> Any:
    moto_core.install()
    moto_sqs.install()
    with mock_aws():
        yield boto3.client("sqs")


def _queue(sqs: Any, url: str) -> Any:
    return sqs_backends[DEFAULT_ACCOUNT_ID][sqs.meta.region_name].get_queue(url.rsplit("/", 1)[-1])


class CountingList(list[Any]):
    """A queue's message list that counts the passes made over it."""

    passes = 0

    def __iter__(self) -> Any:
        CountingList.passes += 1
        return super().__iter__()


def _counts(sqs: Any, url: str) -> tuple[int, int, int]:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesDelayed"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


def test_counts_tell_visible_delayed_and_in_flight_messages_apart(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="counts")["QueueUrl"]
    for index in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"delayed {index}", DelaySeconds=900)
    for index in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"ready {index}")
    assert _counts(sqs, url) == (5, 3, 0)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=60)["Messages"]
    assert len(received) == 2
    assert {message["Body"] for message in received} <= {f"ready {index}" for index in range(5)}
    assert _counts(sqs, url) == (3, 3, 2)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    assert _counts(sqs, url) == (3, 3, 1)


def test_a_send_makes_no_pass_over_the_queued_messages(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="sends")["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(index), "MessageBody": "later", "DelaySeconds": 900} for index in range(10)],
    )
    queue = _queue(sqs, url)
    queue._messages = CountingList(queue._messages)
    CountingList.passes = 0
    sqs.send_message(QueueUrl=url, MessageBody="one more", DelaySeconds=900)
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "b", "MessageBody": "y"}]
    )
    assert CountingList.passes == 0
    assert _counts(sqs, url) == (2, 11, 0)


def test_a_receive_makes_one_pass_however_many_messages_it_hands_out(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="receives")["QueueUrl"]
    for start in range(0, 30, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(index), "MessageBody": str(start + index)} for index in range(10)],
        )
    queue = _queue(sqs, url)
    queue._messages = CountingList(queue._messages)
    CountingList.passes = 0
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(received) == 10
    # moto's own code made 1 + 10 x 4 passes here: a listing, then every count for each message handed out.
    assert CountingList.passes == 1


def test_delete_takes_the_latest_or_an_older_handle_and_refuses_an_unknown_one(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="deletes", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="first")
    sqs.send_message(QueueUrl=url, MessageBody="second")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
    handles: dict[str, list[str]] = {}
    for _ in range(6):
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2).get("Messages", []):
            handles.setdefault(message["Body"], []).append(message["ReceiptHandle"])
    assert len(handles["second"]) >= 2
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])  # an older handle of "first"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["second"][-1])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["second"][-1])  # again: a no-op, as on SQS
    assert _counts(sqs, url) == (0, 0, 0)
    with pytest.raises(ClientError) as refused:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_a_waiting_receive_wakes_when_the_next_held_back_message_shows(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="waits")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=3)
    queue = _queue(sqs, url)
    waits: list[float] = []

    class RecordingCondition:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *_: Any) -> None:
            return None

        def wait_for(self, predicate: Any, timeout: float) -> bool:
            waits.append(timeout)
            return bool(predicate())

    queue._messages_lock = RecordingCondition()
    shows_at = queue._messages[0].delayed_until / 1000
    before = time.time()
    queue.wait_for_messages(20)
    # The wait ends when the delayed message shows (within 3 s), not after the caller's 20 s.
    assert waits and shows_at - before - 0.1 <= waits[0] <= shows_at - before + 0.1
    waits.clear()
    queue.wait_for_messages(1)
    assert waits == [1]  # the message shows after the caller's timeout: the caller's timeout stands


def test_batches_sent_from_many_threads_at_once_all_go_in_whole(sqs: Any) -> None:
    """The planner sends a moment's batches sixteen at a time: each send reads the queue's attributes, and
    one thread's counts must neither be read nor removed by another's (a batch that raised midway had put
    some of its messages in, and was sent again whole: duplicates, and a cursor left behind)."""
    url = sqs.create_queue(QueueName="parallel")["QueueUrl"]
    failures: list[str] = []

    def send(batch: int) -> None:
        entries = [{"Id": str(k), "MessageBody": f"{batch}-{k}", "DelaySeconds": 600} for k in range(10)]
        try:
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except Exception as error:  # any failure is the finding
            failures.append(repr(error))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(send, range(600)))
    assert failures == []
    assert _counts(sqs, url) == (0, 6000, 0)


def _send_group(sqs: Any, url: str, group: str, count: int) -> None:
    for start in range(0, count, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(index), "MessageBody": f"{group}-{start + index}", "MessageGroupId": group}
                for index in range(min(10, count - start))
            ],
        )


def test_a_flooding_tenants_messages_do_not_hold_another_tenants_behind_them(sqs: Any) -> None:
    """A fair queue: 500 messages of one group sent first, then 5 of another; the first receive already
    hands out the second group's, and each group's messages keep their own order."""
    url = sqs.create_queue(QueueName="fair")["QueueUrl"]
    _send_group(sqs, url, "flood", 500)
    _send_group(sqs, url, "quiet", 5)
    received = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert [body for body in received if body.startswith("quiet")] == [f"quiet-{n}" for n in range(5)]
    assert [body for body in received if body.startswith("flood")] == [f"flood-{n}" for n in range(5)]


def test_the_group_with_fewer_messages_in_flight_is_served_first(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="in-flight")["QueueUrl"]
    _send_group(sqs, url, "busy", 30)
    taken = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(taken) == 10  # 10 of "busy" in flight now
    _send_group(sqs, url, "new", 3)
    received = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]]
    assert received == ["new-0", "busy-10"]


def test_a_fifo_queue_keeps_its_own_order(sqs: Any) -> None:
    url = sqs.create_queue(
        QueueName="ordered.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    for body, group in (("a-0", "a"), ("a-1", "a"), ("b-0", "b")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    received = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert received == ["a-0", "a-1", "b-0"]
