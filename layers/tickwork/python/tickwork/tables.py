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
    # A change feed of the table's items (DynamoDB Streams' view type), for whatever indexes them elsewhere.
    stream_view: Literal["NEW_IMAGE"] | None = None

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

    def create_table_kwargs(self, table_name: str | None = None, *, stream: bool = True) -> dict[str, Any]:
        """Arguments for boto3's ``create_table``, used by the local stack and the tests. ``stream=False``
        leaves the change feed out: the local stack feeds its indexer itself (``tickwork_local.changes``)."""
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
        if stream and self.stream_view is not None:
            kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": self.stream_view}
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


# Items carry the schema version they were written in, for the migrations to come.
SCHEMA_VERSION = "v"
ITEM_SCHEMA = 2

# --- jobs -------------------------------------------------------------------------------------------------
# One partition per job, so no tenant's traffic shares a partition key: the job item (sk "job") and its
# lane (sk "lane"), read together in one query. Name locks, one partition per name, keep names unique per
# tenant.
JOBS_PK = "pk"
JOBS_SK = "sk"
JOB_SK = "job"
LANE_SK = "lane"
NAME_SK = "name"
# The sparse due index: only active jobs with a fire left carry these two attributes.
DUE_INDEX = "due"
DUE_SHARD = "due_shard"
DUE_AT = "next_fire_at"
DEFAULT_DUE_SHARDS = 16
# A tenant's jobs, newest first (job ids are ULIDs): only job items carry both attributes.
JOBS_BY_TENANT_INDEX = "by_tenant"
JOB_TENANT = "tenant_id"
JOB_ID = "job_id"

JOBS = TableDefinition(
    logical_name="jobs",
    env_var="TICKWORK_JOBS_TABLE",
    partition_key=KeyAttribute(JOBS_PK, "S"),
    sort_key=KeyAttribute(JOBS_SK, "S"),
    indexes=(
        IndexDefinition(DUE_INDEX, KeyAttribute(DUE_SHARD, "N"), KeyAttribute(DUE_AT, "N"), "KEYS_ONLY"),
        IndexDefinition(
            JOBS_BY_TENANT_INDEX,
            KeyAttribute(JOB_TENANT, "S"),
            KeyAttribute(JOB_ID, "S"),
            "INCLUDE",
            ("status",),
        ),
    ),
)

# --- runs -------------------------------------------------------------------------------------------------
# One partition per job: a job's history is a key range, newest first. A scheduled run's sort key is its fire
# time (13-digit epoch ms); a manual run's is its trigger time and hash, found from its id through a pointer
# item ("m#<hash>") outside the history's range.
RUNS_PK = "pk"
RUNS_SK = "sk"
RUNS_TTL = "expires_at"
MANUAL_POINTER_PREFIX = "m#"
HISTORY_END = ":"  # right after the digits: every history key sorts below it, every pointer above
# Sparse index of the runs the sweeper must look at (a stored manual run's message, a far retry): a run on
# its way carries neither attribute, so its writes touch no index.
ATTENTION_INDEX = "attention"
ATTENTION_SHARD = "attention_shard"
ATTENTION_AT = "attention_at"
DEFAULT_ATTENTION_SHARDS = 4
# Sparse index of the runs an operator acts on (FAILED, DEAD, ABANDONED), a partition per tenant, newest
# first: only those runs carry the two attributes, so a run that succeeds writes no entry. Failures are rare,
# so one partition per tenant stays cool.
FAILURES_INDEX = "failures"
FAILURE_TENANT = "failure_tenant"
FAILURE_AT = "failure_at"  # "<13-digit scheduled_for ms>#<run_id>": the tenant-wide run order

# Sparse index of the runs waiting in a pool for the tenant's workers to claim them, a partition per tenant
# and pool, oldest due first: only a waiting pool run carries the two attributes, so a claim takes it out.
POOL_INDEX = "pool"
POOL_KEY = "pool_key"  # "<tenant>#<pool>"
POOL_AT = "pool_at"  # "<13-digit due ms>#<run_id>"
# A pool run's checkpoint, an item of its own beside the run ("c#<run sort key>", outside the history's range,
# as the manual pointers are), so that a heartbeat without one writes a small run item.
CHECKPOINT_PREFIX = "c#"

RUNS = TableDefinition(
    logical_name="runs",
    env_var="TICKWORK_RUNS_TABLE",
    partition_key=KeyAttribute(RUNS_PK, "S"),
    sort_key=KeyAttribute(RUNS_SK, "S"),
    indexes=(
        IndexDefinition(
            ATTENTION_INDEX,
            KeyAttribute(ATTENTION_SHARD, "N"),
            KeyAttribute(ATTENTION_AT, "N"),
            "INCLUDE",
            ("tenant_id", "run_id"),
        ),
        # ALL: the list shows whole runs, and the few failures are cheaper to copy than to read twice.
        IndexDefinition(FAILURES_INDEX, KeyAttribute(FAILURE_TENANT, "S"), KeyAttribute(FAILURE_AT, "S")),
        # ALL: a claim writes the run as read, and a waiting run is small.
        IndexDefinition(POOL_INDEX, KeyAttribute(POOL_KEY, "S"), KeyAttribute(POOL_AT, "S")),
    ),
    ttl_attribute=RUNS_TTL,
    # Read by the indexer (``tickwork.app.indexer``) into the run index below.
    stream_view="NEW_IMAGE",
)

