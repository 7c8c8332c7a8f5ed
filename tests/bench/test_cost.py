"""The price arithmetic of ``bench.cost``, against dollars worked out by hand. Nothing here is timed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import cost
from bench._cost_workload import INDEX_BATCH, INDEX_WINDOW_S, INDEXER_MEMORY_MB
from bench.cost import Model

# No botocore CPU, so the duration is the hand-computed one below; the planner and the worker traced.
MODEL = Model(botocore_ms=0.0, trace_run_path=True, run_path_platform_logs=True)
# As deployed: StageConfig's trace_run_path (off).
DEPLOYED = Model(botocore_ms=0.0)


def shape() -> dict[str, Any]:
    """10 runs of a 10-second job in one worker invocation, and one planner tick that planned them."""
    return {
        "period": 10,
        "jobs": 10,
        "runs": 10,
        "worker": {
            "count": 1,
            "own_cpu_s": 0.02,
            "slept_s": 0.5,
            "log_bytes": 500,
            "log_lines": 1,
            "requests": {"dynamodb.Query": 20, "dynamodb.UpdateItem": 10, "dynamodb.PutItem": 10},
            "wru": {"dynamodb.UpdateItem": 10.0, "dynamodb.PutItem": 10.0},
            "index_wru": {},
            "rru": {"dynamodb.Query": 20.0},
        },
        "planner": {
            "count": 1,
            "own_cpu_s": 0.01,
            "slept_s": 0.0,
            "log_bytes": 1000,
            "log_lines": 2,
            "requests": {"dynamodb.Query": 20, "dynamodb.UpdateItem": 10, "sqs.SendMessageBatch": 1},
            "wru": {"dynamodb.UpdateItem": 10.0},
            "index_wru": {"dynamodb.UpdateItem": 20.0},
            "rru": {"dynamodb.Query": 10.0},
        },
        "esm": {"sqs.ReceiveMessage": 1, "sqs.DeleteMessageBatch": 1},
        "invocations_per_second": {"1": 1},
    }


CREATE = {
    "invocations": 2,
    "own_cpu_s": 0.0,
    "log_bytes": 0,
    "requests": {"dynamodb.TransactWriteItems": 1},
    "wru": {"dynamodb.TransactWriteItems": 4.0},
    "index_wru": {},
    "rru": {},
}


def test_the_workers_parts_per_run_are_the_published_prices_of_its_requests() -> None:
    parts = cost.shape_dollars(shape(), CREATE, MODEL)
    per_million = {part: value * 1e6 for part, value in parts.items()}
    # 20 WRU at $0.625 per million, over 10 runs
    assert per_million["DynamoDB writes"] == pytest.approx(1.25)
    # 20 RRU at $0.125 per million
    assert per_million["DynamoDB reads"] == pytest.approx(0.25)
    # the mapping's receive and delete, $0.40 per million each
    assert per_million["SQS requests"] == pytest.approx(0.08)
    # one invocation, $0.20 per million
    assert per_million["Lambda requests"] == pytest.approx(0.02)
    # 20 ms of CPU x 1769/512 = 69.102 ms; 40 DynamoDB requests x 5 ms = 200 ms; 500 ms waited; 0.5 ms
    # round-up: 0.769602 s x 0.5 GB = 0.384801 GB-s x $0.0000133334 = $5.13070e-6, over 10 runs
    assert per_million["Lambda duration"] == pytest.approx(0.513070, rel=1e-5)
    # 500 B written + 500 B of platform lines = 1e-6 GB x $0.50, over 10 runs
    assert per_million["CloudWatch Logs"] == pytest.approx(0.05)
    # one invocation in its second: traced, $5 per million traces
    assert per_million["X-Ray traces"] == pytest.approx(0.5)


def test_a_batch_handled_on_threads_is_billed_for_its_longest_chain_of_requests() -> None:
    threaded = shape()
    # Of the 40 DynamoDB requests, 5 were one after another on the busiest thread (the invoking one's and
    # the longest batch thread's), as the workload measures them
    threaded["worker"]["serial_requests"] = {"dynamodb": 5}
    parts = cost.shape_dollars(threaded, CREATE, MODEL)
    # 20 ms x 1769/512 = 69.102 ms; 5 x 5 ms = 25 ms; 500 ms waited; 0.5 ms: 0.594602 s x 0.5 GB x
    # $0.0000133334 = $3.96403e-6, over 10 runs
    assert parts["Lambda duration"] * 1e6 == pytest.approx(0.396403, rel=1e-5)
    # The CPU of every request still counts: botocore's 1 ms for each of the 40 adds 40 ms x 1769/512
    costly = Model(botocore_ms=1.0, trace_run_path=True, run_path_platform_logs=True)
    more = cost.shape_dollars(threaded, CREATE, costly)["Lambda duration"] - parts["Lambda duration"]
    assert more * 1e6 == pytest.approx(0.040 * 1769 / 512 * 0.5 * 13.3334 / 10, rel=1e-5)


def test_the_run_paths_functions_write_no_platform_lines_as_deployed() -> None:
    parts = cost.shape_dollars(shape(), CREATE, DEPLOYED)
    # the worker's 500 B written, no START and REPORT lines: 5e-7 GB x $0.50, over 10 runs
    assert parts["CloudWatch Logs"] * 1e6 == pytest.approx(0.025)
    planner = cost.planner_dollars(shape(), DEPLOYED)
    assert planner["CloudWatch Logs"] * 1e6 == pytest.approx(1000e-9 * 0.5 * 1e6 / 10)
    # the API's functions keep theirs (the create call: 2 invocations x 500 B)
    create = cost.function_dollars({**CREATE, "count": 2}, memory_mb=512, traces=1, model=DEPLOYED)
    assert create["CloudWatch Logs"] * 1e6 == pytest.approx(1000e-9 * 0.5 * 1e6)


def test_the_planner_share_is_its_tick_spread_over_the_runs_it_planned() -> None:
    planner = cost.planner_dollars(shape(), MODEL)
    per_million = {part: value * 1e6 for part, value in planner.items()}
    assert per_million["DynamoDB writes"] == pytest.approx(30 * 0.625 / 10)  # 10 table + 20 index WRU
    assert per_million["DynamoDB reads"] == pytest.approx(10 * 0.125 / 10)
    assert per_million["SQS requests"] == pytest.approx(0.40 / 10)
    assert per_million["Lambda requests"] == pytest.approx(0.20 / 10)
    # 10 ms x 1769/1024 = 17.275 ms; 30 DynamoDB x 5 ms; 1 SQS x 10 ms; 0.5 ms: 0.177775 s x 1 GB
    assert per_million["Lambda duration"] == pytest.approx(0.177775 * 13.3334 / 10, rel=1e-5)
    assert per_million["CloudWatch Logs"] == pytest.approx(1500e-9 * 0.5 * 1e6 / 10)
    assert per_million["X-Ray traces"] == pytest.approx(5.0 / 10)  # every tick is traced
    parts = cost.shape_dollars(shape(), CREATE, MODEL)
    assert parts["planner share"] == pytest.approx(sum(planner.values()))


def test_a_create_call_is_shared_by_thirty_days_of_runs() -> None:
    parts = cost.shape_dollars(shape(), CREATE, MODEL)
    # per million creates: API Gateway $3.50; 2 invocations $0.40; 4 WRU $2.50; one DynamoDB request (5 ms)
    # and 2 x 0.5 ms of round-up at 0.5 GB; 1,000 B of platform lines at $0.50 per GB; one trace $5.00
    create = 3.50 + 0.40 + 2.50 + 0.006 * 0.5 * 13.3334 + 1000e-9 * 0.5 * 1e6 + 5.00
    assert parts["API create share"] * 1e6 == pytest.approx(create / (30 * 86_400 / 10), rel=1e-6)


@pytest.mark.parametrize(
    ("per_second", "traces"),
    [
        ({"1": 100}, 100),  # one invocation a second: every one traced
        ({"2": 840}, 840 * 1.05),  # the first of each second, then 5% of the second one
        ({"12": 1, "1": 10}, 1 + 11 * 0.05 + 10),
    ],
)
def test_xray_records_one_trace_a_second_then_five_percent(per_second: dict[str, int], traces: float) -> None:
    assert cost.xray_traces(per_second, MODEL) == pytest.approx(traces)


def test_waiting_for_the_target_is_priced_once_per_invocation() -> None:
    slow = cost.shape_dollars(
        shape(),
        CREATE,
        Model(botocore_ms=0.0, trace_run_path=True, run_path_platform_logs=True, target_ms=10.0),
    )
    fast = cost.shape_dollars(shape(), CREATE, MODEL)
    # the batch's ten jobs call their targets side by side: one invocation waits 10 ms at 0.5 GB, over 10 runs
    extra = 0.010 * 0.5 * 0.0000133334 / 10
    assert slow["Lambda duration"] - fast["Lambda duration"] == pytest.approx(extra)


def test_before_figures_count_the_mappings_requests_per_invocation_not_the_scripts_polls() -> None:
    before = {
        "period": 60,
        "runs": 2,
        "invocations": 2,
        "ticks": 2,
        "requests": {
            "dynamodb.Query": 44,
            "dynamodb.GetItem": 6,
            "sqs.SendMessageBatch": 2,
            "sqs.ReceiveMessage": 120,
            "sqs.DeleteMessage": 2,
        },
        "wru": {"dynamodb.PutItem": 4.0},
        "index_wru": {"dynamodb.PutItem": 6.0},
        "rru": {"dynamodb.Query": 500.0, "dynamodb.GetItem": 6.0},
        "tick_requests": {"dynamodb.Query": 40, "sqs.SendMessageBatch": 2},
        "tick_wru": {"dynamodb.PutItem": 2.0},
        "tick_index_wru": {"dynamodb.PutItem": 6.0},
        "tick_rru": {"dynamodb.Query": 20.0},
    }
    like = shape()
    normalised = cost.before_shape(before, like)
    assert normalised["esm"] == {"sqs.ReceiveMessage": 2, "sqs.DeleteMessageBatch": 2}
    assert normalised["worker"]["requests"] == {"dynamodb.Query": 4, "dynamodb.GetItem": 6}
    assert normalised["worker"]["wru"] == {"dynamodb.PutItem": 2.0}
    assert normalised["worker"]["index_wru"] == {}
    assert normalised["worker"]["rru"] == {"dynamodb.Query": 480.0, "dynamodb.GetItem": 6.0}
    assert normalised["planner"]["requests"] == {"dynamodb.Query": 40, "sqs.SendMessageBatch": 2}
    # what moto cannot show comes from the present engine, per invocation and per tick
    assert normalised["worker"]["slept_s"] == pytest.approx(2 * 0.5)
    assert normalised["planner"]["log_bytes"] == pytest.approx(2 * 1000)


def test_with_part_of_the_cycle_metered_the_planner_share_is_spread_over_every_run_it_planned() -> None:
    metered = {**shape(), "planned_runs": 40}  # the worker metered 10 of the 40 runs the tick planned
    full = cost.planner_dollars(shape(), MODEL)
    part = cost.planner_dollars(metered, MODEL)
    for name, value in full.items():
        assert part[name] == pytest.approx(value / 4)
    parts = cost.shape_dollars(metered, CREATE, MODEL)
    assert parts["DynamoDB writes"] * 1e6 == pytest.approx(1.25)  # still the worker's 20 WRU over its 10 runs
    assert parts["planner share"] == pytest.approx(sum(part.values()))


def test_the_generated_blocks_of_docs_cost_md_are_those_of_the_saved_figures() -> None:
    figures = json.loads(cost.FIGURES.read_text())
    in_doc = cost.doc_blocks(cost.DOC.read_text())
    assert set(in_doc) == set(cost.BLOCKS)
    assert in_doc == cost.blocks(figures)


def test_the_saved_figures_show_no_transaction_and_no_index_write_by_the_worker() -> None:
    figures = json.loads(cost.FIGURES.read_text())
    for name, measured in figures["shapes"].items():
        worker = measured["worker"]
        assert not any("Transact" in op for op in worker["requests"]), name
        assert not worker["index_wru"], name
        assert not any("Transact" in op for op in measured["planner"]["requests"]), name


def test_the_saved_figures_read_the_tenant_once_every_ten_seconds_of_the_workloads_clock() -> None:
    """The workers' tenant cache keeps a tenant 10 s (the contract's most): on the workload's fake clock, so
    a shape whose worker invocations are 10 s apart or more reads it on every one of them, and the 1-second
    shapes once every 10 s. Run on the real clock the cache would never expire and the read go unpriced."""
    figures = json.loads(cost.FIGURES.read_text())
    for name, measured in figures["shapes"].items():
        reads = measured["worker"]["requests"].get("dynamodb.GetItem", 0)
        seconds = measured["worker_seconds"]
        assert reads >= seconds // max(measured["period"], 10), name


def shape_with_idle_ticks() -> dict[str, Any]:
    """``shape()`` with its tick split: two ticks, one that planned the 10 runs and one that planned nothing
    (the base), as the workload meters them."""
    figures = shape()
    idle = {
        "count": 1,
        "own_cpu_s": 0.004,
        "slept_s": 0.0,
        "log_bytes": 700,
        "log_lines": 2,
        "requests": {"dynamodb.Query": 20, "dynamodb.GetItem": 1},
        "wru": {},
        "index_wru": {},
        "rru": {"dynamodb.Query": 10.0, "dynamodb.GetItem": 0.5},
    }
    planning = {
        "count": 1,
        "own_cpu_s": 0.010,
        "slept_s": 0.45,
        "log_bytes": 760,
        "log_lines": 2,
        "requests": {
            "dynamodb.Query": 20,
            "dynamodb.GetItem": 1,
            "dynamodb.BatchGetItem": 1,
            "dynamodb.UpdateItem": 10,
            "sqs.SendMessageBatch": 1,
        },
        "wru": {"dynamodb.UpdateItem": 10.0},
        "index_wru": {"dynamodb.UpdateItem": 20.0},
        "rru": {"dynamodb.Query": 10.0, "dynamodb.GetItem": 0.5, "dynamodb.BatchGetItem": 5.0},
    }
    figures["planner"] = cost.combine(planning, idle, 1)
    figures["planner_idle"] = idle
    return figures


def test_the_deployed_run_path_records_no_traces() -> None:
    assert not DEPLOYED.trace_run_path  # StageConfig's default: the planner and the worker run PassThrough
    parts = cost.shape_dollars(shape(), CREATE, DEPLOYED)
    assert parts["X-Ray traces"] == 0
    assert cost.planner_dollars(shape(), DEPLOYED)["X-Ray traces"] == 0
    traced = cost.shape_dollars(shape(), CREATE, MODEL)
    assert traced["X-Ray traces"] * 1e6 == pytest.approx(0.5)


def test_a_run_is_charged_the_planning_tick_less_one_base_tick() -> None:
    figures = shape_with_idle_ticks()
    marginal = cost.planner_marginal(figures)
    assert marginal["count"] == 0  # the invocation is the base's
    assert marginal["requests"] == {
        "dynamodb.BatchGetItem": 1,
        "dynamodb.UpdateItem": 10,
        "sqs.SendMessageBatch": 1,
    }
    assert marginal["rru"] == {"dynamodb.BatchGetItem": 5.0}
    assert marginal["own_cpu_s"] == pytest.approx(0.006)
    assert marginal["slept_s"] == pytest.approx(0.45)
    assert marginal["log_bytes"] == pytest.approx(60)
    per_million = {k: v * 1e6 for k, v in cost.planner_dollars(figures, DEPLOYED).items()}
    assert per_million["DynamoDB writes"] == pytest.approx(30 * 0.625 / 10)
    assert per_million["DynamoDB reads"] == pytest.approx(5 * 0.125 / 10)
    assert per_million["SQS requests"] == pytest.approx(0.40 / 10)
    assert per_million["Lambda requests"] == 0
    # 6 ms x 1769/1024 = 10.365 ms; 11 DynamoDB x 5 ms; 1 SQS x 10 ms; 450 ms asleep; no round-up: 0.525365 s
    assert per_million["Lambda duration"] == pytest.approx(0.525365 * 13.3334 / 10, rel=1e-5)
    assert per_million["CloudWatch Logs"] == pytest.approx(60e-9 * 0.5 * 1e6 / 10)  # no platform lines
    assert per_million["X-Ray traces"] == 0


def test_all_in_the_whole_ticks_are_charged_to_the_runs_they_planned() -> None:
    figures = shape_with_idle_ticks()
    marginal = cost.shape_dollars(figures, CREATE, DEPLOYED)
    all_in = cost.shape_dollars(figures, CREATE, DEPLOYED, tick_included=True)
    base = cost.tick_dollars(cost.base_tick(figures) or {}, DEPLOYED)
    # two ticks = the planning tick's marginal work + two base ticks, over the 10 runs planned
    assert all_in["planner share"] - marginal["planner share"] == pytest.approx(2 * sum(base.values()) / 10)
    for part in cost.PARTS[:7]:
        assert all_in[part] == marginal[part]


def test_a_base_tick_is_its_measured_parts_at_the_published_prices() -> None:
    tick = cost.base_tick(shape_with_idle_ticks())
    assert tick is not None
    per_million = {k: v * 1e6 for k, v in cost.tick_dollars(tick, DEPLOYED).items()}
    assert per_million["DynamoDB reads"] == pytest.approx(10.5 * 0.125)
    assert per_million["Lambda requests"] == pytest.approx(0.20)
    # 4 ms x 1769/1024 = 6.910 ms; 21 DynamoDB x 5 ms; 0.5 ms round-up: 0.112410 s at 1 GB
    assert per_million["Lambda duration"] == pytest.approx(0.1124102 * 13.3334, rel=1e-5)
    # 700 B written; no START and REPORT lines (the planner's system log level is WARN)
    assert per_million["CloudWatch Logs"] == pytest.approx(700e-9 * 0.5 * 1e6)
    assert per_million["X-Ray traces"] == 0
    # a month of ticks per planner group
    month = sum(per_million.values()) * cost.TICKS_PER_MONTH / 1e6
    assert month == pytest.approx((1.3125 + 0.20 + 0.1124102 * 13.3334 + 0.35) * 43_200 / 1e6, rel=1e-5)


def test_a_smaller_worker_is_priced_from_the_same_cpu() -> None:
    small = cost.shape_dollars(shape(), CREATE, Model(botocore_ms=0.0, worker_memory_mb=256))
    # 20 ms x 1769/256 = 138.203 ms; 200 ms of DynamoDB; 500 ms waited; 0.5 ms: 0.838703 s x 0.25 GB
    assert small["Lambda duration"] * 1e6 == pytest.approx(0.838703 * 0.25 * 13.3334 / 10, rel=1e-5)


def test_before_is_priced_as_it_was_deployed_traced_and_waiting_half_a_second() -> None:
    before = cost.before_shape(
        {
            "period": 60,
            "runs": 2,
            "invocations": 2,
            "ticks": 2,
            "requests": {"dynamodb.Query": 4},
            "wru": {},
            "index_wru": {},
            "rru": {},
            "tick_requests": {},
            "tick_wru": {},
            "tick_index_wru": {},
            "tick_rru": {},
        },
        {**shape(), "worker": {**shape()["worker"], "slept_s": 0.05}},
    )
    assert before["worker"]["slept_s"] == pytest.approx(2 * 0.5)


def test_the_saved_figures_split_the_ticks_into_base_and_planning() -> None:
    figures = json.loads(cost.FIGURES.read_text())
    for name in cost._main_shapes(figures):
        measured = figures["shapes"][name]
        idle = measured["planner_idle"]
        assert idle["count"] == measured["ticks"] - 1, name  # one planning tick per cycle
        assert not idle["wru"] and not idle["index_wru"] and not idle["slept_s"], name
        assert "sqs.SendMessageBatch" not in idle["requests"], name
        marginal = cost.planner_marginal(measured)
        assert all(value >= 0 for value in marginal["requests"].values()), name


def fleet_with_indexer() -> dict[str, Any]:
    """A 1-minute fleet's window: 280 runs, each one stream record, indexed in 14 batches of 20 (one chunk
    item of 1 WRU each), 2 ms of own CPU and 200 B of logs per invocation."""
    figures = {**shape(), "period": 60, "jobs": 20, "runs": 280}
    figures["indexer"] = {
        "count": 14,
        "own_cpu_s": 0.028,
        "slept_s": 0.0,
        "log_bytes": 2800,
        "log_lines": 14,
        "requests": {"dynamodb.BatchWriteItem": 14},
        "wru": {"dynamodb.BatchWriteItem": 14.0},
        "index_wru": {},
        "rru": {},
        "records": 280,
        "window_s": 2.0,
        "chunk_entries": [20] * 14,
        "chunk_item_bytes": [262] * 14,
        "chunk_compressed_bytes": [185] * 14,
        "hour_item_bytes": 40,
    }
    return figures


def test_a_runs_indexer_share_is_its_invocations_chunk_writes_duration_and_logs() -> None:
    figures = fleet_with_indexer()
    # a fleet's deployment at 10 runs a second: a 2 s window holds 20 records, one invocation per 20 runs
    assert cost.records_per_invocation(figures) == pytest.approx(20)
    per_million = {k: v * 1e6 for k, v in cost.indexer_dollars(figures, DEPLOYED).items()}
    # a chunk item of 1 WRU per 20 runs, and one hour item per hour of the fleet's 1,200 runs
    assert per_million["DynamoDB writes"] == pytest.approx(0.625 / 20 + 0.625 / 1200)
    assert per_million["Lambda requests"] == pytest.approx(0.20 / 20)
    # per invocation: 2 ms x 1769/256 = 13.820 ms; one BatchWriteItem at 5 ms; 0.5 ms: 19.320 ms at 0.25 GB
    assert per_million["Lambda duration"] == pytest.approx(0.019320 * 0.25 * 13.3334 / 20, rel=1e-4)
    assert per_million["CloudWatch Logs"] == pytest.approx(200e-9 * 0.5 * 1e6 / 20)  # no platform lines
    assert per_million["SQS requests"] == 0 and per_million["DynamoDB reads"] == 0  # stream reads: free
    parts = cost.shape_dollars(figures, CREATE, DEPLOYED)
    assert parts["indexer share"] == pytest.approx(sum(cost.indexer_dollars(figures, DEPLOYED).values()))
    without = {**figures}
    del without["indexer"]
    assert sum(parts.values()) - sum(cost.shape_dollars(without, CREATE, DEPLOYED).values()) == pytest.approx(
        parts["indexer share"]
    )


def test_a_lone_jobs_indexer_runs_once_per_runs_writes_as_measured() -> None:
    figures = fleet_with_indexer()
    figures.update(jobs=1, runs=14)
    figures["indexer"].update(records=14, chunk_entries=[1] * 14)
    assert cost.records_per_invocation(figures) == 1
    per_million = {k: v * 1e6 for k, v in cost.indexer_dollars(figures, DEPLOYED).items()}
    assert per_million["Lambda requests"] == pytest.approx(0.20)
    assert per_million["DynamoDB writes"] == pytest.approx(0.625 + 0.625 / 60)  # its chunk, its hour's item


def test_the_indexer_is_priced_with_its_event_source_mappings_window_and_batch() -> None:
    infra = cost.DOC.parents[1] / "infra"
    mapping = (infra / "indexer.py").read_text()
    assert f"BATCH_SIZE = {INDEX_BATCH}\n" in mapping
    assert f"BATCHING_WINDOW = Duration.seconds({INDEX_WINDOW_S:g})\n" in mapping
    stack = (infra / "stack.py").read_text()
    function = stack[stack.index('function(\n            "indexer",') :]
    assert f"memory_mb={INDEXER_MEMORY_MB}," in function[: function.index(")")]
    assert "run_path=True," in function[: function.index(")")]  # PassThrough, system log level WARN


def test_every_shape_of_the_saved_figures_pays_the_indexer_and_the_document_shows_it() -> None:
    figures = json.loads(cost.FIGURES.read_text())
    model = cost.model_of(figures)
    summary = cost.doc_blocks(cost.DOC.read_text())["summary"].splitlines()
    for name in cost._main_shapes(figures):
        measured = figures["shapes"][name]
        indexer = measured["indexer"]
        # every run's write reached the indexer, which wrote its chunks
        assert indexer["records"] >= measured["runs"], name
        assert indexer["wru"]["dynamodb.BatchWriteItem"] >= len(indexer["chunk_entries"]) > 0, name
        rows = {(who, operation): values for who, operation, values in cost._operations(measured)}
        assert rows[("indexer", "dynamodb.BatchWriteItem")]["wru"] > 0, name
        parts = cost.shape_dollars(measured, figures["create"], model)
        invocations = indexer["records"] / cost.records_per_invocation(measured) / measured["runs"]
        chunk_writes = indexer["wru"]["dynamodb.BatchWriteItem"] / measured["runs"] * cost.WRU_PRICE
        assert parts["indexer share"] >= invocations * cost.LAMBDA_REQUEST_PRICE + chunk_writes, name
        # the figure the document shows for the shape is the total with the indexer's share in it
        label = "lone job" if measured["jobs"] == 1 else f"fleet of {measured['jobs']}"
        (row,) = [line for line in summary if f"| every {measured['period']} s | {label} |" in line]
        shown = row.split("|")[6].strip().strip("*")
        assert shown == cost._money(sum(parts.values())), name
        assert shown != cost._money(sum(parts.values()) - parts["indexer share"]), name
