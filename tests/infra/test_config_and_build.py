"""The stage config from CDK context, and the layer build's platform checks (offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tickwork.config import Settings

from infra.build_layers import (
    PLATFORM,
    PYTHON_VERSION,
    WrongPlatform,
    check_layer,
    pip_command,
    runtime_requirements,
)
from infra.config import (
    OTHER_RESOURCES,
    PLANNER_GROUPS_MAX,
    RESOURCES_PER_PLANNER_GROUP,
    RESOURCES_PER_WORKER_FUNCTION,
    STACK_RESOURCES_MAX,
    WORKER_FUNCTIONS_MAX,
    ConfigError,
    StageConfig,
    planner_groups_max,
)
from tests.infra.conftest import FULL_CONTEXT, synthesize


def _context(values: dict[str, Any]) -> Any:
    return values.get


def test_cdk_json_defaults_then_command_line_overrides() -> None:
    config = StageConfig.from_context(
        _context(
            {
                "tickwork": {"stage": "dev", "due_shards": 16},
                "tickwork:due_shards": "32",
                "tickwork:stage": "prod",
            }
        )
    )
    assert (config.stage, config.due_shards) == ("prod", 32)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("arn:aws:sqs:eu-west-1:123456789012:a-*", ("arn:aws:sqs:eu-west-1:123456789012:a-*",)),
        (
            "arn:aws:sqs:*:123456789012:a, arn:aws:lambda:eu-west-1:123456789012:function:f",
            ("arn:aws:sqs:*:123456789012:a", "arn:aws:lambda:eu-west-1:123456789012:function:f"),
        ),
        (
            '["arn:aws:states:us-east-1:123456789012:stateMachine:s"]',
            ("arn:aws:states:us-east-1:123456789012:stateMachine:s",),
        ),
        ("", ()),
    ],
)
def test_target_patterns_from_the_command_line(raw: str, expected: tuple[str, ...]) -> None:
    assert (
        StageConfig.from_context(_context({"tickwork:allowed_target_arns": raw})).allowed_target_arns
        == expected
    )


def test_a_lookahead_past_the_horizon_is_refused_naming_it() -> None:
    context = {"tickwork": {"planner_horizon_seconds": 300, "planner_lookahead_seconds": 600}}
    with pytest.raises(ConfigError, match=r"tickwork:planner_lookahead_seconds: .*exceed planner_horizon"):
        StageConfig.from_context(_context(context))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("allowed_target_arns", "arn:aws:s3:::bucket"),
        ("allowed_target_arns", "*"),
        ("log_retention_days", 31),
        ("worker_max_concurrency", 1),
        ("worker_timeout_seconds", 901),
        ("stage", "Prod!"),
        ("alarm_email", "not-an-address"),
        ("planner_horizon_seconds", 1000),
        ("planner_lookahead_seconds", 30),
        ("planner_groups", PLANNER_GROUPS_MAX + 1),
        ("worker_functions", 0),
        ("worker_functions", WORKER_FUNCTIONS_MAX + 1),
        ("no_such_setting", 1),
    ],
)
def test_bad_settings_fail_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"tickwork:{field}"):
        StageConfig.from_context(_context({"tickwork": {field: value}}))


def test_target_grants_group_patterns_by_action() -> None:
    config = StageConfig(
        allowed_target_arns=(
            "arn:aws:sqs:eu-west-1:123456789012:a",
            "arn:aws:sqs:eu-west-1:123456789012:b",
            "arn:aws:events:eu-west-1:123456789012:event-bus/default",
        )
    )
    assert config.target_grants == {
        "sqs:SendMessage": ["arn:aws:sqs:eu-west-1:123456789012:a", "arn:aws:sqs:eu-west-1:123456789012:b"],
        "events:PutEvents": ["arn:aws:events:eu-west-1:123456789012:event-bus/default"],
    }
    assert StageConfig().target_grants == {}


def test_worker_functions_take_room_from_planner_groups_naming_both() -> None:
    assert planner_groups_max(1) == PLANNER_GROUPS_MAX == 183
    most = planner_groups_max(WORKER_FUNCTIONS_MAX)
    assert StageConfig(worker_functions=WORKER_FUNCTIONS_MAX, planner_groups=most).worker_functions == 10
    context = {"tickwork": {"planner_groups": PLANNER_GROUPS_MAX, "worker_functions": 2}}
    with pytest.raises(
        ConfigError, match=r"tickwork:worker_functions: .*at most 178 planner_groups, not 183"
    ):
        StageConfig.from_context(_context(context))


@pytest.mark.parametrize("worker_functions", [1, WORKER_FUNCTIONS_MAX])
def test_the_most_planner_groups_keep_the_stack_within_cloudformations_500_resources(
    tmp_path: Path, worker_functions: int
) -> None:
    """Each planner group adds an EventBridge rule and its Lambda permission to the one stack, each worker
    function past the first its function, role, policy, log group, a mapping per run queue and two alarms."""
    groups = planner_groups_max(worker_functions)
    context = {
        **FULL_CONTEXT,
        "tickwork:planner_groups": groups,
        "tickwork:due_shards": 1024,
        "tickwork:worker_functions": worker_functions,
    }
    synthesized = synthesize(tmp_path, context)
    assert len(synthesized.of_type("AWS::Events::Rule")) == groups
    # the worker functions' mappings, one per priority's run queue, and the indexer's
    assert len(synthesized.of_type("AWS::Lambda::EventSourceMapping")) == 3 * worker_functions + 1
    budget = (
        OTHER_RESOURCES
        + RESOURCES_PER_PLANNER_GROUP * groups
        + RESOURCES_PER_WORKER_FUNCTION * (worker_functions - 1)
    )
    assert len(synthesized.resources) <= budget <= STACK_RESOURCES_MAX


@pytest.mark.parametrize(("shards", "groups"), [(16, 1), (16, 2), (16, 3), (32, 4), (4, 8)])
def test_shard_groups_are_disjoint_and_cover_every_shard(shards: int, groups: int) -> None:
    owned = StageConfig(due_shards=shards, planner_groups=groups).shard_groups()
    assert len(owned) == min(shards, groups)
    flat = [shard for group in owned for shard in group]
    assert sorted(flat) == list(range(shards))
    assert all(owned)


def test_settings_round_trip_through_the_environment() -> None:
    settings = Settings(run_queue_url="https://sqs/q", due_shards=8, allow_private_targets=True)
    assert Settings.from_env(settings.to_env()) == settings


def test_runtime_requirements_leave_out_what_lambda_provides() -> None:
    requirements = runtime_requirements()
    names = {requirement.split(">")[0].split("[")[0].split("=")[0].lower() for requirement in requirements}
    assert "boto3" not in names and "botocore" not in names
    assert {"aws-lambda-powertools", "croniter", "pydantic", "tzdata"} <= names


def test_pip_resolves_for_lambda_arm64_python313(tmp_path: Path) -> None:
    command = pip_command(tmp_path, ["croniter"])
    assert command[command.index("--platform") + 1] == PLATFORM == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == PYTHON_VERSION == "3.13"
    assert "--only-binary=:all:" in command
    assert command[command.index("--target") + 1] == str(tmp_path)


def _dist(root: Path, name: str, *tags: str) -> None:
    info = root / f"{name}.dist-info"
    info.mkdir(parents=True)
    (info / "WHEEL").write_text("Wheel-Version: 1.0\n" + "".join(f"Tag: {tag}\n" for tag in tags))


def test_layer_check_accepts_pure_and_arm64_cp313_wheels(tmp_path: Path) -> None:
    _dist(tmp_path, "croniter-7.0.0", "py3-none-any")
    _dist(
        tmp_path,
        "pydantic_core-2.0",
        "cp313-cp313-manylinux2014_aarch64",
        "cp313-cp313-manylinux_2_17_aarch64",
    )
    _dist(tmp_path, "stable-1.0", "cp39-abi3-manylinux_2_28_aarch64")
    assert set(check_layer(tmp_path)) == {
        "croniter-7.0.0.dist-info",
        "pydantic_core-2.0.dist-info",
        "stable-1.0.dist-info",
    }


@pytest.mark.parametrize(
    "tag",
    [
        "cp313-cp313-manylinux2014_x86_64",
        "cp312-cp312-manylinux2014_aarch64",
        "cp313-cp313-macosx_11_0_arm64",
        "py2-none-any",
    ],
)
def test_layer_check_refuses_other_platforms(tmp_path: Path, tag: str) -> None:
    _dist(tmp_path, "croniter-7.0.0", "py3-none-any")
    _dist(tmp_path, "wrong-1.0", tag)
    with pytest.raises(WrongPlatform, match=r"wrong-1\.0"):
        check_layer(tmp_path)


def test_layer_check_refuses_an_empty_layer(tmp_path: Path) -> None:
    with pytest.raises(WrongPlatform, match="no distributions"):
        check_layer(tmp_path)
