"""Functions, planner rules and the worker's event source mapping."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match
from tickwork.config import Settings

from infra.config import LOG_RETENTION_DAYS
from infra.planner import planner_concurrency
from tests.infra.conftest import Synthesized

FUNCTIONS = ("api_function", "authorizer_function", "planner_function", "worker_function")


@pytest.mark.parametrize("attribute", FUNCTIONS)
def test_functions_are_arm64_python313_traced_with_json_logs_kept_for_the_retention(
    synthesized: Synthesized, attribute: str
) -> None:
    built = getattr(synthesized.stack, attribute)
    function = synthesized.resources[synthesized.logical_id(built.function)]["Properties"]
    log_group = synthesized.resources[synthesized.logical_id(built.log_group)]["Properties"]

    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    # The API is always traced; the run path (planner, worker) only when the stage asks for it
    run_path = attribute in ("planner_function", "worker_function")
    traced = not run_path or synthesized.stack.config.trace_run_path
    assert function["TracingConfig"] == {"Mode": "Active" if traced else "PassThrough"}
    assert function["LoggingConfig"]["LogFormat"] == "JSON"
    # Lambda's START and REPORT lines: kept for the API; for the run path only when the stage asks for them
    platform = not run_path or synthesized.stack.config.run_path_platform_logs
    assert function["LoggingConfig"]["SystemLogLevel"] == ("INFO" if platform else "WARN")
    assert function["LoggingConfig"]["LogGroup"] == {"Ref": synthesized.logical_id(built.log_group)}
    assert function["Handler"] == "handler.lambda_handler"
    assert len(function["Layers"]) == 2
    assert log_group["RetentionInDays"] == synthesized.stack.config.log_retention_days
    assert synthesized.stack.config.log_retention_days in LOG_RETENTION_DAYS


def test_functions_read_back_the_stage_settings(full_stack: Synthesized) -> None:
    config = full_stack.stack.config
    function = full_stack.resources[full_stack.logical_id(full_stack.stack.worker_function.function)]
    environment = function["Properties"]["Environment"]["Variables"]
    # Table and queue names are tokens until deployment; stand in for them to read the settings back.
    plain = {
        name: value if isinstance(value, str) else f"resolved-{name}" for name, value in environment.items()
    }
    settings = Settings.from_env(plain)
    assert settings.due_shards == config.due_shards
    assert settings.planner_horizon_seconds == config.planner_horizon_seconds
    assert settings.planner_lookahead_seconds == config.planner_lookahead_seconds
    assert settings.lease_margin_seconds == config.lease_margin_seconds
    assert settings.run_retention_days == config.run_retention_days
    assert settings.allow_private_targets is False
    assert environment["TICKWORK_RUN_QUEUE_URL"] == {
        "Ref": full_stack.logical_id(full_stack.stack.storage.run_queue)
    }
    assert settings.allowed_target_arns == config.allowed_target_arns
    # A webhook may take no longer than the worker may run, less the time to record the attempt.
    assert settings.max_target_timeout_seconds == config.worker_timeout_seconds - 10
    assert environment["TICKWORK_AWS_ACCOUNT_ID"] == {"Ref": "AWS::AccountId"}


def test_without_patterns_jobs_may_name_no_aws_target(default_stack: Synthesized) -> None:
    function = default_stack.resources[default_stack.logical_id(default_stack.stack.api_function.function)]
    environment = function["Properties"]["Environment"]["Variables"]
    assert environment["TICKWORK_ALLOWED_TARGET_ARNS"] == ""
    plain = {name: value if isinstance(value, str) else "resolved" for name, value in environment.items()}
    assert Settings.from_env(plain).allowed_target_arns == ()


def test_memory_and_timeouts_come_from_the_config(full_stack: Synthesized) -> None:
    config, stack = full_stack.stack.config, full_stack.stack
    for built, memory, timeout in (
        (stack.api_function, config.api_memory_mb, config.api_timeout_seconds),
        (stack.planner_function, config.planner_memory_mb, config.planner_timeout_seconds),
        (stack.worker_function, config.worker_memory_mb, config.worker_timeout_seconds),
    ):
        properties = full_stack.resources[full_stack.logical_id(built.function)]["Properties"]
        assert (properties["MemorySize"], properties["Timeout"]) == (memory, timeout)


def test_each_worker_function_has_its_own_mapping_on_each_run_queue_with_capped_concurrency(
    synthesized: Synthesized,
) -> None:
    """One mapping per worker function and priority's run queue: a backlog of one priority takes none of
    another's pollers or concurrency."""
    config = synthesized.stack.config
    run_queues = [
        {"Fn::GetAtt": [synthesized.logical_id(queue), "Arn"]}
        for queue in synthesized.stack.storage.run_queues.values()
    ]
    assert len({json.dumps(queue) for queue in run_queues}) == 3
    mappings = [
        mapping
        for mapping in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if "FunctionResponseTypes" in mapping["Properties"]  # the SQS mappings; the stream's is below
    ]
    assert len(mappings) == 3 * config.worker_functions == 3 * len(synthesized.stack.worker_functions)
    for mapping in mappings:
        properties = mapping["Properties"]
        assert properties["EventSourceArn"] in run_queues
        assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert properties["ScalingConfig"] == {"MaximumConcurrency": config.worker_max_concurrency}
        assert properties["BatchSize"] == config.worker_batch_size
    pairs = sorted(
        (mapping["Properties"]["FunctionName"]["Ref"], json.dumps(mapping["Properties"]["EventSourceArn"]))
        for mapping in mappings
    )
    assert pairs == sorted(
        (synthesized.logical_id(worker.function), json.dumps(queue))
        for worker in synthesized.stack.worker_functions
        for queue in run_queues
    )


