"""The harness the local stack, the tests and the benchmarks share (``tickwork_local.harness``): the run
queue's event source mapping (the pump) under moto as the local stack runs it, moto on a fake clock, and the
loopback webhook receiver."""

from __future__ import annotations

import http.client
import io
import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from tickwork_local.harness import Pump, Received, Receiver, Reply, moto_aws, partial_batches

from tests.support.engine import FakeClock


@pytest.fixture
def sqs() -> Iterator[Any]:
    with moto_aws():
        yield boto3.client("sqs", region_name="eu-west-1")


def queue_with(sqs: Any, *bodies: str, name: str = "runs") -> str:
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    return url


def depth(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, in flight) messages of the queue."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


# --- the pump -----------------------------------------------------------------------------------------------
def test_a_pass_deletes_what_succeeded_and_leaves_the_failures_to_their_visibility_timeout(sqs: Any) -> None:
    # Given three messages, one of which its record handler fails
    url = queue_with(sqs, "ok-1", "fail", "ok-2")
    seen: list[str] = []

    def handle(record: Any) -> str:
        seen.append(record.body)
        if record.body == "fail":
            raise ValueError("a failing record")
        return "done"

    pump = Pump(sqs, url, partial_batches(handle), visibility_timeout=60)
    # When one pass runs
    handled = pump.once()
    # Then every message reached the handler as an SQS record, the two successes are gone, and the failure
    # waits out its visibility timeout
    assert handled == 3 and sorted(seen) == ["fail", "ok-1", "ok-2"]
    assert depth(sqs, url) == (0, 1)


def test_a_batch_is_deleted_in_one_call_as_the_event_source_mapping_does(sqs: Any) -> None:
    url = queue_with(sqs, *[f"m{index}" for index in range(10)])
    calls: list[str] = []
    sqs.meta.events.register("before-call.sqs", lambda model, **_: calls.append(model.name))
    assert Pump(sqs, url, partial_batches(lambda record: "done"), batch_size=10).once() == 10
    assert calls == ["ReceiveMessage", "DeleteMessageBatch"]
    assert depth(sqs, url) == (0, 0)


def test_the_event_is_what_the_event_source_mapping_delivers(sqs: Any) -> None:
    url = queue_with(sqs, '{"n": 1}')
    events: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        events.append(event)
        return {"batchItemFailures": []}

    Pump(sqs, url, invoke).once()

    ((record,),) = [event["Records"] for event in events]
    assert record["body"] == '{"n": 1}' and record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(":runs") and record["messageId"] and record["receiptHandle"]


def test_batches_hold_at_most_batch_size_messages_and_drain_empties_the_queue(sqs: Any) -> None:
    url = queue_with(sqs, *(f"m{n}" for n in range(25)))
    sizes: list[int] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        sizes.append(len(event["Records"]))
        return {"batchItemFailures": []}

    assert Pump(sqs, url, invoke, batch_size=4).drain(rounds=2) == 8
    assert Pump(sqs, url, invoke).drain() == 17
    assert max(sizes) <= 10 and sizes[:2] == [4, 4] and sum(sizes) == 25
    assert depth(sqs, url) == (0, 0)
    with pytest.raises(ValueError, match="batch_size"):
        Pump(sqs, url, invoke, batch_size=11)


def test_a_batch_cut_short_or_a_dying_worker_deletes_nothing(sqs: Any) -> None:
    url = queue_with(sqs, "a", "b")
    stopped = threading.Event()

    def stop_midway(record: Any) -> str:
        stopped.set()
        return "done"

    # A poller stopped while its batch ran (a Lambda killed mid-batch): the handler's successes stay queued
    assert Pump(sqs, url, partial_batches(stop_midway), cut_short=stopped.is_set).once() == 2
    assert depth(sqs, url) == (0, 2)

    class Died(BaseException):
        pass

    def die(record: Any) -> str:
        raise Died

    # A process that dies mid-batch: the invocation ends with it, and nothing is deleted
    url = queue_with(sqs, "c", name="other")
    with pytest.raises(Died):
        Pump(sqs, url, partial_batches(die)).once()
    assert depth(sqs, url) == (0, 1)


def test_pollers_side_by_side_hand_each_message_out_once_until_stopped(sqs: Any) -> None:
    url = queue_with(sqs, *(f"m{n}" for n in range(40)))
    seen: list[str] = []
    threads_seen: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def handle(record: Any) -> str:
        with lock:
            seen.append(record.body)
            threads_seen.add(threading.current_thread().name)
        time.sleep(0.01)
        return "done"

    pump = Pump(sqs, url, partial_batches(handle), batch_size=5, pollers=3, wait_seconds=0)
    threads = pump.start(stop.is_set, name="test-pump")
    deadline = time.monotonic() + 20
    while len(seen) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(seen) == sorted(f"m{n}" for n in range(40))
    assert len(threads) == 3 and not any(thread.is_alive() for thread in threads)
    assert threads_seen <= {f"test-pump-{index}" for index in range(3)}
    assert depth(sqs, url) == (0, 0)


