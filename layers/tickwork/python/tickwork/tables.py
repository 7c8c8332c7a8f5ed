"""The single source of truth for table, key, index, attribute and queue names.

The CDK stack, the DynamoDB adapters, the local stack and the test fixtures all build on these definitions,
so a renamed key or index changes everywhere at once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

AttributeType = Literal["S", "N"]
Projection = Literal["ALL", "KEYS_ONLY", "INCLUDE"]


@dataclass(frozen=True)
class KeyAttribute:
    name: str
    type: AttributeType


@dataclass(frozen=True)
class IndexDefinition:
    name: str
    partition_key: KeyAttribute
    sort_key: KeyAttribute | None = None
    projection: Projection = "ALL"
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDefinition:
    """A DynamoDB table: its keys, global secondary indexes and TTL attribute."""

    logical_name: str
    env_var: str
    partition_key: KeyAttribute
    sort_key: KeyAttribute | None = None
    indexes: tuple[IndexDefinition, ...] = ()
    ttl_attribute: str | None = None

    @property
    def default_name(self) -> str:
        return f"tickwork-{self.logical_name}"

    def key_attributes(self) -> list[KeyAttribute]:
        """Every attribute used in a key of the table or of an index, each once."""
        seen: dict[str, KeyAttribute] = {}
        candidates = [self.partition_key, self.sort_key]
        for index in self.indexes:
            candidates += [index.partition_key, index.sort_key]
        for attribute in candidates:
            if attribute is not None:
                seen.setdefault(attribute.name, attribute)
        return list(seen.values())

    def create_table_kwargs(self, table_name: str | None = None) -> dict[str, Any]:
        """Arguments for boto3's ``create_table``, used by the local stack and the tests."""
        kwargs: dict[str, Any] = {
            "TableName": table_name or self.default_name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": a.name, "AttributeType": a.type} for a in self.key_attributes()
            ],
            "KeySchema": _key_schema(self.partition_key, self.sort_key),
        }
        if self.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": _key_schema(index.partition_key, index.sort_key),
                    "Projection": _projection(index),
                }
                for index in self.indexes
            ]
        return kwargs


