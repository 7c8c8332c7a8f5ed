"""The capacity model's arithmetic, docs/capacity.md showing what the model computes, and the deployments it
names checked against the stack's own settings (``infra.config.StageConfig``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from bench.simulate import (
    BLOCKS,
    CAPACITY_DOC,
    TARGET_RATE,
    Burst,
    Deployment,
    Params,
    blocks,
    capacity,
    concurrency_at,
    doc_blocks,
    largest,
    needed,
    simulate_burst,
    steady_state,
    sustains,
    tick_jobs,
    tick_lateness_s,
    visible_times,
)
from infra.config import StageConfig


def refused_fields(deployment: Deployment) -> set[str]:
    """The StageConfig fields that refuse the deployment's values (empty: the stack accepts it)."""
    try:
        StageConfig.model_validate(deployment.stage_config())
    except ValidationError as error:
        return {str(issue["loc"][0]) for issue in error.errors()}
    return set()


def upper_bound(field: str) -> int:
    """StageConfig's ``le`` bound of an integer field."""
    for constraint in StageConfig.model_fields[field].metadata:
        if hasattr(constraint, "le"):
            return int(constraint.le)
    raise AssertionError(f"{field} has no upper bound")


def test_capacity_doc_shows_the_generated_tables() -> None:
    in_doc = doc_blocks(CAPACITY_DOC.read_text())
    assert set(in_doc) == set(BLOCKS)
    assert in_doc == blocks(), "docs/capacity.md is stale: run python -m bench.simulate --write-capacity"


def test_a_changed_parameter_changes_the_generated_tables() -> None:
    assert blocks(replace(Params(), worker_wru=Params().worker_wru + 1))["steady"] != blocks()["steady"]


def test_the_deployment_for_10000_runs_per_second_sustains_it() -> None:
    p = Params()
    target = needed(p)
    assert sustains(p, target, TARGET_RATE)
    # and nothing in it is larger than it needs to be: one group fewer, or one execution fewer, falls short
    assert not sustains(p, replace(target, planner_groups=target.planner_groups - 1), TARGET_RATE)
    fewer = replace(target, worker_max_concurrency=target.worker_max_concurrency - 1)
    assert capacity(p, fewer).worker * p.utilisation < TARGET_RATE


def test_the_stack_lacks_only_run_queues_for_10000_runs_per_second_as_capacity_md_says() -> None:
    """StageConfig accepts every setting 10,000 runs/s needs; what the stack lacks is more than one run queue
    with its mapping (capacity.md says so). When the stack gains them, this fails: update the doc."""
    p = Params()
    target = needed(p)
    assert refused_fields(target) == set()
    assert target.planner_groups <= upper_bound("planner_groups")
    assert target.due_shards <= upper_bound("due_shards")
    assert target.run_queues > 1  # the stack builds one run queue and one event source mapping
    assert target.worker_max_concurrency <= upper_bound("worker_max_concurrency") == p.mapping_max_concurrency
    text = CAPACITY_DOC.read_text()
    assert "run queue" in text and f"{target.run_queues} run queues" in text


def test_the_stacks_largest_deployment_is_accepted_and_carries_what_capacity_md_says() -> None:
    p = Params()
    top = largest(p)
    assert refused_fields(top) == set()
    assert top.planner_groups == upper_bound("planner_groups")
    assert top.worker_max_concurrency == upper_bound("worker_max_concurrency")
    # larger batches need a batching window, which the stack does not set: CDK refuses them
    assert top.worker_batch_size == 10
    assert top.run_queues == 1
    carried = capacity(p, top).bound() * p.utilisation
    assert sustains(p, top, carried) and not sustains(p, top, TARGET_RATE)
    assert f"{carried:,.0f}" in blocks(p)["deployment"]


def test_one_tenant_without_a_limit_has_no_ceiling_of_its_own_and_reaches_10000_runs_per_second() -> None:
    p = Params()
    target = needed(p)
    assert math.isinf(p.tenant_ceiling(None, target.worker_memory_mb))
    assert math.isinf(capacity(p, target).tenant)
    # one tenant's burst of 100,000 runs, on the deployment already running: drained at over 10,000 runs/s
    burst = Burst(
        "one tenant",
        planner_groups=target.planner_groups,
        planner_max_jobs_per_tick=target.planner_max_jobs_per_tick,
        start_concurrency=target.concurrency,
        max_concurrency=target.concurrency,
    )
    result = simulate_burst(p, burst)
    assert burst.jobs / result.max >= TARGET_RATE


