"""The capacity model's arithmetic, and docs/capacity.md showing what the model computes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench.simulate import (
    CAPACITY_DOC,
    Burst,
    Params,
    blocks,
    concurrency_at,
    doc_blocks,
    power_of_two,
    simulate_burst,
    steady_state,
)


def test_capacity_doc_shows_the_generated_tables() -> None:
    in_doc = doc_blocks(CAPACITY_DOC.read_text())
    assert set(in_doc) == {"inputs", "steady", "burst"}
    assert in_doc == blocks(), "docs/capacity.md is stale: run python -m bench.simulate --write-capacity"


def test_a_changed_parameter_changes_the_generated_tables() -> None:
    assert blocks(replace(Params(), worker_wru=Params().worker_wru + 1))["steady"] != blocks()["steady"]


def test_worker_concurrency_follows_littles_law() -> None:
    p = Params()
    steady = steady_state(p, runs_per_second=1000)
    assert steady.worker_concurrency == math.ceil(1000 * p.service_ms / 1000 / p.utilisation)
    double = steady_state(replace(p, dynamodb_latency_ms=p.dynamodb_latency_ms * 2), runs_per_second=1000)
    assert double.worker_concurrency > steady.worker_concurrency


def test_shards_keep_every_index_partition_under_its_share_of_the_limit() -> None:
    p = Params()
    steady = steady_state(p)
    budget = p.partition_wcu * p.utilisation
    assert steady.runs_per_second * p.gsi_wru_open_runs / steady.attention_shards <= budget
    assert steady.runs_per_second * p.gsi_wru_due / steady.due_shards <= budget
    assert steady.due_shards >= steady.planner_groups
    assert steady.min_tenants * p.tenant_runs_per_second * p.utilisation >= steady.runs_per_second


def test_power_of_two_rounds_up() -> None:
    assert [power_of_two(value) for value in (0.3, 1, 2, 3, 64, 65)] == [1, 1, 2, 4, 64, 128]


def test_price_adds_up_from_the_units() -> None:
    p = Params()
    steady = steady_state(p, runs_per_second=100)
    wru = p.worker_wru + p.planner_wru_per_job + p.gsi_wru
    rru = p.worker_rru + p.planner_rru_per_job
    seconds = 30 * 86_400
    assert steady.month_dynamodb == pytest.approx(seconds * 100 * (wru * p.price_wru + rru * p.price_rru))
    assert steady.per_million_runs == pytest.approx(steady.month_total / (100 * seconds) * 1e6)


def test_scaling_modes_ramp_at_their_published_rates() -> None:
    p = Params()
    standard = Burst("s", start_concurrency=5, max_concurrency=10_000)
    provisioned = Burst("p", mode="provisioned", start_concurrency=5, max_concurrency=50_000)
    assert concurrency_at(p, standard, 60) == 305
    assert concurrency_at(p, provisioned, 60) == 1005
    assert concurrency_at(p, provisioned, 3600) == p.provisioned_max_concurrency


def test_no_run_starts_before_its_time_and_more_concurrency_lowers_the_tail() -> None:
    p = Params()
    slow = simulate_burst(p, Burst("slow", jobs=5000, tenants=100))
    fast = simulate_burst(
        p,
        Burst(
            "fast", jobs=5000, tenants=100, mode="provisioned", start_concurrency=2000, max_concurrency=5000
        ),
    )
    assert 0 < fast.p50 <= fast.p99 <= fast.max
    assert fast.p99 < slow.p99


def test_one_tenant_is_held_to_its_counter_items_rate() -> None:
    p = Params()
    result = simulate_burst(p, Burst("one", jobs=5000, tenants=1, mode="provisioned", start_concurrency=5000))
    assert result.max >= (5000 - 1) / p.tenant_runs_per_second


def test_a_planner_that_finishes_late_delays_the_tail() -> None:
    p = Params()
    on_time = simulate_burst(p, Burst("a", jobs=20_000, tenants=100, planner_groups=16))
    late = simulate_burst(p, Burst("b", jobs=20_000, tenants=100, planner_groups=1, lead_seconds=10))
    assert on_time.planned_by < 0 < late.planned_by
    assert late.max >= late.planned_by
    assert late.p99 > on_time.p99


def test_a_counted_tenant_is_held_to_its_counter_items_partition() -> None:
    p = Params()
    assert p.counted_tenant_runs_per_second == p.partition_wcu / p.counter_wru_per_run
    assert p.counted_tenant_runs_per_second < p.tenant_runs_per_second
    counted = simulate_burst(
        p, Burst("c", jobs=5000, tenant_counter=True, mode="provisioned", start_concurrency=5000)
    )
    assert counted.max >= (5000 - 1) / p.counted_tenant_runs_per_second
