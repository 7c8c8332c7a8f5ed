"""The local stack's queues come from the same definitions as the CDK stack's: the run queue hands a message
that keeps failing to its dead-letter queue after the same number of receives."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import boto3
from tickwork import tables
from tickwork_local.harness import moto_aws
from tickwork_local.stack import LocalStack

from infra.config import StageConfig


def test_a_run_message_received_max_receive_count_times_moves_to_the_dlq(tmp_path: Path) -> None:
    saved = dict(os.environ)
    try:
        with moto_aws():
            stack = LocalStack(
                host="127.0.0.1",
                port=1,
                quiet=True,
                data_dir=None,
                log_file=str(tmp_path / "log"),
                tick_seconds=1.0,
                workers=1,
                out=io.StringIO(),
            )
            urls = stack.create_resources()
            sqs = boto3.client("sqs")
            run_queue, dlq = urls[tables.RUN_QUEUE.env_var], urls[tables.RUN_QUEUE_DLQ.env_var]
            policy = json.loads(
                sqs.get_queue_attributes(QueueUrl=run_queue, AttributeNames=["RedrivePolicy"])["Attributes"][
                    "RedrivePolicy"
                ]
            )
            assert policy["maxReceiveCount"] == StageConfig().max_receive_count == 5
            sqs.send_message(QueueUrl=run_queue, MessageBody="a fire whose run keeps failing")

            def receive(url: str) -> list[Any]:
                return sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", [])

            assert all(len(receive(run_queue)) == 1 for _ in range(policy["maxReceiveCount"]))
            assert receive(run_queue) == []
            assert [message["Body"] for message in receive(dlq)] == ["a fire whose run keeps failing"]
    finally:
        os.environ.clear()
        os.environ.update(saved)
