"""Priorities under a backlog on the local stack (issue 30): high runs due behind 2,000 low ones.

    python -m bench.priorities --runs 3 --backlog 2000

The local stack runs in this process (as in ``bench.fairness``: moto in process, the planner ticking every
second with its 10 s horizon, 4 worker pollers), with one tenant, its API rate raised for the creates. It
creates ``--backlog`` one-time ``low`` jobs all due in the same second T, then 10 one-time ``high`` jobs due
one a second over T+1..T+10 s (while the backlog drains), all through ``POST /v1/jobs`` from 8 clients and
accepted before T. A loopback receiver records each call's arrival and its scheduled time; lag = arrival -
scheduled time. The same workload then runs with every job at ``normal`` (no priorities), the baseline. Each
trial starts on a fresh stack.

Goal: each high run starts within 2 s of its time; every low run is delivered, once; no low run waits more
than the bound (300 s) longer than it would without priorities (each percentile of the low runs' lag, and
their last, against the baseline's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import machine, median, table
from bench._flow import (
    CLIENTS,
    CREATES_PER_SECOND,
    LEAD_SECONDS,
    WAIT_PER_RUN,
    WAIT_SECONDS,
    WORKERS,
    Recorder,
    Tally,
    Trace,
    base_url,
    create_jobs,
    local_stack,
    logger,
    one_time,
    paragraph,
    save_figures,
    scheduled_ids,
    tally,
    wait_for,
)

TENANT = "busy"
TOKEN = "tw_bench-busy"  # noqa: S105 - a throwaway token of a local tenant
HIGH_JOBS = 10
HIGH_GOAL_MS = 2000.0
BOUND_MS = 300_000.0
# The receiver's paths: the backlog's and the high runs' calls counted apart.
BACKLOG, URGENT = "backlog", "urgent"


log = logger("priorities")


def high_fires(due: datetime) -> list[datetime]:
    return [due + timedelta(seconds=1 + index) for index in range(HIGH_JOBS)]


@dataclass(frozen=True)
class Trial:
    backlog: int
    prioritized: bool
    low: Tally
    high: Tally
    accepted_before_due: bool
    due: float

    @property
    def drain_seconds(self) -> float:
        return float("nan") if self.low.last is None else self.low.last - self.due

    def summary(self) -> dict[str, Any]:
        return {
            "prioritized": self.prioritized,
            "accepted_before_due": self.accepted_before_due,
            "high_lag_ms": [round(lag) for lag in self.high.lags_ms],
            "low": {
                "received": self.low.received,
                "lost": self.low.lost,
                "duplicates": self.low.duplicates,
                "p50_ms": round(self.low.lag(50)),
                "p99_ms": round(self.low.lag(99)),
                "max_ms": round(max(self.low.lags_ms)) if self.low.lags_ms else None,
            },
            "drain_s": round(self.drain_seconds, 1),
        }


def trial(backlog: int, *, prioritized: bool) -> Trial:
    """One trial on a fresh stack: ``backlog`` jobs due at T and the 10 urgent ones over T+1..T+10 s, at
    ``low`` and ``high`` (``prioritized``) or all at ``normal``."""
    recorder = Recorder()
    low, high = ("low", "high") if prioritized else ("normal", "normal")
    try:
        with local_stack(f"{TENANT}:{TOKEN}:api_requests_per_second=10000", Trace()) as stack:
            url = base_url(stack)
            lead = LEAD_SECONDS + backlog / CREATES_PER_SECOND
            due = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
            fires = high_fires(due)
            urgent_specs = [
                {**one_time(f"urgent-{index}", fire, recorder.url(URGENT)), "priority": high}
                for index, fire in enumerate(fires)
            ]
            urgent = create_jobs(url, TOKEN, urgent_specs)
            backlog_specs = [
                {**one_time(f"backlog-{index}", due, recorder.url(BACKLOG)), "priority": low}
                for index in range(backlog)
            ]
            queued = create_jobs(url, TOKEN, backlog_specs)
            failures = {**urgent.failures, **queued.failures}
            if failures:
                raise RuntimeError(f"job creates failed: {failures}")
            last_accepted = max(urgent.last_accepted, queued.last_accepted)
            log(f"{backlog + HIGH_JOBS} jobs created, {due.timestamp() - last_accepted:.1f} s before T")
            expected = {
                URGENT: scheduled_ids(urgent.job_ids, fires),
                BACKLOG: scheduled_ids(queued.job_ids, [due] * backlog),
            }
            wait_for(recorder, expected, due.timestamp() + WAIT_SECONDS + backlog * WAIT_PER_RUN)
    finally:
        recorder.close()
    return Trial(
        backlog=backlog,
        prioritized=prioritized,
        low=tally(recorder.of(BACKLOG), expected[BACKLOG]),
        high=tally(recorder.of(URGENT), expected[URGENT]),
        accepted_before_due=last_accepted < due.timestamp(),
        due=due.timestamp(),
    )


@dataclass(frozen=True)
class Figures:
    prioritized: list[Trial]
    plain: list[Trial]


def run(runs: int, backlog: int) -> Figures:
    prioritized, plain = [], []
    for number in range(runs):
        prioritized.append(trial(backlog, prioritized=True))
        log(f"trial {number + 1}, priorities: {json.dumps(prioritized[-1].summary())}")
        plain.append(trial(backlog, prioritized=False))
        log(f"trial {number + 1}, all normal: {json.dumps(plain[-1].summary())}")
    return Figures(prioritized, plain)


def faults(result: Tally) -> int:
    return result.early + result.duplicates + result.lost + result.unexpected


def _max(result: Tally) -> float:
    return max(result.lags_ms) if result.lags_ms else float("nan")


def markdown(figures: Figures, command: str) -> str:
    backlog = figures.prioritized[0].backlog
    rows: list[tuple[object, ...]] = []
    for number, (ranked, plain) in enumerate(zip(figures.prioritized, figures.plain, strict=True), start=1):
        rows.append(
            (
                number,
                f"{ranked.high.lag(50):,.0f}",
                f"{_max(ranked.high):,.0f}",
                f"{plain.high.lag(50):,.0f}",
                f"{_max(plain.high):,.0f}",
                f"{ranked.low.lag(50) / 1000:.1f}",
                f"{_max(ranked.low) / 1000:.1f}",
                f"{plain.low.lag(50) / 1000:.1f}",
                f"{_max(plain.low) / 1000:.1f}",
                f"{ranked.low.received:,} of {ranked.low.expected:,}",
                f"{faults(ranked.low) + faults(ranked.high)} / {faults(plain.low) + faults(plain.high)}",
            )
        )
    ranked_trials, plain_trials = figures.prioritized, figures.plain
    medians = {
        "high_max": median(_max(t.high) for t in ranked_trials),
        "high_p50": median(t.high.lag(50) for t in ranked_trials),
        "plain_high_max": median(_max(t.high) for t in plain_trials),
        "plain_high_p50": median(t.high.lag(50) for t in plain_trials),
        "low_p50": median(t.low.lag(50) for t in ranked_trials),
        "low_max": median(_max(t.low) for t in ranked_trials),
        "plain_low_p50": median(t.low.lag(50) for t in plain_trials),
        "plain_low_max": median(_max(t.low) for t in plain_trials),
    }
    rows.append(
        (
            "median",
            f"{medians['high_p50']:,.0f}",
            f"{medians['high_max']:,.0f}",
            f"{medians['plain_high_p50']:,.0f}",
            f"{medians['plain_high_max']:,.0f}",
            f"{medians['low_p50'] / 1000:.1f}",
            f"{medians['low_max'] / 1000:.1f}",
            f"{medians['plain_low_p50'] / 1000:.1f}",
            f"{medians['plain_low_max'] / 1000:.1f}",
            "",
            "",
        )
    )
    header = ("trial", "high p50 ms", "high max ms", "same jobs all normal: p50 ms", "max ms",
              "low p50 s", "low last s", "all normal: p50 s", "last s", "low delivered",
              "early / duplicate / lost (priorities / all normal)")  # fmt: skip
    worst_high = max(_max(t.high) for t in ranked_trials)
    # Each percentile of the low runs' lag against the same percentile without priorities, per trial pair.
    extra_ms = max(
        max(ranked.low.lag(q) - plain.low.lag(q) for q in (50, 90, 99))
        for ranked, plain in zip(ranked_trials, plain_trials, strict=True)
    )
    extra_last_ms = max(_max(r.low) - _max(p.low) for r, p in zip(ranked_trials, plain_trials, strict=True))
    clean = all(faults(t.low) == 0 and faults(t.high) == 0 for t in ranked_trials + plain_trials)
    accepted = all(t.accepted_before_due for t in ranked_trials + plain_trials)
    met = medians["high_max"] <= HIGH_GOAL_MS and clean and max(extra_ms, extra_last_ms) <= BOUND_MS
    lines = [
        "## Priorities (issue 30): high runs due behind a backlog of low ones",
        "",
        f"Command: `{command}`",
        "",
        paragraph(
            "The local stack in process (moto in process, the planner ticking every second with its 10 s"
            f" horizon, {WORKERS} worker pollers of batches of 10 shared by the three priorities' run"
            f" queues), its API on loopback HTTP, one tenant. It creates {backlog:,} one-time `low` jobs"
            f" all due in the same second T, then {HIGH_JOBS} one-time `high` jobs due one a second over"
            f" T+1..T+{HIGH_JOBS} s, while the backlog drains, through `POST /v1/jobs` from {CLIENTS}"
            " clients; every create was accepted before T"
            + ("" if accepted else " but in one trial (see the log)")
            + ". A loopback receiver records each call's arrival and `X-Tickwork-Scheduled-For`; lag ="
            " arrival - scheduled time. The same workload with every job at `normal` (no priorities) is the"
            " baseline; each trial starts on a fresh stack."
        ),
        "",
        table(header, rows),
        "",
        paragraph(
            f"Goal: each high run starts within 2 s of its time, every low run is delivered once, and none"
            f" waits more than 300 s longer than without priorities: {'met' if met else 'not met'}. The high"
            f" runs' latest start was {medians['high_max']:,.0f} ms after its time (median of"
            f" {len(ranked_trials)}; the worst trial {worst_high:,.0f} ms), against"
            f" {medians['plain_high_max'] / 1000:,.1f} s for the same jobs at `normal`, which wait behind"
            f" the backlog. Against the same percentile without priorities (a trial against its baseline),"
            f" the low runs' lag at p50, p90 and p99 was {extra_ms / 1000:+.1f} s at most, and their last"
            f" one {extra_last_ms / 1000:+.1f} s (a negative figure: earlier; the trials' noise is larger"
            " than what the high runs take, a batch's worth of time each). Early, duplicate, lost or"
            " unexpected fires in all trials:"
            f" {sum(faults(t.low) + faults(t.high) for t in ranked_trials + plain_trials)}."
        ),
        "",
        paragraph(
            "How: each priority has a run queue of its own. On AWS each queue has event source mappings of"
            " its own, so a backlog of one priority never holds another's runs. The local stack's pollers"
            " are shared: before each receive a poller serves the queue whose longest-visible message comes"
            " first by its time plus its priority's offset (high 0, normal 150 s, low 300 s), so a low run"
            " that has waited past the bound is served before new high ones."
        ),
    ]
    return "\n".join(lines)


def section(runs: int = 3, backlog: int = 2000) -> str:
    return markdown(run(runs, backlog), "python -m bench --only priorities")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="trials of each workload (default 3)")
    parser.add_argument("--backlog", type=int, default=2000, help="the low one-time jobs (default 2000)")
    args = parser.parse_args()
    started = time.perf_counter()
    figures = run(args.runs, args.backlog)
    save_figures("priorities", figures)
    log(f"done in {time.perf_counter() - started:.0f} s")
    print(f"machine: {machine()}\n")
    print(markdown(figures, " ".join(["python -m bench.priorities", *sys.argv[1:]])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
