"""Planning: a job's due fires become run-queue messages (and MISSED records), then its cursor moves.

The API plans a job's fires inside the horizon at once (create, update, resume); the planner Lambda plans the
jobs the due index returns on every tick. A fire is not stored when planned: it is a message in the queue,
ENQUEUED as the API shows it, until a worker records it. Messages go out ten to a request whatever their
jobs, and a job's cursor moves only once all of its messages are sent, so a planner that dies midway sends
again rather than loses (a run's conditional writes absorb the duplicates).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import (
    Clock,
    Dispatch,
    DueShards,
    JobStore,
    Lanes,
    Metrics,
    RunQueue,
    RunStore,
)
from tickwork.domain.arrival import joined_chain, reads_ahead
from tickwork.domain.fires import FirePlan, due_at, plan_fires
from tickwork.domain.models import Job, JobStatus, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.priority import message_priority
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.observability import logger

SEND_BATCH = 10  # SendMessageBatch's limit
# Sends are dated by when they go out, in chunks of this many messages, once a pass has run this long: a
# delay counted from the start of a long pass would make its last fires late.
SEND_CHUNK = 100
SEND_DRIFT = timedelta(milliseconds=500)
# SQS delays are whole seconds, so a message arrives early by the fraction of a second its delay drops, and
# the worker waits that out, holding its batch, after reading what its run needs. A tick times each send so
# that its messages arrive ``lead`` (by default this) before their fires, within one second; a fire due sooner
# than ALIGN_AFTER goes out at once.
SEND_LEAD = timedelta(milliseconds=50)
SEND_TOGETHER = 0.01  # seconds: fires this close in their second go out together
SEND_PARALLEL = 16  # a moment's batches go out this many at once
SEND_ROUND = timedelta(milliseconds=20)  # a round of sends, allowed for: the moment starts earlier by it
# A moment comes round every second, and a message can go out at any of them (its delay one second less
# each time). A large moment is spread over several of its seconds, soonest fires first, over at most
# SEND_SWEEP seconds: each round it starts earlier is 20 ms more that every worker invocation its messages
# make waits (512 MB), each second more keeps the planner running (1 GB). A second of the tick costs what
# ROUND_WAITS_PER_SECOND invocations waiting a round cost: the rounds per second are chosen to spend least.
SEND_SWEEP = 30
ROUND_WAITS_PER_SECOND = 100
ALIGN_AFTER = timedelta(seconds=2)
REHOME_BATCH = 100  # jobs moved out of each stray shard per tick


@dataclass(frozen=True)
class PlanResult:
    sent: list[str] = field(default_factory=list)
    """Run ids of the fires sent."""
    missed: list[str] = field(default_factory=list)
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    cursor_advanced: bool = False
    chain: tuple[datetime, datetime] | None = None


class Planner:
    def __init__(
        self,
        *,
        jobs: JobStore,
        runs: RunStore,
        lanes: Lanes,
        queue: RunQueue,
        metrics: Metrics,
        horizon: timedelta,
        lookahead: timedelta,
        timer: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        lead: timedelta = SEND_LEAD,
    ):
        self.lead = lead
        """How long before its fire a message is timed to arrive (``Settings.send_lead_ms``)."""
        self.jobs = jobs
        self.runs = runs
        self.lifecycle = RunLifecycle(runs)
        self.lanes = lanes
        self.queue = queue
        self.metrics = metrics
        self.horizon = horizon
        self.timer = timer
        self.sleep = sleep
        self.lookahead = lookahead
        """A job is planned once its cursor is this close: it is then planned up to ``horizon`` ahead, so one
        cursor write covers many fires."""

    def is_due(self, job: Job, now: datetime, *, within: timedelta | None = None) -> bool:
        return (
            job.status is JobStatus.ACTIVE
            and job.next_fire_at is not None
            and job.next_fire_at <= now + (self.lookahead if within is None else within)
        )

    def plan(self, job: Job, now: datetime) -> PlanResult:
        """Plan one job now, whatever its lookahead (the API: its fires inside the horizon go out at once)."""
        return self.plan_many([job], now, within=self.horizon)[0]

    def plan_many(
        self,
        jobs: Sequence[Job],
        now: datetime,
        *,
        within: timedelta | None = None,
        align: bool = False,
        started: float | None = None,
    ) -> list[PlanResult]:
        """Plan the due jobs among ``jobs``. A job whose writes fail keeps its cursor (the next pass plans it
        again) and does not stop the others. ``align`` times the sends to their fires' fractions of a second
        (the planner's tick: it may take a second longer; the API answers at once). ``started``: the timer
        when ``now`` was read, if before this call (a tick reads its due jobs first, and that time counts
        against every send's delay and moment); by default, now."""
        started = self.timer() if started is None else started
        results: dict[str, PlanResult] = {}
        outgoing: list[tuple[Job, FirePlan, list[Dispatch]]] = []
        for job in jobs:
            if not self.is_due(job, now, within=within):
                continue
            plan = plan_fires(job, job.next_fire_at, now, self.horizon)
            try:
                missed = self._record_unrun(job, plan, now)
                if plan.chain is not None:
                    self._mark_chain(job, *plan.chain)
            except Exception:
                logger.exception("recording missed fires failed", extra={"job_id": job.job_id})
                results[job.job_id] = PlanResult(next_fire_at=job.next_fire_at)
                continue
            outgoing.append((job, plan, self._dispatches(job, plan, now)))
            results[job.job_id] = PlanResult(missed=missed, next_fire_at=job.next_fire_at)
        dispatches = [d for _, _, ds in outgoing for d in ds]
        unsent = (
            self._send_aligned(dispatches, now, started) if align else self._send(dispatches, now, started)
        )
        for job, plan, dispatches in outgoing:
            if any(d.message.run_id in unsent for d in dispatches):
                continue  # the cursor stays: the next pass sends them again
            advanced = self._advance(job, plan)
            if advanced:
                # Counted by the pass that moved the cursor: racing or repeated passes count a fire once.
                self.metrics.count("RunsPlanned", len(plan.run))
            results[job.job_id] = PlanResult(
                sent=[d.message.run_id for d in dispatches],
                missed=results[job.job_id].missed,
                next_fire_at=plan.next_fire_at if advanced else job.next_fire_at,
                last_fire_at=plan.last_fire_at if advanced else job.last_fire_at,
                cursor_advanced=advanced,
                chain=plan.chain,
            )
            recorded_last = plan.last_fire_at in plan.missed or any(
                fire_at == plan.last_fire_at for fire_at, _ in plan.excluded
            )
            if advanced and plan.next_fire_at is None and recorded_last:
                self.jobs.complete(job.tenant_id, job.job_id)
        return [results.get(job.job_id) or PlanResult(next_fire_at=job.next_fire_at) for job in jobs]

    def _record_unrun(self, job: Job, plan: FirePlan, now: datetime) -> list[str]:
        """Record the plan's fires that do not run: MISSED ones (returned) and excluded ones, SKIPPED."""
        missed = []
        for fire_at in plan.missed:
            run = self.lifecycle.record_unrun_fire(job, fire_at, now, "misfire", status=RunStatus.MISSED)
            if run is not None:
                missed.append(run.run_id)
        if plan.missed:
            self.metrics.count("RunsMissed", len(missed))
        if plan.more_missed:
            logger.warning("more fires were missed than are recorded", extra={"job_id": job.job_id})
        skipped = 0
        for fire_at, reason in plan.excluded:
            skipped += (
                self.lifecycle.record_unrun_fire(job, fire_at, now, reason, status=RunStatus.SKIPPED)
                is not None
            )
        if plan.excluded:
            self.metrics.count("RunsExcluded", skipped)
        if plan.more_excluded:
            logger.debug("more fires were excluded than are recorded", extra={"job_id": job.job_id})
        return missed

    def _mark_chain(self, job: Job, first: datetime, last: datetime) -> None:
        """The job's lane says a backfill chain runs from ``first`` through ``last`` (joined to the chain it
        records, when they meet): messages of those fires sent before (a pause's, an outage's) are covered
        by it, or take their turn in it, rather than run out of order."""
        for _ in range(5):
            _, lane = self.jobs.get_with_lane(job.tenant_id, job.job_id)
            start, until = joined_chain(job, lane, first, last)
            changed = self.lanes.set_chain(
                job.tenant_id, job.job_id, seen=lane, chain_until=until, chain_from=start
            )
            if changed is None:
                return

    def _dispatches(self, job: Job, plan: FirePlan, now: datetime) -> list[Dispatch]:
        """The fires' messages, each due to arrive ``lead`` before its fire."""
        sent = to_epoch_ms(now)
        ahead = reads_ahead(job) or None
        dispatches = [
            Dispatch(
                RunMessage(
                    tenant_id=job.tenant_id,
                    run_id=scheduled_run_id(job.job_id, fire_at),
                    sent_at=sent,
                    chain_until=(decided := _decided(job, fire_at, now)),
                    priority=message_priority(job.priority),
                    ahead=ahead if decided is None else None,
                ),
                due_at(job, fire_at) - self.lead,
            )
            for fire_at in plan.run
        ]
        if plan.chain is not None:
            first, last = plan.chain
            message = RunMessage(
                tenant_id=job.tenant_id,
                run_id=scheduled_run_id(job.job_id, first),
                sent_at=sent,
                chain_until=to_epoch_ms(last),
                priority=message_priority(job.priority),
            )
            dispatches.insert(0, Dispatch(message, now))
        return dispatches

    def _send(
        self, dispatches: list[Dispatch], now: datetime, started: float, *, dated: bool = False
    ) -> set[str]:
        """Run ids whose message did not go out. Each chunk's delays count from when it is sent (``dated``:
        always; else once the pass has run long enough to matter)."""
        unsent: set[str] = set()
        for first in range(0, len(dispatches), SEND_CHUNK):
            chunk = dispatches[first : first + SEND_CHUNK]
            elapsed = timedelta(seconds=self.timer() - started)
            try:
                failed = self.queue.send(chunk, now + elapsed if dated or elapsed >= SEND_DRIFT else now)
            except Exception:
                logger.exception("sending planned fires failed", extra={"runs": len(chunk)})
                failed = chunk
            unsent.update(d.message.run_id for d in failed)
        return unsent

    def _send_aligned(self, dispatches: list[Dispatch], now: datetime, started: float) -> set[str]:
        """Send each batch when its fires' fraction of a second, less the lead, comes round, so that its
        messages arrive just before their fires: a sweep of a second, or of a few for large moments (see
        ``SEND_SWEEP``). Fires due soon go first, at once."""
        begun = now + timedelta(seconds=self.timer() - started)
        soon = [d for d in dispatches if d.due_at - begun < ALIGN_AFTER]
        later = [d for d in dispatches if d.due_at - begun >= ALIGN_AFTER]
        unsent = self._send(soon, now, started, dated=True)
        pending: list[tuple[datetime, int, list[list[Dispatch]], int]] = []
        for order, (at, batches) in enumerate(_moments(later, begun)):
            heapq.heappush(pending, (at, order, batches, _rounds_each_second(batches)))
        with ThreadPoolExecutor(max_workers=SEND_PARALLEL) as pool:
            while pending:
                at, order, batches, rounds_each = heapq.heappop(pending)
                going, rest = batches[: rounds_each * SEND_PARALLEL], batches[rounds_each * SEND_PARALLEL :]
                again = at + timedelta(seconds=1)
                while rest and rest[0][0].due_at - again < ALIGN_AFTER:  # too close to wait another second
                    going.append(rest.pop(0))
                # The batches go out together, in rounds, starting early enough to end by the moment.
                start = at - SEND_ROUND * (-(-len(going) // SEND_PARALLEL) - 1)
                wait = (start - (now + timedelta(seconds=self.timer() - started))).total_seconds()
                if wait > 0:
                    self.sleep(wait)
                for failed in pool.map(lambda batch: self._send(batch, now, started, dated=True), going):
                    unsent |= failed
                if rest:
                    heapq.heappush(pending, (again, order, rest, rounds_each))
        return unsent

    def _advance(self, job: Job, plan: FirePlan) -> bool:
        try:
            return self.jobs.advance_cursor(job, plan.next_fire_at, plan.last_fire_at)
        except Exception:
            # Planning again is harmless (run ids are deterministic): the next pass retries.
            logger.exception("moving a job's cursor failed", extra={"job_id": job.job_id})
            return False


@dataclass
class TickReport:
    due_jobs: int = 0
    planned_runs: int = 0
    missed_runs: int = 0
    capped: bool = False
    swept: int = 0
    stray_shards: list[int] = field(default_factory=list)


class Sweeps(Protocol):
    """What the tick needs of the sweeper: repair what is due, and say how many runs it repaired."""

    def sweep(self, now: datetime) -> int: ...


class PlannerTick:
    """The planner Lambda's tick: the due jobs of its shards, read in batches, planned. The planner that owns
    shard 0 also sweeps, and looks after the shards past a lowered shard count."""

    def __init__(
        self,
        *,
        jobs: JobStore,
        planner: Planner,
        sweeper: Sweeps,
        metrics: Metrics,
        due_shards: DueShards | None = None,
        max_jobs_per_tick: int = 5000,
        parallelism: int = 4,
    ):
        self.jobs = jobs
        self.planner = planner
        self.sweeper = sweeper
        self.metrics = metrics
        self.due_shards = due_shards
        self.max_jobs_per_tick = max_jobs_per_tick
        self.parallelism = parallelism

    def tick(self, now: datetime, shards: list[int], *, align_sends: bool = False) -> TickReport:
        """``align_sends``: time the sends to the fires (see :meth:`Planner.plan_many`); the Lambda does."""
        started = time.perf_counter()
        begun = self.planner.timer()  # when ``now`` was read: the sends are timed from it, not from planning
        leading = 0 in shards
        strays = self._strays() if leading else []
        shards = [*shards, *strays]
        until = now + self.planner.lookahead
        with ThreadPoolExecutor(max_workers=max(1, min(self.parallelism, len(shards)))) as pool:
            per_shard = list(
                pool.map(
                    lambda shard: self.jobs.due_jobs(shard, until=until, limit=self.max_jobs_per_tick), shards
                )
            )
        due = [key for keys in per_shard for key in keys]
        report = TickReport(due_jobs=len(due), capped=len(due) > self.max_jobs_per_tick, stray_shards=strays)
        jobs = self.jobs.get_many(due[: self.max_jobs_per_tick])
        for result in self.planner.plan_many(jobs, now, align=align_sends, started=begun):
            report.planned_runs += len(result.sent)
            report.missed_runs += len(result.missed)
        if strays:
            self._rehome(strays)
        if leading:
            report.swept = self.sweeper.sweep(now)
        self.metrics.count("PlannerDueJobs", report.due_jobs)
        self.metrics.milliseconds("PlannerTickMs", (time.perf_counter() - started) * 1000)
        _log_tick(report)
        return report

    def _strays(self) -> list[int]:
        if self.due_shards is None:
            return []
        try:
            return self.due_shards.strays()
        except Exception:
            logger.exception("reading the due shard count failed")
            return []

    def _rehome(self, strays: list[int]) -> None:
        """Move a batch of each stray shard's jobs home; once every stray shard is empty, forget them."""
        assert self.due_shards is not None
        try:
            emptied = [self.due_shards.rehome(shard, limit=REHOME_BATCH) for shard in strays]
            if all(emptied):
                self.due_shards.settle(strays)
        except Exception:
            logger.exception("moving jobs out of stray due shards failed")


def _log_tick(report: TickReport) -> None:
    """A routine tick at DEBUG; one that recorded missed fires at INFO; one that left due jobs for the next
    tick (more were due than it plans) at WARNING."""
    fields = {
        "due_jobs": report.due_jobs,
        "planned_runs": report.planned_runs,
        "missed_runs": report.missed_runs,
        "swept_runs": report.swept,
    }
    if report.capped:
        logger.warning("planner tick left due jobs for the next tick", extra=fields)
    elif report.missed_runs:
        logger.info("planner tick recorded missed fires", extra=fields)
    else:
        logger.debug("planner tick", extra=fields)


def _decided(job: Job, fire_at: datetime, now: datetime) -> int | None:
    """An overdue fire that `fire_once` runs late is sent as a chain of one: the policy has been applied, and
    the worker must not apply it again (a fire of a 1-second job would be superseded by its arrival)."""
    return to_epoch_ms(fire_at) if fire_at <= now and job.misfire_policy == "fire_once" else None


def _moments(dispatches: list[Dispatch], begun: datetime) -> Iterator[tuple[datetime, list[list[Dispatch]]]]:
    """The moments of the second's sweep from ``begun``: fires within ``SEND_TOGETHER`` of each other in their
    second, in batches of up to ten, each moment with when its messages should go out."""

    def offset(dispatch: Dispatch) -> float:
        return _second_fraction(dispatch.due_at - begun)

    def moment_of(fires: list[Dispatch]) -> tuple[datetime, list[list[Dispatch]]]:
        by_due = sorted(fires, key=lambda dispatch: dispatch.due_at)  # the soonest fires in the first batches
        batches = [by_due[first : first + SEND_BATCH] for first in range(0, len(by_due), SEND_BATCH)]
        return begun + timedelta(seconds=offset(fires[0])), batches

    fires: list[Dispatch] = []
    for dispatch in sorted(dispatches, key=offset):
        if fires and offset(dispatch) - offset(fires[0]) > SEND_TOGETHER:
            yield moment_of(fires)
            fires = []
        fires.append(dispatch)
    if fires:
        yield moment_of(fires)


def _rounds_each_second(batches: list[list[Dispatch]]) -> int:
    """Rounds of a moment's batches to send each time it comes round: the fewer, the less its workers wait
    and the longer the planner runs (see ``ROUND_WAITS_PER_SECOND``)."""
    rounds = -(-len(batches) // SEND_PARALLEL)
    per_second = Counter(int(d.due_at.timestamp()) for batch in batches for d in batch)
    invocations = sum(-(-count // SEND_BATCH) for count in per_second.values())  # a worker takes ten

    def spent(each: int) -> float:
        return invocations * (each - 1) / ROUND_WAITS_PER_SECOND + -(-rounds // each)

    fewest = -(-rounds // SEND_SWEEP)
    return min(range(fewest, max(fewest, rounds) + 1), key=spent)


def _second_fraction(span: timedelta) -> float:
    """Where in a second ``span`` ends: in [0, 1)."""
    return (span.total_seconds()) % 1.0


def send_delay(due_at: datetime, now: datetime) -> int:
    """Whole seconds to hold a message: rounded down (the worker waits out the rest), at most 900."""
    return max(0, min(900, math.floor((due_at - now).total_seconds())))


__all__ = ["Clock", "PlanResult", "Planner", "PlannerTick", "TickReport", "send_delay"]
