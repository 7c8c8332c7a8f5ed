"""What delivery to AWS targets shares: the boto3 clients, built lazily, and AWS errors classified for the
retry policy. Each AWS kind (SQS, Lambda, EventBridge, Step Functions) has its module in
:mod:`tickwork.targets.kinds`."""

from __future__ import annotations

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

from tickwork.targets.result import TargetResult, permanent, retryable

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient


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


def call_aws(service: str, operation: str, call: Callable[[], TargetResult]) -> TargetResult:
    """Make one AWS call for a delivery, with whatever it raises classified."""
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
