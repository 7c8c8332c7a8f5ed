"""The lag benchmark's bookkeeping: medians of the trials, the best peer, the goal lines and the due time.
(Its timings are never asserted.)"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from bench.lag import (
    Arrival,
    Median,
    Options,
    Result,
    _goal_lines,
    best_peer,
    by_workload,
    due_time,
    markdown,
    medians,
    turned,
)


def trial(
    scheduler: str, jobs: int, lags_ms: list[float], repeat: int = 1, not_run: Counter[str] | None = None
) -> Result:
    """A trial whose runs arrived ``lags_ms`` after a fire time of 1000 s."""
    arrivals = [Arrival(f"k{index}", 1000.0, 1000.0 + lag / 1000) for index, lag in enumerate(lags_ms)]
    workload = f"{jobs:,} one-time jobs, same second"
    return Result(scheduler, workload, jobs, arrivals, 1.0, not_run=not_run or Counter(), repeat=repeat)


def row(scheduler: str, jobs: int, p99: float, **extra: object) -> Median:
    figures: dict[str, object] = {
        "expected": jobs, "trials": 3, "p50": p99 / 2, "p95": p99, "p99": p99, "max_ms": p99,
        "runs_per_s": 300.0, "setup_seconds": 1.0, "lost": 0, "duplicates": 0, "early": 0, "not_run": 0,
    }  # fmt: skip
    figures.update(extra)
    return Median(scheduler, f"{jobs:,} one-time jobs, same second", **figures)  # type: ignore[arg-type]


def test_a_median_row_takes_the_middle_trial_of_each_figure_and_sums_the_faults() -> None:
    results = [
        trial("tickwork", 2, [100, 300], repeat=1),
        trial("tickwork", 2, [900, 900], repeat=2),
        trial("tickwork", 2, [50, 200], repeat=3),
        trial("huey", 2, [400, 400]),
    ]
    results[1].arrivals.append(Arrival("k0", 1000.0, 1001.0))  # a duplicate
    results[1].__post_init__()

    rows = medians(results)

    assert [(row.scheduler, row.trials) for row in rows] == [("tickwork", 3), ("huey", 1)]
    ours = rows[0]
    # p99 of each trial: 298, 998 (the duplicate's lag counts), 198.5; the median is the middle one.
    assert round(ours.p99) == 298
    assert ours.duplicates == 1 and ours.lost == 0 and ours.early == 0


def test_a_trial_with_no_arrival_leaves_the_median_to_the_others() -> None:
    rows = medians([trial("huey", 3, []), trial("huey", 3, [10, 20, 30]), trial("huey", 3, [30, 40, 50])])
    assert round(rows[0].p50) == 30  # the median of 20 and 40; the empty trial has no lag
    assert rows[0].lost == 3


def test_the_rows_follow_the_workloads_then_the_schedulers_order() -> None:
    results = [trial("huey", 100, [1]), trial("tickwork", 100, [1]), trial("APScheduler", 300, [1])]
    results.append(trial("tickwork", 300, [1]))
    assert [(row.workload[:3], row.scheduler) for row in medians(results)] == [
        ("100", "tickwork"),
        ("100", "huey"),
        ("300", "tickwork"),
        ("300", "APScheduler"),
    ]


def test_the_best_peer_is_the_lowest_median_p99_of_the_peers() -> None:
    table = by_workload([row("tickwork", 100, 10), row("APScheduler", 100, 150), row("huey", 100, 120)])
    peer = best_peer(table["100 one-time jobs, same second"])
    assert peer is not None and peer.scheduler == "huey"
    assert best_peer({"tickwork": row("tickwork", 100, 10)}) is None


def test_goal_lines_hold_tickwork_to_the_best_peer_up_to_300_jobs_and_twice_it_beyond() -> None:
    lines = _goal_lines(
        [
            row("tickwork", 300, 130),
            row("APScheduler", 300, 150),
            row("huey", 300, 120),
            row("tickwork", 1000, 230),
            row("APScheduler", 1000, 200),
            row("huey", 1000, 110),
        ]
    )
    assert lines[0] == (
        "- Goal at 300 one-time jobs, same second: tickwork's p99 at most the best peer's"
        " (huey, 120 ms): not met (130 ms)."
    )
    assert lines[1] == (
        "- Goal at 1,000 one-time jobs, same second: tickwork's p99 at most twice the best peer's"
        " (huey, 220 ms): not met (230 ms)."
    )


def test_the_drain_goal_is_the_1000_run_bursts_rate_and_faults_in_any_trial_fail_the_last_goal() -> None:
    lines = _goal_lines(
        [
            row("tickwork", 1000, 100, runs_per_s=260.0, lost=1),
            row("huey", 1000, 100, runs_per_s=10.0),
        ]
    )
    assert lines[0].endswith("twice the best peer's (huey, 200 ms): met (100 ms).")
    assert lines[1] == (
        "- Goal: the 1,000-run burst drained at 250 runs/s or more (first to last arrival): met"
        " (260.0 runs/s)."
    )
    assert lines[2] == (
        "- Goal: no early, duplicate or lost fire of tickwork in any trial: not met (0 early, 0 duplicates,"
        " 1 lost)."
    )
    slow = _goal_lines([row("tickwork", 1000, 100, runs_per_s=249.0)])
    assert "not met (249.0 runs/s)" in slow[0]


def test_the_due_time_is_a_whole_second_a_margin_after_the_creates_would_end() -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, 300_000, tzinfo=UTC).timestamp()
    # 100 creates at 100/s, a quarter slower: 1.25 s; then 5 s: 6.55 s on, so 12:00:07.
    assert due_time(now, 100, 100.0, 5.0) == datetime(2026, 11, 30, 12, 0, 7, tzinfo=UTC)


def test_each_repeat_turns_the_schedulers_order() -> None:
    names = ["tickwork", "APScheduler", "huey"]
    assert [turned(names, by) for by in range(4)] == [
        ["tickwork", "APScheduler", "huey"],
        ["APScheduler", "huey", "tickwork"],
        ["huey", "tickwork", "APScheduler"],
        ["tickwork", "APScheduler", "huey"],
    ]


def test_the_report_has_the_medians_the_ratios_and_every_trial() -> None:
    results = [
        trial("tickwork", 100, [100, 200], not_run=Counter({"MISSED (misfire)": 1})),
        trial("APScheduler", 100, [50, 100]),
        trial("huey", 100, [300, 400]),
    ]
    text = markdown(results, "python -m bench.lag --jobs 100 --repeats 1", Options([100], repeats=1))

    assert text.startswith("## Trigger lag: local stack against APScheduler and huey\n")
    assert "| 100 one-time jobs, same second | 199 | 100 | 399 | APScheduler | 2.00x | 2.00x |" in text
    assert "Fires recorded without a run (from the runs table, so not lost): 1 MISSED (misfire)." in text
    assert sum(line.startswith("| 1 | ") for line in text.splitlines()) == 3  # a row per trial
