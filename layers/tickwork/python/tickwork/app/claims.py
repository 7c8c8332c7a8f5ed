"""The lease of an attempt: a slot of the tenant's in-flight limit, then the job's lane or the run item.

- A tenant with ``max_in_flight`` spreads its slots over a few items; an attempt takes one with a conditional
  write on one of them, and gives it back once the attempt is over.
- A job whose overlap is limited (`skip`, `queue`, ``max_concurrent_runs``) is leased by a *holder* of its
  lane: one conditional write on the lane's version as read, whose next version is the attempt's fencing
  token. Its run item is written only when the attempt ends.
- A job whose runs overlap freely leases the run item itself, through
  :meth:`~tickwork.app.lifecycle.RunLifecycle.claim`.

Either way the RUNNING run the attempt holds comes from :func:`~tickwork.app.lifecycle.leased`, which checks
the move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tickwork import tables
from tickwork.app.flow import FlowGauges
from tickwork.app.lifecycle import RunLifecycle, leased
from tickwork.app.ports import Lanes, Metrics, TenantSlots, TenantStore, TenantThrottles
from tickwork.domain.arrival import MAX_DELAY_SECONDS, Candidate
from tickwork.domain.lanes import (
    WAITER_LEASE,
    Holder,
    Lane,
    capacity,
    ended,
    live_holders,
    needs_waiter_note,
    slot_shards,
)
from tickwork.domain.models import Job, Run, RunMessage
from tickwork.domain.pools import DEFAULT_POOL_WAIT_ALARM, pool_target_of
from tickwork.domain.priority import AHEAD_NOTE, needs_ahead_note, yields_to
from tickwork.domain.throttle import throttle_of
from tickwork.domain.timeutil import EPOCH, from_epoch_ms, to_epoch_ms
from tickwork.domain.workflow import parse_child_run_id
from tickwork.observability import logger

# A claim that loses a race reads again, this many times at most, then leaves the message for later.
CLAIM_TRIES = 5


@dataclass(frozen=True)
class Slot:
    """A slot of a limit (the tenant's in-flight limit, or a concurrency key's), held for one attempt."""

    group: str
    """Whose slot items: the tenant's, or one of its concurrency keys' (``tables.slot_group``)."""
    shard: int
    holder: Holder


@dataclass(frozen=True)
class Lease:
    """The attempt a worker holds: its run, RUNNING, and its lane holder when the job has a lane."""

    run: Run
    holder: Holder | None
    slots: tuple[Slot, ...] = ()


@dataclass(frozen=True)
class LaneFull:
    """Every place in the job's lane is held by a live attempt: the overlap policy decides what follows."""


LANE_FULL = LaneFull()

# A run held by its concurrency key looks again this soon: it starts within a second of a slot freeing.
KEY_WAIT_SECONDS = 1
# A run of a tenant at its in-flight limit looks again this soon; one of a disabled tenant (a retry, or a
# fire that came before its job's pause) looks again once the workers' view of the tenant may have changed.
IN_FLIGHT_WAIT_SECONDS = 2
DISABLED_WAIT_SECONDS = 10


@dataclass(frozen=True)
class Wait:
    """The run may not start now: its message (``message``, when it changed) comes back after ``seconds``."""

    seconds: int
    reason: str
    metric: str = "RunsHeldBack"
    message: RunMessage | None = None


AT_LIMIT = Wait(IN_FLIGHT_WAIT_SECONDS, "held back: the tenant is at its in-flight limit")
AT_KEY_LIMIT = Wait(KEY_WAIT_SECONDS, "held back: its concurrency key is at max_concurrency")
AT_MAX_PARALLEL = Wait(KEY_WAIT_SECONDS, "held back: its workflow run is at max_parallel")
DISABLED = Wait(DISABLED_WAIT_SECONDS, "waits: the tenant is disabled")