def _key_schema(partition_key: KeyAttribute, sort_key: KeyAttribute | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": partition_key.name, "KeyType": "HASH"}]
    if sort_key is not None:
        schema.append({"AttributeName": sort_key.name, "KeyType": "RANGE"})
    return schema


def _projection(index: IndexDefinition) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": index.projection}
    if index.projection == "INCLUDE":
        projection["NonKeyAttributes"] = list(index.non_key_attributes)
    return projection


# --- jobs -------------------------------------------------------------------------------------------------
# One partition per tenant: job items (sk "job#<job_id>", ULIDs so newest sorts last) and name locks
# (sk "name#<name>") that keep names unique per tenant.
JOBS_PK = "pk"
JOBS_SK = "sk"
JOB_SK_PREFIX = "job#"
NAME_SK_PREFIX = "name#"
# The sparse due index: only active jobs with a fire left carry these two attributes.
DUE_INDEX = "due"
DUE_SHARD = "due_shard"
DUE_AT = "next_fire_at"
DEFAULT_DUE_SHARDS = 16

JOBS = TableDefinition(
    logical_name="jobs",
    env_var="TICKWORK_JOBS_TABLE",
    partition_key=KeyAttribute(JOBS_PK, "S"),
    sort_key=KeyAttribute(JOBS_SK, "S"),
    indexes=(
        IndexDefinition(DUE_INDEX, KeyAttribute(DUE_SHARD, "N"), KeyAttribute(DUE_AT, "N"), "KEYS_ONLY"),
    ),
)

# --- runs -------------------------------------------------------------------------------------------------
# The key holds the tenant, so no read or write can reach a run without naming its tenant.
RUNS_PK = "pk"
RUNS_TTL = "expires_at"
# History of one job, newest first.
RUNS_BY_JOB_INDEX = "by_job"
RUNS_JOB_KEY = "job_key"
RUNS_SCHEDULED_AT = "scheduled_at"
# Sparse index of open runs, keyed by when each next needs attention from the sweeper.
OPEN_RUNS_INDEX = "open_runs"
ATTENTION_SHARD = "attention_shard"
ATTENTION_AT = "attention_at"
DEFAULT_ATTENTION_SHARDS = 4
# Recent runs of a tenant, spread over a few shards, for the stats route.
RUNS_BY_TENANT_INDEX = "by_tenant"
RUNS_TENANT_SHARD = "tenant_shard"
TENANT_SHARDS = 4

RUNS = TableDefinition(
    logical_name="runs",
    env_var="TICKWORK_RUNS_TABLE",
    partition_key=KeyAttribute(RUNS_PK, "S"),
    indexes=(
        IndexDefinition(
            RUNS_BY_JOB_INDEX, KeyAttribute(RUNS_JOB_KEY, "S"), KeyAttribute(RUNS_SCHEDULED_AT, "N")
        ),
        IndexDefinition(
            OPEN_RUNS_INDEX,
            KeyAttribute(ATTENTION_SHARD, "N"),
            KeyAttribute(ATTENTION_AT, "N"),
            "INCLUDE",
            ("tenant_id", "run_id", "job_id", "status"),
        ),
        IndexDefinition(
            RUNS_BY_TENANT_INDEX,
            KeyAttribute(RUNS_TENANT_SHARD, "S"),
            KeyAttribute(RUNS_SCHEDULED_AT, "N"),
            "INCLUDE",
            ("status", "lag_ms"),
        ),
    ),
    ttl_attribute=RUNS_TTL,
)

# --- tenants ----------------------------------------------------------------------------------------------
# Tenant profiles ("tenant#<id>"), API tokens ("token#<sha256 of the token>") and each tenant's API request
# counter ("ratelimit#<id>") share one key space.
TENANTS_PK = "pk"
TENANT_PK_PREFIX = "tenant#"
TOKEN_PK_PREFIX = "token#"  # noqa: S105 - a key prefix, not a secret
RATE_LIMIT_PK_PREFIX = "ratelimit#"
# The counter of the current fixed window: its start (epoch seconds) and the requests counted in it.
RATE_WINDOW = "window"
RATE_COUNT = "count"
# Counters of tenants idle for a day expire; the next request starts a new one.
TENANTS_TTL = "expires_at"

TENANTS = TableDefinition(
    logical_name="tenants",
    env_var="TICKWORK_TENANTS_TABLE",
    partition_key=KeyAttribute(TENANTS_PK, "S"),
    ttl_attribute=TENANTS_TTL,
)

# --- idempotency (Powertools' DynamoDBPersistenceLayer defaults) -----------------------------------------
IDEMPOTENCY_PK = "id"
IDEMPOTENCY_TTL = "expiration"

IDEMPOTENCY = TableDefinition(
    logical_name="idempotency",
    env_var="TICKWORK_IDEMPOTENCY_TABLE",
    partition_key=KeyAttribute(IDEMPOTENCY_PK, "S"),
    ttl_attribute=IDEMPOTENCY_TTL,
)

ALL_TABLES: tuple[TableDefinition, ...] = (JOBS, RUNS, TENANTS, IDEMPOTENCY)


# --- queues -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueDefinition:
    logical_name: str
    env_var: str
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def default_name(self) -> str:
        return f"tickwork-{self.logical_name}"


RUN_QUEUE = QueueDefinition("runs", "TICKWORK_RUN_QUEUE_URL")
RUN_QUEUE_DLQ = QueueDefinition("runs-dlq", "TICKWORK_RUN_DLQ_URL")
DEAD_RUN_QUEUE = QueueDefinition("dead-runs", "TICKWORK_DEAD_RUN_QUEUE_URL")
ALL_QUEUES: tuple[QueueDefinition, ...] = (RUN_QUEUE, RUN_QUEUE_DLQ, DEAD_RUN_QUEUE)


# --- key builders -----------------------------------------------------------------------------------------
def stable_shard(value: str, shards: int) -> int:
    """A shard number that is the same in every process (unlike ``hash``)."""
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def job_sort_key(job_id: str) -> str:
    return f"{JOB_SK_PREFIX}{job_id}"


def name_sort_key(name: str) -> str:
    return f"{NAME_SK_PREFIX}{name}"


def run_key(tenant_id: str, run_id: str) -> str:
    return f"{tenant_id}/{run_id}"


def run_job_key(tenant_id: str, job_id: str) -> str:
    return f"{tenant_id}/{job_id}"


def run_tenant_shard(tenant_id: str, run_id: str) -> str:
    return f"{tenant_id}#{stable_shard(run_id, TENANT_SHARDS)}"


def tenant_key(tenant_id: str) -> str:
    return f"{TENANT_PK_PREFIX}{tenant_id}"


def token_key(token_sha256: str) -> str:
    return f"{TOKEN_PK_PREFIX}{token_sha256}"


def rate_limit_key(tenant_id: str) -> str:
    return f"{RATE_LIMIT_PK_PREFIX}{tenant_id}"
