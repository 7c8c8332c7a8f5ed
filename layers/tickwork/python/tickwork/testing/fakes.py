"""In-memory fakes of the engine's ports, with the conditional-write semantics of the DynamoDB adapters.

Each write is atomic (one lock), as one DynamoDB request is; reads return copies, as a read would. Engine
tests use these to check the logic without moto; the adapters are tested against moto separately.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from tickwork import tables
from tickwork.app.ports import Dispatch, Expect, Page, Written
from tickwork.domain.flow import MAX_KEYS_KEPT, key_entry, keys_of
from tickwork.domain.lanes import Holder, Lane
from tickwork.domain.lifecycle import RETRYABLE_BY_HAND, attention_at
from tickwork.domain.models import Job, JobStatus, Run, RunMessage, RunStatus
from tickwork.domain.pools import PoolBacklog, pool_target_of
from tickwork.domain.priority import Priority
from tickwork.domain.run_index import IndexChunk, IndexEntry
from tickwork.domain.run_listing import Position, RunFilter, Slice, position_of
from tickwork.domain.tenants import Principal, Tenant, TenantChanges, hash_token
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.errors import NameTaken, NotFound, QuotaExceeded, VersionConflict


class FakeLanes:
    def __init__(self) -> None:
        self.lanes: dict[tuple[str, str], Lane] = {}
        self.lock = threading.RLock()
        self.writes = 0

    def get(self, tenant_id: str, job_id: str) -> Lane:
        with self.lock:
            return self.lanes.get((tenant_id, job_id), Lane())

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Lane]:
        with self.lock:
            return {key: self.get(*key) for key in keys}

    def claim(
        self, tenant_id: str, job_id: str, *, seen: Lane, holder: Holder, drop: Sequence[str]
    ) -> Lane | None:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, job_id)
            if current.version != seen.version:
                return current
            if holder.token != seen.version + 1:
                raise ValueError("a new holder's token is the lane's next version")
            holders = {r: h for r, h in current.holders.items() if r not in drop}
            holders[holder.run_id] = holder
            self.lanes[(tenant_id, job_id)] = current.model_copy(
                update={"version": current.version + 1, "holders": holders}
            )
            return None

    def heartbeat(self, tenant_id: str, job_id: str, holder: Holder) -> bool:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, job_id)
            held = current.holders.get(holder.run_id)
            if held is None or held.token != holder.token:
                return False
            holders = {
                **current.holders,
                holder.run_id: held.model_copy(update={"lease_until": holder.lease_until}),
            }
            self.lanes[(tenant_id, job_id)] = current.model_copy(
                update={"version": current.version + 1, "holders": holders}
            )
            return True

    def set_chain(
        self,
        tenant_id: str,
        job_id: str,
        *,
        seen: Lane,
        chain_until: datetime | None,
        chain_from: datetime | None = None,
    ) -> Lane | None:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, job_id)
            if current.version != seen.version:
                return current
            self.lanes[(tenant_id, job_id)] = current.model_copy(
                update={"version": current.version + 1, "chain_until": chain_until, "chain_from": chain_from}
            )
            return None

    def move(self, tenant_id: str, job_id: str) -> None:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, job_id)
            self.lanes[(tenant_id, job_id)] = current.model_copy(
                update={"version": current.version + 1, "moved": current.moved + 1}
            )

    def release(self, tenant_id: str, job_id: str, run_id: str, token: int) -> bool:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, job_id)
            held = current.holders.get(run_id)
            if held is None or held.token != token:
                return False
            holders = {r: h for r, h in current.holders.items() if r != run_id}
            self.lanes[(tenant_id, job_id)] = current.model_copy(update={"holders": holders})
            return True


class FakeTenantSlots:
    def __init__(self) -> None:
        self.items: dict[tuple[str, int], Lane] = {}
        self.lock = threading.RLock()
        self.writes = 0

    def get(self, tenant_id: str, shard: int) -> Lane:
        with self.lock:
            return self.items.get((tenant_id, shard), Lane())

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
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, shard)
            if current.version != seen.version:
                return current
            holders = {r: h for r, h in current.holders.items() if r not in drop}
            holders[holder.run_id] = holder
            waiters = {r: until for r, until in current.waiters.items() if r not in forget}
            self.items[(tenant_id, shard)] = current.model_copy(
                update={"version": current.version + 1, "holders": holders, "waiters": waiters}
            )
            return None

    def note_waiter(
        self, tenant_id: str, shard: int, run_id: str, until: datetime, *, seen: Lane, drop: Sequence[str]
    ) -> None:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, shard)
            if run_id in current.holders:
                return
            waiters = {r: u for r, u in current.waiters.items() if r not in drop or r == run_id}
            waiters[run_id] = until
            self.items[(tenant_id, shard)] = current.model_copy(update={"waiters": waiters})

    def note_ahead(self, tenant_id: str, shard: int, priority: Priority, until: datetime) -> None:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, shard)
            noted = current.ahead.get(priority)
            if noted is None or noted < until:
                ahead = {**current.ahead, priority: until}
                self.items[(tenant_id, shard)] = current.model_copy(update={"ahead": ahead})

    def forget_waiter(self, tenant_id: str, shard: int, run_id: str) -> None:
        with self.lock:
            current = self.get(tenant_id, shard)
            if run_id in current.waiters:
                self.writes += 1
                waiters = {r: u for r, u in current.waiters.items() if r != run_id}
                self.items[(tenant_id, shard)] = current.model_copy(update={"waiters": waiters})

    def heartbeat(self, tenant_id: str, shard: int, holder: Holder) -> bool:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, shard)
            held = current.holders.get(holder.run_id)
            if held is None or held.token != holder.token:
                return False
            holders = {
                **current.holders,
                holder.run_id: held.model_copy(update={"lease_until": holder.lease_until}),
            }
            self.items[(tenant_id, shard)] = current.model_copy(
                update={"version": current.version + 1, "holders": holders}
            )
            return True

    def release(self, tenant_id: str, shard: int, run_id: str, token: int) -> bool:
        with self.lock:
            self.writes += 1
            current = self.get(tenant_id, shard)
            held = current.holders.get(run_id)
            if held is None or held.token != token:
                return False
            holders = {r: h for r, h in current.holders.items() if r != run_id}
            self.items[(tenant_id, shard)] = current.model_copy(update={"holders": holders})
            return True


class FakeJobStore:
    def __init__(self, lanes: FakeLanes, *, due_shards: int = tables.DEFAULT_DUE_SHARDS) -> None:
        self.lanes = lanes
        self.due_shards = due_shards
        self.jobs: dict[tuple[str, str], Job] = {}
        self.names: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}
        self.pools_named: dict[str, set[str]] = {}
        self.keys_named: dict[str, set[str]] = {}
        self.lock = threading.RLock()

    def create(self, job: Job, *, max_jobs: int) -> None:
        with self.lock:
            if (job.tenant_id, job.name) in self.names:
                raise NameTaken(f"a job named {job.name!r} already exists", field="name")
            if self.counts.get(job.tenant_id, 0) >= max_jobs:
                raise QuotaExceeded(f"the tenant's limit of {max_jobs} jobs is reached")
            self.jobs[(job.tenant_id, job.job_id)] = job
            self.names[(job.tenant_id, job.name)] = job.job_id
            self.counts[job.tenant_id] = self.counts.get(job.tenant_id, 0) + 1
            target = pool_target_of(job)
            if target is not None:
                self.pools_named.setdefault(job.tenant_id, set()).add(target.pool)

    def get(self, tenant_id: str, job_id: str) -> Job:
        with self.lock:
            job = self.jobs.get((tenant_id, job_id))
        if job is None:
            raise NotFound(f"job {job_id!r} not found", field="job_id")
        return job

    def get_with_lane(self, tenant_id: str, job_id: str) -> tuple[Job, Lane]:
        with self.lock:
            return self.get(tenant_id, job_id), self.lanes.get(tenant_id, job_id)

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Job]:
        with self.lock:
            return [self.jobs[key] for key in keys if key in self.jobs]

    def list_for_tenant(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[Job]:
        with self.lock:
            mine = sorted(
                (job for (tenant, _), job in self.jobs.items() if tenant == tenant_id),
                key=lambda job: job.job_id,
                reverse=True,
            )
        wanted = [
            job
            for job in mine
            if (job.status is status if status else job.status is not JobStatus.CANCELLED)
            and (cursor is None or job.job_id < cursor)
        ]
        page = wanted[:limit]
        return Page(page, page[-1].job_id if len(wanted) > limit else None)

    def list_with_lanes(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None
    ) -> Page[tuple[Job, Lane]]:
        with self.lock:
            page = self.list_for_tenant(tenant_id, status=status, limit=limit, cursor=cursor)
            return Page(
                [(job, self.lanes.get(tenant_id, job.job_id)) for job in page.items], page.next_cursor
            )

    def save(self, job: Job, *, expected_version: int, previous_name: str | None = None) -> None:
        with self.lock:
            stored = self.get(job.tenant_id, job.job_id)
            if stored.version != expected_version:
                raise VersionConflict("the job changed meanwhile", field="version")
            if previous_name is not None:
                if (job.tenant_id, job.name) in self.names:
                    raise NameTaken(f"a job named {job.name!r} already exists", field="name")
                del self.names[(job.tenant_id, previous_name)]
                self.names[(job.tenant_id, job.name)] = job.job_id
            self.jobs[(job.tenant_id, job.job_id)] = job
            self.lanes.move(job.tenant_id, job.job_id)

    def cancel(self, job: Job, *, expected_version: int) -> None:
        with self.lock:
            stored = self.get(job.tenant_id, job.job_id)
            if stored.version != expected_version:
                raise VersionConflict("the job changed meanwhile", field="version")
            self.jobs[(job.tenant_id, job.job_id)] = job.model_copy(update={"next_fire_at": None})
            self.lanes.move(job.tenant_id, job.job_id)
            self.names.pop((job.tenant_id, job.name), None)
            if stored.status is not JobStatus.COMPLETED:
                self.counts[job.tenant_id] -= 1

    def reopen(
        self, job: Job, *, expected_version: int, max_jobs: int, previous_name: str | None = None
    ) -> None:
        with self.lock:
            stored = self.get(job.tenant_id, job.job_id)
            if stored.version != expected_version or stored.status is not JobStatus.COMPLETED:
                raise VersionConflict("the job changed meanwhile", field="version")
            if previous_name is not None and (job.tenant_id, job.name) in self.names:
                raise NameTaken(f"a job named {job.name!r} already exists", field="name")
            if self.counts.get(job.tenant_id, 0) >= max_jobs:
                raise QuotaExceeded(f"the tenant's limit of {max_jobs} jobs is reached")
            if previous_name is not None:
                del self.names[(job.tenant_id, previous_name)]
                self.names[(job.tenant_id, job.name)] = job.job_id
            self.jobs[(job.tenant_id, job.job_id)] = job
            self.counts[job.tenant_id] = self.counts.get(job.tenant_id, 0) + 1

    def advance_cursor(self, job: Job, next_fire_at: datetime | None, last_fire_at: datetime | None) -> bool:
        with self.lock:
            stored = self.jobs.get((job.tenant_id, job.job_id))
            if (
                stored is None
                or stored.version != job.version
                or stored.status is not JobStatus.ACTIVE
                or stored.next_fire_at != job.next_fire_at
            ):
                return False
            update: dict[str, Any] = {"next_fire_at": next_fire_at}
            if next_fire_at is None:
                update["last_fire_at"] = last_fire_at
            self.jobs[(job.tenant_id, job.job_id)] = stored.model_copy(update=update)
            return True

    def complete(self, tenant_id: str, job_id: str, *, through: datetime | None = None) -> bool:
        with self.lock:
            stored = self.jobs.get((tenant_id, job_id))
            if stored is None or stored.status is not JobStatus.ACTIVE:
                return False
            if stored.next_fire_at is not None and (through is None or stored.next_fire_at > through):
                return False
            self.jobs[(tenant_id, job_id)] = stored.model_copy(
                update={"status": JobStatus.COMPLETED, "next_fire_at": None}
            )
            self.counts[tenant_id] -= 1
            return True

    def due_jobs(self, shard: int, *, until: datetime, limit: int) -> list[tuple[str, str]]:
        with self.lock:
            due = sorted(
                (job.next_fire_at, tenant, job_id)
                for (tenant, job_id), job in self.jobs.items()
                if job.status is JobStatus.ACTIVE
                and job.next_fire_at is not None
                and job.next_fire_at <= until
                and tables.stable_shard(job_id, self.due_shards) == shard
            )
        return [(tenant, job_id) for _, tenant, job_id in due[:limit]]

    def count_by_status(self, tenant_id: str) -> dict[JobStatus, int]:
        counts: dict[JobStatus, int] = {}
        with self.lock:
            for (tenant, _), job in self.jobs.items():
                if tenant == tenant_id:
                    counts[job.status] = counts.get(job.status, 0) + 1
        return counts

    def note_pool(self, tenant_id: str, pool: str) -> None:
        with self.lock:
            self.pools_named.setdefault(tenant_id, set()).add(pool)

    def pools(self, tenant_id: str) -> list[str]:
        with self.lock:
            return sorted(self.pools_named.get(tenant_id, ()))

    def note_concurrency_key(self, tenant_id: str, key: str, max_concurrency: int) -> None:
        with self.lock:
            named = self.keys_named.setdefault(tenant_id, set())
            entry = key_entry(key, max_concurrency)
            if len(named) < MAX_KEYS_KEPT or entry in named:
                named.add(entry)

    def concurrency_keys(self, tenant_id: str) -> dict[str, int]:
        with self.lock:
            return keys_of(self.keys_named.get(tenant_id, ()))


class FakeRunStore:
    """``changes`` is the table's change feed: every run written, in order, with a rising version, until
    ``take_changes`` hands them to an indexer."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, str], Run] = {}
        self.lock = threading.RLock()
        self.writes = 0
        self.failed_writes = 0
        self.changes: list[tuple[str, IndexEntry]] = []
        self.versions = itertools.count(1)
        self.checkpoints: dict[tuple[str, str], tuple[int, Any]] = {}

    def take_changes(self) -> list[tuple[str, IndexEntry]]:
        with self.lock:
            taken, self.changes = self.changes, []
        return taken

    def get(self, tenant_id: str, run_id: str) -> Run:
        with self.lock:
            run = self.runs.get((tenant_id, run_id))
        if run is None:
            raise NotFound(f"run {run_id!r} not found", field="run_id")
        return run

    def find_many(
        self, tenant_id: str, job_id: str, run_ids: Sequence[str], *, consistent: bool = True
    ) -> dict[str, Run]:
        with self.lock:
            return {
                run_id: self.runs[(tenant_id, run_id)]
                for run_id in run_ids
                if (tenant_id, run_id) in self.runs
            }

    def tasks_of(self, tenant_id: str, run: Run) -> list[Run]:
        with self.lock:
            prefix = run.run_id + "/"
            return [
                task
                for (tenant, run_id), task in self.runs.items()
                if tenant == tenant_id and run_id.startswith(prefix)
            ]

    def put(self, run: Run, expect: Expect) -> Written:
        with self.lock:
            self.writes += 1
            stored = self.runs.get((run.tenant_id, run.run_id))
            if not _meets(stored, expect):
                self.failed_writes += 1
                return Written(False, stored)
            self.runs[(run.tenant_id, run.run_id)] = run
            entry = IndexEntry(
                run.run_id, to_epoch_ms(run.scheduled_for), run.status, run.lag_ms, next(self.versions)
            )
            self.changes.append((run.tenant_id, entry))
            return Written(True)

    def delete(self, run: Run, expect: Expect) -> Written:
        with self.lock:
            stored = self.runs.get((run.tenant_id, run.run_id))
            if not _meets(stored, expect):
                return Written(False, stored)
            self.runs.pop((run.tenant_id, run.run_id), None)
            return Written(True)

    def list_for_job(self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None) -> Page[Run]:
        with self.lock:
            mine = sorted(
                (r for (t, _), r in self.runs.items() if t == tenant_id and r.job_id == job_id),
                key=lambda r: (r.scheduled_for, r.run_id),
                reverse=True,
            )
        if cursor is not None:
            mine = [r for r in mine if (r.scheduled_for.isoformat(), r.run_id) < tuple(cursor.split("|", 1))]
        page = mine[:limit]
        more = len(mine) > limit
        return Page(page, f"{page[-1].scheduled_for.isoformat()}|{page[-1].run_id}" if more else None)

    def list_failures(
        self, tenant_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        return self._slice(tenant_id, only, RETRYABLE_BY_HAND, before=before, want=want, budget=budget)

    def list_for_job_filtered(
        self, tenant_id: str, job_id: str, only: RunFilter, *, before: Position | None, want: int, budget: int
    ) -> Slice:
        return self._slice(
            tenant_id, replace(only, job_id=job_id), None, before=before, want=want, budget=budget
        )

    def _slice(
        self,
        tenant_id: str,
        only: RunFilter,
        among: frozenset[RunStatus] | None,
        *,
        before: Position | None,
        want: int,
        budget: int,
    ) -> Slice:
        """As the store reads them: newest first, each candidate counted against ``budget``."""
        with self.lock:
            candidates = sorted(
                (
                    run
                    for (tenant, _), run in self.runs.items()
                    if tenant == tenant_id
                    and (among is None or run.status in among)
                    and (only.job_id is None or run.job_id == only.job_id)
                    and (before is None or position_of(run) < before)
                ),
                key=position_of,
                reverse=True,
            )
        found: list[Run] = []
        for read, run in enumerate(candidates, start=1):
            if only.matches(run):
                found.append(run)
            if (len(found) >= want or read >= budget) and read < len(candidates):
                return Slice(found, position_of(run))
        return Slice(found)

    def latest(self, tenant_id: str, job_id: str, *, until: datetime) -> Run | None:
        with self.lock:
            mine = [r for (t, _), r in self.runs.items() if t == tenant_id and r.job_id == job_id]
        started = [r for r in mine if r.scheduled_for <= until]
        return max(started, key=lambda r: r.scheduled_for) if started else None

    def get_many(self, tenant_id: str, runs: Sequence[tuple[str, int]]) -> dict[str, Run]:
        with self.lock:
            return {run_id: run for run_id, _ in runs if (run := self.runs.get((tenant_id, run_id)))}

    def due_for_attention(self, shard: int, *, now: datetime, limit: int) -> list[tuple[str, str]]:
        with self.lock:
            due = sorted(
                (when, tenant, run_id)
                for (tenant, run_id), run in self.runs.items()
                if (when := attention_at(run)) is not None and when <= now
            )
        return [(tenant, run_id) for _, tenant, run_id in due[:limit]]

    def waiting_in_pool(self, tenant_id: str, pool: str, *, limit: int) -> list[Run]:
        with self.lock:
            waiting = sorted(
                (
                    run
                    for (tenant, _), run in self.runs.items()
                    if tenant == tenant_id and run.waiting_in_pool and run.pool == pool
                ),
                key=lambda run: (run.due_at, run.run_id),
            )
        return waiting[:limit]

    def pool_backlog(self, tenant_id: str, pool: str, *, now: datetime, cap: int) -> PoolBacklog:
        due = [
            run.due_at for run in self.waiting_in_pool(tenant_id, pool, limit=1_000_000) if run.due_at <= now
        ]
        return PoolBacklog(
            pool=pool, waiting=min(len(due), cap), capped=len(due) > cap, oldest_due=min(due, default=None)
        )

    def save_checkpoint(self, run: Run, checkpoint: Any) -> bool:
        with self.lock:
            saved = self.checkpoints.get((run.tenant_id, run.run_id))
            if saved is not None and saved[0] > run.fencing_token:
                return False
            copied = json.loads(json.dumps(checkpoint))
            self.checkpoints[(run.tenant_id, run.run_id)] = (run.fencing_token, copied)
            return True

    def checkpoint_of(self, run: Run) -> Any:
        with self.lock:
            saved = self.checkpoints.get((run.tenant_id, run.run_id))
        return saved[1] if saved is not None else None


class FakeRunIndex:
    """Chunks by tenant, read newest first as the table's sort key orders them."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], IndexChunk] = {}
        self.lock = threading.Lock()
        self.chunks_read = 0

    def write(self, chunks: Sequence[IndexChunk]) -> None:
        with self.lock:
            for chunk in chunks:
                self.stored[(chunk.tenant_id, chunk.chunk_id)] = chunk

    def chunks(self, tenant_id: str, *, below_ms: int | None, since_ms: int | None) -> Iterator[IndexChunk]:
        with self.lock:
            mine = sorted(
                (
                    chunk
                    for (tenant, _), chunk in self.stored.items()
                    if tenant == tenant_id
                    and (below_ms is None or chunk.newest_ms < below_ms)
                    and (since_ms is None or chunk.newest_ms >= since_ms)
                ),
                key=lambda chunk: (chunk.newest_ms, chunk.chunk_id),
                reverse=True,
            )
        for chunk in mine:
            self.chunks_read += 1
            yield chunk


def _meets(stored: Run | None, expect: Expect) -> bool:
    if stored is None:
        return expect.absent
    if not expect.present:
        return False
    if expect.statuses is not None and stored.status not in expect.statuses:
        return False
    if expect.token is not None and stored.fencing_token != expect.token:
        return False
    if expect.lease is not None and (stored.lease_expires_at, stored.cancel_requested) != expect.lease:
        return False
    if expect.manual_retries is not None and stored.manual_retries != expect.manual_retries:
        return False
    return not (expect.token_below is not None and stored.fencing_token >= expect.token_below)


@dataclass(eq=False)
class Queued:
    message: RunMessage
    visible_at: datetime


@dataclass
class FakeRunQueue:
    """Messages with the time each becomes visible; ``receive`` hands out the visible ones (oldest first)."""

    clock: Any
    messages: list[Queued] = field(default_factory=list)
    sent: int = 0
    fail_sends: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def send(self, dispatches: Sequence[Dispatch], now: datetime) -> list[Dispatch]:
        with self.lock:
            if self.fail_sends:
                self.fail_sends -= 1
                return list(dispatches)
            # The delay is worked out from the sender's ``now``; SQS counts it from when the message arrives.
            arrived = self.clock()
            for dispatch in dispatches:
                delay = max(0, min(900, int((dispatch.due_at - now).total_seconds())))
                self.messages.append(Queued(dispatch.message, arrived + timedelta(seconds=delay)))
                self.sent += 1
        return []

    def send_later(self, message: RunMessage, delay_seconds: int) -> None:
        with self.lock:
            self.messages.append(Queued(message, self.clock() + timedelta(seconds=max(0, delay_seconds))))
            self.sent += 1

    def receive(self, *, limit: int = 10, visibility: float = 30) -> list[Queued]:
        """Up to ``limit`` visible messages, oldest first, hidden for ``visibility`` seconds: delete each
        once handled, or it comes back (as SQS does)."""
        moment = self.clock()
        with self.lock:
            visible = sorted((q for q in self.messages if q.visible_at <= moment), key=lambda q: q.visible_at)
            taken = visible[:limit]
            for queued in taken:
                queued.visible_at = moment + timedelta(seconds=visibility)
        return taken

    def delete(self, queued: Queued) -> None:
        with self.lock:
            if queued in self.messages:
                self.messages.remove(queued)

    def pending(self) -> list[Queued]:
        with self.lock:
            return sorted(self.messages, key=lambda q: q.visible_at)


@dataclass
class FakeDeadLetters:
    letters: list[dict[str, Any]] = field(default_factory=list)

    def send(self, run: Run, *, reason: str, error: dict[str, Any] | None) -> None:
        self.letters.append({"run_id": run.run_id, "reason": reason, "last_error": error})


class FakeTenantThrottles:
    """Throttle times by (tenant, shard), moved atomically; ``writes`` counts the moves."""

    def __init__(self) -> None:
        self.times: dict[tuple[str, int], int] = {}
        self.writes = 0
        self._lock = threading.Lock()

    def advance(self, tenant_id: str, shard: int, *, now_us: int, interval_us: int) -> int:
        with self._lock:
            moved = max(self.times.get((tenant_id, shard), now_us), now_us) + interval_us
            self.times[(tenant_id, shard)] = moved
            self.writes += 1
            return moved

    def time_of(self, tenant_id: str, shard: int) -> int | None:
        with self._lock:
            return self.times.get((tenant_id, shard))


class FakeTenants:
    """Tenants, and ``tokens``: bearer token -> tenant id."""

    def __init__(self, *tenants: Tenant, tokens: dict[str, str] | None = None) -> None:
        self.tenants = {tenant.tenant_id: tenant for tenant in tenants}
        self.tokens = {hash_token(token): tenant_id for token, tenant_id in (tokens or {}).items()}

    def get(self, tenant_id: str) -> Tenant:
        if tenant_id not in self.tenants:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return self.tenants[tenant_id]

    def by_token(self, token: str) -> Principal | None:
        tenant_id = self.tokens.get(hash_token(token))
        return Principal(tenant=self.tenants[tenant_id], token_label="default") if tenant_id else None  # noqa: S106

    def update(self, tenant_id: str, changes: TenantChanges) -> Tenant:
        changed = self.get(tenant_id).changed(changes)
        self.tenants[tenant_id] = changed
        return changed


@dataclass
class CountingMetrics:
    counts: dict[str, float] = field(default_factory=dict)
    timings: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, name: str, value: float = 1) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + value

    def milliseconds(self, name: str, value: float) -> None:
        with self.lock:
            self.timings.setdefault(name, []).append(value)


@dataclass
class RecordingGauges:
    """Per-tenant gauges as put: (tenant, values) in order."""

    recorded: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, tenant_id: str, values: Mapping[str, float]) -> None:
        with self.lock:
            self.recorded.append((tenant_id, dict(values)))


class FakeClock:
    """Time that moves only when a test (or a worker's wait) moves it."""

    def __init__(self, now: datetime):
        self.now = now
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += timedelta(seconds=seconds)

    def advance(self, **delta: float) -> datetime:
        with self._lock:
            self.now += timedelta(**delta)
            return self.now
