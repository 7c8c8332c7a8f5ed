"""Least privilege, target allow-lists, cdk-nag and cfn-lint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import botocore.client
import pytest
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]
from tickwork import tables

from infra import nag
from infra.app import STAND_IN_ASSETS, BuildMissing, build_app, cli_context, dependencies_layer_dir
from infra.config import target_actions
from infra.storage import READ_ACTIONS
from tests.infra.conftest import FULL_CONTEXT, Synthesized

TARGET_ONLY_ACTIONS = {"lambda:InvokeFunction", "events:PutEvents", "states:StartExecution"}


def _statements(synthesized: Synthesized, attribute: str) -> list[dict[str, Any]]:
    return _statements_of(synthesized, getattr(synthesized.stack, attribute).role)


def _statements_of(synthesized: Synthesized, role: Any) -> list[dict[str, Any]]:
    role_id = synthesized.logical_id(role)
    statements: list[dict[str, Any]] = []
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    assert statements
    return statements


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def _tables_in(statement: dict[str, Any], synthesized: Synthesized) -> set[str]:
    names = {synthesized.logical_id(table): name for name, table in synthesized.stack.storage.tables.items()}
    return {name for logical_id, name in names.items() if logical_id in str(statement["Resource"])}


def _table_access(synthesized: Synthesized, attribute: str) -> dict[str, set[str]]:
    access: dict[str, set[str]] = {}
    for statement in _statements(synthesized, attribute):
        for table in _tables_in(statement, synthesized):
            access.setdefault(table, set()).update(_actions(statement))
    return access


def test_authorizer_only_reads_tenants(default_stack: Synthesized) -> None:
    access = _table_access(default_stack, "authorizer_function")
    assert set(access) == {tables.TENANTS.logical_name}
    assert access["tenants"] == set(READ_ACTIONS)


def test_planner_has_no_idempotency_table_and_sends_to_the_dead_run_queue_only(
    default_stack: Synthesized,
) -> None:
    """The planner's sweeper ends pool runs whose lease lapsed, and a run it ends DEAD owes its dead letter:
    it may send to that queue, and do nothing else with it."""
    access = _table_access(default_stack, "planner_function")
    assert set(access) == {tables.JOBS.logical_name, tables.RUNS.logical_name, tables.TENANTS.logical_name}
    dead = default_stack.logical_id(default_stack.stack.storage.dead_run_queue)
    on_dead = [
        statement
        for statement in _statements(default_stack, "planner_function")
        if dead in str(statement["Resource"])
    ]
    assert on_dead, "the planner cannot send a lapsed pool run's dead letter"
    for statement in on_dead:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all(
            action.startswith("sqs:SendMessage") or action.startswith("sqs:GetQueue") for action in actions
        ), actions


def test_every_worker_function_has_the_first_ones_grants(synthesized: Synthesized) -> None:
    """Each worker role holds the same statements; only the log group each writes to is its own."""
    stack = synthesized.stack

    def grants(index: int) -> str:
        worker = stack.worker_functions[index]
        text = json.dumps(_statements_of(synthesized, worker.role), sort_keys=True)
        return text.replace(synthesized.logical_id(worker.log_group), "<own log group>")

    first = grants(0)
    assert "<own log group>" in first and "sqs:ReceiveMessage" in first
    assert all(grants(index) == first for index in range(1, len(stack.worker_functions)))


def test_no_function_may_scan_or_use_wildcard_actions(synthesized: Synthesized) -> None:
    for attribute in ("api_function", "authorizer_function", "planner_function", "worker_function"):
        for statement in _statements(synthesized, attribute):
            for action in _actions(statement):
                assert action != "dynamodb:Scan" and not action.endswith(":*"), (attribute, action)
            assert "/index/*" not in str(statement["Resource"]), attribute


def test_index_access_names_each_index(default_stack: Synthesized) -> None:
    text = str(_statements(default_stack, "planner_function"))
    assert f"/index/{tables.DUE_INDEX}" in text
    assert f"/index/{tables.ATTENTION_INDEX}" in text
    assert f"/index/{tables.JOBS_BY_TENANT_INDEX}" in str(_statements(default_stack, "api_function"))


def test_without_patterns_the_worker_may_call_no_aws_target(default_stack: Synthesized) -> None:
    own_queues = {
        default_stack.logical_id(queue)
        for queue in (default_stack.stack.storage.run_queue, default_stack.stack.storage.dead_run_queue)
    }
    for statement in _statements(default_stack, "worker_function"):
        assert not (_actions(statement) & TARGET_ONLY_ACTIONS)
        if "sqs:SendMessage" in _actions(statement):
            assert any(queue in str(statement["Resource"]) for queue in own_queues)
            assert "arn:" not in str(statement["Resource"])


def test_with_patterns_the_worker_may_call_exactly_those(full_stack: Synthesized) -> None:
    granted: dict[str, set[str]] = {}
    for statement in _statements(full_stack, "worker_function"):
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        for action in _actions(statement) & {a for actions in target_actions().values() for a in actions}:
            granted.setdefault(action, set()).update(r for r in resources if isinstance(r, str))
    patterns = list(full_stack.stack.config.allowed_target_arns)
    assert granted == {
        "sqs:SendMessage": {patterns[0]},
        "lambda:InvokeFunction": {patterns[1]},
        "events:PutEvents": {patterns[2]},
        "states:StartExecution": {patterns[3]},
    }
    # Only the worker calls targets.
    for attribute in ("api_function", "planner_function", "authorizer_function"):
        for statement in _statements(full_stack, attribute):
            assert not (_actions(statement) & TARGET_ONLY_ACTIONS)


def test_cdk_nag_reports_nothing_unacknowledged(synthesized: Synthesized) -> None:
    (report,) = synthesized.validation_report["pluginReports"]
    assert report["pluginName"] == "AwsSolutions"
    assert report["conclusion"] == "success"
    assert report["violations"] == []
    # Every acknowledgement is on a single resource, never on the stack or the app.
    for violation in report["suppressedViolations"]:
        for construct in violation["violatingConstructs"]:
            assert construct["constructPath"].count("/") >= 2, construct["constructPath"]


def test_every_acknowledgement_gives_a_reason(
    default_stack: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    reasons: list[tuple[str, str]] = []
    original = nag.acknowledge

    def record(construct: Any, rule: str, reason: str) -> None:
        reasons.append((rule, reason))
        original(construct, rule, reason)

    monkeypatch.setattr(nag, "acknowledge", record)
    build_app(cdk.App(context={**cli_context({}), **FULL_CONTEXT, STAND_IN_ASSETS: "true"}))
    assert reasons
    assert all(len(reason) > 40 for _, reason in reasons)
    assert any(rule.startswith("IAM5[Resource::arn:aws:sqs") for rule, _ in reasons)


def test_cdk_nag_is_active(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the reviewed acknowledgements, synthesis fails on the findings."""
    monkeypatch.setattr("infra.app.suppress_reviewed_findings", lambda stack: None)
    app, _ = build_app(cdk.App(context={**cli_context({}), STAND_IN_ASSETS: "true"}, outdir=str(tmp_path)))
    with pytest.raises(RuntimeError, match=r"ValidationFailed(.|\n)*AwsSolutions-L1"):
        app.synth()


def test_cfn_lint_finds_no_error(synthesized: Synthesized) -> None:
    template = (synthesized.outdir / f"{synthesized.stack.stack_name}.template.json").read_text()
    matches = lint(template, config=ManualArgs(regions=["us-east-1", "eu-west-1"], ignore_checks=["W3005"]))
    assert [str(match) for match in matches] == []


def test_synthesis_calls_no_aws_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"AWS API called at synth time: {args[1:2]}")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    app, stack = build_app(
        cdk.App(context={**cli_context({}), STAND_IN_ASSETS: "true"}, outdir=str(tmp_path))
    )
    assert app.synth().get_stack_artifact(stack.artifact_id).template["Resources"]


def test_synthesis_without_the_build_says_to_run_make_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("infra.app.DEPENDENCIES_LAYER_DIR", tmp_path / "missing")
    with pytest.raises(BuildMissing, match="make build"):
        dependencies_layer_dir(cdk.App())


def test_run_as_a_module_the_app_reads_cdk_json_but_defers_to_the_cli() -> None:
    assert cli_context({})["tickwork"]["stage"] == "dev"
    assert cli_context({"CDK_CONTEXT_JSON": "{}"}) == {}
