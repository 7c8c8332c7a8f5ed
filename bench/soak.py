"""Soak: the local stack for ten minutes under a steady cron load, with the workers and the planner
restarted under it.

    python -m bench.soak --minutes 10

The real local stack (``tickwork_local.stack.LocalStack``, in process: moto in process, the
planner/sweeper loop ticking every second, 4 worker pollers) and a loopback webhook receiver with three
paths: ``/ok`` answers 200, ``/slow`` holds the request a few seconds then answers 200, ``/fail`` answers
500 (those runs retry and go DEAD). A few hundred cron jobs are created through the service layer (the code
behind ``POST /v1/jobs``), all between one start and one end time, so the fires they owe are known exactly;
they are counted here from the expressions by a matcher of this module, not by croniter.

During the fires the worker pollers are stopped and new ones started every minute (a stopped poller leaves
its batch to the visibility timeout, as a Lambda killed mid-batch does), and once the planner/sweeper loop
is stopped, left down for 20 s and started again. After the last fire the stack drains with no new fires;
then the runs table is read and the fires balanced: every expected fire has exactly one run, every run is
terminal, no run reached the target successfully twice. The exit status is 1 if any of that fails.

Lag = the receiver's clock minus ``X-Tickwork-Scheduled-For``, first attempts only (a retry's lag is its
backoff). Memory: the process's RSS (``VmRSS`` of /proc/self/status) every 30 s; ``--tracemalloc`` adds
Python's traced heap, at a cost: it hooks every allocation, and moto allocates a lot.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork_local.harness import Receiver, Reply

from bench._common import machine, percentile, table

TENANT = "soak"
TOKEN = "tw_soak-local"  # noqa: S105 - a throwaway token of a local tenant
WORKERS = 4
SLOW_SECONDS = 3.0
TARGET_TIMEOUT_SECONDS = 10
SAMPLE_SECONDS = 30.0
PLANNER_DOWN_SECONDS = 20.0
FAILING_RETRY = {"max_attempts": 3, "initial_delay_seconds": 1, "max_delay_seconds": 4, "jitter": "none"}
TERMINAL = ("SUCCEEDED", "FAILED", "DEAD", "MISSED", "SKIPPED", "CANCELLED", "ABANDONED")


# --- the receiver -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arrival:
    run_id: str
    attempt: int
    scheduled_for: float
    received: float
    status: int
    path: str


def receiver() -> Receiver:
    """A loopback webhook target (``tickwork_local.harness.Receiver``): ``/ok`` 200, ``/slow`` 200 after
    ``SLOW_SECONDS``, ``/fail`` 500."""
    return Receiver(
        replies={
            "/slow": Reply(200, body=b"ok", delay=SLOW_SECONDS),  # it holds the worker's call
            "/fail": Reply(500, body=b"ok"),
        }
    )


def arrivals(receiver: Receiver) -> list[Arrival]:
    """The calls the receiver got so far."""
    found = []
    for request in list(receiver.requests):
        scheduled = request.headers.get("X-Tickwork-Scheduled-For", "")
        found.append(
            Arrival(
                run_id=request.headers.get("X-Tickwork-Run-Id", ""),
                attempt=int(request.headers.get("X-Tickwork-Attempt", "0")),
                scheduled_for=parse_instant(scheduled) if scheduled else math.nan,
                received=request.at,
                status=request.status,
                path=request.path,
            )
        )
    return found


def parse_instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --- the job mix and the fires it owes --------------------------------------------------------------------
@dataclass(frozen=True)
class SoakJob:
    name: str
    kind: str  # ok, slow, fail or seconds: which receiver path, and what its runs should end as
    expression: str
    misfire_policy: str = "fire_once"
    misfire_grace_seconds: int = 60


def job_mix(jobs: int) -> list[SoakJob]:
    """About 1.5 target calls/s whatever the minute: seconds and minutes are spread over the jobs.

    - 75 % "ok": every 6 minutes, most with a second in the expression, a third classic 5-field crons at
      second 0 (a small burst each minute);
    - 10 % "slow": every 4 minutes, the receiver holds each call ``SLOW_SECONDS``;
    - 10 % "fail": every 5 minutes, 500 on each of their 3 attempts, so each run retries and goes DEAD;
    - 5 % "seconds": every 30 s, misfire policy ``skip`` with a grace of 5 s, so the fires the planner's
      outage makes more than 5 s late are recorded MISSED; the others keep ``fire_once`` with 60 s of grace
      and run late.
    """
    mix: list[SoakJob] = []
    for index in range(jobs):
        second, share = (index * 7) % 60, index % 10
        if share < 7:
            if index % 2:
                mix.append(SoakJob(f"ok-{index}", "ok", f"{second} {index % 6}-59/6 * * * *"))
            else:
                mix.append(SoakJob(f"ok-{index}", "ok", f"{index % 6}-59/6 * * * *"))
        elif share == 7:
            mix.append(SoakJob(f"slow-{index}", "slow", f"{second} {index % 4}-59/4 * * * *"))
        elif share == 8:
            mix.append(SoakJob(f"fail-{index}", "fail", f"{second} {index % 5}-59/5 * * * *"))
        elif index % 20 == 9:
            mix.append(SoakJob(f"seconds-{index}", "seconds", f"{index % 30}/30 * * * * *", "skip", 5))
        else:
            mix.append(SoakJob(f"ok-{index}", "ok", f"{second} {index % 6}-59/6 * * * *"))
    return mix


def field_matches(spec: str, value: int) -> bool:
    """One cron field (``*``, ``n``, ``a-b``, ``*/s``, ``a/s``, ``a-b/s``, lists of them) against a value."""
    for part in spec.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            low, high = 0, 59
        elif "-" in base:
            low, high = (int(bound) for bound in base.split("-"))
        else:
            low = int(base)
            high = 59 if step_text else low
        if low <= value <= high and (value - low) % step == 0:
            return True
    return False


def cron_matches(expression: str, moment: datetime) -> bool:
    """Seconds-first 6-field or classic 5-field (second 0); day, month and weekday fields must be ``*``."""
    fields = expression.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise ValueError(f"a cron expression has 5 or 6 fields: {expression!r}")
    second, minute, hour, *calendar = fields
    if any(part != "*" for part in calendar):
        raise ValueError(f"the soak's matcher only knows '*' for day, month and weekday: {expression!r}")
    return (
        field_matches(second, moment.second)
        and field_matches(minute, moment.minute)
        and (hour == "*" or field_matches(hour, moment.hour))
    )


def expected_fires(expression: str, start: datetime, end: datetime) -> list[datetime]:
    """Every whole second from ``start`` to ``end`` inclusive that the expression matches."""
    seconds = int((end - start).total_seconds())
    moments = (start + timedelta(seconds=offset) for offset in range(seconds + 1))
    return [moment for moment in moments if cron_matches(expression, moment)]


# --- bookkeeping ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MinuteLag:
    minute: int  # from the first fire; -1 for arrivals before it
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


def lag_by_minute(arrivals: Iterable[Arrival], first_fire: float) -> list[MinuteLag]:
    """Lag percentiles of first attempts, by the minute of the soak they were received in."""
    by_minute: dict[int, list[float]] = {}
    for arrival in arrivals:
        if arrival.attempt != 1 or math.isnan(arrival.scheduled_for):
            continue
        minute = max(-1, math.floor((arrival.received - first_fire) / 60))
        by_minute.setdefault(minute, []).append((arrival.received - arrival.scheduled_for) * 1000)
    return [
        MinuteLag(
            minute,
            len(lags),
            percentile(lags, 50),
            percentile(lags, 95),
            percentile(lags, 99),
            max(lags),
        )
        for minute, lags in sorted(by_minute.items())
    ]


@dataclass(frozen=True)
class SoakRun:
    """One run as the runs table holds it, reduced to what the balance needs."""

    run_id: str
    job_id: str
    scheduled_for: float
    status: str


@dataclass
class Balance:
    expected: int
    runs: int
    by_status: Counter[str]
    lost: int  # expected fires with no run, plus runs never terminal
    no_run: int
    not_terminal: int
    unexpected_runs: int  # runs for no expected fire
    duplicated: int  # run ids the target accepted more than once
    succeeded_without_call: int  # SUCCEEDED runs the receiver never accepted

    @property
    def terminal(self) -> int:
        return sum(self.by_status[status] for status in TERMINAL)

    @property
    def balanced(self) -> bool:
        """planned = succeeded + failed + dead + missed + skipped + cancelled + abandoned."""
        return self.runs == self.terminal

    @property
    def ok(self) -> bool:
        return (
            self.balanced
            and self.lost == 0
            and self.duplicated == 0
            and self.unexpected_runs == 0
            and self.succeeded_without_call == 0
        )


def balance(
    expected: Iterable[tuple[str, float]], runs: Sequence[SoakRun], accepted: Iterable[Arrival]
) -> Balance:
    """Expected fires ``(job id, epoch seconds)`` against the runs table and the receiver's 2xx calls."""
    wanted = set(expected)
    planned = {(run.job_id, run.scheduled_for) for run in runs}
    calls = Counter(arrival.run_id for arrival in accepted if 200 <= arrival.status < 300)
    not_terminal = sum(1 for run in runs if run.status not in TERMINAL)
    no_run = len(wanted - planned)
    return Balance(
        expected=len(wanted),
        runs=len(runs),
        by_status=Counter(run.status for run in runs),
        lost=no_run + not_terminal,
        no_run=no_run,
        not_terminal=not_terminal,
        unexpected_runs=sum(1 for run in runs if (run.job_id, run.scheduled_for) not in wanted),
        duplicated=sum(1 for count in calls.values() if count > 1),
        succeeded_without_call=sum(1 for run in runs if run.status == "SUCCEEDED" and not calls[run.run_id]),
    )


