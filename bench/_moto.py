"""tickwork's tables and queues in moto, in process (no HTTP) as the local stack runs it, with the runtime
wired to them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

REGION = "us-east-1"
TENANT = "bench"
TOKEN = "tw_bench-token"  # noqa: S105 - a throwaway token for a local tenant


@contextmanager
def aws_environment() -> Iterator[None]:
    """Fake credentials, no endpoint override, tracing off; the environment comes back as it was."""
    saved = dict(os.environ)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(
        AWS_DEFAULT_REGION=REGION,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",  # noqa: S106 - moto accepts any
        POWERTOOLS_TRACE_DISABLED="1",
        POWERTOOLS_METRICS_NAMESPACE="Tickwork",
        POWERTOOLS_LOG_LEVEL="ERROR",
    )
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class NullMetrics:
    def count(self, name: str, value: float = 1) -> None:
        return None

    def milliseconds(self, name: str, value: float) -> None:
        return None


@contextmanager
def moto_runtime(*, max_in_flight: int | None = None, **settings: Any) -> Iterator[Any]:
    """A :class:`tickwork.runtime.Runtime` over moto in process, with one tenant (no in-flight limit to
    speak of). moto and the DynamoDB calls' serialisation are the local stack's."""
    with aws_environment():
        import boto3
        from tickwork import tables
        from tickwork.adapters.tenants import DynamoTenantStore
        from tickwork.config import Settings
        from tickwork.domain.tenants import Tenant
        from tickwork.runtime import build_runtime, runtime
        from tickwork_local.atomic import serialise_dynamodb
        from tickwork_local.harness import moto_aws

        runtime.cache_clear()
        with moto_aws():
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            sqs = boto3.client("sqs", region_name=REGION)
            for definition in tables.ALL_TABLES:
                dynamodb.create_table(**definition.create_table_kwargs())
            urls = {
                queue.logical_name: sqs.create_queue(QueueName=queue.default_name)["QueueUrl"]
                for queue in tables.ALL_QUEUES
            }
            serialise_dynamodb(dynamodb.meta.events)
            config = Settings(
                run_queue_url=urls[tables.RUN_QUEUE.logical_name],
                dead_run_queue_url=urls[tables.DEAD_RUN_QUEUE.logical_name],
                allow_private_targets=True,
                **settings,
            )
            current = build_runtime(config, dynamodb=dynamodb, sqs=sqs, metrics=NullMetrics())
            tenant = Tenant(
                tenant_id=TENANT,
                name=TENANT,
                signing_secret="bench-secret",  # noqa: S106 - a throwaway secret
                created_at=datetime(2026, 1, 1, tzinfo=UTC),
                max_jobs=1_000_000,
                max_concurrent_runs=max_in_flight,
            )
            DynamoTenantStore(dynamodb, table=config.tenants_table).put(tenant, token=TOKEN)
            yield current
        runtime.cache_clear()


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's billed size of an item: attribute names plus values (close enough for numbers)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    kind, inner = next(iter(value.items()))
    if kind in ("S", "B"):
        return len(inner.encode() if isinstance(inner, str) else inner)
    if kind == "N":
        return 1 + (len(inner.lstrip("-").replace(".", "")) + 1) // 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(key.encode()) + _value_size(sub) + 1 for key, sub in inner.items())
    if kind == "L":
        return 3 + sum(_value_size(sub) + 1 for sub in inner)
    return sum(len(str(member).encode()) for member in inner)
