"""DynamoDB's item calls and SQS's message calls handed straight to moto's handlers, in process.

Through ``mock_aws`` a call is signed, sent to moto's stub as an HTTP request, parsed back into parameters by
moto (werkzeug request, botocore shapes), answered, and the answer parsed again by botocore: about a third of
a create's CPU in the local stack went there rather than into DynamoDB's logic. For the item operations,
the client's serialised body is given to moto's handler as its parameters and moto's answer to botocore's
own response parser, so the caller gets what it got before, errors included (with their modelled fields, such
as a failed condition's ``Item`` or a cancelled transaction's ``CancellationReasons``). SQS's message calls
(JSON protocol too) go the same way. Table and queue management calls take the usual way.

The botocore events a call emits are unchanged but for the HTTP ones (``before-send``, signing): handlers on
``before-call`` and ``after-call`` (the lock that makes calls atomic, the benchmarks' counters) still run.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.parsers import create_parser

logger = logging.getLogger(__name__)

ITEM_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
MESSAGE_OPERATIONS = frozenset(
    {
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    }
)
# The JSON protocol names the action in this header (the service's target prefix, a dot, the operation);
# moto's handlers read it the same way.
_TARGET_PREFIX = {"dynamodb": "DynamoDB_20120810.", "sqs": "AmazonSQS."}
_parser = create_parser("json")


def _new_handler(service: str) -> Any:
    if service == "dynamodb":
        from moto.dynamodb.responses import DynamoHandler

        return DynamoHandler()
    from moto.sqs.responses import SQSResponse

    return SQSResponse()


def _handler(service: str, operation: str, region: str, params: dict[str, Any]) -> Any:
    from moto.core.models import DEFAULT_ACCOUNT_ID

    handler = _new_handler(service)
    # What moto's setup_class derives from an HTTP request, given directly.
    handler.headers = {"X-Amz-Target": _TARGET_PREFIX[service] + operation}
    handler.querystring = {}
    handler.data = {}
    handler.method = "POST"
    handler.path = "/"
    handler.uri = "/"
    handler.uri_match = {}
    handler.region = region
    handler.current_account = DEFAULT_ACCOUNT_ID
    handler.response_headers = {"server": "amazon.com"}
    handler.params = params
    handler.body = params
    handler.raw_body = b""
    return handler


def _answer(service: str, operation: str, region: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    try:
        handler = _handler(service, operation, region, json.loads(body or b"{}"))
        status, headers, answer = handler.call_action()
    except Exception:
        # As moto's server would answer: a 500 the caller sees as an error (and the lock is released).
        logger.exception("moto failed on %s.%s", service, operation)
        failure = {"__type": "InternalFailure", "message": "moto failed"}
        return 500, {}, json.dumps(failure).encode()
    text = answer.encode() if isinstance(answer, str) else answer
    return int(status), {str(k): str(v) for k, v in headers.items()}, text


def dispatch(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
    """A ``before-call`` handler: the answer to an item or message operation, or None for the usual way."""
    operation = model.name
    if operation in ITEM_OPERATIONS:
        service = "dynamodb"
    elif operation in MESSAGE_OPERATIONS:
        service = "sqs"
    else:
        return None
    region = context.get("client_region") or "us-east-1"
    status, headers, body = _answer(service, operation, region, params.get("body") or b"")
    response_dict = {"status_code": status, "headers": headers, "body": body}
    parsed = _parser.parse(response_dict, model.output_shape)
    if status >= 300:
        error_code = parsed.get("Error", {}).get("Code")
        error_shape = model.service_model.shape_for_error_code(error_code) if error_code else None
        if error_shape is not None:
            parsed.update(_parser.parse(response_dict, error_shape))
    http = AWSResponse(params.get("url", ""), status, headers, None)  # type: ignore[arg-type]
    http._content = body  # type: ignore[attr-defined] # read by handlers that look at the raw answer
    return http, parsed


class _EndpointAsConfigured:
    """A client that takes its endpoint as configured instead of working it out from the service's endpoint
    rules on every call (4 % of a local create's CPU): every endpoint here is moto's, and a call answered
    in process never uses it."""

    meta: Any

    def _resolve_endpoint_ruleset(
        self, operation_model: Any, params: Any, request_context: Any, ignore_signing_region: bool = False
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        return self.meta.endpoint_url, {}, {}


def _endpoint_as_configured(base_classes: list[type], **_: Any) -> None:
    base_classes.insert(0, _EndpointAsConfigured)


def direct_calls(events: Any) -> None:
    """Register on a botocore session's events, after every other ``before-call`` handler (the lock among
    them): the first to answer ends the event. Clients created afterwards skip the endpoint rules."""
    events.register_last("before-call.dynamodb", dispatch)
    events.register_last("before-call.sqs", dispatch)
    events.register("creating-client-class.dynamodb", _endpoint_as_configured)
    events.register("creating-client-class.sqs", _endpoint_as_configured)