def wrong_outcomes(runs: Iterable[SoakRun], kind_of_job: dict[str, str]) -> Counter[str]:
    """Runs that ended other than their target should make them: ok/slow/seconds runs that did not
    succeed (MISSED and SKIPPED are decisions, not failures), fail runs that did not go DEAD."""
    wrong: Counter[str] = Counter()
    for run in runs:
        kind = kind_of_job.get(run.job_id, "?")
        if run.status in ("MISSED", "SKIPPED", "CANCELLED"):
            continue
        if (kind == "fail") != (run.status == "DEAD") or (kind != "fail" and run.status != "SUCCEEDED"):
            wrong[f"{kind} {run.status}"] += 1
    return wrong


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


@dataclass(frozen=True)
class Sample:
    at: float  # seconds from the first fire
    rss_kib: int
    traced_kib: int | None
    queue_depth: int
    arrivals: int


def memory_growth(samples: Sequence[Sample], from_second: float) -> tuple[Sample, Sample] | None:
    """The first sample at or after ``from_second`` and the last one, if they differ."""
    later = [sample for sample in samples if sample.at >= from_second]
    if len(later) < 2:
        return None
    return later[0], later[-1]


# --- the stack --------------------------------------------------------------------------------------------
@contextmanager
def local_stack(log_file: str) -> Iterator[Any]:
    """The local stack in threads of this process; the environment comes back as it was."""
    from tickwork_local.stack import running_in_thread

    environment = {"TICKWORK_LOCAL_TENANTS": f"{TENANT}:{TOKEN}", "POWERTOOLS_LOG_LEVEL": "WARNING"}
    with running_in_thread(
        environment=environment, log_file=log_file, tick_seconds=1.0, workers=WORKERS
    ) as stack:
        yield stack


