"""What the local stack, the tests and the benchmarks run tickwork on: moto in this process with the local
stack's changes to it, the run queue's event source mapping (the pump), and a loopback webhook receiver.

- :func:`moto_aws` starts moto as the local stack runs it; with a ``clock``, moto's SQS tells time by it.
- :class:`Pump` does what the Lambda event source mapping of an SQS queue does: it receives batches of up to
  ten messages, hands each to the worker as an SQS event (:func:`sqs_event`), and deletes the messages the
  partial batch response (``ReportBatchItemFailures``) does not name; the others come back after their
  visibility timeout. :func:`partial_batches` makes such a handler of a record handler, as the worker
  function does with Powertools' batch processing.
- :class:`Receiver` is a webhook target on 127.0.0.1 that records every request (method, path, headers,
  body, arrival time) and answers as told, per path.

Nothing here is imported by the Lambda functions; moto and Powertools are imported only when used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tickwork_local.gateway import Server

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.base import BasePartialBatchProcessor
    from mypy_boto3_sqs import SQSClient

DEFAULT_REGION = "us-east-1"

Message = Mapping[str, Any]
"""A message as SQS ``ReceiveMessage`` returns it."""
BatchHandler = Callable[[dict[str, Any]], Mapping[str, Any]]
"""A worker invocation: an SQS event in, a partial batch response (``batchItemFailures``) out."""


# --- moto ---------------------------------------------------------------------------------------------------
class _Untracked(list[Any]):
    """A list that keeps nothing appended to it."""

    def append(self, item: Any) -> None:
        return None


def stop_moto_instance_tracking() -> None:
    """moto keeps every DynamoDB item and SQS message object it ever made, for its dashboard, and each
    transaction deep-copies the tables it writes: the process grew by gigabytes in ten minutes of steady
    load. Nothing here has a use for the dashboard. moto starts keeping them again after each reset."""
    import moto.dynamodb.models
    import moto.sqs.models  # noqa: F401 - importing registers the models below
    from moto.core.model_instances import model_data

    for service in ("dynamodb", "sqs"):
        for model in model_data.get(service, {}).values():
            model.instances_tracked = _Untracked()  # type: ignore[attr-defined]


@contextmanager
def moto_aws(*, clock: Callable[[], datetime] | None = None) -> Iterator[None]:
    """moto in this process for the length of the block, as the local stack runs it: with its changes to
    moto's request dispatch, DynamoDB and SQS (``moto_core``, ``moto_dynamodb``, ``moto_sqs``; installed once
    per process, they change no answer) and without moto's copy of every object it made. With ``clock``,
    moto's SQS reads delays and visibility timeouts from it (:func:`sqs_follows`)."""
    from moto import mock_aws

    from tickwork_local import moto_core, moto_dynamodb, moto_sqs

    stop_moto_instance_tracking()
    moto_core.install()
    moto_dynamodb.install()
    moto_sqs.install()
    with mock_aws():
        if clock is None:
            yield
        else:
            with sqs_follows(clock):
                yield


class _ClockTime:
    """The ``time`` module as ``tickwork_local.moto_sqs`` sees it while moto follows a fake clock."""

    def __init__(self, clock: Callable[[], datetime]):
        self._clock = clock

    def time(self) -> float:
        return self._clock().timestamp()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextmanager
def sqs_follows(clock: Callable[[], datetime]) -> Iterator[None]:
    """moto's SQS (and the local stack's changes to it) measure delays, visibility timeouts and retention on
    the wall clock; make them read ``clock`` for the length of the block."""
    import moto.sqs.models

    from tickwork_local import moto_sqs

    sqs_models: Any = moto.sqs.models  # its time functions are imported names, replaced for a while
    changes: Any = moto_sqs
    original_seconds, original_millis = sqs_models.unix_time, sqs_models.unix_time_millis
    original_time = changes.time

    def unix_time(dt: datetime | None = None) -> float:
        return float(original_seconds(dt)) if dt is not None else clock().timestamp()

    def unix_time_millis(dt: datetime | None = None) -> float:
        return float(original_millis(dt)) if dt is not None else clock().timestamp() * 1000

    sqs_models.unix_time, sqs_models.unix_time_millis = unix_time, unix_time_millis
    changes.time = _ClockTime(clock)
    try:
        yield
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = original_seconds, original_millis
        changes.time = original_time


