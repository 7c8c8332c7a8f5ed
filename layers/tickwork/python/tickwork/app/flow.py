"""A tenant's flow control as it stands (:mod:`tickwork.domain.flow`), read from the items its limits are
enforced on: its item (limits, the concurrency keys its jobs name), each limit's slot items and its throttle
times. A read is O(keys x slot items), never O(runs) or O(jobs).

The stats route reads it; and while a tenant has runs held back or throttled, the workers that hold them
put it in CloudWatch per tenant (:class:`FlowGauges`), at most every ``FLOW_GAUGE_EVERY`` per process: a run
that starts at once emits nothing.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from tickwork import tables
from tickwork.app.ports import JobStore, TenantGauges, TenantSlots, TenantStore, TenantThrottles
from tickwork.domain.flow import KeyFlow, SlotCounts, TenantFlow, count_slots, sum_waiting
from tickwork.domain.lanes import MAX_WAITERS_PER_SHARD, slot_shards
from tickwork.domain.tenants import Tenant
from tickwork.domain.throttle import throttle_of
from tickwork.domain.timeutil import EPOCH

# A process puts a tenant's gauges in CloudWatch at most this often, however many of its runs wait.
FLOW_GAUGE_EVERY = timedelta(seconds=10)
RUNNING_GAUGE = "TenantRunsRunning"
WAITING_GAUGE = "TenantRunsWaiting"
THROTTLED_GAUGE = "TenantRunsThrottled"


class FlowReader:
    def __init__(
        self, *, jobs: JobStore, slots: TenantSlots, throttles: TenantThrottles, tenants: TenantStore
    ):
        self.jobs = jobs
        self.slots = slots
        self.throttles = throttles
        self.tenants = tenants

    def tenant_flow(self, tenant_id: str, now: datetime) -> TenantFlow:
        tenant = self.tenants.get(tenant_id)
        keys = {
            key: self._key_flow(tenant_id, key, limit, now)
            for key, limit in sorted(self.jobs.concurrency_keys(tenant_id).items())
        }
        limit = tenant.max_concurrent_runs
        own = self._count(tenant_id, limit, now) if limit is not None else SlotCounts()
        waiting, capped = sum_waiting(own, keys)
        return TenantFlow(
            max_concurrent_runs=limit,
            max_runs_per_second=tenant.max_runs_per_second,
            burst=tenant.burst,
            disabled=tenant.disabled,
            running=own.running,
            running_from="in_flight_slots" if limit is not None else "sampled_runs",
            waiting=waiting,
            waiting_capped=capped,
            throttled=self._throttled(tenant, now),
            keys=list(keys.values()),
        )

    def _key_flow(self, tenant_id: str, key: str, limit: int, now: datetime) -> KeyFlow:
        counts = self._count(tables.slot_group(tenant_id, key), limit, now)
        return KeyFlow(
            key=key,
            max_concurrency=limit,
            running=counts.running,
            waiting=counts.waiting,
            waiting_capped=counts.waiting_capped,
        )

    def _count(self, group: str, limit: int, now: datetime) -> SlotCounts:
        items = [self.slots.get(group, shard) for shard in range(len(slot_shards(limit)))]
        return count_slots(items, now, cap=MAX_WAITERS_PER_SHARD)

    def _throttled(self, tenant: Tenant, now: datetime) -> int:
        throttle = throttle_of(tenant)
        if throttle is None:
            return 0
        now_us = (now - EPOCH) // timedelta(microseconds=1)
        return sum(
            throttle.booked_ahead(self.throttles.time_of(tenant.tenant_id, shard), now_us)
            for shard in range(throttle.shards)
        )


class FlowGauges:
    """A tenant's running, waiting and throttled counts as CloudWatch gauges (dimension ``tenant_id``, never
    a key: one series per tenant), put when one of its runs is held back or throttled, at most every
    ``every`` per tenant in this process."""

    def __init__(self, reader: FlowReader, gauges: TenantGauges, every: timedelta = FLOW_GAUGE_EVERY):
        self.reader = reader
        self.gauges = gauges
        self.every = every
        self._last: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def on_wait(self, tenant_id: str, now: datetime) -> None:
        with self._lock:
            last = self._last.get(tenant_id)
            if last is not None and now - last < self.every:
                return
            self._last[tenant_id] = now
        flow = self.reader.tenant_flow(tenant_id, now)
        values = {WAITING_GAUGE: float(flow.waiting), THROTTLED_GAUGE: float(flow.throttled)}
        if flow.running_from == "in_flight_slots":  # else unknown here: no runs are read on this path
            values[RUNNING_GAUGE] = float(flow.running)
        self.gauges.record(tenant_id, values)


__all__ = [
    "FLOW_GAUGE_EVERY",
    "RUNNING_GAUGE",
    "THROTTLED_GAUGE",
    "WAITING_GAUGE",
    "FlowGauges",
    "FlowReader",
]