def test_a_tenant_with_an_in_flight_limit_is_held_to_its_slots() -> None:
    p = Params()
    memory = 512
    ceilings = p.tenant_ceilings(100, memory)
    # Little's law: each run holds a slot from its claim to its release
    assert ceilings["slots held (limit / hold time)"] == pytest.approx(100 * 1000 / p.slot_hold_ms(memory))
    assert p.slot_hold_ms(memory) < p.service_ms(memory) + p.dynamodb_latency_ms
    # ten slots to an item; a claim is a read and a write conditional on the version read
    assert ceilings["claims per slot item (version round trips)"] == 10 * 1000 / (2 * p.dynamodb_latency_ms)
    # each item a partition of 1,000 WCU/s written twice a run, at up to 2 WRU
    assert ceilings["slot items' partitions (2 writes of 2 WRU)"] == 10 * p.partition_wcu / 4
    assert p.tenant_ceiling(100, memory) == min(ceilings.values())
    # the limit one tenant needs for the modelled rate: a whole number of slot items, and no fewer
    limit = p.limit_for(TARGET_RATE, memory)
    assert limit % 10 == 0
    assert p.tenant_ceiling(limit, memory) * p.utilisation >= TARGET_RATE
    assert p.tenant_ceiling(limit - 10, memory) * p.utilisation < TARGET_RATE
    limited = simulate_burst(
        p, Burst("c", jobs=5000, max_in_flight=100, mode="provisioned", start_concurrency=5000)
    )
    assert limited.max >= (5000 - 1) / p.tenant_ceiling(100, memory)


def test_one_time_jobs_write_their_tenants_job_count() -> None:
    p = Params()
    assert p.one_time_tenant_ceiling == p.partition_wcu / 4


def test_worker_executions_follow_littles_law() -> None:
    p = Params()
    target = needed(p, runs_per_second=1000)
    assert target.concurrency >= math.ceil(1000 * p.execution_ms_per_run(512, 10) / 1000 / p.utilisation)
    assert target.run_queues == 1
    slower = needed(replace(p, dynamodb_latency_ms=p.dynamodb_latency_ms * 2), runs_per_second=1000)
    assert slower.concurrency > target.concurrency


def test_the_wait_before_a_fire_holds_the_execution_once_a_batch() -> None:
    p = Params()
    assert p.execution_ms_per_run(512, 10) == pytest.approx(
        p.service_ms(512) + (p.batch_overhead_ms + p.early_wait_ms) / 10
    )
    assert p.execution_ms_per_run(512, 1) > p.execution_ms_per_run(512, 10)


def test_shards_keep_every_index_partition_under_its_share_of_the_limit() -> None:
    p = Params()
    target = needed(p)
    budget = p.partition_wcu * p.utilisation
    assert TARGET_RATE * p.planned_jobs_per_run * p.planner_index_wru_per_job / target.due_shards <= budget
    assert target.due_shards % target.planner_groups == 0  # every group owns as many shards


def test_a_fires_message_is_seen_as_late_as_its_tick_had_run_when_it_was_sent() -> None:
    p = Params()
    target = needed(p)
    mean, most = tick_lateness_s(p, target, TARGET_RATE)
    jobs = tick_jobs(p, target, TARGET_RATE)
    assert jobs == math.ceil(TARGET_RATE * p.tick_seconds / target.planner_groups)
    assert 0 < mean < most == pytest.approx(p.planner_send_offset_ms(jobs, 1024) / 1000 - 0.5)
    # more groups, smaller ticks, sooner sends
    more = replace(target, planner_groups=2 * target.planner_groups, due_shards=2 * target.due_shards)
    assert tick_lateness_s(p, more, TARGET_RATE)[1] < most
    # in a burst, no message is seen before the planner has sent it
    burst = Burst("b", jobs=2000, planner_groups=2)
    seen, last_sent = visible_times(p, burst)
    assert len(seen) == 2000 and seen == sorted(seen)
    assert max(seen) == pytest.approx(last_sent + burst.lead_seconds - 0.5)


def test_price_adds_up_from_the_units() -> None:
    p = Params()
    steady = steady_state(p, runs_per_second=100)
    seconds = 30 * 86_400
    units = (p.wru_per_run + p.index_wru_per_run) * p.price_wru + p.rru_per_run * p.price_rru
    assert steady.month_dynamodb == pytest.approx(seconds * 100 * units)
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
    slow = simulate_burst(p, Burst("slow", jobs=5000))
    fast = simulate_burst(
        p, Burst("fast", jobs=5000, mode="provisioned", start_concurrency=2000, max_concurrency=5000)
    )
    assert 0 < fast.p50 <= fast.p99 <= fast.max
    assert fast.p99 < slow.p99


def test_a_planner_that_finishes_late_delays_the_tail() -> None:
    p = Params()
    on_time = simulate_burst(p, Burst("a", jobs=20_000, planner_groups=64))
    late = simulate_burst(p, Burst("b", jobs=20_000, planner_groups=1, lead_seconds=10))
    assert on_time.planned_by < 0 < late.planned_by
    assert late.max >= late.planned_by
    assert late.p99 > on_time.p99