# --- the pump: the run queue's event source mapping ---------------------------------------------------------
def sqs_record(message: Message, queue_url: str) -> dict[str, Any]:
    """A received SQS message, shaped as the Lambda event source mapping delivers it."""
    name = queue_url.rstrip("/").rsplit("/", 1)[-1]
    region = os.environ.get("AWS_DEFAULT_REGION", DEFAULT_REGION)
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{region}:000000000000:{name}",
        "awsRegion": region,
    }


def sqs_event(messages: Sequence[Message], queue_url: str) -> dict[str, Any]:
    """The event of one worker invocation over ``messages``."""
    return {"Records": [sqs_record(message, queue_url) for message in messages]}


def partial_batches(
    record_handler: Callable[[Any], Any],
    *,
    processor: Callable[[], BasePartialBatchProcessor] | None = None,
) -> BatchHandler:
    """A worker invocation around ``record_handler``, as the worker function has it: Powertools' partial
    batch processing, a new ``processor`` for each batch (by default Powertools' SQS ``BatchProcessor``, one
    record after another). A record whose handler raises an ``Exception`` is a failure of the response; any
    other exception (a process dying) ends the invocation, and the pump then deletes nothing."""

    def handle(event: dict[str, Any]) -> Mapping[str, Any]:
        from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

        made = (
            processor()
            if processor is not None
            else BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        )
        return process_partial_response(event=event, record_handler=record_handler, processor=made)

    return handle


class InvocationCut(BaseException):
    """Raised while a record waits (for its fire) when its invocation is cut short by the stack stopping:
    nothing of the batch is deleted, and the pump hands its messages back at once. A ``BaseException``, so
    the worker's handler does not take it for a failure of the record."""


