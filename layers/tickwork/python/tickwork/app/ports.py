"""The ports the engine (service, planner, worker, sweeper) needs; DynamoDB and SQS adapters implement them,
and ``tickwork.testing`` holds in-memory fakes of the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from tickwork.domain.lanes import Holder, Lane
from tickwork.domain.models import Job, JobStatus, Run, RunMessage, RunStatus
from tickwork.domain.pools import PoolBacklog
from tickwork.domain.priority import Priority
from tickwork.domain.run_index import IndexChunk
from tickwork.domain.run_listing import Position, RunFilter, Slice
from tickwork.domain.tenants import Principal, Tenant, TenantChanges
from tickwork.domain.workflow import TaskEnds, TaskOutcome

T = TypeVar("T")
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True)
class Expect:
    """The condition of a run write: what the stored item must be for the write to happen.

    ``absent``: no item yet. Otherwise an item whose status is in ``statuses`` (None: any), whose fencing
    token equals ``token`` (None: any) or is below ``token_below`` (None: no bound), and whose lease is
    ``lease`` (its expiry, None for none, and whether it was asked to stop; None: any), and which has been
    re-run by hand ``manual_retries`` times (None: any).
    """

    absent: bool = False
    present: bool = False
    statuses: frozenset[RunStatus] | None = None
    token: int | None = None
    token_below: int | None = None
    lease: tuple[datetime | None, bool] | None = None
    manual_retries: int | None = None

    @classmethod
    def new(cls) -> Expect:
        return cls(absent=True)

    @classmethod
    def at(cls, run: Run) -> Expect:
        """Exactly as read: its status, its fencing token and its lease. Writes that keep the status and the
        token (a heartbeat, a cancel request) change the lease, so a write based on an older read (a sweep
        that found the lease lapsed, a heartbeat that read the run before a cancel) is refused."""
        return cls(
            present=True,
            statuses=frozenset({run.status}),
            token=run.fencing_token,
            lease=(run.lease_expires_at, run.cancel_requested),
        )

    @classmethod
    def older_than(cls, token: int) -> Expect:
        """Absent, or written by an earlier attempt (a lower fencing token)."""
        return cls(absent=True, present=True, token_below=token)


@dataclass(frozen=True)
class Written:
    """What a conditional run write did: written, or not, with the run as stored now (None: no item)."""

    ok: bool
    current: Run | None = None


@dataclass(frozen=True)
class Dispatch:
    """One message for the run queue, to arrive at ``due_at`` (or at once when that has passed)."""

    message: RunMessage
    due_at: datetime


class JobStore(Protocol):
    def create(self, job: Job, *, max_jobs: int) -> None:
        """Store a new job and claim its name. Raises NameTaken or QuotaExceeded."""

    def get(self, tenant_id: str, job_id: str) -> Job:
        """Raises NotFound, also for another tenant's job."""

    def get_with_lane(self, tenant_id: str, job_id: str) -> tuple[Job, Lane]:
        """The job and its lane (empty when it has none), in one consistent read. Raises NotFound."""

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Job]:
        """The jobs of ``(tenant_id, job_id)`` keys that exist, in the order asked."""

    def list_for_tenant(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[Job]:
        """Newest first. ``status=None`` lists every job but the cancelled ones."""

    def list_with_lanes(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[tuple[Job, Lane]]:
        """``list_for_tenant``, each job with its lane (empty when it has none), read together."""

    def save(self, job: Job, *, expected_version: int, previous_name: str | None = None) -> None:
        """Replace the job if its stored version is ``expected_version``; move the name lock on a rename."""

    def cancel(self, job: Job, *, expected_version: int) -> None:
        """Store the cancelled job, free its name and its slot in the tenant's quota."""

    def reopen(
        self, job: Job, *, expected_version: int, max_jobs: int, previous_name: str | None = None
    ) -> None:
        """Store a COMPLETED job that an update made ACTIVE again (a new fire): it takes a slot of the
        tenant's quota again, within ``max_jobs``. Raises VersionConflict, NameTaken (on a rename) or
        QuotaExceeded."""

    def advance_cursor(self, job: Job, next_fire_at: datetime | None, last_fire_at: datetime | None) -> bool:
        """Move the planning cursor if the job is unchanged (same version, still ACTIVE); with no fire left,
        take it out of the due index and keep its last fire. False when it changed meanwhile."""

    def complete(self, tenant_id: str, job_id: str, *, through: datetime | None = None) -> bool:
        """An ACTIVE job whose schedule has run out becomes COMPLETED, leaves the due index and frees its
        quota slot; False when it is not (or no longer) such a job. ``through``: the schedule's last fire,
        which has ended: the job completes even if its cursor has not moved past it yet."""

    def due_jobs(self, shard: int, *, until: datetime, limit: int) -> list[tuple[str, str]]:
        """``(tenant_id, job_id)`` of the shard's jobs with a fire due by ``until``, earliest first."""

    def count_by_status(self, tenant_id: str) -> dict[JobStatus, int]: ...

    def note_pool(self, tenant_id: str, pool: str) -> None:
        """Remember that a job of the tenant names ``pool`` (a job created with it is remembered already)."""

    def pools(self, tenant_id: str) -> list[str]:
        """Every pool a job of the tenant has named, in name order."""

    def note_concurrency_key(self, tenant_id: str, key: str, max_concurrency: int) -> None:
        """Remember that a job of the tenant names ``key`` with ``max_concurrency``, while the tenant has
        named fewer than ``MAX_KEYS_KEPT`` (key, limit) pairs."""

    def concurrency_keys(self, tenant_id: str) -> dict[str, int]:
        """Every concurrency key a job of the tenant has named, with the largest limit named for it."""


class DueShards(Protocol):
    """The due index's shards beyond the current count: jobs written while the count was higher."""

    def strays(self) -> list[int]:
        """Shards at or above the current count that may still hold jobs (empty unless it was lowered)."""

    def rehome(self, shard: int, *, limit: int) -> bool:
        """Move up to ``limit`` jobs of the stray ``shard`` into the current shards; True when it is empty."""

    def settle(self, strays: Sequence[int]) -> None:
        """None of ``strays`` holds a job any more: stop looking at them."""


class Lanes(Protocol):
    def claim(
        self, tenant_id: str, job_id: str, *, seen: Lane, holder: Holder, drop: Sequence[str]
    ) -> Lane | None:
        """Add ``holder`` (whose token must be ``seen.version + 1``) and remove the holders ``drop`` names, if
        the lane is still at ``seen.version``. None when it was; the lane as it is now when it was not."""

    def heartbeat(self, tenant_id: str, job_id: str, holder: Holder) -> bool:
        """Push the holder's lease to ``holder.lease_until`` while it still holds the lane with its token."""

    def set_chain(
        self,
        tenant_id: str,
        job_id: str,
        *,
        seen: Lane,
        chain_until: datetime | None,
        chain_from: datetime | None = None,
    ) -> Lane | None:
        """Set (or clear) the lane's backfill chain, its last fire and its first, if it is still at
        ``seen.version``; as :meth:`claim`."""

    def get(self, tenant_id: str, job_id: str) -> Lane:
        """The lane alone, in one consistent read (empty when the job has none)."""

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Lane]:
        """The lanes of ``(tenant_id, job_id)`` keys, consistent, a hundred to a request (empty ones for jobs
        that have none)."""

    def release(self, tenant_id: str, job_id: str, run_id: str, token: int) -> bool:
        """Let the holder ``run_id`` go if it still holds with ``token`` (a claim taken ahead of its fire that
        will not be called); False when it did not."""

    def move(self, tenant_id: str, job_id: str) -> None:
        """Move the lane to its next version (making it, if the job has none yet), and nothing else: a claim
        on the version read before fails, so a fire read ahead is decided again (a run's cancel)."""


class TenantSlots(Protocol):
    """A tenant's in-flight limit: slot items of a few slots each, holders let go explicitly."""

    def get(self, tenant_id: str, shard: int) -> Lane: ...

    def claim(
        self,
        tenant_id: str,
        shard: int,
        *,
        seen: Lane,
        holder: Holder,
        drop: Sequence[str],
        forget: Sequence[str] = (),
    ) -> Lane | None:
        """As :meth:`Lanes.claim`, on the tenant's slot item ``shard``; and the waiting notes ``forget``
        (read in ``seen``) dropped in the same write."""

    def heartbeat(self, tenant_id: str, shard: int, holder: Holder) -> bool: ...

    def release(self, tenant_id: str, shard: int, run_id: str, token: int) -> bool: ...

    def note_waiter(
        self, tenant_id: str, shard: int, run_id: str, until: datetime, *, seen: Lane, drop: Sequence[str]
    ) -> None:
        """Note the run as waiting for the item's limit until ``until`` (unless it holds a slot of the item
        meanwhile), dropping the lapsed notes ``drop``; the version stays."""

    def forget_waiter(self, tenant_id: str, shard: int, run_id: str) -> None:
        """Drop the run's waiting note, if it has one."""

    def note_ahead(self, tenant_id: str, shard: int, priority: Priority, until: datetime) -> None:
        """Note that runs of ``priority`` wait for the item's limit until ``until`` (a later note only);
        the version stays."""


class TaskEndStore(Protocol):
    """The fan-in of workflow runs: each task's end, recorded once (:mod:`tickwork.adapters.task_ends`)."""

    def record(self, workflow_run: Run, task_id: str, outcome: TaskOutcome) -> TaskEnds:
        """The task's end if not recorded yet; every end recorded, as they stand after the call."""

    def read(self, workflow_run: Run) -> dict[str, TaskOutcome]:
        """Every end recorded in the workflow run's go (its ``manual_retries``)."""

    def begin_retry(self, reopened: Run, kept: dict[str, TaskOutcome]) -> None:
        """The ends a retry keeps, as the first of the reopened run's go, written once."""


class TenantThrottles(Protocol):
    """The GCRA times of tenants' run-start throttles (:mod:`tickwork.domain.throttle`)."""

    def advance(self, tenant_id: str, shard: int, *, now_us: int, interval_us: int) -> int:
        """Atomically move the item's time to ``max(time, now_us) + interval_us``; the time as moved."""

    def time_of(self, tenant_id: str, shard: int) -> int | None:
        """The item's time as stored (microseconds); None for a throttle at rest (no item)."""


class RunStore(Protocol):
    def get(self, tenant_id: str, run_id: str) -> Run:
        """Raises NotFound, also for another tenant's run."""

    def find_many(
        self, tenant_id: str, job_id: str, run_ids: Sequence[str], *, consistent: bool = True
    ) -> dict[str, Run]:
        """The stored runs among ``run_ids`` (all of one job), in as few reads as it can: consistent ones,
        unless ``consistent`` is False (half the price; a read may miss a write of the last second)."""

    def tasks_of(self, tenant_id: str, run: Run) -> list[Run]:
        """The task runs of workflow run ``run`` that exist, in one read."""

    def put(self, run: Run, expect: Expect) -> Written:
        """Write the whole run if the stored item meets ``expect``; when it does not, say what is stored."""

    def delete(self, run: Run, expect: Expect) -> Written:
        """Delete the run's item if it meets ``expect``; when it does not, say what is stored."""

    def list_for_job(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        """Stored runs, newest first (by scheduled time)."""

    def list_failures(
        self, tenant_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        """The tenant's stored FAILED, DEAD and ABANDONED runs in ``only`` below ``before``, newest first:
        up to ``want`` of them, reading at most ``budget`` items."""

    def list_for_job_filtered(
        self, tenant_id: str, job_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        """The job's stored runs in ``only`` (statuses and times) below ``before``, as ``list_failures``."""

    def latest(self, tenant_id: str, job_id: str, *, until: datetime) -> Run | None:
        """The stored run with the latest scheduled time at or before ``until``."""

    def get_many(self, tenant_id: str, runs: Sequence[tuple[str, int]]) -> dict[str, Run]:
        """The stored runs among ``(run_id, scheduled ms)`` of any of the tenant's jobs, read in batches."""

    def due_for_attention(self, shard: int, *, now: datetime, limit: int) -> list[tuple[str, str]]:
        """``(tenant_id, run_id)`` of runs the sweeper should look at by now, oldest first."""

    def waiting_in_pool(self, tenant_id: str, pool: str, *, limit: int) -> list[Run]:
        """Runs waiting in the tenant's pool for a claim, oldest due first (possibly a moment stale)."""

    def save_checkpoint(self, run: Run, checkpoint: Any) -> bool:
        """Keep the run's checkpoint, unless a later attempt (a higher fencing token) saved one."""

    def checkpoint_of(self, run: Run) -> Any:
        """The run's last saved checkpoint; None when there is none."""

    def pool_backlog(self, tenant_id: str, pool: str, *, now: datetime, cap: int) -> PoolBacklog:
        """The runs waiting in the tenant's pool and due by ``now``: counted up to ``cap``, and the oldest's
        due time (possibly a moment stale)."""


class RunIndex(Protocol):
    """The tenant-wide run history (``tickwork.domain.run_index``), written from the runs' change feed."""

    def write(self, chunks: Sequence[IndexChunk]) -> None: ...

    def chunks(self, tenant_id: str, *, below_ms: int | None, since_ms: int | None) -> Iterator[IndexChunk]:
        """The tenant's chunks whose newest run is scheduled before ``below_ms``, newest first, read as
        they are asked for; none older than ``since_ms``."""


class RunQueue(Protocol):
    def send(self, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        """Send, ten to a request; returns the ones that were not sent."""

    def send_later(self, message: RunMessage, delay_seconds: int) -> None:
        """One message, held back ``delay_seconds`` (a retry, a held run, an early one)."""


class DeadLetters(Protocol):
    def send(self, run: Run, *, reason: str, error: dict[str, Any] | None) -> None: ...


class TenantStore(Protocol):
    def get(self, tenant_id: str) -> Tenant:
        """Raises NotFound."""

    def by_token(self, token: str) -> Principal | None:
        """Who a bearer token belongs to (an active tenant), or None."""


class TenantAdmin(Protocol):
    """The operator's side of the tenants: their settings changed."""

    def get(self, tenant_id: str) -> Tenant:
        """Raises NotFound."""

    def update(self, tenant_id: str, changes: TenantChanges) -> Tenant:
        """Change the settings given and nothing else; the tenant as changed. Raises NotFound."""


class TenantGauges(Protocol):
    """Per-tenant gauges in CloudWatch (the dimension ``tenant_id``): rare, so each is a line of its own."""

    def record(self, tenant_id: str, values: Mapping[str, float]) -> None: ...


class NoTenantGauges:
    def record(self, tenant_id: str, values: Mapping[str, float]) -> None:
        return None


class Metrics(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...

    def milliseconds(self, name: str, value: float) -> None: ...
