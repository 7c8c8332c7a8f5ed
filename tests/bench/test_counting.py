"""The benchmarks' bookkeeping: lost, duplicate and early fires, expected cron fires, requests per run and per
planned job. (Their timings are never asserted; the meter's units are checked in test_cost_meter.)"""

from __future__ import annotations

from datetime import UTC, datetime

from bench._common import percentile
from bench._cost_meter import Tally
from bench._moto import item_size
from bench.lag import Arrival, Result, _cron_expected
from bench.planner_scale import TickResult, per_job
from bench.worker_cpu import per_run


def test_lost_duplicate_and_early_fires_are_counted() -> None:
    arrivals = [
        Arrival("a", scheduled_for=100.0, received=100.5),
        Arrival("a", scheduled_for=100.0, received=101.0),  # a duplicate
        Arrival("b", scheduled_for=100.0, received=99.9),  # early
    ]
    result = Result("tickwork", "w", expected=3, arrivals=arrivals, setup_seconds=0)
    assert (result.unique, result.duplicates, result.lost, result.early) == (2, 1, 1, 1)
    assert result.lags_ms[0] == 500


def test_expected_cron_fires_follow_the_clock_seconds() -> None:
    # 10 s from hh:mm:58: every-second jobs fire 10 times, */5 at :00 and :05, */15 only at :00.
    start = datetime(2026, 11, 22, 9, 0, 58, tzinfo=UTC)
    end = datetime(2026, 11, 22, 9, 1, 7, tzinfo=UTC)
    assert _cron_expected(start, end) == 4 * 10 + 2 * 2 + 2 * 1
    quiet = datetime(2026, 11, 22, 9, 0, 1, tzinfo=UTC)
    assert _cron_expected(quiet, datetime(2026, 11, 22, 9, 0, 4, tzinfo=UTC)) == 4 * 4


def test_percentile_interpolates() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 99) == 9.9
    assert percentile([7.0], 99) == 7.0


def test_worker_requests_per_run_leave_the_event_source_mappings_calls_out() -> None:
    tally = Tally()
    tally.requests.update(
        {
            "dynamodb.Query": 20,
            "dynamodb.UpdateItem": 10,
            "dynamodb.PutItem": 10,
            "sqs.ReceiveMessage": 2,
            "sqs.DeleteMessage": 10,
            "sqs.SendMessage": 1,
        }
    )
    assert per_run(tally, 10) == {
        "dynamodb.PutItem": 1.0,
        "dynamodb.Query": 2.0,
        "dynamodb.UpdateItem": 1.0,
        "sqs.SendMessage": 0.1,
    }


def test_planner_requests_per_planned_job() -> None:
    result = TickResult(
        registered=1000,
        due_jobs=200,
        planned=200,
        items_read=200,
        requests={"dynamodb.UpdateItem": 200, "sqs.SendMessageBatch": 20, "dynamodb.Query": 20},
        wru=200,
        index_wru=400,
        rru=210,
        own_cpu_ms=80,
        aws_cpu_ms=1000,
        wall_ms=1100,
    )
    assert per_job(result, "dynamodb.UpdateItem") == 1.0
    assert per_job(result, "sqs.SendMessageBatch") == 0.1
    assert result.own_cpu_ms_per_job == 0.4


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
