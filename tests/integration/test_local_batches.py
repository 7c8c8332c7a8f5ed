"""The local stack's worker invocations are batched as the event source mapping's are: ``--batch-size``
messages at most per invocation (1 to 10, as SQS allows), ``--workers`` invocations at once."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from tickwork.domain.models import JobSpec
from tickwork.runtime import runtime
from tickwork_local import harness
from tickwork_local.cli import main
from tickwork_local.cli.app import app
from tickwork_local.harness import Receiver
from tickwork_local.stack import running_in_thread


def local_options(*arguments: str) -> dict[str, Any]:
    """What `tickwork local ARGUMENTS` would run with: its options parsed, nothing started."""
    group = typer.main.get_command(app)
    root = group.make_context("tickwork", ["local"])
    command = group.get_command(root, "local")  # type: ignore[attr-defined]
    assert command is not None
    return dict(command.make_context("local", list(arguments), parent=root).params)


def test_the_batch_size_is_an_option_from_1_to_10(capsys: pytest.CaptureFixture[str]) -> None:
    assert local_options("--batch-size", "3")["batch_size"] == 3
    assert local_options()["batch_size"] == 10
    for refused in ("0", "11", "ten"):
        assert main(["local", "--batch-size", refused]) == 2
        assert "--batch-size" in capsys.readouterr().err


def test_each_invocation_gets_at_most_batch_size_messages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    batches: list[int] = []
    original = harness.sqs_event

    def recorded(messages: Sequence[Any], queue_url: str) -> dict[str, Any]:
        batches.append(len(messages))
        return original(messages, queue_url)

    monkeypatch.setattr(harness, "sqs_event", recorded)
    with (
        Receiver() as receiver,
        running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": "acme:tw_batches", "POWERTOOLS_LOG_LEVEL": "ERROR"},
            log_file=str(tmp_path / "tickwork.log"),
            tick_seconds=0.5,
            workers=1,
            batch_size=2,
        ),
    ):
        now = datetime.now(UTC)
        for index in range(6):
            spec = {
                "name": f"batch-{index}",
                "schedule": {"type": "once", "at": now.isoformat()},
                "target": {"type": "http", "url": receiver.url("/batched")},
            }
            runtime().service.create_job("acme", JobSpec.model_validate(spec), now)
        deadline = time.monotonic() + 30
        while len(receiver.for_path("/batched")) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert len(receiver.for_path("/batched")) == 6
    assert batches and max(batches) <= 2
    assert sum(batches) >= 6


def test_a_started_stack_sets_what_is_alive_aside_from_the_garbage_collector(tmp_path: Path) -> None:
    import gc

    from tickwork_local.stack import YOUNG_COLLECTION_THRESHOLD

    threshold = gc.get_threshold()
    try:
        with running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": "acme:tw_gc", "POWERTOOLS_LOG_LEVEL": "ERROR"},
            log_file=str(tmp_path / "tickwork.log"),
            tick_seconds=0.5,
            workers=1,
        ):
            assert gc.get_freeze_count() > 100_000  # the modules, moto's backends, the tables
            assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_runs_held_by_a_limit_print_no_metrics_on_the_console(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The workers' per-tenant gauges go to CloudWatch on AWS; the local stack has none, and its console keeps
    the banner and the status line."""
    tenants = "acme:tw_held:max_concurrent_runs=1"
    with (
        Receiver() as receiver,
        running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": tenants, "POWERTOOLS_LOG_LEVEL": "ERROR"},
            log_file=str(tmp_path / "tickwork.log"),
            tick_seconds=0.5,
            workers=2,
        ),
    ):
        now = datetime.now(UTC)
        for index in range(4):  # one at a time: three of them are held back at least once
            spec = {
                "name": f"held-{index}",
                "schedule": {"type": "once", "at": now.isoformat()},
                "target": {"type": "http", "url": receiver.url("/held")},
            }
            runtime().service.create_job("acme", JobSpec.model_validate(spec), now)
        deadline = time.monotonic() + 60
        while len(receiver.for_path("/held")) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert len(receiver.for_path("/held")) == 4
    printed = capfd.readouterr()
    assert '"_aws"' not in printed.out + printed.err
