"""The application service behind the HTTP API: one method per route, all scoped to a tenant.

It checks what the models cannot check alone (the clock, the tenant's limits, the job's state), then calls
the stores and the planner. It takes ``now`` from its caller and knows nothing of HTTP or AWS.

A fire that was planned but has not reached a worker is a message, not an item: the service shows it as the
run it will be (ENQUEUED, or RUNNING while the job's lane holds it), from the job's cursor and lane.
"""

from __future__ import annotations

import statistics
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from ulid import ULID

from tickwork.app.flow import FlowReader
from tickwork.app.lifecycle import RunLifecycle
from tickwork.app.planner import Planner
from tickwork.app.ports import (
    Dispatch,
    JobStore,
    Lanes,
    Page,
    RunIndex,
    RunQueue,
    RunStore,
    TaskEndStore,
    TenantStore,
)
from tickwork.app.workflows import reopen_workflow
from tickwork.domain.arrival import reads_ahead
from tickwork.domain.fires import first_fire_anchor, is_fire_of, jitter_span
from tickwork.domain.flow import TenantFlow
from tickwork.domain.lanes import Holder, Lane, ended
from tickwork.domain.lifecycle import RETRYABLE_BY_HAND, TERMINAL, WAITING
from tickwork.domain.models import (
    Job,
    JobPatch,
    JobSpec,
    JobStatus,
    OnceSchedule,
    PauseInfo,
    RateSchedule,
    Run,
    RunMessage,
    RunStatus,
    parse_run_id,
    scheduled_run_id,
)
from tickwork.domain.patch import merge_patch
from tickwork.domain.pools import PoolBacklog, pool_target_of
from tickwork.domain.priority import Priority, message_priority
from tickwork.domain.run_index import chunks_below, read_index
from tickwork.domain.run_listing import Position, RunFilter, decode_cursor, encode_cursor, merge
from tickwork.domain.schedule import (
    MAX_EXCLUDED_IN_A_ROW,
    AnySchedule,
    DstNote,
    dst_note,
    fire_times_between,
    iter_candidate_fires,
    next_fire_time,
    next_fire_times,
)
from tickwork.domain.targets import AwsTargetPolicy, check_payload_fits
from tickwork.domain.timeutil import from_epoch_ms, to_epoch_ms
from tickwork.domain.workflow import parse_child_run_id
from tickwork.errors import InvalidInput, InvalidSchedule, InvalidState, NotFound, VersionConflict
from tickwork.targets.kind import CheckContext
from tickwork.targets.registry import kind_of

# A one-time job may name a time this far in the past (clock skew, a slow client) and still be accepted.
ONCE_PAST_TOLERANCE = timedelta(seconds=60)
STATS_WINDOW = timedelta(hours=1)
# The stats count each pool's waiting runs up to this many ("1000+" beyond).
STATS_POOL_CAP = 1000
# The stats route reads at most this many recent runs in all (``sampled_runs`` says how many it read).
STATS_SAMPLE = 10_000
# Run summaries the stats route reads from the run index at most (a run may have several, one per write).
STATS_BUDGET = 3 * STATS_SAMPLE
# Fires a job's history shows as ENQUEUED ahead of its stored runs, at most.
SHOWN_AHEAD = 1000
# The newest stored runs read to find where a job's unrecorded fires start (manual runs sort among them).
RECENT_RUNS = 20
# A job list reads the last run of this many jobs of its page at once.
LAST_RUN_PARALLEL = 8
# A preview lists at most this many excluded fires beyond its fire times.
PREVIEW_EXCLUDED_LIMIT = 100
# The tenant-wide run list reads at most this many items (run summaries, or failures) for a page: a page
# may then hold fewer runs than asked for, with a cursor to go on.
LIST_BUDGET = 2000
# A history cursor that continues among the fires in flight, before this fire (epoch ms).
AHEAD_CURSOR = "a."


@dataclass(frozen=True)
class JobDetails:
    job: Job
    next_fire_at: datetime | None
    """The next fire strictly after now, for display; the stored cursor may run ahead of it."""
    last_run: Run | None = None


@dataclass(frozen=True)
class RunDetail:
    run: Run
    checkpoint: Any
    """A pool run's last saved checkpoint (None: none, or not a pool run)."""
    tasks: list[Run] | None = None
    """A workflow run's task runs that exist (None: not a workflow run)."""