# --- run index --------------------------------------------------------------------------------------------
# The tenant-wide run history (``tickwork.domain.run_index``), written from the runs table's change feed: a
# chunk item holds the summaries of many runs of one tenant and one minute (their scheduled time), so a run
# costs a share of one write, and no run write touches an index. A partition per tenant and hour
# ("<tenant>#<epoch hour>"), chunks keyed "<newest scheduled ms, 13 digits>#<chunk id>"; the hours that hold
# chunks are listed in "<tenant>#hours" (sort key: the hour, 10 digits), so a sparse history is walked by
# the hours it has.
INDEX_PK = "pk"
INDEX_SK = "sk"
INDEX_TTL = "expires_at"
INDEX_HOURS = "hours"
INDEX_ENTRIES = "entries"  # the chunk's summaries, compressed (``tickwork.adapters.run_index``)
HOUR_MS = 3_600_000

RUN_INDEX = TableDefinition(
    logical_name="run-index",
    env_var="TICKWORK_RUN_INDEX_TABLE",
    partition_key=KeyAttribute(INDEX_PK, "S"),
    sort_key=KeyAttribute(INDEX_SK, "S"),
    ttl_attribute=INDEX_TTL,
)

# --- tenants ----------------------------------------------------------------------------------------------
# Tenant profiles ("tenant#<id>"), API tokens ("token#<sha256 of the token>") and each tenant's API request
# counter ("ratelimit#<id>") share one key space.
TENANTS_PK = "pk"
TENANT_PK_PREFIX = "tenant#"
TOKEN_PK_PREFIX = "token#"  # noqa: S105 - a key prefix, not a secret
RATE_LIMIT_PK_PREFIX = "ratelimit#"
# The highest due-shard count planners have used, so that lowering the count strands no job.
SHARD_COUNT_PK = "meta#due_shards"
SHARD_COUNT_HIGH = "high"
# A tenant's in-flight limit, over a few slot items ("inflight#<tenant>#<shard>") of ten slots each.
IN_FLIGHT_PK_PREFIX = "inflight#"
# A tenant's run-start throttle, over one or more items ("throttle#<tenant>#<shard>") holding its GCRA time.
THROTTLE_PK_PREFIX = "throttle#"
THROTTLE_TAT = "tat_us"
# The counter of the current fixed window: its start (epoch seconds) and the requests counted in it.
RATE_WINDOW = "window"
RATE_COUNT = "count"
# Counters of tenants idle for a day expire; the next request starts a new one.
TENANTS_TTL = "expires_at"
# On the tenant's item: the pools its jobs have named (a string set), kept by the job writes that name one.
TENANT_POOLS = "pools"
# On the tenant's item: the concurrency keys its jobs have named, each as "<max_concurrency>:<key>" (a string
# set, capped: ``tickwork.domain.flow.MAX_KEYS_KEPT``), kept by the job writes that name one.
TENANT_CONCURRENCY_KEYS = "concurrency_keys"

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

ALL_TABLES: tuple[TableDefinition, ...] = (JOBS, RUNS, TENANTS, IDEMPOTENCY, RUN_INDEX)


# --- queues -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueDefinition:
    logical_name: str
    env_var: str
    attributes: dict[str, str] = field(default_factory=dict)
    # Where a message goes after this many receives without a delete (on AWS and in the local stack alike).
    dead_letter: QueueDefinition | None = None
    max_receive_count: int = 5

    @property
    def default_name(self) -> str:
        return f"tickwork-{self.logical_name}"


RUN_QUEUE_DLQ = QueueDefinition("runs-dlq", "TICKWORK_RUN_DLQ_URL")
RUN_QUEUE = QueueDefinition("runs", "TICKWORK_RUN_QUEUE_URL", dead_letter=RUN_QUEUE_DLQ)
# The runs of high and low priority jobs have queues of their own (normal ones keep the run queue), each
# consumed by workers of its own: a backlog in one never holds the others' runs behind it.
RUN_QUEUE_HIGH = QueueDefinition("runs-high", "TICKWORK_RUN_QUEUE_HIGH_URL", dead_letter=RUN_QUEUE_DLQ)
RUN_QUEUE_LOW = QueueDefinition("runs-low", "TICKWORK_RUN_QUEUE_LOW_URL", dead_letter=RUN_QUEUE_DLQ)
RUN_QUEUES_BY_PRIORITY: dict[str, QueueDefinition] = {
    "high": RUN_QUEUE_HIGH,
    "normal": RUN_QUEUE,
    "low": RUN_QUEUE_LOW,
}
DEAD_RUN_QUEUE = QueueDefinition("dead-runs", "TICKWORK_DEAD_RUN_QUEUE_URL")
# A dead-letter queue comes before the queue that names it, so it exists when that one is created.
ALL_QUEUES: tuple[QueueDefinition, ...] = (
    RUN_QUEUE_DLQ,
    RUN_QUEUE,
    RUN_QUEUE_HIGH,
    RUN_QUEUE_LOW,
    DEAD_RUN_QUEUE,
)


