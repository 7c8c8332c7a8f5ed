"""The sweeper: runs stored but not moving, found through the sparse attention index.

- a manual run (or a re-run by hand) whose message may not have gone out: sent again;
- a run waiting for a retry due later than SQS can delay a message: its message is sent once the retry is
  less than the sweep's lead away; a short retry whose message was lost: sent again;
- a run held outside whose lease lapsed (a pool run, or a webhook's that answered 202, with no heartbeat
  within its timeout, or its cap reached): its attempt ends as a retryable failure (``lapse``, the pools' own:
  the retry policy decides what follows);
- a pool run still waiting for a claim the pool wait threshold after it became claimable: nothing to repair
  (it waits for the tenant's workers), but it is counted (``PoolRunsWaitingLong``, with the longest wait of
  the sweep in ``PoolRunOldestWaitMs``) and logged with its tenant and pool, and looked at again one
  threshold later, so a run that keeps waiting is counted once per threshold, not once per sweep.

A fire's own runs need no sweeper: a fire is a message until a worker records it, and a worker that dies
leaves the message to come back after its visibility timeout. Each repair moves the run's attention time on,
so the next sweep finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.ports import Dispatch, Metrics, RunQueue, RunStore
from tickwork.domain.models import Run, RunMessage, RunStatus
from tickwork.domain.pools import DEFAULT_POOL_WAIT_ALARM
from tickwork.domain.timeutil import to_epoch_ms
from tickwork.errors import NotFound
from tickwork.observability import logger


class Sweeper:
    def __init__(
        self,
        *,
        runs: RunStore,
        queue: RunQueue,
        metrics: Metrics,
        shards: int,
        limit_per_shard: int = 500,
        lapse: Callable[[Run], Run | None] | None = None,
        pool_wait_alarm: timedelta = DEFAULT_POOL_WAIT_ALARM,
    ):
        self.runs = runs
        self.lapse = lapse
        self.lifecycle = RunLifecycle(runs)
        self.queue = queue
        self.metrics = metrics
        self.shards = shards
        self.limit_per_shard = limit_per_shard
        self.pool_wait_alarm = pool_wait_alarm

    def sweep(self, now: datetime) -> int:
        repaired = 0
        waits: list[int] = []  # of the runs found waiting long in their pools, in ms
        for shard in range(self.shards):
            for tenant_id, run_id in self.runs.due_for_attention(shard, now=now, limit=self.limit_per_shard):
                try:
                    repaired += self._repair(tenant_id, run_id, now, waits)
                except NotFound:
                    logger.warning("a run needing attention vanished", extra={"run_id": run_id})
                except Exception:
                    # Its attention time has not moved, so the next sweep tries again; the others go on.
                    logger.exception("repairing a run failed", extra={"run_id": run_id})
        if waits:
            self.metrics.count("PoolRunsWaitingLong", len(waits))
            self.metrics.milliseconds("PoolRunOldestWaitMs", max(waits))
        return repaired

    def _repair(self, tenant_id: str, run_id: str, now: datetime, waits: list[int]) -> int:
        run = self.runs.get(tenant_id, run_id)
        if run.waiting_in_pool:
            waited = self._waiting_long(run, now)
            if waited is not None:
                waits.append(waited)
            return 0
        if run.held_outside:
            return int(
                run.status is RunStatus.RUNNING and self.lapse is not None and self.lapse(run) is not None
            )
        if run.status in (RunStatus.PLANNED, RunStatus.ENQUEUED):
            message = RunMessage(tenant_id=tenant_id, run_id=run_id, sent_at=to_epoch_ms(now))
            if self.queue.send([Dispatch(message, run.scheduled_for)], now):
                return 0
            self.lifecycle.enqueued(run, now)
            self.metrics.count("RunsResent")
            return 1
        if run.status is RunStatus.RETRY_WAIT and run.retry_at is not None:
            message = RunMessage(tenant_id=tenant_id, run_id=run_id, attempt=run.attempt + 1)
            if self.queue.send([Dispatch(message, run.retry_at)], now):
                return 0
            self.lifecycle.retry_sent(run, now)
            self.metrics.count("RetriesSent")
            return 1
        return 0

    def _waiting_long(self, run: Run, now: datetime) -> int | None:
        """A run waiting in its pool past its threshold: how long it has waited (ms), once it is set to be
        looked at again a threshold later; None when there is nothing to count (a claim or a cancel changed
        it meanwhile)."""
        if run.pool_wait_alarm_at is None or run.pool_wait_alarm_at > now:
            return None  # the index is eventually consistent: it was claimed, or looked at, a moment ago
        if not self.lifecycle.pool_wait_noticed(run, now + self.pool_wait_alarm):
            return None
        since = run.pool_waiting_since or run.enqueued_at or run.created_at
        waited = max(0, to_epoch_ms(now) - to_epoch_ms(since))
        logger.warning(
            "a run waits long in its pool for a claim",
            extra={"tenant_id": run.tenant_id, "pool": run.pool, "run_id": run.run_id, "waited_ms": waited},
        )
        return waited