@dataclass(frozen=True)
class TenantStats:
    jobs: dict[str, int]
    runs: dict[str, int]
    lag_ms: dict[str, int | None]
    queue_depth: int
    sampled_runs: int
    window_seconds: int = int(STATS_WINDOW.total_seconds())
    pools: list[PoolBacklog] = field(default_factory=list)
    flow: TenantFlow | None = None
    """Flow control: None where the service has no reader of it (a deployment always has one)."""


class JobService:
    def __init__(
        self,
        *,
        jobs: JobStore,
        lanes: Lanes,
        runs: RunStore,
        index: RunIndex,
        tenants: TenantStore,
        queue: RunQueue,
        planner: Planner,
        allow_private_targets: bool,
        flow: FlowReader | None = None,
        aws_targets: AwsTargetPolicy | None = None,
        max_target_timeout_seconds: int = 900,
        task_ends: TaskEndStore | None = None,
    ):
        self.jobs = jobs
        self.lanes = lanes
        self.task_ends = task_ends
        self.runs = runs
        self.lifecycle = RunLifecycle(runs)
        self.index = index
        self.tenants = tenants
        self.queue = queue
        self.planner = planner
        self.flow = flow
        self.allow_private_targets = allow_private_targets
        self.aws_targets = aws_targets
        self.max_target_timeout_seconds = max_target_timeout_seconds

    @property
    def target_checks(self) -> CheckContext:
        """What this deployment allows targets to be, for their kinds to check."""
        return CheckContext(
            allow_private=self.allow_private_targets,
            aws_targets=self.aws_targets,
            max_timeout_seconds=self.max_target_timeout_seconds,
        )

    # --- jobs ---------------------------------------------------------------------------------------------
    def create_job(self, tenant_id: str, spec: JobSpec, now: datetime) -> JobDetails:
        tenant = self.tenants.get(tenant_id)
        self._check_spec(spec, now)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # stored timestamps keep milliseconds
        created = Job(
            **spec.model_dump(),
            job_id=str(ULID.from_datetime(now)),
            tenant_id=tenant_id,
            created_at=now,
            updated_at=now,
        )
        job = created.model_copy(update={"next_fire_at": first_fire(created, now)})
        self._note_concurrency_key(job)
        self.jobs.create(job, max_jobs=tenant.max_jobs)
        return self._details(self._plan(job, now), now)

    def get_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        job, lane = self.jobs.get_with_lane(tenant_id, job_id)
        return self._details(job, now, last_run=self._last_run(job, lane, now))

    def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None, limit: int, cursor: str | None, now: datetime
    ) -> Page[JobDetails]:
        """A page of jobs, each with its last run as ``get_job`` gives it: the jobs and their lanes come in
        one batch read, then each job's newest stored run in one query of one item, side by side."""
        page = self.jobs.list_with_lanes(tenant_id, status=status, limit=limit, cursor=cursor)
        if not page.items:
            return Page([], page.next_cursor)
        with ThreadPoolExecutor(max_workers=min(LAST_RUN_PARALLEL, len(page.items))) as pool:
            last_runs = list(pool.map(lambda pair: self._last_run(pair[0], pair[1], now), page.items))
        details = [
            self._details(job, now, last_run=last)
            for (job, _), last in zip(page.items, last_runs, strict=True)
        ]
        return Page(details, page.next_cursor)

    def update_job(
        self, tenant_id: str, job_id: str, patch: JobPatch, now: datetime, *, if_match: int | None = None
    ) -> JobDetails:
        job = self.jobs.get(tenant_id, job_id)
        reopening = job.status is JobStatus.COMPLETED
        if not reopening:
            self._require_not_ended(job, "update")
        expected = patch.version if patch.version is not None else if_match
        if expected is not None and expected != job.version:
            raise VersionConflict(
                f"job is at version {job.version}, not {expected}",
                field="version",
                current_version=job.version,
            )
        spec = JobSpec.model_validate(merge_patch(job.spec().model_dump(mode="json"), patch.changes()))
        self._check_spec(spec, now)
        updated = Job(
            **spec.model_dump(),
            **job.model_dump(exclude=set(JobSpec.model_fields) | {"version", "updated_at"}),
            version=job.version + 1,
            updated_at=now,
        )
        if spec.schedule != job.schedule:
            # Fires already sent from the old schedule are CANCELLED by the worker (schedule_changed), unless
            # the new schedule fires then too.
            updated = updated.model_copy(
                update={"next_fire_at": first_fire(updated, now), "last_fire_at": None}
            )
        previous_name = job.name if spec.name != job.name else None
        pool = pool_target_of(updated)
        if pool is not None:
            # Before the job is saved: a crash between leaves a pool named by no job, never one unknown. Every
            # update of a pool job notes its pool (one small write), so a pool job from before the tenant's
            # pools were kept joins them at its next update.
            self.jobs.note_pool(tenant_id, pool.pool)
        self._note_concurrency_key(updated)
        if reopening:
            # A completed job given a schedule that fires again (a new `at`, a later `end_at`) is ACTIVE
            # again.
            next_fire = first_fire(updated, now) if spec.schedule != job.schedule else None
            if next_fire is None:
                raise InvalidState(
                    "a completed job can be updated only with a schedule that fires again"
                    " (a new schedule.at, or a later schedule.end_at)",
                    job_status=job.status,
                )
            updated = updated.model_copy(update={"status": JobStatus.ACTIVE, "next_fire_at": next_fire})
            max_jobs = self.tenants.get(tenant_id).max_jobs
            self.jobs.reopen(
                updated, expected_version=job.version, max_jobs=max_jobs, previous_name=previous_name
            )
        else:
            self.jobs.save(updated, expected_version=job.version, previous_name=previous_name)
        return self._details(self._plan(updated, now), now)

    def pause_job(
        self, tenant_id: str, job_id: str, *, reason: str | None, actor: str, now: datetime
    ) -> JobDetails:
        """Fires not started stop, those already sent too (the worker drops them); a running attempt ends."""
        job = self.jobs.get(tenant_id, job_id)
        self._require_not_ended(job, "pause")
        if job.status is JobStatus.ACTIVE:
            paused = next_version(
                job,
                now,
                status=JobStatus.PAUSED,
                pause=PauseInfo(reason=reason, paused_at=now, paused_by=actor),
            )
            self.jobs.save(paused, expected_version=job.version)
            job = paused
        return self._details(job, now)

    def resume_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        """Fires that fell in the pause are planned again, now, under the job's misfire policy (a one-time
        job whose time passed included), with the fires ahead."""
        job = self.jobs.get(tenant_id, job_id)
        self._require_not_ended(job, "resume")
        if job.status is JobStatus.PAUSED:
            active = resumed(job, now)
            self.jobs.save(active, expected_version=job.version)
            job = self._plan(active, now)
        return self._details(job, now)

    def replan_unrecorded(self, tenant_id: str, job_id: str, now: datetime) -> Job:
        """The run queue was lost (a local stack started again from its saved tables): the fires sent and
        not recorded are planned again from the first of them, under the misfire policy. A fire recorded
        meanwhile absorbs its second message; one whose attempt was running is taken over."""
        job = self.jobs.get(tenant_id, job_id)
        if job.status is not JobStatus.ACTIVE:
            return job
        recent = self.runs.list_for_job(tenant_id, job_id, limit=RECENT_RUNS, cursor=None)
        first = next_fire_time(job.schedule, _after_recorded(job, recent), anchor=first_fire_anchor(job))
        if first is None or (job.next_fire_at is not None and first >= job.next_fire_at):
            return job
        rewound = next_version(job, now, next_fire_at=first, last_fire_at=None)
        self.jobs.save(rewound, expected_version=job.version)
        return self._plan(rewound, now)

    def cancel_job(self, tenant_id: str, job_id: str, now: datetime) -> JobDetails:
        """Fires not started end CANCELLED as they reach a worker (or at once, when shown); a running attempt
        finishes, and is not retried."""
        job = self.jobs.get(tenant_id, job_id)
        if job.status is not JobStatus.CANCELLED:
            cancelled = next_version(job, now, status=JobStatus.CANCELLED, cancelled_at=now)
            self.jobs.cancel(cancelled, expected_version=job.version)
            job = cancelled
        return self._details(job, now)

    def trigger_job(self, tenant_id: str, job_id: str, *, idempotency_key: str | None, now: datetime) -> Run:
        """Run now, outside the schedule. The same idempotency key always gives the same run."""
        job = self.jobs.get(tenant_id, job_id)
        if job.status is JobStatus.CANCELLED:
            raise InvalidState("a cancelled job cannot be triggered", job_status=job.status)
        run, written = self.lifecycle.plan_manual(
            tenant_id=tenant_id, job_id=job_id, idempotency_key=idempotency_key, now=now
        )
        if not written.ok:
            if written.current is None:
                raise InvalidState("the run could not be stored; try again")
            return written.current
        return self._send(run, now, priority=job.priority)

    # --- runs ---------------------------------------------------------------------------------------------
    def list_runs(
        self, tenant_id: str, job_id: str, *, limit: int, cursor: str | None, now: datetime
    ) -> Page[Run]:
        """Newest first: the fires sent and not yet recorded (ENQUEUED, or RUNNING), then the stored runs.
        A cursor either continues among the fires in flight (``a.<epoch ms>``) or among the stored runs."""
        job, lane = self.jobs.get_with_lane(tenant_id, job_id)
        if cursor is not None and not cursor.startswith(AHEAD_CURSOR):
            return self.runs.list_for_job(tenant_id, job_id, limit=limit, cursor=cursor)
        before = _ahead_position(cursor) if cursor is not None else None
        recent = self.runs.list_for_job(tenant_id, job_id, limit=RECENT_RUNS, cursor=None)
        ahead = sorted(
            (
                run
                for run in self._unrecorded(job, lane, recent, now)
                if before is None or run.scheduled_for < before
            ),
            key=lambda run: (run.scheduled_for, run.run_id),
            reverse=True,
        )
        if len(ahead) > limit or (len(ahead) == limit and recent.items):
            last = ahead[limit - 1]
            return Page(ahead[:limit], f"{AHEAD_CURSOR}{to_epoch_ms(last.scheduled_for)}")
        if len(ahead) == limit:
            return Page(ahead, None)
        stored = self.runs.list_for_job(tenant_id, job_id, limit=limit - len(ahead), cursor=None)
        shown = {run.run_id for run in ahead}
        return Page([*ahead, *(run for run in stored.items if run.run_id not in shown)], stored.next_cursor)

    def list_tenant_runs(
        self, tenant_id: str, only: RunFilter, *, limit: int, cursor: str | None
    ) -> Page[Run]:
        """The tenant's stored runs in ``only``, newest first (see ``tickwork.domain.run_listing``).

        One job: its history. Only failure statuses: the sparse failure index. Otherwise the run index
        (``tickwork.domain.run_index``), a few seconds behind the runs, whose page is then read from the runs
        themselves: a run whose status moved out of ``only`` meanwhile is left out. At most ``LIST_BUDGET``
        items are read for a page, so a page may hold fewer than ``limit`` runs and still have a cursor."""
        before = decode_cursor(cursor) if cursor is not None else None
        want = limit + 1
        budget = max(want, LIST_BUDGET)
        if only.job_id is not None:
            self.jobs.get(tenant_id, only.job_id)  # another tenant's job is a 404, as its history is
            found = self.runs.list_for_job_filtered(
                tenant_id, only.job_id, only, before=before, want=want, budget=budget
            )
        elif only.statuses and only.statuses <= RETRYABLE_BY_HAND:
            found = self.runs.list_failures(tenant_id, only, before=before, want=want, budget=budget)
        else:
            return self._list_from_index(tenant_id, only, before=before, limit=limit, budget=budget)
        runs, next_position = merge([found], before=before, limit=limit)
        return Page(runs, encode_cursor(next_position) if next_position is not None else None)

    def _list_from_index(
        self, tenant_id: str, only: RunFilter, *, before: Position | None, limit: int, budget: int
    ) -> Page[Run]:
        since_ms = to_epoch_ms(only.since) if only.since is not None else None
        chunks = self.index.chunks(tenant_id, below_ms=chunks_below(before, only), since_ms=since_ms)
        found = read_index(chunks, only, before=before, want=limit + 1, budget=budget)
        listed = found.entries[:limit]
        if len(found.entries) > limit:
            next_position: Position | None = listed[-1].position
        else:
            next_position = found.stopped_at
        stored = self.runs.get_many(tenant_id, [(entry.run_id, entry.scheduled_ms) for entry in listed])
        runs = [
            stored[entry.run_id]
            for entry in listed
            if entry.run_id in stored and only.matches(stored[entry.run_id])
        ]
        return Page(runs, encode_cursor(next_position) if next_position is not None else None)

    def get_run(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        try:
            return self.runs.get(tenant_id, run_id)
        except NotFound:
            key = parse_run_id(run_id)
            if key is None or key.fire_ms is None:
                raise
            job, lane = self.jobs.get_with_lane(tenant_id, key.job_id)
            fire = from_epoch_ms(key.fire_ms)
            for run in self._unrecorded(job, lane, Page([]), now, around=fire):
                if run.run_id == run_id:
                    return run
            raise

    def cancel_unrecorded(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        """A fire sent and not yet reached by a worker (shown ENQUEUED, with no run item): recorded CANCELLED
        now, so its message is absorbed as a duplicate when it comes. Raises NotFound for a run not shown,
        InvalidState for one whose attempt is running in its job's lane (it has no item to ask through)."""
        shown = self.get_run(tenant_id, run_id, now)
        if shown.status in TERMINAL:
            raise InvalidState(f"the run is {shown.status.value} already", field="run_id")
        if shown.status is not RunStatus.ENQUEUED:
            raise InvalidState(
                "the run's attempt is running and has not been recorded yet; cancel its job to stop what"
                " follows it",
                field="run_id",
            )
        job = self.jobs.get(tenant_id, shown.job_id)
        cancelled = self.lifecycle.record_unrun_fire(
            job, shown.scheduled_for, now, "cancelled", status=RunStatus.CANCELLED
        )
        if cancelled is not None and reads_ahead(job):
            # A worker may have read the fire ahead (before this record): its claim at the fire now fails.
            self.lanes.move(tenant_id, job.job_id)
        # None: a worker recorded the fire meanwhile; the run as it stands now.
        return cancelled if cancelled is not None else self.runs.get(tenant_id, run_id)

    def run_detail(self, tenant_id: str, run_id: str, now: datetime) -> RunDetail:
        """The run, and a pool run's last checkpoint or a workflow run's tasks: one more read, for those
        only."""
        run = self.get_run(tenant_id, run_id, now)
        checkpoint = self.runs.checkpoint_of(run) if run.pool is not None else None
        tasks = self.runs.tasks_of(tenant_id, run) if run.workflow else None
        return RunDetail(run, checkpoint, tasks)

    def retry_run(self, tenant_id: str, run_id: str, now: datetime) -> Run:
        """A new attempt of a FAILED, DEAD or ABANDONED run, under the same run id and idempotency key."""
        run = self.runs.get(tenant_id, run_id)
        job = self.jobs.get(tenant_id, run.job_id)
        if job.status is JobStatus.CANCELLED:
            raise InvalidState("runs of a cancelled job cannot be retried", job_status=job.status)
        if run.status not in RETRYABLE_BY_HAND:
            raise InvalidState(
                f"only FAILED, DEAD or ABANDONED runs can be retried; this run is {run.status.value}",
                run_status=run.status,
            )
        child = parse_child_run_id(run.run_id)
        if child is not None:
            # Retried alone, a task would leave its workflow run ended and its children undecided.
            raise InvalidState(
                f"a workflow task's run is retried with its workflow run: retry {child.parent_run_id}, which"
                " runs again its failed tasks and what depends on them",
                run_status=run.status,
            )
        if run.workflow:
            if self.task_ends is None:
                raise InvalidState("workflow runs cannot be retried here", run_status=run.status)
            reopened, written = reopen_workflow(self.lifecycle, self.task_ends, job, run, now)
        else:
            reopened, written = self.lifecycle.rerun(run, now)
        if not written.ok:
            current = written.current
            raise InvalidState(
                "the run changed meanwhile" + (f"; it is {current.status.value}" if current else ""),
                run_status=current.status if current else None,
            )
        return self._send(reopened, now, attempt=run.attempt + 1, priority=job.priority)

    # --- read-only helpers --------------------------------------------------------------------------------
    @staticmethod
    def preview(schedule: AnySchedule, *, after: datetime, count: int, jitter_seconds: int = 0) -> Preview:
        """The next ``count`` fire times strictly after ``after`` (a rate schedule with no start_at counts
        from ``after``), and each fire up to the last of them with what changes it: an exclusion, DST,
        jitter."""
        anchor = None
        if isinstance(schedule, RateSchedule):
            try:
                anchor = after + timedelta(seconds=schedule.every_seconds)
            except OverflowError:  # the first fire would fall past year 9999
                return Preview([], [])
        fire_times = next_fire_times(schedule, after, count, anchor=anchor)

        def shown(at: datetime, excluded: str | None) -> PreviewFire:
            starts_by = None
            if jitter_seconds and excluded is None:
                starts_by = at + jitter_span(schedule, at, jitter_seconds, anchor=anchor)
            return PreviewFire(at, excluded, dst_note(schedule, at), starts_by)

        fires: list[PreviewFire] = []
        looked_at = iter_candidate_fires(schedule, after, anchor=anchor)
        firing = 0
        for at, excluded in islice(looked_at, count + PREVIEW_EXCLUDED_LIMIT):
            fires.append(shown(at, excluded))
            firing += excluded is None
            if firing == count:
                break
        listed = {fire.at for fire in fires}
        # Past a long run of excluded fires the rest are listed without their excluded neighbours.
        fires += [shown(at, None) for at in fire_times if at not in listed]
        return Preview(fire_times, fires)

    def stats(self, tenant_id: str, now: datetime) -> TenantStats:
        """Jobs by status; the runs scheduled in the last hour, by status, with their trigger lag, from the
        run index (the newest ``STATS_SAMPLE`` of them at most); and the queue depth: those runs still waiting
        to start (sent, held back, or between attempts). Fires the planner sent ahead of their time are the
        schedule, not a backlog, and are not counted: counting them would read every job of the tenant.

        And each pool the tenant's jobs have named: its runs waiting for a claim (counted up to
        ``STATS_POOL_CAP``) and how long the oldest has waited, two queries of the pool index per pool.

        And its flow control (:mod:`tickwork.app.flow`): a read per slot item of its limits and keys and per
        throttle item; without an in-flight limit its running count is the sample's RUNNING runs."""
        job_counts = self.jobs.count_by_status(tenant_id)
        window = RunFilter(since=now - STATS_WINDOW)
        chunks = self.index.chunks(tenant_id, below_ms=None, since_ms=to_epoch_ms(now - STATS_WINDOW))
        samples = read_index(chunks, window, before=None, want=STATS_SAMPLE, budget=STATS_BUDGET).entries
        by_status = Counter(sample.status.value for sample in samples)
        lags = sorted(sample.lag_ms for sample in samples if sample.lag_ms is not None)
        flow = self.flow.tenant_flow(tenant_id, now) if self.flow is not None else None
        if flow is not None and flow.running_from == "sampled_runs":
            flow = flow.counted_from_sample(by_status.get(RunStatus.RUNNING.value, 0))
        return TenantStats(
            jobs={status.value: job_counts.get(status, 0) for status in JobStatus},
            runs={status.value: by_status.get(status.value, 0) for status in RunStatus},
            lag_ms={"p50": percentile(lags, 50), "p95": percentile(lags, 95), "p99": percentile(lags, 99)},
            queue_depth=sum(1 for sample in samples if sample.status in WAITING),
            sampled_runs=len(samples),
            pools=[
                self.runs.pool_backlog(tenant_id, pool, now=now, cap=STATS_POOL_CAP)
                for pool in self.jobs.pools(tenant_id)
            ],
            flow=flow,
        )

    # --- internals ----------------------------------------------------------------------------------------
    def _note_concurrency_key(self, job: Job) -> None:
        """Before the job is written, as its pool: a crash between leaves a key named by no job (counted as
        idle), never a key the stats do not know. One small write, for a job with a key only."""
        if job.concurrency_key is not None and job.max_concurrency is not None:
            self.jobs.note_concurrency_key(job.tenant_id, job.concurrency_key, job.max_concurrency)

    def _send(
        self, run: Run, now: datetime, *, attempt: int | None = None, priority: Priority | None = None
    ) -> Run:
        """Send a stored run's message; ENQUEUED once sent, else PLANNED for the sweeper. Without its job's
        ``priority`` it goes to the normal queue, and the worker sends it on in its job's if it waits."""
        message = RunMessage(
            tenant_id=run.tenant_id,
            run_id=run.run_id,
            sent_at=to_epoch_ms(now),
            attempt=attempt,
            priority=message_priority(priority) if priority is not None else None,
        )
        if self.queue.send([Dispatch(message, now)], now):
            return run
        enqueued, written = self.lifecycle.enqueued(run, now)
        return enqueued if written.ok else (written.current or run)

    def _unrecorded(
        self, job: Job, lane: Lane, recent: Page[Run], now: datetime, *, around: datetime | None = None
    ) -> list[Run]:
        """Fires sent and not yet recorded: RUNNING while the lane holds them, else ENQUEUED. ``recent`` is
        the newest stored runs: the fires after the newest scheduled one among them have not been recorded.
        ``around`` asks for one fire's (``get_run``)."""
        recorded = {run.run_id for run in recent.items}
        running = {run.run_id: run for run in self._running(job, lane, now) if run.run_id not in recorded}
        fires: list[datetime] = []
        # Sent so far: every fire before the cursor, or up to the last one once the schedule has run out.
        sent_until = job.next_fire_at or (
            job.last_fire_at + timedelta(microseconds=1) if job.last_fire_at else None
        )
        if job.pause is not None and sent_until is not None:
            # Fires sent for a time in the pause are not runs: the worker drops them, and resuming plans them.
            sent_until = min(sent_until, job.pause.paused_at)
        if job.status is not JobStatus.COMPLETED and sent_until is not None:
            if around is not None:
                start, limit = around, 1
            else:
                start, limit = _after_recorded(job, recent) + timedelta(microseconds=1), SHOWN_AHEAD
            fires = fire_times_between(
                job.schedule,
                max(start, job.created_at),
                sent_until,
                anchor=first_fire_anchor(job),
                limit=limit,
            )
        shown = list(running.values())
        for fire in fires:
            run = _enqueued(job, fire)
            if run.run_id not in recorded and run.run_id not in running:
                shown.append(run)
        return shown

    def _running(self, job: Job, lane: Lane, now: datetime) -> list[Run]:
        """The lane's holders as the runs they are: RUNNING, unless their run item says they ended. A holder
        whose start is still to come was claimed ahead of its fire: it is shown with the fires not started."""
        started = {run_id: holder for run_id, holder in lane.holders.items() if holder.started_at <= now}
        if not started:
            return []
        stored = self.runs.find_many(job.tenant_id, job.job_id, sorted(started))
        running = []
        for run_id, holder in started.items():
            record = stored.get(run_id)
            if ended(holder, record.fencing_token if record else None):
                continue
            running.append(_running(job, holder, record))
        return running

    def _check_spec(self, spec: JobSpec, now: datetime) -> None:
        if isinstance(spec.schedule, OnceSchedule) and spec.schedule.at < now - ONCE_PAST_TOLERANCE:
            raise InvalidSchedule("schedule.at is in the past", field="schedule.at")
        kind = kind_of(spec.target)
        check_payload_fits(spec, kind.payload_limit)
        kind.validate(spec.target, self.target_checks)

    def _plan(self, job: Job, now: datetime) -> Job:
        """Plan fires inside the horizon at once, so they do not wait for the planner's next tick."""
        if not self.planner.is_due(job, now, within=self.planner.horizon):
            return job
        result = self.planner.plan(job, now)
        if not result.cursor_advanced:
            return self.jobs.get(job.tenant_id, job.job_id)
        return job.model_copy(
            update={"next_fire_at": result.next_fire_at, "last_fire_at": result.last_fire_at}
        )

    def _last_run(self, job: Job, lane: Lane, now: datetime) -> Run | None:
        """The run scheduled latest, up to now: the newest stored one, or one the lane holds that is not
        recorded yet."""
        stored = self.runs.latest(job.tenant_id, job.job_id, until=now)
        running = [run for run in self._running(job, lane, now) if run.scheduled_for <= now]
        candidates = [run for run in (stored, *running) if run is not None]
        return max(candidates, key=lambda run: run.scheduled_for) if candidates else None

    def _details(self, job: Job, now: datetime, last_run: Run | None = None) -> JobDetails:
        upcoming = None
        if job.status is JobStatus.ACTIVE:
            upcoming = next_fire_time(job.schedule, now, anchor=first_fire_anchor(job))
        return JobDetails(job=job, next_fire_at=upcoming, last_run=last_run)

    @staticmethod
    def _require_not_ended(job: Job, action: str) -> None:
        if job.status in (JobStatus.CANCELLED, JobStatus.COMPLETED):
            raise InvalidState(f"a {job.status.value.lower()} job cannot {action}", job_status=job.status)


def _after_recorded(job: Job, recent: Page[Run]) -> datetime:
    """Where the unrecorded fires start: after the newest stored scheduled run. Manual runs sort among
    them by time; when the newest stored runs are all manual, none of the fires before them is shown."""
    scheduled = [run.scheduled_for for run in recent.items if run.trigger == "schedule"]
    if scheduled:
        return max(scheduled)
    if recent.next_cursor is not None:
        return min(run.scheduled_for for run in recent.items)
    return job.created_at - timedelta(microseconds=1)


def _enqueued(job: Job, fire: datetime) -> Run:
    """A fire sent and not reached: ENQUEUED, or CANCELLED already when its job was (the worker records it
    so when its message arrives)."""
    cancelled = job.status is JobStatus.CANCELLED
    return Run(
        run_id=scheduled_run_id(job.job_id, fire),
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        scheduled_for=fire,
        status=RunStatus.CANCELLED if cancelled else RunStatus.ENQUEUED,
        trigger="schedule",
        created_at=fire,
        reason="job_cancelled" if cancelled else None,
    )


def _ahead_position(cursor: str) -> datetime:
    try:
        return from_epoch_ms(int(cursor.removeprefix(AHEAD_CURSOR)))
    except (ValueError, OverflowError, OSError) as error:
        raise InvalidInput("cursor is not valid", field="cursor", code="invalid_cursor") from error


def _running(job: Job, holder: Holder, record: Run | None) -> Run:
    base = record or Run(
        run_id=holder.run_id,
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        scheduled_for=holder.scheduled_for,
        status=RunStatus.ENQUEUED,
        trigger="manual" if ":m:" in holder.run_id else "schedule",
        created_at=holder.started_at,
    )
    return base.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "attempt": holder.attempt,
            "fencing_token": holder.token,
            "lease_owner": holder.worker_id,
            "lease_expires_at": holder.lease_until,
            "started_at": base.started_at or holder.started_at,
            "lag_ms": base.lag_ms
            if base.lag_ms is not None
            else max(0, to_epoch_ms(holder.started_at) - to_epoch_ms(holder.scheduled_for)),
        }
    )