# --- key builders -----------------------------------------------------------------------------------------
def stable_shard(value: str, shards: int) -> int:
    """A shard number that is the same in every process (unlike ``hash``)."""
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def job_key(tenant_id: str, job_id: str) -> str:
    """The partition of a job's items (job, lane) and of its runs."""
    return f"{tenant_id}/{job_id}"


def tasks_key(tenant_id: str, job_id: str, run_sort_key: str) -> str:
    """The partition of a workflow run's tasks (their child runs, by task id): apart from the job's runs, so
    the job's history lists workflow runs only, and a run's tasks are one query."""
    return f"{job_key(tenant_id, job_id)}#tasks#{run_sort_key}"


# In a workflow run's tasks partition, the item of its tasks' ends: an attribute per ended task, its outcome.
# Its sort key sorts before every task id (they start with a letter or a digit).
TASK_ENDS_SK = "#ended"
TASK_END_PREFIX = "end_"


def task_ends_sort_key(go: int) -> str:
    """The item of a workflow run's tasks' ends in its go ``go`` (0: its first; each retry by hand, one
    more): a retry starts from an item of its own, so an end recorded late in an earlier go never counts."""
    return TASK_ENDS_SK if go == 0 else f"{TASK_ENDS_SK}#{go}"


def name_key(tenant_id: str, name: str) -> str:
    return f"{tenant_id}/name/{name}"


def run_sort_key(epoch_ms: int, manual_hash: str | None = None) -> str:
    """A run's place in its job's history: its fire (or trigger) time, then a manual run's hash."""
    return f"{epoch_ms:013d}" + (f"m{manual_hash}" if manual_hash else "")


def failure_sort_key(epoch_ms: int, run_id: str) -> str:
    return f"{epoch_ms:013d}#{run_id}"


def history_bounds(since_ms: int | None, through_ms: int | None) -> tuple[str, str]:
    """The sort key range of the runs scheduled from ``since_ms`` through ``through_ms`` (inclusive), in a
    job's history and in the failure index alike: both keys start with the 13-digit time, and "~" sorts after
    every character that follows it (never reaching the manual pointers, "m#...")."""
    return f"{since_ms or 0:013d}", f"{through_ms if through_ms is not None else 10**13 - 1:013d}~"


def index_partition(tenant_id: str, hour: int) -> str:
    """The run index's partition of a tenant's runs scheduled in one hour (epoch hours)."""
    return f"{tenant_id}#{hour}"


def index_hours_key(tenant_id: str) -> str:
    return f"{tenant_id}#{INDEX_HOURS}"


def index_hour_sort_key(hour: int) -> str:
    return f"{hour:010d}"


def index_chunk_sort_key(newest_ms: int, chunk_id: str) -> str:
    return f"{newest_ms:013d}#{chunk_id}"


def pool_key(tenant_id: str, pool: str) -> str:
    return f"{tenant_id}#{pool}"


def pool_sort_key(due_ms: int, run_id: str) -> str:
    return f"{due_ms:013d}#{run_id}"


def checkpoint_key(run_sort_key: str) -> str:
    return f"{CHECKPOINT_PREFIX}{run_sort_key}"


def manual_pointer_key(manual_hash: str) -> str:
    return f"{MANUAL_POINTER_PREFIX}{manual_hash}"


def tenant_key(tenant_id: str) -> str:
    return f"{TENANT_PK_PREFIX}{tenant_id}"


def token_key(token_sha256: str) -> str:
    return f"{TOKEN_PK_PREFIX}{token_sha256}"


def in_flight_key(tenant_id: str, shard: int) -> str:
    return f"{IN_FLIGHT_PK_PREFIX}{tenant_id}#{shard}"


def slot_group(tenant_id: str, concurrency_key: str) -> str:
    """Whose slot items a concurrency key's are: ``inflight#<tenant>#key#<digest>#<shard>`` beside the
    tenant's own ``inflight#<tenant>#<shard>`` (a tenant id has no ``#``; the digest keeps any key short)."""
    digest = hashlib.sha256(concurrency_key.encode()).hexdigest()[:32]
    return f"{tenant_id}#key#{digest}"


def throttle_key(tenant_id: str, shard: int) -> str:
    return f"{THROTTLE_PK_PREFIX}{tenant_id}#{shard}"


def rate_limit_key(tenant_id: str) -> str:
    return f"{RATE_LIMIT_PK_PREFIX}{tenant_id}"
