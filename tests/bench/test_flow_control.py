"""The flow-control benchmarks' bookkeeping on made-up arrivals: per-tenant counts, where a run's lag went,
starts per second under a throttle, and the goals. (Their timings are never asserted.)"""

from __future__ import annotations

from datetime import UTC, datetime

from bench._flow import Arrival, Tally, Wait, tally, waits
from bench.fairness import Figures, Trial, allowed_p99, faults, quiet_fires
from bench.fairness import markdown as fairness_markdown
from bench.priorities import Figures as PriorityFigures
from bench.priorities import Trial as PriorityTrial
from bench.priorities import markdown as priorities_markdown
from bench.throttle import Trial as ThrottleTrial
from bench.throttle import markdown as throttle_markdown
from bench.throttle import most_in_one_second, starts_per_second, steady_rate


def test_a_tenants_arrivals_are_counted_against_the_runs_it_expected() -> None:
    arrivals = [
        Arrival("quiet", "a", scheduled_for=100.0, received=100.2),
        Arrival("quiet", "a", scheduled_for=100.0, received=101.0),  # a duplicate
        Arrival("quiet", "b", scheduled_for=101.0, received=100.9),  # early
        Arrival("quiet", "x", scheduled_for=100.0, received=100.1),  # not one of the tenant's
    ]

    result = tally(arrivals, {"a", "b", "c"})

    assert (result.expected, result.received, result.duplicates, result.lost) == (3, 2, 1, 1)
    assert (result.unexpected, result.early) == (1, 1)
    assert [round(lag) for lag in result.lags_ms] == [200, -100]  # each expected run's first arrival
    assert (result.first, result.last) == (100.1, 101.0)
    assert faults(result) == 4


def test_a_lag_is_split_into_planner_queue_and_worker() -> None:
    due = 100.0
    # Sent 0.5 s late, received 1 s after that, called 0.1 s after the receive.
    late = waits(Arrival("q", "a", due, 101.6), sent_ms=100_500, received=[101.5])
    assert late is not None
    assert (round(late.planner), round(late.queue), round(late.worker)) == (500, 1000, 100)
    # Sent ahead, received before its time: the worker sleeps out the rest, nothing waits in the queue.
    early = waits(Arrival("q", "b", due, 100.05), sent_ms=90_000, received=[99.4])
    assert early is not None
    assert (early.planner, early.queue, round(early.worker)) == (0.0, 0.0, 50)
    # A throttled run: the last receive before the call counts.
    again = waits(Arrival("q", "c", due, 102.3), sent_ms=99_000, received=[100.0, 102.2, 105.0])
    assert again is not None
    assert round(again.queue) == 2200
    assert waits(Arrival("q", "d", due, 101.0), sent_ms=None, received=[100.5]) is None


def test_the_fairness_goal_is_twice_the_baseline_or_a_second() -> None:
    assert allowed_p99(12.0) == 1000.0
    assert allowed_p99(800.0) == 1600.0


def test_the_quiet_tenants_fires_spread_over_ten_seconds() -> None:
    due = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)
    fires = quiet_fires(due)
    assert len(fires) == 50
    assert fires[0] == due
    assert (fires[-1] - due).total_seconds() == 9.8


def test_starts_are_counted_per_second_from_the_due_time() -> None:
    due = 1000.0
    times = [due + 0.05] * 11 + [due + 1.0 + index / 10 for index in range(10)] + [due + 2.5, due - 0.2]
    counts = starts_per_second(times, due)
    assert counts == [12, 10, 1]  # an early start counts in the first second
    assert starts_per_second([], due) == []


def test_the_most_starts_in_any_one_second_window() -> None:
    # 11 at once, then one every 100 ms: a window [t, t+1) holds 20 at most.
    times = [0.0] * 11 + [0.1 * index for index in range(1, 40)]
    assert most_in_one_second(times) == 20
    assert most_in_one_second([]) == 0


def test_the_steady_rate_leaves_out_the_first_and_the_last_second() -> None:
    assert steady_rate([20, 10, 9, 11, 10, 3]) == 10.0
    assert steady_rate([20, 4]) != steady_rate([20, 4])  # nan: no full second after the first


def _quiet_trial(flood_runs: int, lag_ms: float, *, fair: bool = True) -> Trial:
    due = 1000.0
    quiet = tally(
        [
            Arrival("quiet", f"q{index}", due + index / 5, due + index / 5 + lag_ms / 1000)
            for index in range(50)
        ],
        {f"q{index}" for index in range(50)},
    )
    flood = (
        tally(
            [Arrival("flood", f"f{index}", due, due + index / 150) for index in range(flood_runs)],
            {f"f{index}" for index in range(flood_runs)},
        )
        if flood_runs
        else None
    )
    wait = Wait(planner=0.0, queue=lag_ms / 2, worker=lag_ms / 2)
    return Trial(flood_runs, fair, quiet, flood, 20.0, True, due, (wait,) * 50)


