"""The soak's bookkeeping: lag percentiles by minute, the counter balance, expected cron fires. Pure: no
stack."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.domain.models import JobSpec
from tickwork.domain.schedule import iter_fire_times

from bench.soak import (
    Arrival,
    Sample,
    SoakRun,
    balance,
    cron_matches,
    expected_fires,
    job_mix,
    lag_by_minute,
    memory_growth,
    restart_plan,
    wrong_outcomes,
)

FIRST_FIRE = 1_000_000.0


def arrival(
    run_id: str, scheduled: float, received: float, *, attempt: int = 1, status: int = 200
) -> Arrival:
    return Arrival(run_id, attempt, scheduled, received, status, "/ok")


def test_lag_percentiles_are_per_minute_of_receipt_and_first_attempts_only() -> None:
    arrivals = [
        # minute 0: lags 100..1000 ms
        *(arrival(f"a{n}", FIRST_FIRE + n, FIRST_FIRE + n + n / 10) for n in range(1, 11)),
        # minute 1: one call 5 s late; a retry of it is left out (its lag is the backoff)
        arrival("b", FIRST_FIRE + 70, FIRST_FIRE + 75),
        arrival("b", FIRST_FIRE + 70, FIRST_FIRE + 90, attempt=2),
        # before the first fire
        arrival("c", FIRST_FIRE - 5, FIRST_FIRE - 4.5),
    ]
    rows = lag_by_minute(arrivals, FIRST_FIRE)
    assert [(row.minute, row.count) for row in rows] == [(-1, 1), (0, 10), (1, 1)]
    minute0 = rows[1]
    assert minute0.p50_ms == pytest.approx(550)
    assert minute0.p95_ms == pytest.approx(955)
    assert minute0.max_ms == pytest.approx(1000)
    assert rows[2].p99_ms == rows[2].max_ms == pytest.approx(5000)


def runs_of(*entries: tuple[str, str, float, str]) -> list[SoakRun]:
    return [SoakRun(run_id, job_id, at, status) for run_id, job_id, at, status in entries]


def test_a_clean_soak_balances() -> None:
    expected = [("j1", 10.0), ("j1", 20.0), ("j2", 10.0), ("j3", 10.0)]
    runs = runs_of(
        ("r1", "j1", 10.0, "SUCCEEDED"),
        ("r2", "j1", 20.0, "MISSED"),
        ("r3", "j2", 10.0, "DEAD"),
        ("r4", "j3", 10.0, "SUCCEEDED"),
    )
    calls = [arrival("r1", 10, 11), arrival("r3", 10, 11, status=500), arrival("r4", 10, 12)]
    result = balance(expected, runs, calls)
    assert result.ok and result.balanced
    assert (result.expected, result.runs, result.terminal) == (4, 4, 4)
    assert result.by_status == Counter({"SUCCEEDED": 2, "MISSED": 1, "DEAD": 1})
    assert (result.lost, result.duplicated, result.unexpected_runs) == (0, 0, 0)


def test_lost_fires_open_runs_and_duplicate_calls_are_counted() -> None:
    expected = [("j1", 10.0), ("j1", 20.0), ("j2", 10.0), ("j3", 10.0)]
    runs = runs_of(
        ("r1", "j1", 10.0, "SUCCEEDED"),  # called twice
        ("r3", "j2", 10.0, "RUNNING"),  # never terminal
        ("r4", "j3", 10.0, "SUCCEEDED"),  # never called
        ("r5", "j3", 30.0, "SUCCEEDED"),  # for no expected fire
    )
    calls = [arrival("r1", 10, 11), arrival("r1", 10, 15, attempt=2), arrival("r5", 30, 31)]
    result = balance(expected, runs, calls)
    assert not result.ok
    assert not result.balanced  # 4 planned, 3 terminal
    assert (result.no_run, result.not_terminal, result.lost) == (1, 1, 2)
    assert result.duplicated == 1
    assert result.succeeded_without_call == 1
    assert result.unexpected_runs == 1


def test_a_failed_call_then_a_success_is_not_a_duplicate() -> None:
    runs = runs_of(("r1", "j1", 10.0, "SUCCEEDED"))
    calls = [arrival("r1", 10, 11, status=500), arrival("r1", 10, 13, attempt=2)]
    assert balance([("j1", 10.0)], runs, calls).ok


def test_runs_that_end_other_than_their_target_makes_them_are_flagged() -> None:
    runs = runs_of(
        ("r1", "ok", 1, "SUCCEEDED"),
        ("r2", "ok", 2, "DEAD"),
        ("r3", "fail", 1, "DEAD"),
        ("r4", "fail", 2, "SUCCEEDED"),
        ("r5", "fail", 3, "MISSED"),
        ("r6", "ok", 3, "FAILED"),
    )
    assert wrong_outcomes(runs, {"ok": "ok", "fail": "fail"}) == Counter(
        {"ok DEAD": 1, "fail SUCCEEDED": 1, "ok FAILED": 1}
    )


def test_expected_fires_count_clock_seconds_and_minutes() -> None:
    start = datetime(2026, 11, 23, 10, 0, 50, tzinfo=UTC)
    end = start + timedelta(minutes=10, seconds=-1)  # 10:00:50 .. 10:10:49
    assert len(expected_fires("*/20 * * * * *", start, end)) == 30
    assert [f.minute for f in expected_fires("2-59/6 * * * *", start, end)] == [2, 8]
    assert [(f.minute, f.second) for f in expected_fires("45 1-59/4 * * * *", start, end)] == [
        (1, 45),
        (5, 45),
        (9, 45),
    ]
    assert cron_matches("7/20 * * * * *", datetime(2026, 1, 1, 0, 0, 47, tzinfo=UTC))
    with pytest.raises(ValueError, match="day, month and weekday"):
        cron_matches("0 0 * * 1", start)
    with pytest.raises(ValueError, match="5 or 6 fields"):
        cron_matches("0 * * *", start)


def test_the_expected_fires_of_every_soak_job_agree_with_tickworks_schedules() -> None:
    """The soak counts fires with its own matcher; tickwork's croniter-based schedules must agree."""
    start = datetime(2026, 11, 23, 10, 0, 37, tzinfo=UTC)
    end = start + timedelta(minutes=12, seconds=-1)
    for job in job_mix(40):
        spec = JobSpec.model_validate(
            {
                "name": job.name,
                "schedule": {
                    "type": "cron",
                    "expression": job.expression,
                    "start_at": start.isoformat(),
                    "end_at": end.isoformat(),
                },
                "target": {"type": "http", "url": "https://example.com/hook"},
            }
        )
        tickwork_fires = list(iter_fire_times(spec.schedule, start - timedelta(seconds=1)))
        assert expected_fires(job.expression, start, end) == tickwork_fires, job