class Pump:
    """The Lambda event source mapping of one SQS queue into ``handler``.

    Each batch is one receive of up to ``batch_size`` messages (1 to 10), long-polled for ``wait_seconds``
    and hidden for ``visibility_timeout`` when given (else the queue's own settings), and one invocation of
    ``handler`` with them as an SQS event. The messages the response does not name as failures are deleted;
    the failed ones come back after their visibility timeout. If ``cut_short()`` is true when the invocation
    returns, nothing is deleted, as when a Lambda is killed mid-batch. ``pollers`` is how many batches
    :meth:`start` handles at once.

    ``serve_order``, when given, makes it the mappings of several queues with shared pollers: before each
    batch it names the queues to try in order; the first that gives messages is served, and only the last
    one is long-polled."""

    def __init__(
        self,
        sqs: SQSClient,
        queue_url: str,
        handler: BatchHandler,
        *,
        batch_size: int = 10,
        pollers: int = 1,
        wait_seconds: int | None = None,
        visibility_timeout: int | None = None,
        cut_short: Callable[[], bool] = lambda: False,
        serve_order: Callable[[], Sequence[str]] | None = None,
    ):
        if not 1 <= batch_size <= 10:
            raise ValueError(f"batch_size must be 1 to 10 (SQS's most per receive), not {batch_size}")
        if pollers < 1:
            raise ValueError(f"pollers must be at least 1, not {pollers}")
        self.sqs = sqs
        self.queue_url = queue_url
        self.handler = handler
        self.batch_size = batch_size
        self.pollers = pollers
        self.wait_seconds = wait_seconds
        self.visibility_timeout = visibility_timeout
        self.cut_short = cut_short
        self.serve_order = serve_order

    def receive(self, queue_url: str | None = None, *, wait: bool = True) -> list[Message]:
        """One receive: the messages of the next batch (none if the queue has nothing visible)."""
        options: dict[str, Any] = {}
        if self.wait_seconds is not None:
            options["WaitTimeSeconds"] = self.wait_seconds if wait else 0
        if self.visibility_timeout is not None:
            options["VisibilityTimeout"] = self.visibility_timeout
        response = self.sqs.receive_message(
            QueueUrl=queue_url or self.queue_url, MaxNumberOfMessages=self.batch_size, **options
        )
        return list(response.get("Messages", []))

    def deliver(self, messages: Sequence[Message], queue_url: str | None = None) -> Mapping[str, Any]:
        """One invocation of the handler over ``messages``, then the deletes; returns its response."""
        if not messages:
            return {"batchItemFailures": []}
        queue_url = queue_url or self.queue_url
        try:
            response = self.handler(sqs_event(messages, queue_url))
        except InvocationCut:
            self.hand_back(messages, queue_url)
            return {"batchItemFailures": [{"itemIdentifier": message["MessageId"]} for message in messages]}
        if self.cut_short():
            return response
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        self.delete([message for message in messages if message["MessageId"] not in failed], queue_url)
        return response

    def hand_back(self, messages: Sequence[Message], queue_url: str | None = None) -> None:
        """Make a batch cut short while it waited visible again at once: what it had not started is received
        again as soon as a poller runs."""
        self.sqs.change_message_visibility_batch(
            QueueUrl=queue_url or self.queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0}
                for index, message in enumerate(messages)
            ],
        )

    def delete(self, messages: Sequence[Message], queue_url: str | None = None) -> None:
        """The handled messages (a receive's, so at most ten) in one DeleteMessageBatch, as the event source
        mapping deletes them. A message not deleted (its receipt expired) comes back after its visibility
        timeout."""
        if not messages:
            return
        response = self.sqs.delete_message_batch(
            QueueUrl=queue_url or self.queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                for index, message in enumerate(messages)
            ],
        )
        for failure in response.get("Failed", []):
            logging.getLogger("tickwork").warning(
                "message not deleted; it comes back after its visibility timeout",
                extra={"message_id": messages[int(failure["Id"])]["MessageId"], "code": failure.get("Code")},
            )

    def once(self) -> int:
        """One pass: receive once (from the first queue of ``serve_order`` with messages), deliver what came;
        returns how many messages it handled."""
        messages, queue_url = self.next_batch()
        self.deliver(messages, queue_url)
        return len(messages)

    def next_batch(self) -> tuple[list[Message], str]:
        """One receive (from the first queue of ``serve_order`` with messages): the batch and its queue."""
        if self.serve_order is None:
            return self.receive(), self.queue_url
        queue_urls = list(self.serve_order())
        for position, queue_url in enumerate(queue_urls):
            messages = self.receive(queue_url, wait=position == len(queue_urls) - 1)
            if messages:
                return messages, queue_url
        return [], self.queue_url

    def drain(self, rounds: int | None = None) -> int:
        """Passes until a receive finds nothing (at most ``rounds`` of them); returns how many messages."""
        handled = 0
        passes = 0
        while rounds is None or passes < rounds:
            passes += 1
            count = self.once()
            if not count:
                break
            handled += count
        return handled

    def poll(
        self,
        stopped: Callable[[], bool],
        *,
        pause: Callable[[float], object] = time.sleep,
        in_flight: int = 1,
    ) -> None:
        """One poller: passes until ``stopped()``. A pass that fails is logged, and the poller waits a second
        (``pause``) before the next. With ``in_flight`` above one, the poller receives again while up to that
        many of its batches are being handled, each by an invocation of its own, as the event source mapping
        scales its invocations out (a batch that waits for its fires holds no other back); it returns once
        they have all ended."""
        if in_flight <= 1:
            while not stopped():
                try:
                    self.once()
                except Exception:
                    logging.getLogger("tickwork").exception("worker poll failed")
                    pause(1.0)
            return
        free = threading.BoundedSemaphore(in_flight)
        invocations: list[threading.Thread] = []

        def invoke(messages: list[Message], queue_url: str) -> None:
            try:
                self.deliver(messages, queue_url)
            except Exception:
                logging.getLogger("tickwork").exception("worker invocation failed")
            finally:
                free.release()

        while not stopped():
            if not free.acquire(timeout=1.0):
                continue
            try:
                messages, queue_url = self.next_batch()
            except Exception:
                free.release()
                logging.getLogger("tickwork").exception("worker poll failed")
                pause(1.0)
                continue
            if not messages:
                free.release()
                continue
            invocation = threading.Thread(target=invoke, args=(messages, queue_url), daemon=True)
            invocation.start()
            invocations = [thread for thread in invocations if thread.is_alive()] + [invocation]
        for invocation in invocations:
            invocation.join()

    def start(
        self,
        stopped: Callable[[], bool],
        *,
        name: str = "tickwork-pump",
        pause: Callable[[float], object] = time.sleep,
    ) -> list[threading.Thread]:
        """``pollers`` daemon threads, each running :meth:`poll` until ``stopped()``."""
        threads = [
            threading.Thread(
                target=self.poll,
                args=(stopped,),
                kwargs={"pause": pause},
                name=f"{name}-{index}",
                daemon=True,
            )
            for index in range(self.pollers)
        ]
        for thread in threads:
            thread.start()
        return threads


