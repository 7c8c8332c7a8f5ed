"""The CDK app: `cdk synth` / `cdk deploy` run this (see cdk.json). It calls no AWS API at synth time."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import CONTEXT_PREFIX, StageConfig
from infra.functions import REPO_ROOT
from infra.nag import suppress_console_findings, suppress_reviewed_findings
from infra.stack import TickworkStack
from infra.web import ASSETS, CONSOLE_DIST, ConsoleStack

# `make build` writes the third-party layer here.
DEPENDENCIES_LAYER_DIR = REPO_ROOT / "build" / "layers" / "dependencies"
# With this context flag the layer is an empty stand-in, so tests synthesize without `make build`.
STAND_IN_ASSETS = f"{CONTEXT_PREFIX}stand_in_assets"


class BuildMissing(RuntimeError):
    """The dependencies layer or the web console has not been built."""


def dependencies_layer_dir(app: cdk.App) -> Path:
    if str(app.node.try_get_context(STAND_IN_ASSETS)).lower() == "true":
        stand_in = Path(tempfile.mkdtemp(prefix="tickwork-layer-"))
        (stand_in / "python").mkdir()
        return stand_in
    if not (DEPENDENCIES_LAYER_DIR / "python").is_dir():
        raise BuildMissing(f"{DEPENDENCIES_LAYER_DIR} is missing: run `make build` first")
    return DEPENDENCIES_LAYER_DIR


def console_stack_name(stage: str) -> str:
    return f"tickwork-{stage}-console"


def console_dist_dir(app: cdk.App) -> Path:
    """The built web console that the stack publishes; a one-page stand-in with ``stand_in_assets``."""
    if str(app.node.try_get_context(STAND_IN_ASSETS)).lower() == "true":
        stand_in = Path(tempfile.mkdtemp(prefix="tickwork-console-"))
        (stand_in / ASSETS).mkdir()
        (stand_in / ASSETS / "main-STANDIN.js").write_text("")
        (stand_in / "index.html").write_text("<!doctype html><title>tickwork</title>")
        return stand_in
    if not (CONSOLE_DIST / "index.html").is_file() or not (CONSOLE_DIST / ASSETS).is_dir():
        raise BuildMissing(f"{CONSOLE_DIST} is missing: run `make console` first (it needs Node.js and npm)")
    return CONSOLE_DIST


def build_app(app: cdk.App | None = None) -> tuple[cdk.App, TickworkStack]:
    app = app or cdk.App()
    config = StageConfig.from_context(app.node.try_get_context)
    stack = TickworkStack(
        app,
        f"tickwork-{config.stage}",
        config=config,
        dependencies_layer_dir=dependencies_layer_dir(app),
        description=f"tickwork job scheduler ({config.stage})",
    )
    console = ConsoleStack(
        app,
        console_stack_name(config.stage),
        config=config,
        rest_api=stack.api.rest_api,
        dist_dir=console_dist_dir(app),
        log_key=stack.key,
        description=f"tickwork web console ({config.stage})",
    )
    suppress_reviewed_findings(stack)
    suppress_console_findings(console)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def cli_context(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The context of cdk.json when run as `python -m infra.app`; the CDK CLI passes its own."""
    if "CDK_CONTEXT_JSON" in environ:
        return {}
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return context


if __name__ == "__main__":
    build_app(cdk.App(context=cli_context()))[0].synth()
