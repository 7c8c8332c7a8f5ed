"""`tickwork local`: the whole scheduler on one machine, against moto.

moto runs as a server on a free loopback port; the tables and queues are created from the same definitions
the CDK stack uses; the API handlers sit behind a real HTTP server; the planner and sweeper tick every
second; a few pollers long-poll the run queue and hand SQS-shaped batches to the worker handler.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tickwork_local.console import Console
from tickwork_local.datadir import private_directory, private_open, write_private
from tickwork_local.harness import InvocationCut
from tickwork_local.journal import JOURNAL_FILE

if TYPE_CHECKING:
    from tickwork.domain.tenants import Tenant

LOCAL_REGION = "us-east-1"
LOCAL_HORIZON_SECONDS = 10  # moto's SQS sends slow down as delayed messages pile up: keep few in flight
LOCAL_DUE_SHARDS = 2  # one machine needs no spread of index writes: fewer queries per tick
LOCAL_ATTENTION_SHARDS = 1
# Messages arrive this long before their fires, so a burst's runs are all read before it (nothing is paid for
# the wait here); the worker holds a message up to a second more than this.
LOCAL_SEND_LEAD_MS = 2000
# A call at a burst's fire keeps its turn among the stack's runs this long at most: loopback calls a few at a
# time end sooner than all at once in one interpreter, and a slow target does not hold the others back.
LOCAL_BURST_CALL_HOLD_MS = 50
# Past this many worker invocations at once, the pollers hand batches to invocations of their own.
MAX_POLLERS = 4
SNAPSHOT_FILE = "tables.json"
# The snapshot's entry for the queues' messages: a name no DynamoDB table can have.
QUEUES_KEY = "sqs:queues"
# The snapshot's run changes not yet indexed (``tickwork_local.changes``).
CHANGES_KEY = "runs:changes"
# The journal is folded into a new snapshot once it holds this many item states (checked every few seconds;
# $TICKWORK_LOCAL_COMPACT_AFTER_LINES sets another count).
COMPACT_AFTER_LINES = 20_000
COMPACT_CHECK_SECONDS = 5.0
# The Lambda handlers live in the repository's functions/ folder, beside this package.
REPOSITORY = Path(__file__).resolve().parents[2]
AUTHORIZER_CACHE_SECONDS = 300  # as deployed (infra.config.StageConfig.authorizer_cache_seconds)
DEFAULT_TOKEN_FILE = "default-token"  # noqa: S105 - a file name
LOG_FILE = "tickwork.log"
# What a data directory holds: `tickwork local --reset` deletes these and nothing else.
DATA_FILES = (SNAPSHOT_FILE, SNAPSHOT_FILE + ".tmp", JOURNAL_FILE, DEFAULT_TOKEN_FILE, LOG_FILE)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LocalMetrics:
    """Counts and lags of the last minutes, for the status line (instead of EMF on stdout)."""

    window_seconds: float = 60.0
    events: deque[tuple[float, str, float]] = field(default_factory=lambda: deque(maxlen=200_000))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, name: str, value: float = 1) -> None:
        with self.lock:
            self.events.append((time.monotonic(), name, value))

    def milliseconds(self, name: str, value: float) -> None:
        self.count(name, value)

    def recent(self) -> dict[str, list[float]]:
        cutoff = time.monotonic() - self.window_seconds
        found: dict[str, list[float]] = {}
        with self.lock:
            for at, name, value in self.events:
                if at >= cutoff:
                    found.setdefault(name, []).append(value)
        return found


class CachedAuthorizer:
    """API Gateway keeps a TOKEN authorizer's policy for each token for the stage's cache time (300 s as
    deployed, ``authorizer_cache_seconds``) and calls the function again only after it; so does the local
    gateway. A refusal ("Unauthorized") is not kept."""

    def __init__(self, handler: Any, seconds: float, clock: Any = time.monotonic):
        self.handler = handler
        self.seconds = seconds
        self.clock = clock
        self.policies: dict[str, tuple[float, Any]] = {}
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        token = event["authorizationToken"]
        with self.lock:
            kept = self.policies.get(token)
        if kept is not None and self.clock() < kept[0]:
            return kept[1]
        policy = self.handler(event, context)
        if self.seconds > 0:
            with self.lock:
                if len(self.policies) > 10_000:
                    self.policies.clear()
                self.policies[token] = (self.clock() + self.seconds, policy)
        return policy


class WorkerStopped(InvocationCut):
    """A stopped poller refuses the rest of its batch: the batch is handed back at once (what it handled
    already comes again as a duplicate, which its run items absorb)."""


@dataclass
class SweepTotals:
    """What the sweeper repaired since the start: stored runs whose message it sent (again)."""

    repaired: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, report: Any) -> None:
        with self.lock:
            self.repaired += report.swept


TENANTS_VARIABLE = "TICKWORK_LOCAL_TENANTS"
# The settings a local tenant may be given at start (``tickwork tenants update`` changes them later).
TENANT_SETTINGS = (
    "api_requests_per_second",
    "max_jobs",
    "max_concurrent_runs",
    "max_runs_per_second",
    "burst",
    "disabled",
)
# The settings that take ``none`` (no limit).
OPTIONAL_SETTINGS = frozenset({"max_concurrent_runs", "max_runs_per_second", "burst"})
NO_LIMIT = "none"


@dataclass(frozen=True)
class LocalTenant:
    """A tenant of ``TICKWORK_LOCAL_TENANTS``: its id, its token, and the settings its entry gives."""

    tenant_id: str
    token: str = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SeededTenant:
    """A local tenant as the stack started it, for the banner."""

    tenant_id: str
    token: str = field(repr=False)
    signing_secret: str = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)


def parse_tenants(spec: str) -> list[LocalTenant]:
    """``acme:token-a,globex:token-b:api_requests_per_second=500:max_jobs=100``: each entry is a tenant, its
    token, and any settings of it, ``:`` apart. Raises :class:`TenantSettingsError` naming the entry at
    fault."""
    tenants = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        tenant_id, _, rest = entry.partition(":")
        token, *settings = (part.strip() for part in rest.split(":"))
        if not tenant_id.strip() or not token:
            raise TenantSettingsError(
                f"{TENANTS_VARIABLE} entry {entry!r} is not tenant:token, or tenant:token:setting=value..."
            )
        where = f"{TENANTS_VARIABLE} entry {tenant_id.strip()}"
        # Each in its bounds; with --tenant-setting's they make the tenant's, checked whole at start.
        tenants.append(
            LocalTenant(tenant_id.strip(), token, parse_settings(settings, where=where, whole=False))
        )
    return tenants


class TenantSettingsError(ValueError):
    """A local tenant's settings, as given at start, are refused; the message says where and why."""