def create_jobs(mix: Sequence[SoakJob], base_url: str, start: datetime, end: datetime) -> dict[str, SoakJob]:
    """Through the service layer from 4 threads; job id -> its soak job."""
    from concurrent.futures import ThreadPoolExecutor

    from tickwork.domain.models import JobSpec
    from tickwork.runtime import runtime

    service = runtime().service

    def create(job: SoakJob) -> tuple[str, SoakJob]:
        path = "ok" if job.kind == "seconds" else job.kind
        spec: dict[str, Any] = {
            "name": job.name,
            "schedule": {
                "type": "cron",
                "expression": job.expression,
                "start_at": start.isoformat(),
                "end_at": end.isoformat(),
            },
            "target": {
                "type": "http",
                "url": f"{base_url}/{path}",
                "timeout_seconds": TARGET_TIMEOUT_SECONDS,
            },
            "misfire_policy": job.misfire_policy,
            "misfire_grace_seconds": job.misfire_grace_seconds,
        }
        if job.kind == "fail":
            spec["retry"] = FAILING_RETRY
        created = service.create_job(TENANT, JobSpec.model_validate(spec), datetime.now(UTC))
        return created.job.job_id, job

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(create, mix))


def read_runs() -> list[SoakRun]:
    from tickwork.adapters.runs import run_from_item
    from tickwork.runtime import runtime

    current = runtime()
    runs = []
    for page in current.dynamodb.get_paginator("scan").paginate(TableName=current.settings.runs_table):
        for item in page["Items"]:
            run = run_from_item(item)
            runs.append(SoakRun(run.run_id, run.job_id, run.scheduled_for.timestamp(), run.status.value))
    return runs