class Claims:
    def __init__(
        self,
        *,
        lanes: Lanes,
        slots: TenantSlots,
        throttles: TenantThrottles,
        tenants: TenantStore,
        lifecycle: RunLifecycle,
        metrics: Metrics,
        worker_id: str,
        lease_margin: timedelta,
        pool_wait_alarm: timedelta = DEFAULT_POOL_WAIT_ALARM,
        flow: FlowGauges | None = None,
    ):
        self.flow = flow
        self.lanes = lanes
        self.slots = slots
        self.throttles = throttles
        self.tenants = tenants
        self.lifecycle = lifecycle
        self.metrics = metrics
        self.worker_id = worker_id
        self.lease_margin = lease_margin
        self.pool_wait_alarm = pool_wait_alarm

    def lease_for(self, job: Job) -> timedelta:
        """How long a lease lasts unless extended: the target's timeout and a margin to record the outcome."""
        return timedelta(seconds=timeout_of(job)) + self.lease_margin

    def admit(self, job: Job, run: Run, message: RunMessage, now: datetime) -> tuple[Slot, ...] | Wait:
        """Whether the attempt may start now: its place under the tenant's throttle (unless its message
        reserved one already), then a slot of each limit it counts against (:meth:`take_slot`). A run over
        the throttle is sent again for the second after the start it reserved, carrying it, rather than
        slept out: waiting is not paid for."""
        if self.tenants.get(job.tenant_id).disabled:
            return DISABLED  # as the worker's cache of the tenant says: checked first, so it reserves nothing
        start = self.reserve_start(job, run, now) if message.start_at is None else None
        if start is not None:
            later = message.model_copy(update={"start_at": to_epoch_ms(start)})
            delay = min(math.ceil((start - now).total_seconds()), MAX_DELAY_SECONDS)
            self._gauge(job.tenant_id, now)
            return Wait(delay, "throttled: sent again for the start it reserved", "RunsThrottled", later)
        taken = self.take_slot(job, run, now, message)
        if isinstance(taken, Wait):
            self._gauge(job.tenant_id, now)
        return taken

    def _gauge(self, tenant_id: str, now: datetime) -> None:
        """The tenant's flow gauges, on a wait only; best effort: the held run is sent again regardless."""
        if self.flow is None:
            return
        try:
            self.flow.on_wait(tenant_id, now)
        except Exception:
            logger.warning("the tenant's flow gauges were not put", exc_info=True)

    def admits_freely(self, job: Job) -> bool:
        """Whether :meth:`admit` takes nothing for the job's runs (no throttle, no limit to take a slot of,
        the tenant enabled): a claim may then be taken ahead of the fire, as the start it would reserve or
        the slot it would hold is not counted from then."""
        tenant = self.tenants.get(job.tenant_id)
        return (
            not tenant.disabled
            and tenant.max_in_flight is None
            and throttle_of(tenant) is None
            and job.concurrency_key is None
            and job.workflow is None
            and pool_target_of(job) is None
        )

    def reserve_start(self, job: Job, run: Run, now: datetime) -> datetime | None:
        """A place under the tenant's throttle on run starts: None to start now, else the later start the
        run reserved (:mod:`tickwork.domain.throttle`). A pool run reserves none: it starts when claimed."""
        if pool_target_of(job) is not None:
            return None
        throttle = throttle_of(self.tenants.get(job.tenant_id))
        if throttle is None:
            return None
        now_us = (now - EPOCH) // timedelta(microseconds=1)
        shard = tables.stable_shard(run.run_id, throttle.shards)
        moved = self.throttles.advance(job.tenant_id, shard, now_us=now_us, interval_us=throttle.interval_us)
        start_us = throttle.start_us(moved, now_us)
        return None if start_us <= now_us else EPOCH + timedelta(microseconds=start_us)

    def take_slot(
        self, job: Job, run: Run, now: datetime, message: RunMessage | None = None
    ) -> tuple[Slot, ...] | Wait:
        """A slot of each limit the attempt counts against (its concurrency key's ``max_concurrency``, the
        tenant's in-flight limit): the slots, none when there is no limit; a Wait when one is full, or when
        a free slot is left to a higher priority's waiting runs. Slots are spread over items of a few each,
        so no item takes every run's write. A pool run takes none: the tenant's own workers bound what they
        run. A held run's message carries when it was first held (``held_since``), which ages it."""
        tenant = self.tenants.get(job.tenant_id)
        if pool_target_of(job) is not None:
            return ()
        limits: list[tuple[str, int, Wait]] = []
        workflow, child = job.workflow, parse_child_run_id(run.run_id)
        if workflow is not None and workflow.max_parallel is not None and child is not None:
            # A workflow run's max_parallel: its tasks share a limit of their own, as a key's runs do.
            group = tables.slot_group(job.tenant_id, f"workflow-run:{child.parent_run_id}")
            limits.append((group, workflow.max_parallel, AT_MAX_PARALLEL))
        if job.concurrency_key is not None and job.max_concurrency is not None:
            group = tables.slot_group(job.tenant_id, job.concurrency_key)
            limits.append((group, job.max_concurrency, AT_KEY_LIMIT))
        if tenant.max_in_flight is not None:
            limits.append((job.tenant_id, tenant.max_in_flight, AT_LIMIT))
        held_since = message.held_since if message is not None else None
        waited = now - from_epoch_ms(held_since) if held_since is not None else timedelta(0)
        taken: list[Slot] = []
        for group, limit, full in limits:
            slot = self._take(group, limit, job, run, now, waited)
            if not isinstance(slot, Slot):
                self.give_back(job, tuple(taken))
                wait = full if slot is None else Wait(full.seconds, slot)
                if message is None:
                    return wait
                first = held_since if held_since is not None else to_epoch_ms(now)
                return replace(wait, message=message.model_copy(update={"held_since": first}))
            taken.append(slot)
        return tuple(taken)

    def _take(
        self, group: str, limit: int, job: Job, run: Run, now: datetime, waited: timedelta
    ) -> Slot | str | None:
        """A slot of the limit, tried from the run's home item on; None when every item is full (the run is
        then noted as waiting on its home item, :func:`needs_waiter_note`) or the run holds one already. A
        run that was noted drops its note in the write that takes its slot, so a run that starts at once
        pays nothing for the count.

        A free slot is left (the reason returned) while runs of a higher priority are noted as waiting for
        the limit and this run has not waited past the difference of their offsets (:func:`yields_to`);
        a run held by a full limit notes its priority on the items it read (:func:`needs_ahead_note`)."""
        shards = slot_shards(limit)
        home = tables.stable_shard(run.run_id, len(shards))
        home_seen: Lane | None = None
        full_items: dict[int, Lane] = {}
        lease_until = now + self.lease_for(job)
        for offset in range(len(shards)):
            shard = (home + offset) % len(shards)
            for _ in range(CLAIM_TRIES):
                slots = self.slots.get(group, shard)
                if shard == home:
                    home_seen = slots
                mine = slots.holders.get(run.run_id)
                if mine is not None and mine.lease_until > now:
                    # Another delivery of this run holds a place: taking it over would let that delivery's
                    # give-back (when it loses the run) free the place the attempt still runs in.
                    return None
                live = [r for r, h in slots.holders.items() if h.lease_until > now and r != run.run_id]
                if len(live) >= shards[shard]:
                    full_items[shard] = slots
                    break
                higher = yields_to(job.priority, waited, slots.ahead, now)
                if higher is not None:
                    self._note_waiting(group, home_seen, home, run, now)
                    return f"held back: its place goes to {higher} priority runs waiting for the same limit"
                holder = Holder(
                    run_id=run.run_id,
                    token=slots.version + 1,
                    attempt=run.attempt + 1,
                    scheduled_for=run.scheduled_for,
                    started_at=now,
                    lease_until=lease_until,
                    worker_id=self.worker_id,
                )
                gone = [r for r, h in slots.holders.items() if h.lease_until <= now and r != run.run_id]
                forget = [r for r, until in slots.waiters.items() if until <= now or r == run.run_id]
                if (
                    self.slots.claim(group, shard, seen=slots, holder=holder, drop=gone, forget=forget)
                    is None
                ):
                    if shard != home and home_seen is not None and run.run_id in home_seen.waiters:
                        self.slots.forget_waiter(group, home, run.run_id)
                    return Slot(group, shard, holder)
        self._note_waiting(group, home_seen, home, run, now)
        for shard, slots in full_items.items():
            if needs_ahead_note(job.priority, slots.ahead, now):
                self.slots.note_ahead(group, shard, job.priority, now + AHEAD_NOTE)
        return None

    def _note_waiting(self, group: str, home_seen: Lane | None, home: int, run: Run, now: datetime) -> None:
        """The run's waiting note on its home item, for the counts (:func:`needs_waiter_note`)."""
        if home_seen is not None and needs_waiter_note(home_seen, run.run_id, now):
            lapsed = [r for r, until in home_seen.waiters.items() if until <= now]
            self.slots.note_waiter(group, home, run.run_id, now + WAITER_LEASE, seen=home_seen, drop=lapsed)

    def give_back(self, job: Job, slots: tuple[Slot, ...]) -> None:
        for slot in slots:
            self.slots.release(slot.group, slot.shard, slot.holder.run_id, slot.holder.token)

    def extend(self, job: Job, lease: Lease, until: datetime) -> Lease | None:
        """The heartbeat: every lease the attempt holds pushed to ``until``; the lease as it is now, or None
        when the attempt lost it."""
        for slot in lease.slots:
            held = slot.holder.model_copy(update={"lease_until": until})
            self.slots.heartbeat(slot.group, slot.shard, held)
        if lease.holder is not None:
            holder = lease.holder.model_copy(update={"lease_until": until})
            return lease if self.lanes.heartbeat(job.tenant_id, job.job_id, holder) else None
        extended = self.lifecycle.extend_lease(lease.run, until)
        return replace(lease, run=extended) if extended is not None else None

    def claim_lane(
        self,
        job: Job,
        lane: Lane,
        candidate: Candidate,
        records: dict[str, Run],
        now: datetime,
        *,
        start: datetime | None = None,
    ) -> Lease | LaneFull | Lane:
        """Become a holder of the job's lane: the lease; LANE_FULL when live attempts fill it; or the lane
        as it is now when another claim got there first. ``start``: when the attempt is to start, for a claim
        taken ahead of its fire (its lease counts from then; which holders are live, from ``now``)."""
        limit = capacity(job)
        assert limit is not None
        run = candidate.run
        # A run held outside (in its pool, or a webhook's that answered 202) holds its place however long it
        # waits or runs: its own lease is on its run item, watched by the sweeper.
        outside = {run_id for run_id, stored in records.items() if stored.held_outside}
        recorded = {
            run_id: stored.fencing_token for run_id, stored in records.items() if not stored.held_outside
        }
        live = {
            **live_holders(lane, recorded, now),
            **{r: lane.holders[r] for r in outside if r in lane.holders},
        }
        others = {r: h for r, h in live.items() if r != run.run_id}
        if len(others) >= limit:
            return LANE_FULL
        lease_for = self.lease_for(job)
        token = lane.version + 1
        attempt = run.attempt + 1
        begins = start or now
        # Built (and its move checked) before the lane is written: an illegal move claims nothing.
        running = leased(
            candidate, attempt=attempt, token=token, now=begins, lease_for=lease_for, worker_id=self.worker_id
        )
        holder = Holder(
            run_id=run.run_id,
            token=token,
            attempt=attempt,
            scheduled_for=run.scheduled_for,
            started_at=begins,
            lease_until=begins + lease_for,
            worker_id=self.worker_id,
        )
        finished = sorted(r for r, h in lane.holders.items() if r != run.run_id and ended(h, recorded.get(r)))
        current = self.lanes.claim(job.tenant_id, job.job_id, seen=lane, holder=holder, drop=finished)
        if current is not None:
            self.metrics.count("LeaseConflicts")
            return current
        return Lease(running, holder)

    def hand_to_pool(self, job: Job, candidate: Candidate, lease: Lease | None, now: datetime) -> Run | None:
        """A pool job's attempt is its workers' to start: the run waits in its pool, under the lane holder
        taken for it (``lease``; None for a job with no lane, whose run item is written as read)."""
        target = pool_target_of(job)
        assert target is not None
        holder = lease.holder if lease is not None else None
        run = candidate.run.model_copy(update={"fencing_token": holder.token}) if holder else candidate.run
        handed = self.lifecycle.hand_to_pool(
            candidate,
            run,
            pool=target.pool,
            in_lane=holder is not None,
            now=now,
            wait_alarm=self.pool_wait_alarm,
        )
        if handed is None:
            self.metrics.count("LeaseConflicts")
        return handed

    def claim_run(self, job: Job, candidate: Candidate, now: datetime) -> tuple[Lease | None, Run | None]:
        """Lease the run item itself (a job with no lane): (the lease, None), or (None, the run as stored
        now) when another worker changed it first."""
        run = candidate.run
        running = leased(
            candidate,
            attempt=run.attempt + 1,
            token=run.fencing_token + 1,
            now=now,
            lease_for=self.lease_for(job),
            worker_id=self.worker_id,
        )
        written = self.lifecycle.claim(candidate, running)
        if written.ok:
            return Lease(running, None), None
        self.metrics.count("LeaseConflicts")
        return None, written.current


def timeout_of(job: Job) -> int:
    return int(getattr(job.target, "timeout_seconds", 30))
