"""Figures of ``bench.cost`` measured before the hot path was cut, kept so the report can show both.

Measured with ``python -m bench.cost --json`` at the commit below (the same workload and meter).
"""

from typing import Any

BEFORE_COMMIT = "ab09a9c"

BEFORE: dict[str, Any] = {
    "create": {
        "handler_ms": 87.27,
        "index_wru": {"dynamodb.TransactWriteItems": 2.0},
        "invocations": 2,
        "requests": {"dynamodb.GetItem": 3, "dynamodb.TransactWriteItems": 1},
        "rru": {"dynamodb.GetItem": 3.0},
        "runs": 1,
        "ticks": 0,
        "wru": {"dynamodb.TransactWriteItems": 6.0},
    },
    "dead": {
        "handler_ms": 128.73,
        "index_wru": {
            "dynamodb.PutItem": 3.0,
            "dynamodb.TransactWriteItems": 30.0,
            "dynamodb.UpdateItem": 5.0,
        },
        "invocations": 2,
        "requests": {
            "dynamodb.GetItem": 7,
            "dynamodb.PutItem": 3,
            "dynamodb.TransactWriteItems": 4,
            "dynamodb.UpdateItem": 5,
            "sqs.DeleteMessageBatch": 2,
            "sqs.ReceiveMessage": 2,
            "sqs.SendMessage": 2,
            "sqs.SendMessageBatch": 1,
        },
        "rru": {"dynamodb.GetItem": 7.0},
        "runs": 1,
        "ticks": 1,
        "wru": {"dynamodb.PutItem": 3.0, "dynamodb.TransactWriteItems": 16.0, "dynamodb.UpdateItem": 5.0},
    },
    "idle_tick": {
        "handler_ms": 63.83,
        "index_wru": {},
        "invocations": 0,
        "requests": {"dynamodb.Query": 60},
        "rru": {"dynamodb.Query": 30.0},
        "runs": 3,
        "ticks": 3,
        "wru": {},
    },
    "item_bytes": {
        "tickwork-idempotency": 244,
        "tickwork-jobs": 821,
        "tickwork-runs": 893,
        "tickwork-tenants": 138,
    },
    "once": {
        "handler_ms": 102.75,
        "index_wru": {
            "dynamodb.PutItem": 30.0,
            "dynamodb.TransactWriteItems": 140.0,
            "dynamodb.UpdateItem": 50.0,
        },
        "invocations": 1,
        "requests": {
            "dynamodb.GetItem": 40,
            "dynamodb.PutItem": 20,
            "dynamodb.TransactWriteItems": 20,
            "dynamodb.UpdateItem": 40,
            "sqs.DeleteMessageBatch": 1,
            "sqs.ReceiveMessage": 1,
            "sqs.SendMessageBatch": 10,
        },
        "rru": {"dynamodb.GetItem": 40.0},
        "runs": 10,
        "ticks": 1,
        "wru": {"dynamodb.PutItem": 20.0, "dynamodb.TransactWriteItems": 80.0, "dynamodb.UpdateItem": 40.0},
    },
    "recurring": {
        "handler_ms": 108.62,
        "index_wru": {
            "dynamodb.PutItem": 150.0,
            "dynamodb.TransactWriteItems": 700.0,
            "dynamodb.UpdateItem": 300.0,
        },
        "invocations": 5,
        "requests": {
            "dynamodb.GetItem": 200,
            "dynamodb.PutItem": 100,
            "dynamodb.Query": 50.0,
            "dynamodb.TransactWriteItems": 100,
            "dynamodb.UpdateItem": 150,
            "sqs.DeleteMessageBatch": 5,
            "sqs.ReceiveMessage": 5,
            "sqs.SendMessageBatch": 50,
        },
        "rru": {"dynamodb.GetItem": 200.0, "dynamodb.Query": 25.0},
        "runs": 50,
        "ticks": 5,
        "wru": {
            "dynamodb.PutItem": 100.0,
            "dynamodb.TransactWriteItems": 400.0,
            "dynamodb.UpdateItem": 150.0,
        },
    },
    "retry": {
        "handler_ms": 321.22,
        "index_wru": {
            "dynamodb.PutItem": 3.0,
            "dynamodb.TransactWriteItems": 30.0,
            "dynamodb.UpdateItem": 5.0,
        },
        "invocations": 2,
        "requests": {
            "dynamodb.GetItem": 7,
            "dynamodb.PutItem": 3,
            "dynamodb.TransactWriteItems": 4,
            "dynamodb.UpdateItem": 5,
            "sqs.DeleteMessageBatch": 2,
            "sqs.ReceiveMessage": 2,
            "sqs.SendMessage": 1,
            "sqs.SendMessageBatch": 1,
        },
        "rru": {"dynamodb.GetItem": 7.0},
        "runs": 1,
        "ticks": 1,
        "wru": {"dynamodb.PutItem": 3.0, "dynamodb.TransactWriteItems": 16.0, "dynamodb.UpdateItem": 5.0},
    },
}