# --- the loopback receiver ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reply:
    """What the receiver answers: a status, headers, a body, after ``delay`` seconds."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


OK = Reply(200, body=b"ok")


@dataclass(frozen=True)
class Received:
    """A request as it arrived: ``at`` is the receiver's clock then, ``status`` what it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    method: str = "POST"
    status: int = 0

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """A real webhook target on 127.0.0.1, from construction until :meth:`close` (or the end of its ``with``).

    Each request is recorded in ``requests`` as it arrives (``clock`` tells its time), then answered:

    - by ``answer(request)`` when that returns a reply;
    - else by ``replies[path]``;
    - else by the statuses ``script[path]`` lists, in order, the last one repeating (with the body ``ok``);
    - else by ``default`` (200 ``ok``).

    ``delays[path]`` holds each answer of a path back that many more seconds. ``most_at_once[key]`` is the
    most requests of one ``group(request)`` (by default its path) it had in progress at the same time.
    ``protocol_version`` "HTTP/1.1" keeps connections open between requests."""

    def __init__(
        self,
        *,
        replies: Mapping[str, Reply] | None = None,
        default: Reply = OK,
        answer: Callable[[Received], Reply | None] | None = None,
        group: Callable[[Received], str] = lambda request: request.path,
        clock: Callable[[], float] = time.time,
        protocol_version: str = "HTTP/1.0",
    ):
        self.requests: list[Received] = []
        self.replies: dict[str, Reply] = dict(replies or {})
        self.script: dict[str, list[int]] = {}
        self.delays: dict[str, float] = {}
        self.most_at_once: dict[str, int] = {}
        self.default = default
        self.answer = answer
        self.group = group
        self.clock = clock
        self._in_progress: dict[str, int] = {}
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _handler_class(self, protocol_version))
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="receiver", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        port: int = self.server.server_address[1]
        return port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def for_path(self, path: str) -> list[Received]:
        return [request for request in self.requests if request.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _reply(self, request: Received) -> Reply:
        """The answer to ``request``; called under the lock."""
        if self.answer is not None:
            answered = self.answer(request)
            if answered is not None:
                return answered
        if request.path in self.replies:
            return self.replies[request.path]
        statuses = self.script.get(request.path)
        if statuses:
            return dataclasses.replace(OK, status=statuses.pop(0) if len(statuses) > 1 else statuses[0])
        return self.default

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = Received(handler.path, dict(handler.headers.items()), body, self.clock(), handler.command)
        with self._lock:
            reply = self._reply(request)
            self.requests.append(dataclasses.replace(request, status=reply.status))
            key = self.group(request)
            in_progress = self._in_progress[key] = self._in_progress.get(key, 0) + 1
            self.most_at_once[key] = max(self.most_at_once.get(key, 0), in_progress)
        try:
            delay = reply.delay + self.delays.get(request.path, 0.0)
            if delay:
                time.sleep(delay)
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(reply.body)))
            handler.end_headers()
            handler.wfile.write(reply.body)
        finally:
            with self._lock:
                self._in_progress[key] -= 1


class _Server(Server):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a timeout on a held answer) is expected; anything else is reported.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _handler_class(receiver: Receiver, protocol: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = protocol

        def _handle(self) -> None:
            receiver._serve(self)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 (http.server's names)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
