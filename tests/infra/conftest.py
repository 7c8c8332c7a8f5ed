"""Synthesizes the stack once per configuration, offline, with a stand-in dependencies layer.

`stand_in_assets` replaces the layer that `make build` produces with an empty directory, so these tests need
neither the build nor the network. Context comes from cdk.json, as `cdk synth` reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii prints a banner about Node.js support on every start; the Makefile sets the same.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20,22")

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.app import STAND_IN_ASSETS, build_app, cli_context
from infra.stack import TickworkStack
from infra.web import ConsoleStack

# Everything optional switched on: target grants, several planner groups and worker functions, an alarm
# subscription.
FULL_CONTEXT: dict[str, Any] = {
    "tickwork:stage": "prod",
    "tickwork:planner_groups": 4,
    "tickwork:due_shards": 32,
    "tickwork:worker_max_concurrency": 200,
    "tickwork:worker_functions": 3,
    "tickwork:worker_batch_size": 5,
    "tickwork:max_receive_count": 7,
    "tickwork:trace_run_path": True,
    "tickwork:run_path_platform_logs": True,
    "tickwork:log_retention_days": 90,
    "tickwork:alarm_email": "oncall@example.com",
    "tickwork:pool_lapsed_leases_alarm": 3,
    "tickwork:pool_wait_alarm_seconds": 1800,
    "tickwork:allowed_target_arns": json.dumps(
        [
            "arn:aws:sqs:eu-west-1:123456789012:orders-*",
            "arn:aws:lambda:eu-west-1:123456789012:function:report",
            "arn:aws:events:eu-west-1:123456789012:event-bus/default",
            "arn:aws:states:eu-west-1:123456789012:stateMachine:billing-*",
        ]
    ),
}


@dataclass
class Synthesized:
    stack: TickworkStack
    template: Template
    document: dict[str, Any]
    outdir: Path
    console: ConsoleStack
    """The web console's stack, beside the scheduler's."""
    console_template: Template
    console_document: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources: dict[str, dict[str, Any]] = self.document["Resources"]
        return resources

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: resource for name, resource in self.resources.items() if resource["Type"] == kind}

    def logical_id(self, construct: Any) -> str:
        return str(self.stack.get_logical_id(construct.node.default_child))

    @property
    def validation_report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


def synthesize(tmp: Path, extra_context: dict[str, Any] | None = None) -> Synthesized:
    context = {**cli_context({}), STAND_IN_ASSETS: "true", **(extra_context or {})}
    app, stack = build_app(cdk.App(context=context, outdir=str(tmp)))
    assembly = app.synth()
    document = assembly.get_stack_artifact(stack.artifact_id).template
    console = next(child for child in app.node.children if isinstance(child, ConsoleStack))
    console_document = assembly.get_stack_artifact(console.artifact_id).template
    return Synthesized(
        stack=stack,
        template=Template.from_json(document),
        document=document,
        outdir=tmp,
        console=console,
        console_template=Template.from_json(console_document),
        console_document=console_document,
    )


@pytest.fixture(scope="session")
def default_stack(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The stack exactly as cdk.json configures it."""
    return synthesize(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def full_stack(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk-full"), FULL_CONTEXT)


@pytest.fixture(params=["default", "full"])
def synthesized(request: pytest.FixtureRequest) -> Synthesized:
    fixture: Synthesized = request.getfixturevalue(f"{request.param}_stack")
    return fixture