def test_a_failed_poll_is_logged_and_the_poller_waits_before_the_next(sqs: Any) -> None:
    url = queue_with(sqs)
    sqs.delete_queue(QueueUrl=url)
    pauses: list[float] = []
    pump = Pump(sqs, url, partial_batches(str))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger("tickwork").addHandler(handler)
    try:
        pump.poll(lambda: len(pauses) >= 2, pause=pauses.append)
    finally:
        logging.getLogger("tickwork").removeHandler(handler)

    assert pauses == [1.0, 1.0]
    assert stream.getvalue().count("worker poll failed") == 2
    assert "QueueDoesNotExist" in stream.getvalue()


# --- moto on a fake clock -----------------------------------------------------------------------------------
def test_moto_as_the_local_stack_runs_it_tells_delays_and_retention_by_the_fake_clock() -> None:
    # Given a fake clock a year behind the wall clock (SQS keeps a message four days by default)
    clock = FakeClock(datetime.now(UTC) - timedelta(days=365))
    with moto_aws(clock=clock):
        sqs = boto3.client("sqs", region_name="eu-west-1")
        url = queue_with(sqs)
        sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=10)
        # When the fake clock has not reached the delay's end, and then has
        before = Pump(sqs, url, partial_batches(str)).receive()
        clock.advance(seconds=11)
        after = Pump(sqs, url, partial_batches(str)).receive()
    # Then the message shows only once the fake clock says so, and it has not expired by the wall clock
    assert before == [] and [message["Body"] for message in after] == ["later"]


# --- the receiver -------------------------------------------------------------------------------------------
def post(receiver: Receiver, path: str, body: bytes = b"{}", method: str = "POST") -> tuple[int, bytes, Any]:
    """(status, body, headers) of one request, redirects not followed."""
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={"X-Test": "yes"})
        response = connection.getresponse()
        return response.status, response.read(), response.headers
    finally:
        connection.close()


def test_the_receiver_records_each_request_and_answers_200_ok_by_default() -> None:
    with Receiver(clock=lambda: 1234.5) as receiver:
        status, body, _ = post(receiver, "/hook", b'{"run_id": "r1"}')
        assert post(receiver, "/other", method="PUT")[0] == 200
    assert (status, body) == (200, b"ok")
    first, second = receiver.requests
    assert (first.method, first.path, first.body, first.at, first.status) == (
        "POST",
        "/hook",
        b'{"run_id": "r1"}',
        1234.5,
        200,
    )
    assert first.headers["X-Test"] == "yes" and first.json() == {"run_id": "r1"}
    assert (second.method, receiver.for_path("/other")) == ("PUT", [second])


def test_the_receiver_answers_by_answer_then_replies_then_script_then_default() -> None:
    def answer(request: Received) -> Reply | None:
        return Reply(418, body=b"teapot") if request.path == "/answer" else None

    with Receiver(
        answer=answer, replies={"/answer": Reply(200), "/reply": Reply(302, {"Location": "/x"})}
    ) as receiver:
        receiver.script["/flaky"] = [503, 503, 200]
        answers = [post(receiver, path)[:2] for path in ("/answer", "/flaky", "/flaky", "/flaky", "/flaky")]
        status, _, headers = post(receiver, "/reply")
    assert answers == [(418, b"teapot"), (503, b"ok"), (503, b"ok"), (200, b"ok"), (200, b"ok")]
    assert (status, headers["Location"]) == (302, "/x")
    assert [request.status for request in receiver.requests] == [418, 503, 503, 200, 200, 302]


def test_held_answers_count_the_requests_in_progress_at_once_per_group() -> None:
    with Receiver(group=lambda request: json.loads(request.body)["run_id"]) as receiver:
        receiver.delays["/slow"] = 0.3
        threads = [
            threading.Thread(target=post, args=(receiver, "/slow", json.dumps({"run_id": run}).encode()))
            for run in ("a", "a", "b")
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        held = time.monotonic() - started
    assert receiver.most_at_once == {"a": 2, "b": 1}
    assert held >= 0.3


def test_the_local_http_servers_take_a_burst_of_connections_before_accepting_any() -> None:
    """A burst of new connections waits in the listen backlog while the server is busy: with the default
    backlog of 5, the kernel drops the rest and each of their clients tries again only a second later."""
    import socket
    from http.server import BaseHTTPRequestHandler

    from tickwork_local.gateway import Server

    server = Server(("127.0.0.1", 0), BaseHTTPRequestHandler)  # listening, not yet accepting
    clients: list[socket.socket] = []
    try:
        for _ in range(64):
            client = socket.socket()
            client.settimeout(0.5)  # far below the one-second retry of a dropped connection attempt
            client.connect(server.server_address)
            clients.append(client)
        assert len(clients) == 64
    finally:
        for client in clients:
            client.close()
        server.server_close()
    # the loopback receiver and `tickwork receive` are such servers
    from tickwork_local.cli.receive import make_receiver

    with Receiver() as receiver:
        assert isinstance(receiver.server, Server)
    receive = make_receiver("127.0.0.1", 0, None, 200, io.StringIO())
    assert isinstance(receive, Server)
    receive.server_close()
