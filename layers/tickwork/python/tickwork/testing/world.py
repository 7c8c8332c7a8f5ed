"""The whole engine (service, planner, worker, sweeper) on in-memory fakes and a fake clock, for tests.

``World.execute`` stands in for the targets: it records every call and answers from a per-job script, whose
entries may be callables run during the call (to make something happen while a run is in flight).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.app.flow import FlowReader
from tickwork.app.indexer import Indexer
from tickwork.app.planner import Planner, PlannerTick
from tickwork.app.pools import PoolService
from tickwork.app.service import JobService
from tickwork.app.sweeper import Sweeper
from tickwork.app.tenant_switch import TenantSwitch
from tickwork.app.worker import Worker
from tickwork.domain.models import Job, JobSpec, Run, RunMessage, RunStatus
from tickwork.domain.pools import DEFAULT_POOL_WAIT_ALARM
from tickwork.domain.retry import OutcomeClass
from tickwork.domain.tenants import Tenant
from tickwork.targets import TargetResult
from tickwork.testing.fakes import (
    CountingMetrics,
    FakeClock,
    FakeDeadLetters,
    FakeJobStore,
    FakeLanes,
    FakeRunIndex,
    FakeRunQueue,
    FakeRunStore,
    FakeTenants,
    FakeTenantSlots,
    FakeTenantThrottles,
    RecordingGauges,
)

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
OK = TargetResult(OutcomeClass.SUCCESS, 200)
UNAVAILABLE = TargetResult(OutcomeClass.RETRYABLE, 503, "http_503", "503 Service Unavailable")
GONE = TargetResult(OutcomeClass.PERMANENT, 404, "http_404", "404 Not Found")

Answer = TargetResult | Callable[[], TargetResult]


@dataclass(frozen=True)
class Call:
    job: str
    run_id: str
    attempt: int
    token: int
    at: datetime
    scheduled_for: datetime
    lease_token: str | None = None
    """The lease token the call carried (a webhook's: ``X-Tickwork-Lease-Token``)."""


@dataclass
class World:
    clock: FakeClock = field(default_factory=lambda: FakeClock(START))
    horizon: timedelta = timedelta(seconds=60)
    lookahead: timedelta = timedelta(seconds=10)
    pool_wait_alarm: timedelta = DEFAULT_POOL_WAIT_ALARM
    calls: list[Call] = field(default_factory=list)
    script: dict[str, list[Answer]] = field(default_factory=dict)
    """Answers by job name, one per call; the last one repeats. Unscripted jobs answer 200."""
    in_flight: dict[str, int] = field(default_factory=dict)
    most_in_flight: dict[str, int] = field(default_factory=dict)
    """Per job: the most calls it had in progress at once."""

    def __post_init__(self) -> None:
        self.lanes = FakeLanes()
        self.slots = FakeTenantSlots()
        self.throttles = FakeTenantThrottles()
        self.jobs = FakeJobStore(self.lanes, due_shards=2)
        self.runs = FakeRunStore()
        self.index = FakeRunIndex()
        self.queue = FakeRunQueue(self.clock)
        self.letters = FakeDeadLetters()
        self.metrics = CountingMetrics()
        self.gauges = RecordingGauges()
        self.tenants = FakeTenants(
            *(
                Tenant(tenant_id=t, name=t, signing_secret=f"secret-{t}", created_at=START)
                for t in ("acme", "globex")
            ),
            tokens={"tw_acme": "acme", "tw_globex": "globex"},
        )
        self.planner = Planner(
            jobs=self.jobs,
            runs=self.runs,
            lanes=self.lanes,
            queue=self.queue,
            metrics=self.metrics,
            horizon=self.horizon,
            lookahead=self.lookahead,
            # The world moves in whole steps: a message comes at its fire, as the steps' tests expect.
            lead=timedelta(0),
        )
        self.sweeper = Sweeper(
            runs=self.runs,
            queue=self.queue,
            metrics=self.metrics,
            shards=1,
            pool_wait_alarm=self.pool_wait_alarm,
        )
        self.ticker = PlannerTick(
            jobs=self.jobs, planner=self.planner, sweeper=self.sweeper, metrics=self.metrics
        )
        self.indexer = Indexer(index=self.index, metrics=self.metrics)
        self.service = JobService(
            jobs=self.jobs,
            lanes=self.lanes,
            runs=self.runs,
            index=self.index,
            tenants=self.tenants,
            queue=self.queue,
            planner=self.planner,
            allow_private_targets=True,
            flow=FlowReader(jobs=self.jobs, slots=self.slots, throttles=self.throttles, tenants=self.tenants),
        )
        self.default_worker = self.worker("w1")
        self.pools = PoolService(
            jobs=self.jobs,
            runs=self.runs,
            lifecycle=self.default_worker.lifecycle,
            attempts=self.default_worker.attempts,
            after_end=self.default_worker.after_end,
            metrics=self.metrics,
            clock=self.clock,
            sleep=self.clock.sleep,
        )
        self.sweeper.lapse = self.pools.lapse
        self.switch = TenantSwitch(tenants=self.tenants, jobs=self.jobs, clock=self.clock)

    # --- parts ----------------------------------------------------------------------------------------------
    def worker(
        self,
        worker_id: str,
        *,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> Worker:
        """A worker of the world; ``sleep``, its waits (by default, the clock moved on by as long)."""
        return Worker(
            jobs=self.jobs,
            lanes=self.lanes,
            slots=self.slots,
            throttles=self.throttles,
            runs=self.runs,
            tenants=self.tenants,
            queue=self.queue,
            dead_letters=self.letters,
            execute=self.execute,
            metrics=self.metrics,
            clock=clock or self.clock,
            sleep=sleep or self.clock.sleep,
            worker_id=worker_id,
            pool_wait_alarm=self.pool_wait_alarm,
            gauges=self.gauges,
        )

    def execute(self, job: Job, run: Run, tenant: Tenant) -> TargetResult:
        self.calls.append(
            Call(
                job.name,
                run.run_id,
                run.attempt,
                run.fencing_token,
                self.clock(),
                run.scheduled_for,
                run.lease_token,
            )
        )
        self.in_flight[job.name] = self.in_flight.get(job.name, 0) + 1
        self.most_in_flight[job.name] = max(self.most_in_flight.get(job.name, 0), self.in_flight[job.name])
        try:
            answers = self.script.get(job.name, [])
            answer = answers.pop(0) if len(answers) > 1 else (answers[0] if answers else OK)
            return answer() if callable(answer) else answer
        finally:
            self.in_flight[job.name] -= 1

    # --- driving --------------------------------------------------------------------------------------------
    def create(self, tenant: str = "acme", **spec: Any) -> Job:
        body = {
            "name": spec.pop("name", f"job-{uuid.uuid4().hex[:8]}"),
            "target": {"type": "http", "url": "https://hooks.example.com/x"},
            **spec,
        }
        return self.service.create_job(tenant, JobSpec.model_validate(body), self.clock()).job

    def tick(self) -> Any:
        return self.ticker.tick(self.clock(), [0, 1])

    def deliver(self, worker: Worker | None = None, *, limit: int = 100) -> list[str]:
        """Hand every message visible now to the worker, one by one, deleting each once handled (a worker
        that dies leaves its message to come back); returns what the worker did with each."""
        notes = []
        for queued in self.queue.receive(limit=limit):
            notes.append((worker or self.default_worker).handle(queued.message))
            self.queue.delete(queued)
        return notes

    def run_for(self, seconds: float, *, step: float = 1.0, tick_every: float = 1.0) -> None:
        """Move time on in steps, ticking the planner and delivering what is visible at each step."""
        end = self.clock() + timedelta(seconds=seconds)
        next_tick = self.clock()
        while self.clock() < end:
            if self.clock() >= next_tick:
                self.tick()
                next_tick = self.clock() + timedelta(seconds=tick_every)
            self.deliver()
            self.index_changes()
            self.clock.advance(seconds=step)

    def index_changes(self) -> int:
        """The run changes written since the last call, into the run index as one batch (the change feed's
        consumer does this a moment after the writes)."""
        return self.indexer.index_changes(self.runs.take_changes())

    def message(self, run_id: str, tenant: str = "acme", **fields: Any) -> RunMessage:
        return RunMessage(tenant_id=tenant, run_id=run_id, **fields)

    # --- looking --------------------------------------------------------------------------------------------
    def runs_of(self, job: Job) -> list[Run]:
        """Stored runs of the job, oldest first."""
        return sorted(
            (run for run in self.runs.runs.values() if run.job_id == job.job_id),
            key=lambda run: (run.scheduled_for, run.run_id),
        )

    def statuses(self, job: Job) -> list[RunStatus]:
        return [run.status for run in self.runs_of(job)]

    def calls_of(self, job: Job) -> list[Call]:
        return [call for call in self.calls if call.job == job.name]

    def job(self, job: Job) -> Job:
        return self.jobs.get(job.tenant_id, job.job_id)