def parse_settings(texts: list[str], *, where: str, whole: bool = True) -> dict[str, Any]:
    """``["api_requests_per_second=500", "max_concurrent_runs=none", "disabled=false"]`` -> the settings,
    each checked as ``tickwork tenants update`` checks it, and (``whole``) together as a new tenant's.
    Raises :class:`TenantSettingsError` saying ``where`` and what is wrong."""
    settings: dict[str, Any] = {}
    for text in texts:
        name, equals, value = (part.strip() for part in text.partition("="))
        if not equals or name not in TENANT_SETTINGS:
            raise TenantSettingsError(
                f"{where}: {text!r} is not SETTING=VALUE with a setting among {', '.join(TENANT_SETTINGS)}"
            )
        if name == "disabled":
            if value.lower() not in ("true", "false"):
                raise TenantSettingsError(f"{where}: disabled is true or false, not {value!r}")
            settings[name] = value.lower() == "true"
        elif value.lower() == NO_LIMIT and name in OPTIONAL_SETTINGS:
            settings[name] = None
        elif value.isdigit():
            settings[name] = int(value)
        else:
            allowed = f"a whole number or {NO_LIMIT}" if name in OPTIONAL_SETTINGS else "a whole number"
            raise TenantSettingsError(f"{where}: {name} is {allowed}, not {value!r}")
    if whole:
        check_settings(settings, where=where)
    else:
        check_settings(settings, where=where, tenant=None, alone=True)
    return settings


def check_settings(
    settings: Mapping[str, Any], *, where: str, tenant: Tenant | None = None, alone: bool = False
) -> None:
    """Raise :class:`TenantSettingsError` unless ``settings`` may be applied to ``tenant`` (a stored one), or
    given to a new tenant: each in its bounds, a burst with a rate and not below it. ``alone``: each in its
    bounds only (settings that others may complete)."""
    from pydantic import ValidationError
    from tickwork.domain.tenants import Tenant, TenantChanges

    try:
        changes = TenantChanges.model_validate(settings)
        if alone:
            return
        if tenant is not None:
            tenant.changed(changes)
            return
        # As a new tenant would have them: a burst without a rate, or below it, is refused here.
        Tenant.model_validate(
            {
                "tenant_id": "local",
                "name": "local",
                "signing_secret": "-",
                "created_at": datetime.now(UTC),
                **settings,
            }
        )
    except ValidationError as error:
        first = error.errors()[0]
        named = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise TenantSettingsError(f"{where}: {named}: {message}") from None


@contextmanager
def moto_server(host: str) -> Iterator[str]:
    """moto in this process (``harness.moto_aws``): the stack's own boto3 clients call it directly (no HTTP,
    a third of the time per call), and a server on a free loopback port shows the same tables and queues to
    other processes."""
    from moto.server import ThreadedMotoServer

    from tickwork_local.harness import moto_aws

    with moto_aws():
        port = free_port(host)
        server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        server.start()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