def test_the_job_mix_has_every_kind_and_stays_under_two_calls_a_second() -> None:
    mix = job_mix(300)
    assert Counter(job.kind for job in mix) == Counter({"ok": 225, "slow": 30, "fail": 30, "seconds": 15})
    start = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
    end = start + timedelta(minutes=10, seconds=-1)
    calls = sum(
        len(expected_fires(job.expression, start, end)) * (3 if job.kind == "fail" else 1) for job in mix
    )
    assert 1.0 <= calls / 600 <= 2.0


def test_memory_growth_starts_at_the_first_sample_from_minute_two() -> None:
    samples = [Sample(at, rss, None, 0, 0) for at, rss in ((0, 100), (90, 150), (120, 160), (600, 170))]
    assert memory_growth(samples, 120) == (samples[2], samples[3])
    assert memory_growth(samples[:3], 120) is None


def test_workers_restart_every_minute_and_the_planner_is_down_once() -> None:
    plan = restart_plan(10, FIRST_FIRE)
    assert [at - FIRST_FIRE for at, action in plan if action == "workers"] == [
        60 * m - 30 for m in range(1, 11)
    ]
    stops = [at for at, action in plan if action == "planner-stop"]
    starts = [at for at, action in plan if action == "planner-start"]
    assert len(stops) == len(starts) == 1 and starts[0] - stops[0] == 20