def next_version(job: Job, now: datetime, **changes: object) -> Job:
    """The job with ``changes``, as the tenant's next version of it."""
    return job.model_copy(update={**changes, "version": job.version + 1, "updated_at": now})


def resumed(job: Job, now: datetime) -> Job:
    """A paused job active again, its cursor back at the first fire in the pause: the fires that fell in it
    are planned again, under the job's misfire policy (a one-time job whose time passed included)."""
    assert job.pause is not None
    since = next_fire_time(
        job.schedule, job.pause.paused_at - timedelta(microseconds=1), anchor=first_fire_anchor(job)
    )
    cursor = job.next_fire_at if since is None else min(since, job.next_fire_at or since)
    return next_version(
        job,
        now,
        status=JobStatus.ACTIVE,
        pause=None,
        next_fire_at=cursor,
        last_fire_at=job.last_fire_at if cursor is None else None,
    )


@dataclass(frozen=True)
class PreviewFire:
    at: datetime
    excluded: str | None
    """Why ``schedule.exclude`` excludes it (it does not fire), or None."""
    dst: DstNote | None
    """``shifted`` or ``repeated`` by daylight saving time (see ``dst_note``), or None."""
    starts_by: datetime | None
    """With jitter: the latest it may start."""


@dataclass(frozen=True)
class Preview:
    fire_times: list[datetime]
    fires: list[PreviewFire]


