"""The one place that builds boto3 clients and wires adapters into services, lazily, once per process.

Handlers call :func:`runtime` on their first invocation, never at import time; tests clear the cache between
moto sessions with ``runtime.cache_clear()``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from tickwork.adapters.jobs import DynamoJobStore
from tickwork.adapters.runs import DynamoRunStore
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.config import Settings
from tickwork.domain.ports import KeepPlanned, RunDispatcher
from tickwork.service import JobService

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from mypy_boto3_dynamodb import DynamoDBClient

_CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=2, read_timeout=5)


@dataclass
class Runtime:
    settings: Settings
    dynamodb: DynamoDBClient
    dispatcher: RunDispatcher

    @cached_property
    def jobs(self) -> DynamoJobStore:
        return DynamoJobStore(
            self.dynamodb,
            table=self.settings.jobs_table,
            tenants_table=self.settings.tenants_table,
            due_shards=self.settings.due_shards,
        )

    @cached_property
    def runs(self) -> DynamoRunStore:
        return DynamoRunStore(
            self.dynamodb,
            table=self.settings.runs_table,
            retention=timedelta(days=self.settings.run_retention_days),
            attention_shards=self.settings.attention_shards,
        )

    @cached_property
    def tenants(self) -> DynamoTenantStore:
        return DynamoTenantStore(self.dynamodb, table=self.settings.tenants_table)

    @cached_property
    def service(self) -> JobService:
        return JobService(
            jobs=self.jobs,
            runs=self.runs,
            tenants=self.tenants,
            dispatcher=self.dispatcher,
            horizon=self.settings.planner_horizon,
            allow_private_targets=self.settings.allow_private_targets,
        )

    @cached_property
    def idempotency_store(self) -> DynamoDBPersistenceLayer:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        return DynamoDBPersistenceLayer(
            table_name=self.settings.idempotency_table, boto3_client=self.dynamodb
        )


def build_runtime(
    settings: Settings, *, dynamodb: Any = None, dispatcher: RunDispatcher | None = None
) -> Runtime:
    return Runtime(
        settings=settings,
        dynamodb=dynamodb or boto3.client("dynamodb", config=_CLIENT_CONFIG),
        dispatcher=dispatcher or KeepPlanned(),
    )


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The process-wide runtime, from the environment, built on first use."""
    return build_runtime(Settings.from_env(os.environ))
