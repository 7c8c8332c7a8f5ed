"""Delivery to AWS targets (SQS, Lambda, EventBridge, Step Functions) through boto3, with AWS errors
classified for the retry policy."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    ParamValidationError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from tickwork.domain.models import EventBridgeTarget, LambdaTarget, SqsTarget, StepFunctionsTarget
from tickwork.targets.envelope import Delivery
from tickwork.targets.result import TargetResult, permanent, retryable, success

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

AwsTarget = SqsTarget | LambdaTarget | EventBridgeTarget | StepFunctionsTarget


class TargetClients(Protocol):
    """Where the AWS invokers get their clients; each is built on first use, if at all."""

    def sqs(self) -> SQSClient: ...

    def lambda_(self) -> LambdaClient: ...

    def events(self) -> EventBridgeClient: ...

    def stepfunctions(self) -> SFNClient: ...


# The run-level retry policy does the real retrying; botocore only smooths over brief blips.
DEFAULT_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=15
)


class LazyClients:
    """Builds each boto3 client the first time it is asked for and keeps it. ``endpoint_url`` points every
    client at one endpoint (moto in local mode). Safe to share between threads: a boto3 session must not
    build clients in two threads at once, so building is serialised (the clients themselves are safe)."""

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        config: Config | None = None,
        session: boto3.session.Session | None = None,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self.config = config or DEFAULT_CLIENT_CONFIG
        self._session = session
        self._clients: dict[str, Any] = {}
        self._building = threading.Lock()

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._building:
                client = self._clients.get(service)
                if client is None:
                    if self._session is None:
                        self._session = boto3.session.Session()
                    client = self._clients[service] = self._session.client(
                        service,  # type: ignore[call-overload]
                        region_name=self.region,
                        endpoint_url=self.endpoint_url,
                        config=self.config,
                    )
        return client

    def sqs(self) -> SQSClient:
        client: SQSClient = self._client("sqs")
        return client

    def lambda_(self) -> LambdaClient:
        client: LambdaClient = self._client("lambda")
        return client

    def events(self) -> EventBridgeClient:
        client: EventBridgeClient = self._client("events")
        return client

    def stepfunctions(self) -> SFNClient:
        client: SFNClient = self._client("stepfunctions")
        return client


def invoke_aws(target: AwsTarget, delivery: Delivery, body: bytes, clients: TargetClients) -> TargetResult:
    if isinstance(target, SqsTarget):
        return _call_aws("SQS", "SendMessage", lambda: _send_sqs(target, delivery, body, clients))
    if isinstance(target, LambdaTarget):
        return _call_aws("Lambda", "Invoke", lambda: _invoke_lambda(target, body, clients))
    if isinstance(target, EventBridgeTarget):
        return _call_aws("EventBridge", "PutEvents", lambda: _put_event(target, body, clients))
    return _call_aws(
        "Step Functions", "StartExecution", lambda: _start_execution(target, delivery, body, clients)
    )


_THROTTLING = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "ExecutionLimitExceeded",
    }
)
_UNAVAILABLE = frozenset(
    {
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalError",
        "InternalFailure",
        "InternalException",
        "InternalServerError",
        "InternalServiceError",
        "ServiceException",
        "RequestTimeout",
        "RequestTimeoutException",
        "ResourceConflictException",  # Lambda: the function is being updated
        "ResourceNotReadyException",
    }
)
_NOT_FOUND = frozenset(
    {
        "ResourceNotFound",
        "ResourceNotFoundException",
        "NonExistentQueue",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "StateMachineDoesNotExist",
        "StateMachineDeleting",
    }
)


def classify_client_error(error: ClientError, *, service: str, operation: str) -> TargetResult:
    """Throttling and service-side failures may pass later; anything else is the target's configuration
    (missing resource, no permission, invalid input) and will not."""
    details = error.response.get("Error", {})
    code = str(details.get("Code") or "Unknown")
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = f"{service} {operation} failed: {code}: {details.get('Message') or ''}".rstrip(": ")
    if code in _THROTTLING or "throttl" in code.lower() or status == 429:
        return retryable("throttled", message, status)
    if code in _UNAVAILABLE or (status is not None and status >= 500):
        return retryable("target_unavailable", message, status)
    if code in _NOT_FOUND:
        return permanent("target_not_found", message, status)
    if "accessdenied" in code.lower().replace(".", "") or status == 403:
        return permanent("access_denied", message, status)
    return permanent("target_rejected", message, status)


def _call_aws(service: str, operation: str, call: Callable[[], TargetResult]) -> TargetResult:
    try:
        return call()
    except ClientError as error:
        return classify_client_error(error, service=service, operation=operation)
    except (ConnectTimeoutError, ReadTimeoutError):
        return retryable("timeout", f"{service} {operation} timed out")
    except (BotoConnectionError, HTTPClientError) as error:
        return retryable(
            "connection_error", f"{service} {operation} could not connect ({type(error).__name__})"
        )
    except ParamValidationError as error:
        return permanent("target_rejected", f"{service} {operation} refused the request: {error}")
    except BotoCoreError as error:
        # Credentials or configuration of this deployment, not the target: worth another try.
        return retryable("aws_error", f"{service} {operation} failed ({type(error).__name__})")


_SQS_TOKEN = re.compile(r"^[!-~]{1,128}$")


def _sqs_token(value: str) -> str:
    """FIFO group and deduplication ids allow 128 printable ASCII characters."""
    return value if _SQS_TOKEN.match(value) else hashlib.sha256(value.encode()).hexdigest()


def _send_sqs(target: SqsTarget, delivery: Delivery, body: bytes, clients: TargetClients) -> TargetResult:
    extra: dict[str, Any] = {}
    if target.queue_url.endswith(".fifo"):
        # One group per job keeps a job's runs in order; one dedup id per attempt drops a re-sent attempt.
        extra = {
            "MessageGroupId": _sqs_token(delivery.job_id),
            "MessageDeduplicationId": _sqs_token(f"{delivery.run_id}:a{delivery.attempt}"),
        }
    clients.sqs().send_message(
        QueueUrl=target.queue_url,
        MessageBody=body.decode(),
        MessageAttributes={
            "tickwork-run-id": {"DataType": "String", "StringValue": delivery.run_id},
            "tickwork-attempt": {"DataType": "Number", "StringValue": str(delivery.attempt)},
        },
        **extra,
    )
    return success()


def _invoke_lambda(target: LambdaTarget, body: bytes, clients: TargetClients) -> TargetResult:
    response = clients.lambda_().invoke(
        FunctionName=target.function_arn, InvocationType="Event", Payload=body
    )
    return success(response.get("StatusCode"))


_EVENTS_RETRYABLE = ("throttl", "internal", "unavailable", "timeout")


def _put_event(target: EventBridgeTarget, body: bytes, clients: TargetClients) -> TargetResult:
    response = clients.events().put_events(
        Entries=[
            {
                "EventBusName": target.event_bus_name,
                "Source": target.source,
                "DetailType": target.detail_type,
                "Detail": body.decode(),
            }
        ]
    )
    if not response.get("FailedEntryCount"):
        return success()
    entry = (response.get("Entries") or [{}])[0]
    code = entry.get("ErrorCode") or "Unknown"
    message = f"EventBridge PutEvents rejected the event: {code}: {entry.get('ErrorMessage') or ''}"
    if any(marker in code.lower() for marker in _EVENTS_RETRYABLE):
        return retryable("throttled" if "throttl" in code.lower() else "target_unavailable", message)
    return permanent("target_rejected", message)


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_PLAIN_RUN_ID = re.compile(r"^[A-Za-z0-9:-]+$")
MAX_EXECUTION_NAME = 80


def execution_name(run_id: str, attempt: int) -> str:
    """A Step Functions execution name unique to this run attempt: at most 80 of ``[A-Za-z0-9_-]``.

    Two attempts must never share a name, since a taken name reads as "already started". Turning ``:`` into
    ``_`` loses nothing when the run id has no ``_`` of its own; any other run id gets a hash of itself.
    """
    suffix = f"-a{attempt}"
    safe = _UNSAFE_NAME_CHARS.sub("_", run_id)
    if _PLAIN_RUN_ID.match(run_id) and len(safe) + len(suffix) <= MAX_EXECUTION_NAME:
        return safe + suffix
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
    head = safe[: MAX_EXECUTION_NAME - len(suffix) - len(digest) - 1]
    return f"{head}_{digest}{suffix}"


def _start_execution(
    target: StepFunctionsTarget, delivery: Delivery, body: bytes, clients: TargetClients
) -> TargetResult:
    try:
        clients.stepfunctions().start_execution(
            stateMachineArn=target.state_machine_arn,
            name=execution_name(delivery.run_id, delivery.attempt),
            input=body.decode(),
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            return success()  # this very attempt was started before: a duplicate delivery
        raise
    return success()