def queue_depth() -> int:
    from tickwork.runtime import runtime

    current = runtime()
    attributes = current.sqs.get_queue_attributes(QueueUrl=current.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    return sum(
        int(attributes.get(name, 0))
        for name in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )


@dataclass
class Timeline:
    first_fire: float
    events: list[tuple[float, str]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    baseline: tracemalloc.Snapshot | None = None  # with --tracemalloc: the heap after the first minute

    def note(self, text: str) -> None:
        self.events.append((time.time() - self.first_fire, text))
        print(f"[{time.time() - self.first_fire:7.1f} s] {text}", file=sys.stderr, flush=True)


def sampler(timeline: Timeline, receiver: Receiver, stop: threading.Event) -> None:
    while True:
        try:
            traced = tracemalloc.get_traced_memory()[0] // 1024 if tracemalloc.is_tracing() else None
            timeline.samples.append(
                Sample(
                    time.time() - timeline.first_fire,
                    rss_kib(),
                    traced,
                    queue_depth(),
                    len(receiver.requests),
                )
            )
            if tracemalloc.is_tracing() and timeline.baseline is None and timeline.samples[-1].at >= 60:
                timeline.baseline = tracemalloc.take_snapshot()
        except Exception as error:  # a sample lost is no reason to stop the soak
            timeline.note(f"sample failed: {error!r}")
        if stop.wait(SAMPLE_SECONDS):
            return


def heap_growth(baseline: tracemalloc.Snapshot | None, top: int = 12) -> str:
    """The lines whose allocations grew most since ``baseline``, as a markdown table."""
    if baseline is None:
        return ""
    stats = tracemalloc.take_snapshot().compare_to(baseline, "lineno")[:top]
    return table(
        ("allocated at", "growth MiB", "blocks"),
        (
            (str(stat.traceback[0]), f"{stat.size_diff / 2**20:+.1f}", f"{stat.count_diff:+d}")
            for stat in stats
        ),
    )


def restart_plan(minutes: int, first_fire: float) -> list[tuple[float, str]]:
    """Worker restarts every minute (at its 30th second), the planner down once mid-soak."""
    plan = [(first_fire + 60 * minute - 30, "workers") for minute in range(1, minutes + 1)]
    planner_stop = first_fire + 60 * (minutes // 2) + 10
    plan += [(planner_stop, "planner-stop"), (planner_stop + PLANNER_DOWN_SECONDS, "planner-start")]
    return sorted(plan)


def drive(stack: Any, plan: list[tuple[float, str]], until: float, timeline: Timeline) -> None:
    for at, action in plan:
        if at > until:
            break
        time.sleep(max(0.0, at - time.time()))
        started = time.perf_counter()
        if action == "workers":
            clean = stack.stop_workers()
            stack.start_workers()
            timeline.note(f"workers restarted in {time.perf_counter() - started:.1f} s (clean stop: {clean})")
        elif action == "planner-stop":
            clean = stack.stop_planner()
            timeline.note(f"planner/sweeper loop stopped (clean stop: {clean})")
        else:
            stack.start_planner()
            timeline.note("planner/sweeper loop started again")
    time.sleep(max(0.0, until - time.time()))


def drain(max_seconds: float, timeline: Timeline) -> list[SoakRun]:
    """Wait until every run is terminal and the queue is empty (or ``max_seconds``)."""
    deadline = time.time() + max_seconds
    while True:
        runs = read_runs()
        open_runs = sum(1 for run in runs if run.status not in TERMINAL)
        depth = queue_depth()
        if (open_runs == 0 and depth == 0) or time.time() > deadline:
            timeline.note(f"drained: {open_runs} runs open, queue depth {depth}")
            return runs
        time.sleep(10)


# --- report -----------------------------------------------------------------------------------------------
def report(
    args: argparse.Namespace,
    mix: Sequence[SoakJob],
    timeline: Timeline,
    arrivals: Sequence[Arrival],
    result: Balance,
    wrong: Counter[str],
    counters: Counter[str],
    sweeps: Any,
    setup_seconds: float,
) -> str:
    kinds = Counter(job.kind for job in mix)
    lines = [
        f"machine: {machine()}",
        f"command: python -m bench.soak --minutes {args.minutes} --jobs {args.jobs}",
        f"jobs: {len(mix)} ({', '.join(f'{count} {kind}' for kind, count in sorted(kinds.items()))}), "
        f"created through the service layer in {setup_seconds:.1f} s; fires for {args.minutes} min",
        f"target calls: {len(arrivals)} ({len(arrivals) / max(1, args.minutes * 60):.2f}/s over the fires); "
        f"first attempts {sum(1 for a in arrivals if a.attempt == 1)}",
        "",
        "Lag of first attempts by minute of the soak (receive time - X-Tickwork-Scheduled-For):",
        "",
        table(
            ("minute", "calls", "p50 ms", "p95 ms", "p99 ms", "max ms"),
            (
                (
                    "before"
                    if row.minute < 0
                    else ("drain" if row.minute >= args.minutes else row.minute + 1),
                    row.count,
                    round(row.p50_ms),
                    round(row.p95_ms),
                    round(row.p99_ms),
                    round(row.max_ms),
                )
                for row in lag_by_minute(arrivals, timeline.first_fire)
            ),
        ),
        "",
        f"early calls (before their time): {sum(1 for a in arrivals if a.received < a.scheduled_for)}",
        "",
        f"Memory every {SAMPLE_SECONDS:.0f} s (and the run queue's depth, visible + in flight + delayed):",
        "",
        table(
            ("s from first fire", "RSS MiB", "traced MiB", "queue depth", "target calls so far"),
            (
                (
                    round(sample.at),
                    f"{sample.rss_kib / 1024:.1f}",
                    "-" if sample.traced_kib is None else f"{sample.traced_kib / 1024:.1f}",
                    sample.queue_depth,
                    sample.arrivals,
                )
                for sample in timeline.samples
            ),
        ),
    ]
    growth = memory_growth(timeline.samples, 120)
    if growth:
        first, last = growth
        lines += [
            "",
            f"RSS from {first.at:.0f} s to {last.at:.0f} s: {first.rss_kib / 1024:.1f} -> "
            f"{last.rss_kib / 1024:.1f} MiB ({(last.rss_kib - first.rss_kib) / 1024:+.1f} MiB)",
        ]
    statuses = ", ".join(f"{status.lower()} {result.by_status[status]}" for status in TERMINAL)
    lines += [
        "",
        "Counters after the drain (runs table):",
        "",
        f"- planned {result.runs} = {statuses} (= {result.terminal}); "
        f"balanced: {'yes' if result.balanced else 'NO'}",
        f"- expected fires {result.expected} (from the expressions), runs {result.runs}, "
        f"runs for no expected fire {result.unexpected_runs}",
        f"- lost {result.lost} (fires with no run {result.no_run}, "
        f"runs never terminal {result.not_terminal})",
        f"- duplicated {result.duplicated} (run ids the target accepted twice); succeeded without a call "
        f"{result.succeeded_without_call}",
        f"- runs that ended other than their target makes them: {dict(wrong) or 0}",
        "",
        "Noteworthy:",
        "",
        f"- sweeper: {sweeps.repaired} stored runs whose message it sent (again)",
        "- worker: "
        + ", ".join(
            f"{name} {int(counters[name])}"
            for name in (
                "RunsPlanned",
                "RunsStarted",
                "RunsSucceeded",
                "RunsRetried",
                "RunsDead",
                "RunsFailed",
                "RunsMissed",
                "RunsSkipped",
                "RunsHeldBack",
                "RunsAbandoned",
                "DuplicateDeliveriesAbsorbed",
                "LeaseConflicts",
                "LeasesExpired",
                "MessagesDropped",
            )
        ),
        f"- retried calls at the receiver: {sum(1 for a in arrivals if a.attempt > 1)}",
        "- events:",
    ]
    lines += [f"  - {at:.0f} s: {text}" for at, text in timeline.events]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=int, default=10, help="minutes of fires (default 10)")
    parser.add_argument("--jobs", type=int, default=300, help="cron jobs (default 300)")
    parser.add_argument("--drain-seconds", type=float, default=300, help="longest wait after the last fire")
    parser.add_argument("--tracemalloc", action="store_true", help="also sample Python's traced heap")
    parser.add_argument("--output", help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.minutes < 1 or args.jobs < 10:
        parser.error("--minutes must be at least 1 and --jobs at least 10")
    if args.tracemalloc:
        tracemalloc.start()

    directory = tempfile.mkdtemp(prefix="tickwork-soak-")
    webhooks = receiver()
    try:
        with local_stack(os.path.join(directory, "tickwork.log")) as stack:
            # Lead for creating the jobs before the first fire: 20-40/s under moto, slower on a busy machine.
            start = (datetime.now(UTC) + timedelta(seconds=15 + args.jobs / 10)).replace(microsecond=0)
            end = start + timedelta(minutes=args.minutes, seconds=-1)
            # A short run leaves out the jobs whose every fire falls after it (tickwork refuses them).
            mix = [job for job in job_mix(args.jobs) if expected_fires(job.expression, start, end)]
            timeline = Timeline(start.timestamp())
            created = time.perf_counter()
            jobs = create_jobs(mix, webhooks.base_url, start, end)
            setup_seconds = time.perf_counter() - created
            if time.time() > start.timestamp():
                raise SystemExit(f"creating the jobs took {setup_seconds:.0f} s, past the first fire")
            timeline.note(f"{len(jobs)} jobs created in {setup_seconds:.1f} s; logs in {directory}")
            stop_sampling = threading.Event()
            sampling = threading.Thread(
                target=sampler, args=(timeline, webhooks, stop_sampling), name="soak-sampler", daemon=True
            )
            sampling.start()
            drive(stack, restart_plan(args.minutes, start.timestamp()), end.timestamp() + 1, timeline)
            timeline.note("last fire passed; draining")
            runs = drain(args.drain_seconds, timeline)
            time.sleep(2)  # late duplicates, if any
            stop_sampling.set()
            sampling.join(timeout=60)
            growth_sites = heap_growth(timeline.baseline)
            arrived = arrivals(webhooks)
            with stack.metrics.lock:
                counters: Counter[str] = Counter()
                for _, name, value in stack.metrics.events:
                    counters[name] += value
            expected = [
                (job_id, fire.timestamp())
                for job_id, job in jobs.items()
                for fire in expected_fires(job.expression, start, end)
            ]
            result = balance(expected, runs, arrived)
            wrong = wrong_outcomes(runs, {job_id: job.kind for job_id, job in jobs.items()})
            text = report(args, mix, timeline, arrived, result, wrong, counters, stack.sweeps, setup_seconds)
    finally:
        webhooks.close()
    if growth_sites:
        text += (
            "\n\nTraced heap growth from the first minute to the end, by allocating line:\n\n" + growth_sites
        )
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as output:
            output.write(text + "\n")
    if not result.ok or wrong:
        print("\nSOAK FAILED: the fires do not balance (see the counters above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