def test_the_fairness_section_states_the_goal_from_the_medians() -> None:
    figures = Figures(
        flood=[_quiet_trial(300, lag) for lag in (200.0, 250.0, 900.0)],
        alone=[_quiet_trial(0, lag) for lag in (5.0, 10.0, 8.0)],
        send_order=_quiet_trial(300, 2500.0, fair=False),
        listing_ms=(0.45, 0.15),
    )

    text = fairness_markdown(figures, "python -m bench --only fairness")
    flat = " ".join(text.split())  # the paragraphs are wrapped

    assert "| median | 250 | 250 | 8 | 8 | 31.2x |" in text
    assert "(1,000 ms)" in flat and ": met (250 ms, median of 3; the worst trial 900 ms;" in flat
    assert "p99 2,500 ms" in flat
    assert "takes 0.45 ms with the flood's 300 messages visible, against 0.15 ms in send order" in flat
    slow = Figures(flood=[_quiet_trial(300, 1500.0)] * 3, alone=figures.alone, send_order=None)
    assert ": not met (1,500 ms" in " ".join(fairness_markdown(slow, "c").split())


def _throttle_trial(counts: list[int]) -> ThrottleTrial:
    due = 1000.0
    times = [due + second + 0.05 for second, count in enumerate(counts) for _ in range(count)]
    arrivals = [Arrival("paced", f"r{index}", due, moment) for index, moment in enumerate(times)]
    result = tally(arrivals, {f"r{index}" for index in range(sum(counts))})
    return ThrottleTrial(
        result,
        tuple(starts_per_second(times, due)),
        most_in_one_second(times),
        1.0,
        True,
        due,
        2 * len(times),
    )


def test_the_throttle_section_states_the_goal() -> None:
    trials = [_throttle_trial([11] + [10] * 18 + [9])] * 3

    text = throttle_markdown(trials, "python -m bench --only throttle")
    flat = " ".join(text.split())  # the paragraphs are wrapped

    assert ": met (11 in the first second, median of 3; 10 a second after;" in flat
    assert "Per second from T, trial 1: 11, 10," in text
    over = [_throttle_trial([25] + [10] * 17 + [5])] * 3
    assert ": not met (25 in the first second" in " ".join(throttle_markdown(over, "c").split())


def test_a_window_over_the_burst_is_reported_as_such() -> None:
    due = 1000.0
    # The first second's 11 called late (T+0.3), the next second's 10 as soon as they came back (T+1.05).
    times = [due + 0.3] * 11 + [due + 1.05] * 10 + [due + 2.05 + index / 100 for index in range(9)]
    arrivals = [Arrival("paced", f"r{index}", due, moment) for index, moment in enumerate(times)]
    trial = ThrottleTrial(
        tally(arrivals, {f"r{index}" for index in range(len(times))}),
        tuple(starts_per_second(times, due)),
        most_in_one_second(times),
        1.0,
        True,
        due,
        len(times),
    )
    assert trial.most_in_a_second == 21

    flat = " ".join(throttle_markdown([trial], "c").split())

    assert "holds the most starts, 21 here, one over the burst" in flat


# --- priorities ---------------------------------------------------------------------------------------------
def _tally(lags_ms: list[float], lost: int = 0) -> Tally:
    return Tally(
        expected=len(lags_ms) + lost,
        received=len(lags_ms),
        duplicates=0,
        lost=lost,
        unexpected=0,
        early=0,
        lags_ms=tuple(lags_ms),
        first=0.0,
        last=max(lags_ms, default=0.0) / 1000,
    )


def _pair(high_ms: float, low_ms: list[float], plain_low_ms: list[float], lost: int = 0) -> PriorityFigures:
    ranked = PriorityTrial(2000, True, _tally(low_ms, lost), _tally([high_ms] * 10), True, 0.0)
    plain = PriorityTrial(2000, False, _tally(plain_low_ms), _tally([9000.0] * 10), True, 0.0)
    return PriorityFigures([ranked], [plain])


def test_the_priorities_goal_is_met_only_with_high_runs_within_2_s_and_every_low_run_delivered() -> None:
    met = priorities_markdown(_pair(105.0, [5000.0, 9000.0], [5100.0, 9100.0]), "cmd")
    assert "then 10 one-time `high`" in " ".join(met.split())
    assert ": met." in " ".join(met.split())
    late = priorities_markdown(_pair(2500.0, [5000.0], [5000.0]), "cmd")
    assert ": not met." in " ".join(late.split())
    lost = priorities_markdown(_pair(105.0, [5000.0], [5000.0], lost=1), "cmd")
    assert ": not met." in " ".join(lost.split())
    # a low run 301 s later than without priorities breaks the bound
    starved = priorities_markdown(_pair(105.0, [5000.0, 320_000.0], [5000.0, 9000.0]), "cmd")
    assert ": not met." in " ".join(starved.split())
