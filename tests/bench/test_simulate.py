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
    seen_after_fire_s,
    simulate_burst,
    steady_state,
    sustains,
    tick_jobs,
    tick_lateness_s,
    visible_times,
)
from infra.config import StageConfig, planner_groups_max


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


def test_the_stack_expresses_10000_runs_per_second_as_capacity_md_says() -> None:
    """StageConfig accepts every setting 10,000 runs/s needs: 3 worker functions, each with its mapping at
    861 executions, within every limit the model states."""
    p = Params()
    target = needed(p)
    assert refused_fields(target) == set()
    assert (target.worker_functions, target.worker_max_concurrency) == (3, 861)
    assert target.worker_functions <= upper_bound("worker_functions")
    assert target.worker_max_concurrency <= upper_bound("worker_max_concurrency") == p.mapping_max_concurrency
    # one function fewer would need mappings over 1,000
    assert math.ceil(target.concurrency / (target.worker_functions - 1)) > p.mapping_max_concurrency
    assert target.planner_groups <= planner_groups_max(target.worker_functions)
    assert target.due_shards <= upper_bound("due_shards")
    assert target.in_flight <= p.queue_max_in_flight
    text = CAPACITY_DOC.read_text()
    assert f"`worker_functions` {target.worker_functions}" in text
    assert f"{target.worker_max_concurrency} executions each" in text


def test_the_stacks_largest_deployment_is_accepted_and_carries_what_capacity_md_says() -> None:
    p = Params()
    top = largest(p)
    assert refused_fields(top) == set()
    assert top.worker_max_concurrency == upper_bound("worker_max_concurrency")
    assert top.planner_groups == planner_groups_max(top.worker_functions)
    # a group more does not fit beside its worker functions
    assert refused_fields(replace(top, planner_groups=top.planner_groups + 1)) == {"worker_functions"}
    # no other count of worker functions, with the groups it leaves room for, carries more
    for functions in range(1, upper_bound("worker_functions") + 1):
        groups = planner_groups_max(functions)
        other = replace(top, worker_functions=functions, planner_groups=groups, due_shards=groups)
        assert refused_fields(other) == set()
        assert capacity(p, other).bound() <= capacity(p, top).bound()
    # larger batches need a batching window, which the stack does not set: CDK refuses them
    assert top.worker_batch_size == 10
    assert top.in_flight <= upper_bound("worker_functions") * p.mapping_max_concurrency * 10
    assert upper_bound("worker_functions") * p.mapping_max_concurrency * 10 <= p.queue_max_in_flight
    carried = capacity(p, top).bound() * p.utilisation
    assert sustains(p, top, carried) and sustains(p, top, TARGET_RATE)
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
    assert target.worker_functions == 1
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


def test_each_chunk_of_a_long_pass_counts_its_delays_from_when_it_goes_out() -> None:
    p = Params()
    target = needed(p)
    jobs = tick_jobs(p, target, TARGET_RATE)
    assert jobs == math.ceil(TARGET_RATE * p.tick_seconds / target.planner_groups)
    sends = p.planner_sends(jobs, 1024)
    assert len(sends) == jobs
    assert sends[-1][0] == pytest.approx(p.planner_send_offset_ms(jobs, 1024))
    # a message goes out after the reads and at most one chunk's ten requests after its delay's instant
    late = [sent - counted_from for sent, counted_from in sends]
    read = p.planner_read_ms(jobs)
    assert min(late) == pytest.approx(read + p.send_request_ms)
    assert max(late) == pytest.approx(read + 10 * p.send_request_ms)
    mean, most = tick_lateness_s(p, target, TARGET_RATE)
    assert most == pytest.approx(max(late) / 1000) and most < 0.5
    assert 0 < mean < most
    # counted from the tick's start, as they were before the chunks, the last would be seen seconds late
    assert p.planner_send_offset_ms(jobs, 1024) / 1000 - 0.5 > 5


def test_a_short_pass_counts_its_delays_from_the_tick_start() -> None:
    """Under SEND_DRIFT (half a second) of planning and sending, a chunk's delays count from the tick's
    start: its messages are late by the pass so far, which stays under the drift and one chunk."""
    p = Params()
    sends = p.planner_sends(300, 1024)
    assert all(counted_from == 0 for _, counted_from in sends)
    assert max(sent for sent, _ in sends) < p.planner_read_ms(300) + 500 + 10 * p.send_request_ms


@pytest.mark.parametrize(("late", "seen"), [(0.0, 0.0), (0.5, 0.125), (1.0, 0.5), (3.0, 2.5)])
def test_a_message_sent_late_is_seen_late_less_the_rounding(late: float, seen: float) -> None:
    assert seen_after_fire_s(late) == pytest.approx(seen)


def test_in_a_burst_no_message_is_seen_before_it_was_sent_or_long_after_its_fire() -> None:
    p = Params()
    burst = Burst("b", jobs=2000, planner_groups=2)
    seen, last_sent = visible_times(p, burst)
    assert len(seen) == 2000 and seen == sorted(seen)
    assert last_sent == pytest.approx(-burst.lead_seconds + p.planner_send_offset_ms(1000, 1024) / 1000)
    most = max(sent - counted_from for sent, counted_from in p.planner_sends(1000, 1024)) / 1000
    assert max(seen) == pytest.approx(most - p.early_wait_ms / 1000)


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
    # each worker function's mapping scales on its own
    three = Burst("m", start_concurrency=15, max_concurrency=3000, mappings=3)
    assert concurrency_at(p, three, 60) == 915
    assert concurrency_at(p, three, 3600) == 3000


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
