"""Drives the execution engine under moto with a fake clock: planner ticks, sweeps and worker batches."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from tickwork_local.atomic import serialise_dynamodb


class WorkerDied(BaseException):
    """A worker process killed mid-run: not an Exception, so nothing in the worker catches it."""


class FakeClock:
    """Time that moves only when a test (or a worker's wait) moves it."""

    def __init__(self, now: datetime):
        self.now = now
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += timedelta(seconds=seconds)

    def advance(self, **delta: float) -> datetime:
        with self._lock:
            self.now += timedelta(**delta)
            return self.now


class RecordingMetrics:
    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.timings: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def count(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + value

    def milliseconds(self, name: str, value: float) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append(value)


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """An SQS event as the Lambda event source mapping delivers it."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1795338903000",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1795338903001",
                },
                "messageAttributes": {},
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "eu-west-1",
            }
            for message in messages
        ]
    }


def receive(sqs: Any, queue_url: str, max_messages: int = 10) -> list[dict[str, Any]]:
    response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=max_messages, VisibilityTimeout=30)
    messages: list[dict[str, Any]] = response.get("Messages", [])
    return messages


def deliver(
    sqs: Any,
    queue_url: str,
    messages: list[dict[str, Any]],
    record_handler: Callable[[Any], str],
) -> dict[str, Any]:
    """One worker invocation over ``messages``, then what the event source mapping does: delete the ones
    that succeeded; failed ones come back after their visibility timeout."""
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    event = sqs_event(messages, "arn:aws:sqs:eu-west-1:123456789012:tickwork-runs")
    response: dict[str, Any] = dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor)
    )
    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return response


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A real webhook receiver on loopback. ``script[path]`` lists the statuses to answer, in order; the
    last one repeats. ``delays[path]`` holds each answer back that many seconds; ``most_at_once[path]`` is
    the most requests of a path it had in progress at the same time."""

    server: ThreadingHTTPServer
    requests: list[Received] = field(default_factory=list)
    script: dict[str, list[int]] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    most_at_once: dict[str, int] = field(default_factory=dict)
    _in_progress: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def for_path(self, path: str) -> list[Received]:
        return [request for request in self.requests if request.path == path]


def start_receiver() -> Iterator[Receiver]:
    import time

    receiver: Receiver | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            assert receiver is not None
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with receiver._lock:
                receiver.requests.append(Received(self.path, dict(self.headers.items()), body, time.time()))
                statuses = receiver.script.get(self.path, [200])
                status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
                now_in_progress = receiver._in_progress.get(self.path, 0) + 1
                receiver._in_progress[self.path] = now_in_progress
                receiver.most_at_once[self.path] = max(
                    receiver.most_at_once.get(self.path, 0), now_in_progress
                )
            try:
                time.sleep(receiver.delays.get(self.path, 0.0))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            finally:
                with receiver._lock:
                    receiver._in_progress[self.path] -= 1

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def make_requests_atomic(client: Any) -> None:
    """moto in process does not lock; see ``tickwork_local.atomic``."""
    serialise_dynamodb(client.meta.events)
