"""The benchmarks' bookkeeping: lost, duplicate and early fires, expected cron fires, request and capacity
counting. (Their timings are never asserted.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bench._common import CallCounter, percentile
from bench._moto import item_size
from bench.lag import Arrival, Result, _cron_expected


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


def test_call_counter_counts_operations_and_units(dynamodb: Any) -> None:
    from tickwork import tables

    counter = CallCounter()
    counter.attach(dynamodb)
    runs = tables.RUNS.default_name
    key = {tables.RUNS_PK: {"S": "acme#r1"}, tables.RUNS_SK: {"S": "0"}}
    item = {**key, "body": {"S": "x" * 1500}}
    dynamodb.put_item(TableName=runs, Item=item)
    dynamodb.get_item(TableName=runs, Key=key, ConsistentRead=True)
    dynamodb.get_item(TableName=runs, Key=key)
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": runs, "Item": {**key, tables.RUNS_PK: {"S": "acme#r2"}}}}]
    )
    assert counter.calls == {"dynamodb.PutItem": 1, "dynamodb.GetItem": 2, "dynamodb.TransactWriteItems": 1}
    # One put plus a transaction item (2); a 1.5 KB item takes 2 WRU per write and 1 RRU per read.
    assert counter.writes[runs] == 3
    assert counter.reads[runs] == 1.5
    wru, rru = counter.capacity_units({runs: item_size(item)})
    assert (wru, rru) == (6.0, 1.5)


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"pk": {"S": "abc"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