def test_worker_functions_are_identical_but_for_their_role_and_log_group(full_stack: Synthesized) -> None:
    """The same code, settings and environment; the first keeps the construct ids of a lone worker."""
    workers = full_stack.stack.worker_functions
    assert len(workers) == full_stack.stack.config.worker_functions > 1
    assert full_stack.logical_id(workers[0].function).startswith("WorkerFunction")
    own = ("Role", "LoggingConfig")
    first, *others = (full_stack.resources[full_stack.logical_id(w.function)]["Properties"] for w in workers)
    for properties in others:
        assert {k: v for k, v in properties.items() if k not in own} == {
            k: v for k, v in first.items() if k not in own
        }
        assert properties["LoggingConfig"]["LogFormat"] == first["LoggingConfig"]["LogFormat"]
    assert len({str(full_stack.logical_id(w.role)) for w in workers}) == len(workers)


def test_one_rule_per_planner_group_owning_disjoint_shards(synthesized: Synthesized) -> None:
    config = synthesized.stack.config
    rules = synthesized.of_type("AWS::Events::Rule")
    assert len(rules) == config.planner_groups
    owned: list[int] = []
    planner = synthesized.logical_id(synthesized.stack.planner_function.function)
    for rule in rules.values():
        properties = rule["Properties"]
        assert properties["ScheduleExpression"] == "rate(1 minute)"
        assert properties["State"] == "ENABLED"
        (target,) = properties["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [planner, "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
        owned += json.loads(target["Input"])["shards"]
    assert sorted(owned) == list(range(config.due_shards))


def test_planner_cannot_pile_up_slow_ticks(synthesized: Synthesized) -> None:
    planner = synthesized.logical_id(synthesized.stack.planner_function.function)
    properties = synthesized.resources[planner]["Properties"]
    assert properties["ReservedConcurrentExecutions"] == planner_concurrency(synthesized.stack.config)
    assert properties["ReservedConcurrentExecutions"] == 2 * synthesized.stack.config.planner_groups
    synthesized.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": planner}, "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
    )


def test_layers_are_for_arm64_python313(default_stack: Synthesized) -> None:
    layers = default_stack.of_type("AWS::Lambda::LayerVersion")
    assert len(layers) == 2
    for layer in layers.values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    default_stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Layers": Match.array_with([{"Ref": Match.string_like_regexp("TickworkLayer")}])},
    )


def test_the_indexer_reads_the_runs_tables_stream_in_large_batches_retried_whole(
    synthesized: Synthesized,
) -> None:
    """Every change reaches the run index: a failed batch is retried whole (its chunks are written again, the
    same items), never split or skipped while the stream keeps it; removals are filtered out."""
    stack = synthesized.stack
    runs = synthesized.logical_id(stack.storage.runs)
    stream = {"Fn::GetAtt": [runs, "StreamArn"]}
    (mapping,) = [
        mapping["Properties"]
        for mapping in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if mapping["Properties"]["EventSourceArn"] == stream
    ]
    assert mapping["FunctionName"]["Ref"] == synthesized.logical_id(stack.indexer_function.function)
    assert mapping["BatchSize"] == 1000 and mapping["MaximumBatchingWindowInSeconds"] == 2
    assert mapping["MaximumRetryAttempts"] == -1 and mapping["BisectBatchOnFunctionError"] is False
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    (pattern,) = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert pattern == {"eventName": ["INSERT", "MODIFY"]}
    table = synthesized.resources[runs]["Properties"]
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