class LocalStack:
    def __init__(
        self,
        *,
        host: str,
        port: int,
        quiet: bool,
        data_dir: str | None,
        log_file: str | None,
        tick_seconds: float,
        workers: int,
        batch_size: int = 10,
        tenant_settings: Mapping[str, Any] | None = None,
        out: TextIO = sys.stdout,
    ):
        self.host = host
        # Settings of every local tenant at start (``--tenant-setting``); an entry's own win over them.
        self.tenant_settings = dict(tenant_settings or {})
        self.port = port
        self.quiet = quiet
        self.data_dir = Path(data_dir) if data_dir else None
        self.log_file = Path(log_file) if log_file else (self.data_dir or Path(".tickwork")) / LOG_FILE
        self.tick_seconds = tick_seconds
        self.restored_jobs: list[tuple[str, str]] = []
        self.workers = workers
        self.batch_size = batch_size  # the event source mapping's batch size: messages per invocation
        self.out = out
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.metrics = LocalMetrics()
        self.threads: list[threading.Thread] = []
        # Each start of the planner loop or of the worker pollers gets its own stop event, so that either
        # can be stopped and started again while the rest of the stack runs (the soak restarts them).
        self.planner_stop = threading.Event()
        self.worker_stop = threading.Event()
        self.planner_thread: threading.Thread | None = None
        self.worker_threads: list[threading.Thread] = []
        self.worker_starts = 0
        self.restart_lock = threading.Lock()
        self.sweeps = SweepTotals()
        self.journal: Any = None
        self.snapshot_current = False  # the snapshot on disk is the whole state: no need to write it again
        self.authorizer_seconds = float(
            os.environ.get("TICKWORK_AUTHORIZER_CACHE_SECONDS", AUTHORIZER_CACHE_SECONDS)
        )
        self.console = Console.from_environment()
        self.changes: Any = None  # the runs table's change feed, once the clients are configured

    # --- set-up -------------------------------------------------------------------------------------------
    def configure_clients(self) -> None:
        """Every boto3 client of this process comes from the default session: make its DynamoDB calls
        atomic with respect to each other, as they are against the real service."""
        import boto3

        from tickwork_local.atomic import serialise_dynamodb
        from tickwork_local.moto_direct import direct_calls

        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        serialise_dynamodb(boto3.DEFAULT_SESSION.events)
        direct_calls(boto3.DEFAULT_SESSION.events)

    def attach_change_feed(self) -> None:
        """The runs table's changes, for the indexer (``tickwork_local.changes``)."""
        import boto3

        from tickwork_local.changes import ChangeFeed
        from tickwork_local.moto_dynamodb import stored_item

        self.changes = ChangeFeed(stored_item)
        assert boto3.DEFAULT_SESSION is not None
        self.changes.attach(boto3.DEFAULT_SESSION.events)

    def configure_environment(self) -> None:
        os.environ.update(
            AWS_ACCESS_KEY_ID="local",
            AWS_SECRET_ACCESS_KEY="local",  # noqa: S106 - moto accepts any
            AWS_DEFAULT_REGION=os.environ.get("AWS_DEFAULT_REGION", LOCAL_REGION),
            POWERTOOLS_TRACE_DISABLED="1",
            POWERTOOLS_METRICS_NAMESPACE="Tickwork",
            TICKWORK_ALLOW_PRIVATE_TARGETS="true",
            TICKWORK_PLANNER_HORIZON_SECONDS=os.environ.get(
                "TICKWORK_PLANNER_HORIZON_SECONDS", str(LOCAL_HORIZON_SECONDS)
            ),
            TICKWORK_SEND_LEAD_MS=os.environ.get("TICKWORK_SEND_LEAD_MS", str(LOCAL_SEND_LEAD_MS)),
            TICKWORK_BURST_CALL_HOLD_MS=os.environ.get(
                "TICKWORK_BURST_CALL_HOLD_MS", str(LOCAL_BURST_CALL_HOLD_MS)
            ),
            TICKWORK_DUE_SHARDS=str(LOCAL_DUE_SHARDS),
            TICKWORK_ATTENTION_SHARDS=str(LOCAL_ATTENTION_SHARDS),
        )
        # The stack's clients reach moto in process; an endpoint would send them over HTTP instead.
        os.environ.pop("AWS_PROFILE", None)
        os.environ.pop("AWS_ENDPOINT_URL", None)

    def configure_logging(self) -> None:
        """Structured logs go to a file; the console keeps the banner and the status line."""
        from tickwork.observability import logger

        private_directory(self.log_file.parent)
        stream = os.fdopen(private_open(self.log_file, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")
        for name in ("tickwork",):
            for handler in logging.getLogger(name).handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(stream)
        # Powertools' own warnings (batch failures and the like) would otherwise reach stderr; as JSON, like
        # every other line of the file.
        library_handler = logging.StreamHandler(stream)
        library_handler.setFormatter(logger.registered_formatter)
        library = logging.getLogger("aws_lambda_powertools")
        library.addHandler(library_handler)
        library.propagate = False
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto server request lines

    def create_resources(self) -> dict[str, str]:
        import boto3
        from tickwork import tables

        dynamodb = boto3.client("dynamodb")
        existing = set(dynamodb.list_tables()["TableNames"])
        for definition in tables.ALL_TABLES:
            if definition.default_name in existing:
                continue
            dynamodb.create_table(**definition.create_table_kwargs(stream=False))
            if definition.ttl_attribute:
                dynamodb.update_time_to_live(
                    TableName=definition.default_name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": definition.ttl_attribute},
                )
        sqs = boto3.client("sqs")
        urls: dict[str, str] = {}
        arns: dict[str, str] = {}
        for queue in tables.ALL_QUEUES:
            attributes: dict[str, Any] = dict(queue.attributes)
            if queue.dead_letter is not None:  # the redrive the CDK stack gives the same queue
                attributes["RedrivePolicy"] = json.dumps(
                    {
                        "deadLetterTargetArn": arns[queue.dead_letter.logical_name],
                        "maxReceiveCount": queue.max_receive_count,
                    }
                )
            url = sqs.create_queue(QueueName=queue.default_name, Attributes=attributes)["QueueUrl"]  # type: ignore[arg-type]
            urls[queue.env_var] = url
            arns[queue.logical_name] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        os.environ.update(urls)
        return urls

    def restore(self) -> int:
        """Put back the tables and queues as the last snapshot and the journal after it leave them, straight
        into moto; returns how many items, messages and states were applied. A snapshot written before the
        queues were journaled has no messages: the jobs ACTIVE in it are replanned instead."""
        if self.data_dir is None:
            return 0
        from tickwork import tables

        from tickwork_local.journal import replay
        from tickwork_local.moto_dynamodb import drop_item, load_item, load_items
        from tickwork_local.moto_sqs import QueueLoader

        count = 0
        queues = QueueLoader()
        legacy = False
        if (self.data_dir / SNAPSHOT_FILE).exists():
            snapshot = json.loads((self.data_dir / SNAPSHOT_FILE).read_text())
            legacy = QUEUES_KEY not in snapshot
            if self.changes is not None:
                self.changes.restore(snapshot.get(CHANGES_KEY, []))
            snapshot.pop(CHANGES_KEY, None)
            for queue, messages in snapshot.pop(QUEUES_KEY, {}).items():
                for message in messages:
                    queues.put(queue, message)
                    count += 1
            for table, items in snapshot.items():
                load_items(table, items)
                count += len(items)
        replayed = 0
        for state in replay(self.data_dir):
            replayed += 1
            if "table" in state:
                if state["item"] is None:
                    drop_item(state["table"], state["key"])
                else:
                    load_item(state["table"], state["item"])
                    if state["table"] == tables.RUNS.default_name and self.changes is not None:
                        self.changes.add_item(state["item"])
            elif "message" in state:
                queues.put(state["queue"], state["message"])
            elif "deleted" in state:
                queues.drop(state["queue"], state["deleted"])
            elif "received" in state:
                queues.received(state["queue"], state["received"])
            count += 1
        queues.finish()
        # The indexes (0.3 s for 10,000 jobs) are built while the API starts; the first DynamoDB call
        # waits for them, as every call waits for the one before.
        self.spawn(
            self.build_indexes, "tickwork-indexes", [table.default_name for table in tables.ALL_TABLES]
        )
        # The snapshot already holds everything unless a journal was replayed over it (or it is old).
        self.snapshot_current = (self.data_dir / SNAPSHOT_FILE).exists() and not legacy and replayed == 0
        if not legacy:
            return count
        import boto3

        dynamodb = boto3.client("dynamodb")
        for page in dynamodb.get_paginator("scan").paginate(TableName=tables.JOBS.default_name):
            for item in page["Items"]:
                if item.get("status") == {"S": "ACTIVE"} and tables.JOB_ID in item:
                    self.restored_jobs.append((item[tables.JOB_TENANT]["S"], item[tables.JOB_ID]["S"]))
        return count

    def build_indexes(self, table_names: list[str]) -> None:
        from tickwork_local.atomic import holding_writes
        from tickwork_local.moto_dynamodb import build_indexes

        with holding_writes():
            for name in table_names:
                build_indexes(name)

    def open_journal(self) -> None:
        """From here on every DynamoDB write is on disk before its call returns (``tickwork_local.journal``).
        What was restored goes into a fresh snapshot first, and the journal starts empty."""
        if self.data_dir is None:
            return
        import boto3

        from tickwork_local.atomic import serialise_queue_writes
        from tickwork_local.journal import Journal
        from tickwork_local.moto_dynamodb import stored_item
        from tickwork_local.moto_sqs import stored_message

        if not self.snapshot_current:
            self.save()
        self.journal = Journal(self.data_dir, stored_item, read_message=stored_message)
        self.journal.truncate()
        assert boto3.DEFAULT_SESSION is not None
        serialise_queue_writes(boto3.DEFAULT_SESSION.events)
        self.journal.attach(boto3.DEFAULT_SESSION.events)

    def compact_loop(self) -> None:
        """Fold a long journal into a new snapshot, with every DynamoDB call held back meanwhile."""
        from tickwork_local.atomic import holding_writes

        while not self.stop.wait(COMPACT_CHECK_SECONDS):
            after = int(os.environ.get("TICKWORK_LOCAL_COMPACT_AFTER_LINES", COMPACT_AFTER_LINES))
            if self.journal is None or self.journal.lines < after:
                continue
            try:
                with holding_writes():
                    self.save()
                    self.journal.truncate()
            except Exception:
                logging.getLogger("tickwork").exception("compacting the journal failed")

    def replan_restored(self) -> None:
        """The queue is not saved: the fires of the restored jobs that were sent and not recorded are planned
        again, under each job's misfire policy (those whose time passed while the stack was down)."""
        from tickwork.observability import logger
        from tickwork.runtime import runtime

        service, now = runtime().service, datetime.now(UTC)
        for tenant_id, job_id in self.restored_jobs:
            try:
                service.replan_unrecorded(tenant_id, job_id, now)
            except Exception:
                logger.exception("planning a restored job again failed", extra={"job_id": job_id})

    def save(self) -> None:
        if self.data_dir is None:
            return
        from tickwork import tables

        from tickwork_local.moto_dynamodb import stored_items
        from tickwork_local.moto_sqs import stored_messages

        snapshot: dict[str, Any] = {
            definition.default_name: stored_items(definition.default_name) for definition in tables.ALL_TABLES
        }
        if self.changes is not None:
            snapshot[CHANGES_KEY] = self.changes.pending()
        snapshot[QUEUES_KEY] = {
            queue.default_name: stored_messages(queue.default_name) for queue in tables.ALL_QUEUES
        }
        private_directory(self.data_dir)
        temporary = self.data_dir / (SNAPSHOT_FILE + ".tmp")
        with os.fdopen(private_open(temporary, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as written:
            written.write(json.dumps(snapshot))  # C's encoder: json.dump's streaming one is Python's
            written.flush()
            os.fsync(written.fileno())
        temporary.replace(self.data_dir / SNAPSHOT_FILE)
        directory = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself, before the journal it replaces is emptied
        finally:
            os.close(directory)

    def seed_tenants(self) -> list[SeededTenant]:
        """Each local tenant with its token and signing secret (which signs its webhooks). A tenant new to the
        tables is written with the settings given at start; one restored from the data directory gets them
        too, and keeps its others as they were (changed by ``tickwork tenants update``, say)."""
        import boto3
        from tickwork.adapters.tenants import DynamoTenantStore
        from tickwork.config import Settings
        from tickwork.domain.tenants import Tenant, TenantChanges, new_signing_secret

        store = DynamoTenantStore(boto3.client("dynamodb"), table=Settings.from_env(os.environ).tenants_table)
        spec = os.environ.get(TENANTS_VARIABLE)
        wanted = parse_tenants(spec) if spec else [LocalTenant("default", self.default_token())]
        seeded = []
        for local in wanted:
            settings = {**self.tenant_settings, **local.settings}
            where = f"the settings of local tenant {local.tenant_id}"
            principal = store.by_token(local.token)
            check_settings(settings, where=where, tenant=principal.tenant if principal else None)
            if principal is None:
                secret = os.environ.get("TICKWORK_LOCAL_SIGNING_SECRET") or new_signing_secret()
                tenant = Tenant.model_validate(
                    {
                        "tenant_id": local.tenant_id,
                        "name": local.tenant_id,
                        "signing_secret": secret,
                        "created_at": datetime.now(UTC),
                    }
                    | settings
                )
                store.put(tenant, token=local.token)
            else:
                tenant = principal.tenant
                if settings:
                    tenant = store.update(tenant.tenant_id, TenantChanges.model_validate(settings))
            seeded.append(SeededTenant(tenant.tenant_id, local.token, tenant.signing_secret, settings))
        return seeded

    def default_token(self) -> str:
        """A new token each start, or the saved one when state persists across restarts."""
        path = self.data_dir / DEFAULT_TOKEN_FILE if self.data_dir else None
        if path is not None and path.exists():
            return path.read_text().strip()
        token = f"tw_local_{secrets.token_urlsafe(18)}"
        if path is not None:
            private_directory(path.parent)
            write_private(path, token)
        return token

    # --- loops --------------------------------------------------------------------------------------------
    def planner_loop(self) -> None:
        from tickwork.runtime import runtime

        stop = self.planner_stop  # this start's event: a later start has its own
        current = runtime()
        shards = list(range(current.settings.due_shards))
        while not (self.stop.is_set() or stop.is_set()):
            started = time.monotonic()
            try:
                report = current.planner_tick.tick(datetime.now(UTC), shards)
                self.sweeps.add(report)
            except Exception:
                logging.getLogger("tickwork").exception("planner tick failed")
            stop.wait(max(0.0, self.tick_seconds - (time.monotonic() - started)))

    def worker_loop(self, index: int) -> None:
        """One poller of the run queue's event source mapping (``harness.Pump``) into the worker handler's
        record handler, with a worker of its own, until the stack or this start of the pollers stops."""
        from tickwork.batches import JobOrderedBatchProcessor
        from tickwork.runtime import runtime

        from functions.worker.handler import handle_record
        from tickwork_local.harness import Pump, partial_batches
        from tickwork_local.priorities import ServeOrder

        stop = self.worker_stop  # this start's event: a later start has its own
        current = runtime()

        def sleep(seconds: float) -> None:
            # A record waiting (for its fire) when the pollers stop is cut short: its batch is handed back.
            if stop.wait(seconds):
                raise InvocationCut("the worker pollers stopped while a record waited")

        worker = current.worker(worker_id=f"local-worker-{self.worker_starts}-{index}", sleep=sleep)
        parallelism = current.settings.worker_parallelism

        def handle(record: Any) -> str:
            if stop.is_set():
                raise WorkerStopped("the poller was stopped before this record")
            return handle_record(record, current, worker)

        pump = Pump(
            current.sqs,
            current.queue_url,
            partial_batches(handle, processor=lambda: JobOrderedBatchProcessor(parallelism=parallelism)),
            batch_size=self.batch_size,
            wait_seconds=1,
            visibility_timeout=60,
            # Like a Lambda killed mid-batch: nothing of the batch is deleted, the visibility timeout hands
            # it out again, and runs left RUNNING wait for the sweeper.
            cut_short=stop.is_set,
            # The three priorities' queues, served in the priority order (tickwork_local.priorities).
            serve_order=ServeOrder(current.queue_urls, poller=index),
        )
        pump.poll(
            lambda: self.stop.is_set() or stop.is_set(), pause=self.stop.wait, in_flight=self.in_flight(index)
        )

    def pollers(self) -> int:
        """Pollers of the run queues: one per invocation up to MAX_POLLERS; past that, each poller hands its
        batches to invocations of their own (:meth:`in_flight`)."""
        return min(self.workers, MAX_POLLERS)

    def in_flight(self, poller: int) -> int:
        """How many of ``poller``'s batches may be handled at once: the stack's ``workers`` shared out."""
        share, extra = divmod(self.workers, self.pollers())
        return share + (1 if poller < extra else 0)

    def index_loop(self) -> None:
        from functions.indexer.handler import handle
        from tickwork_local.changes import WINDOW_SECONDS, index_loop

        window = float(os.environ.get("TICKWORK_INDEX_WINDOW_SECONDS", WINDOW_SECONDS))
        index_loop(self.changes, handle, self.stop, window=window)

    def status_loop(self) -> None:
        while not self.stop.wait(5):
            try:
                self.out.write(self.status_line() + "\n")
                self.out.flush()
            except Exception:
                logging.getLogger("tickwork").exception("status line failed")

    def status_line(self) -> str:
        import boto3
        from tickwork.app.service import percentile
        from tickwork.runtime import runtime

        current = runtime()
        # Each tenant's item counts its registered jobs (active or paused): a scan of tenants, not jobs.
        registered = sum(
            int(item["job_count"]["N"])
            for page in boto3.client("dynamodb")
            .get_paginator("scan")
            .paginate(TableName=current.settings.tenants_table, ProjectionExpression="job_count")
            for item in page["Items"]
            if "job_count" in item
        )
        depth = 0
        for queue_url in current.queue_urls.values():  # the three priorities' run queues
            attributes = current.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])[
                "Attributes"
            ]
            depth += sum(
                int(attributes.get(name, 0))
                for name in (
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                )
            )
        recent = self.metrics.recent()
        lags = sorted(int(value) for value in recent.get("TriggerLagMs", []))
        started, succeeded = (
            int(sum(recent.get("RunsStarted", []))),
            int(sum(recent.get("RunsSucceeded", []))),
        )
        failed = int(sum(recent.get("RunsFailed", [])) + sum(recent.get("RunsDead", [])))

        def lag(pct: int) -> str:
            value = percentile(lags, pct)
            return "-" if value is None else f"{value} ms"  # no run started in the last 60 s

        return (
            f"[{datetime.now(UTC):%H:%M:%S}] jobs registered {registered} | last 60 s: started {started}, "
            f"succeeded {succeeded}, failed {failed} | lag p50 {lag(50)}, p99 {lag(99)} | queue depth {depth}"
        )

    def spawn(self, target: Any, name: str, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread

    # --- restarts -----------------------------------------------------------------------------------------
    def start_planner(self) -> None:
        with self.restart_lock:
            if self.planner_thread is not None and self.planner_thread.is_alive():
                raise RuntimeError("the planner loop is already running")
            self.planner_stop = threading.Event()
            self.planner_thread = self.spawn(self.planner_loop, "tickwork-planner")

    def stop_planner(self, timeout: float = 30.0) -> bool:
        """Stop the planner/sweeper loop after its current tick; True if it ended within ``timeout``."""
        with self.restart_lock:
            self.planner_stop.set()
            thread, self.planner_thread = self.planner_thread, None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def start_workers(self) -> None:
        with self.restart_lock:
            if any(thread.is_alive() for thread in self.worker_threads):
                raise RuntimeError("the worker pollers are already running")
            self.worker_stop = threading.Event()
            self.worker_starts += 1
            self.worker_threads = [
                self.spawn(self.worker_loop, f"tickwork-worker-{self.worker_starts}-{index}", index)
                for index in range(self.pollers())
            ]

    def stop_workers(self, timeout: float = 30.0) -> bool:
        """Stop the worker pollers; a batch being handled is cut short after its current record and left
        to the visibility timeout. True if every poller ended within ``timeout``."""
        with self.restart_lock:
            self.worker_stop.set()
            threads, self.worker_threads = self.worker_threads, []
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    # --- run ----------------------------------------------------------------------------------------------
    def run(self) -> int:
        started = time.monotonic()
        if str(REPOSITORY) not in sys.path:
            sys.path.insert(0, str(REPOSITORY))
        with moto_server(self.host if self.host != "0.0.0.0" else "127.0.0.1") as endpoint:  # noqa: S104
            self.configure_environment()
            self.configure_clients()
            self.attach_change_feed()
            from tickwork.app.ports import NoTenantGauges
            from tickwork.runtime import runtime

            from functions.api.handler import make_handler as make_api_handler
            from functions.authorizer.handler import lambda_handler as authorizer_handler
            from tickwork_local.expiry import expiry_loop
            from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread

            self.configure_logging()
            self.create_resources()
            restored = self.restore()
            self.open_journal()
            runtime.cache_clear()
            current = runtime()
            current.metrics = self.metrics
            # No CloudWatch here: a tenant's waiting and throttled counts are in GET /v1/stats, and the
            # per-tenant gauges' EMF lines would land on the console.
            current.gauges = NoTenantGauges()
            self.replan_restored()
            tenants = self.seed_tenants()
            collect_less_often()
            server = serve(
                Gateway(
                    HandlerPool(make_api_handler),
                    CachedAuthorizer(authorizer_handler, self.authorizer_seconds),
                ),
                self.host,
                self.port,
                ready=self.ready.is_set,
                console=self.console,
            )
            start_in_thread(server)
            self.start_planner()
            self.start_workers()
            self.spawn(self.index_loop, "tickwork-indexer")
            # Runs and index chunks past their retention are deleted, as DynamoDB's TTL does on AWS.
            self.spawn(expiry_loop, "tickwork-expiry", self.stop)
            if self.journal is not None:
                self.spawn(self.compact_loop, "tickwork-compact")
            if not self.quiet:
                self.spawn(self.status_loop, "tickwork-status")
            if threading.current_thread() is threading.main_thread():
                # `kill` and process managers send SIGTERM, a closed terminal SIGHUP: stop as cleanly as for
                # Ctrl-C.
                signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
                signal.signal(signal.SIGHUP, lambda *_: self.stop.set())
            self.ready.set()
            logging.getLogger("tickwork").info(
                "local stack started", extra={"port": server.server_address[1]}
            )
            self.banner(tenants, restored, time.monotonic() - started, endpoint)
            try:
                while not self.stop.wait(0.5):
                    pass
            except KeyboardInterrupt:
                self.out.write("\nstopping…\n")
            finally:
                self.stop.set()
                self.worker_stop.set()  # records waiting for their fires are handed back, not run now
                server.shutdown()
                server.server_close()
                for thread in self.threads:
                    thread.join(timeout=3)
                from tickwork_local.atomic import holding_writes

                # A thread that has not stopped yet may still write: not between the snapshot and the
                # journal's truncation, or that write would be in neither.
                with holding_writes():
                    self.save()
                    if self.journal is not None:
                        self.journal.truncate()
                        self.journal.close()
        return 0

    def banner(self, tenants: list[SeededTenant], restored: int, seconds: float, endpoint: str) -> None:
        url = f"http://{self.host}:{self.port}"
        lines = [
            f"tickwork local is ready at {url} (in {seconds:.1f} s); logs in {self.log_file}",
            f"AWS endpoint (moto): {endpoint}",
        ]
        if self.console.built:
            lines.append(f"web console: {url}/ (sign in with a token below)")
        else:
            lines.append("web console: not built (run `make console`; it needs Node.js and npm)")
        if restored:
            lines.append(f"restored {restored} items from {self.data_dir}")
        for tenant in tenants:
            lines.append(
                f"tenant {tenant.tenant_id}: token {tenant.token} signing secret {tenant.signing_secret}"
            )
            if tenant.settings:
                given = ", ".join(f"{name}={setting_text(value)}" for name, value in tenant.settings.items())
                lines.append(f"tenant {tenant.tenant_id} settings at start: {given}")
        first = tenants[0]
        token, secret = first.token, first.signing_secret
        program = cli_program()
        api_url = "" if url == "http://127.0.0.1:8000" else f"TICKWORK_API_URL={url} "
        region = os.environ.get("AWS_DEFAULT_REGION", LOCAL_REGION)
        lines += [
            "",
            f"Try it (start a receiver first: {program} receive --port 9000 --secret {secret}):",
            f"  curl -s -X POST {url}/v1/jobs -H 'Authorization: Bearer {token}' \\",
            "    -H 'Content-Type: application/json' \\",
            '    -d \'{"name": "hello", "schedule": {"type": "rate", "every_seconds": 10},'
            ' "target": {"type": "http", "url": "http://127.0.0.1:9000/hook"}, "payload": {"hi": 1}}\'',
            f"  {api_url}TICKWORK_TOKEN={token} {program} jobs list",
            "Administer the tenants (list, get, update, disable, enable, rotate-token) through moto:",
            f"  AWS_ENDPOINT_URL={endpoint} AWS_DEFAULT_REGION={region} AWS_ACCESS_KEY_ID=local \\",
            f"    AWS_SECRET_ACCESS_KEY=local {program} tenants update {first.tenant_id}"
            " --api-requests-per-second 500",
            "Ctrl-C stops.",
        ]
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()


def setting_text(value: Any) -> str:
    """A setting as ``TICKWORK_LOCAL_TENANTS`` and ``--tenant-setting`` write it."""
    if value is None:
        return NO_LIMIT
    return str(value).lower() if isinstance(value, bool) else str(value)


def cli_program(cwd: Path | None = None) -> str:
    """How to run the CLI from this shell: ``tickwork`` when that name on the PATH is this installation's,
    else the script beside this Python (``.venv/bin/tickwork`` after `make run`), else ``python -m``."""
    import shutil

    script = Path(sys.executable).with_name("tickwork")
    found = shutil.which("tickwork")
    if found and script.exists() and Path(found).resolve() == script.resolve():
        return "tickwork"
    if script.exists():
        try:
            return str(script.absolute().relative_to((cwd or Path.cwd()).absolute()))
        except ValueError:
            return str(script)
    return f"{sys.executable} -m tickwork_local.cli"


# The youngest generation is collected after this many allocations (Python's default: 700).
YOUNG_COLLECTION_THRESHOLD = 50_000


def collect_less_often() -> None:
    """The local stack keeps every table in memory, hundreds of thousands of long-lived objects (moto's items
    and indexes, the restored snapshot, the modules): the cyclic garbage collector walked them again and
    again, a sixth of a burst of runs' CPU. What is alive once the stack has started is set aside for good
    (``gc.freeze``), and the youngest generation is collected less often; what is freed by reference
    counting (most of a run's garbage) is freed at once as before."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


@contextmanager
def running_in_thread(
    *,
    environment: Mapping[str, str],
    stack_class: type[LocalStack] | None = None,
    ready_seconds: float = 120,
    **options: Any,
) -> Iterator[LocalStack]:
    """A fresh local stack on a free loopback port, run in a thread of this process for the length of the
    block (for benchmarks and tests). It points the environment, the runtime and boto3's default session at
    its moto server, so all three are put back as they were afterwards. ``options`` go to the stack
    (``log_file``, ``tick_seconds``, ``workers``)."""
    import boto3
    from tickwork.runtime import runtime

    saved = dict(os.environ)
    os.environ.update(environment)
    stack = (stack_class or LocalStack)(
        host="127.0.0.1", port=free_port(), quiet=True, data_dir=None, out=io.StringIO(), **options
    )
    thread = threading.Thread(target=stack.run, name="tickwork-local", daemon=True)
    thread.start()
    try:
        if not stack.ready.wait(ready_seconds):
            raise RuntimeError(f"the local stack did not start in {ready_seconds:.0f} s")
        yield stack
    finally:
        stack.stop.set()
        thread.join(timeout=60)
        os.environ.clear()
        os.environ.update(saved)
        runtime.cache_clear()
        boto3.DEFAULT_SESSION = None
        if thread.is_alive():
            raise RuntimeError("the local stack did not stop within 60 s")


def run_local(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    quiet: bool = False,
    data_dir: str | None = None,
    log_file: str | None = None,
    tick_seconds: float = 1.0,
    workers: int = 4,
    batch_size: int = 10,
    tenant_settings: Mapping[str, Any] | None = None,
) -> int:
    stack = LocalStack(
        host=host,
        port=port,
        quiet=quiet,
        data_dir=data_dir,
        log_file=log_file,
        tick_seconds=tick_seconds,
        workers=workers,
        batch_size=batch_size,
        tenant_settings=tenant_settings,
    )
    return stack.run()
