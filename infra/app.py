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
from infra.nag import suppress_reviewed_findings
from infra.stack import TickworkStack

# `make build` writes the third-party layer here.
DEPENDENCIES_LAYER_DIR = REPO_ROOT / "build" / "layers" / "dependencies"
# With this context flag the layer is an empty stand-in, so tests synthesize without `make build`.
STAND_IN_ASSETS = f"{CONTEXT_PREFIX}stand_in_assets"


class BuildMissing(RuntimeError):
    """The dependencies layer has not been built."""


def dependencies_layer_dir(app: cdk.App) -> Path:
    if str(app.node.try_get_context(STAND_IN_ASSETS)).lower() == "true":
        stand_in = Path(tempfile.mkdtemp(prefix="tickwork-layer-"))
        (stand_in / "python").mkdir()
        return stand_in
    if not (DEPENDENCIES_LAYER_DIR / "python").is_dir():
        raise BuildMissing(f"{DEPENDENCIES_LAYER_DIR} is missing: run `make build` first")
    return DEPENDENCIES_LAYER_DIR


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
    suppress_reviewed_findings(stack)
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