def first_fire(job: Job, now: datetime) -> datetime:
    """The first fire at or after ``now`` (a one-time job's own time, even slightly past). Raises
    InvalidSchedule when the schedule has none left."""
    if isinstance(job.schedule, OnceSchedule):
        return job.schedule.at
    after, anchor = now - timedelta(microseconds=1), first_fire_anchor(job)
    first = next(iter_candidate_fires(job.schedule, after, anchor=anchor), None)
    if first is None:
        raise InvalidSchedule("the schedule has no fire time after now", field="schedule")
    if first[1] is not None and next_fire_time(job.schedule, after, anchor=anchor) is None:
        raise InvalidSchedule(
            f"schedule.exclude excludes every fire the schedule has left (or more than"
            f" {MAX_EXCLUDED_IN_A_ROW:,} in a row)",
            field="schedule.exclude",
        )
    # The cursor starts at the first fire even when it is excluded: the planner records it SKIPPED.
    return first[0]


def percentile(sorted_values: list[int], pct: int) -> int | None:
    if not sorted_values:
        return None
    if len(sorted_values) == 1:
        return sorted_values[0]
    return round(statistics.quantiles(sorted_values, n=100, method="inclusive")[pct - 1])


__all__ = [
    "JobDetails",
    "JobService",
    "TenantStats",
    "first_fire",
    "is_fire_of",
    "next_version",
    "percentile",
    "resumed",
]
