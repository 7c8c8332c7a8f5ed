"""`tickwork runs get`, `tickwork runs cancel` and `tickwork stats` on pool runs: a worker's progress, stage,
lease and checkpoint as an operator reads them, a run asked to stop, and each pool's waiting runs."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork_client import Client

from tests.conftest import TOKENS
from tests.integration.test_cli import Cli, api_url, clean_environment  # noqa: F401 - fixtures
from tests.support.pool_runs import seed_waiting

ACME = TOKENS["acme"]


@pytest.fixture
def cli(api_url: str) -> Cli:  # noqa: F811 - the fixture
    return Cli(api_url)


def pool_job(cli: Cli, name: str, pool: str) -> str:
    spec = {
        "name": name,
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
        "target": {"type": "pool", "pool": pool, "heartbeat_timeout_seconds": 60},
    }
    created = Client(cli.url, ACME).create_job(spec)
    return created.job_id


def claimed_run(cli: Cli, *, checkpoint: Any = None, pool: str = "gpu") -> tuple[str, str]:
    """A run of a new pool job, claimed by gpu-host-1, which heartbeats once with progress 0.25, a stage and
    ``checkpoint``: its run id and lease token."""
    job_id = pool_job(cli, f"train-{pool}", pool)
    waiting = seed_waiting("acme", job_id, pool, waited=timedelta(seconds=20))
    client = Client(cli.url, ACME)
    [run] = client.claim(pool, worker_id="gpu-host-1", wait_seconds=0).runs
    client.heartbeat(
        run.run_id,
        lease_token=run.lease_token,
        progress=0.25,
        stage="epoch 3 of 12",
        checkpoint=checkpoint if checkpoint is not None else {"epoch": 3},
    )
    assert run.run_id == waiting.run_id
    return run.run_id, run.lease_token


def field(out: str, name: str) -> str:
    found = re.search(rf"^{name}\s+(.*)$", out, re.MULTILINE)
    assert found is not None, out
    return found[1].strip()


def test_runs_get_shows_a_pool_runs_progress_stage_holder_heartbeat_lease_and_checkpoint(cli: Cli) -> None:
    # Given a pool run claimed by gpu-host-1, which heartbeats with progress, a stage and a checkpoint
    run_id, _ = claimed_run(cli)
    # When it is shown
    shown = cli("runs", "get", run_id)
    # Then every part of it is there, in words
    assert shown.code == 0, shown.err
    assert field(shown.out, "status") == "RUNNING"
    assert field(shown.out, "pool") == "gpu"
    assert field(shown.out, "progress") == "[#####...............]  25%"
    assert field(shown.out, "stage") == "epoch 3 of 12"
    assert field(shown.out, "holder") == "gpu-host-1"
    assert re.fullmatch(r"(now|\d+s ago) \(.+\)", field(shown.out, "heartbeat")), shown.out
    assert re.fullmatch(r"in (\d+[hms])+ \(.+\)", field(shown.out, "lease_expires")), shown.out
    assert field(shown.out, "lease_deadline").startswith("in ")
    assert field(shown.out, "cancel_requested") == "false"
    assert field(shown.out, "checkpoint") == '{"epoch":3}'
    assert "lease_token" not in shown.out
    # And -o json is the API's run, checkpoint included
    document = cli("runs", "get", run_id, "-o", "json")
    assert document.code == 0, document.err
    run = document.json()
    assert (run["progress"], run["stage"], run["lease_owner"], run["checkpoint"]) == (
        0.25,
        "epoch 3 of 12",
        "gpu-host-1",
        {"epoch": 3},
    )
    assert run["cancel_requested"] is False
    heartbeat_at = datetime.fromisoformat(run["heartbeat_at"])
    assert abs(datetime.now(UTC) - heartbeat_at) < timedelta(seconds=10)
    assert datetime.fromisoformat(run["lease_expires_at"]) > heartbeat_at
    assert "lease_token" not in run


def test_a_long_checkpoint_is_cut_in_text_and_whole_in_json(cli: Cli) -> None:
    checkpoint = {"shards": list(range(400))}
    run_id, _ = claimed_run(cli, checkpoint=checkpoint)
    shown = field(cli("runs", "get", run_id).out, "checkpoint")
    assert shown.endswith("characters; -o json shows it all)")
    assert len(shown) < 400
    assert cli("runs", "get", run_id, "-o", "json").json()["checkpoint"] == checkpoint


def test_a_run_that_is_not_a_pools_shows_no_pool_fields(cli: Cli) -> None:
    cli.create("hook")
    triggered = cli("jobs", "trigger", "hook", "-o", "json")
    assert triggered.code == 0, triggered.err
    shown = cli("runs", "get", triggered.json()["run_id"])
    assert shown.code == 0, shown.err
    assert not re.search(r"^(holder|progress|checkpoint)\s", shown.out, re.MULTILINE)


def test_runs_cancel_asks_a_running_pool_run_to_stop_and_its_worker_hears_it(cli: Cli) -> None:
    run_id, token = claimed_run(cli)
    cancelled = cli("runs", "cancel", run_id, "--yes")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.out.strip() == (
        f"asked run {run_id} to stop: it is RUNNING, and its worker hears it at its next heartbeat"
    )
    assert field(cli("runs", "get", run_id).out, "cancel_requested") == "true"
    assert Client(cli.url, ACME).heartbeat(run_id, lease_token=token).cancel_requested is True
    again = cli("runs", "cancel", run_id, "--yes", "-o", "json")
    assert again.code == 0, again.err
    assert (again.json()["status"], again.json()["cancel_requested"]) == ("RUNNING", True)


def test_runs_cancel_ends_a_waiting_run_at_once_and_refuses_an_ended_one(cli: Cli) -> None:
    job_id = pool_job(cli, "export", "cpu")
    waiting = seed_waiting("acme", job_id, "cpu", waited=timedelta(seconds=5))
    cancelled = cli("runs", "cancel", waiting.run_id, "-y", "-o", "json")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.json()["status"] == "CANCELLED"
    assert cli("runs", "get", waiting.run_id, "-o", "json").json()["status"] == "CANCELLED"
    ended = cli("runs", "cancel", waiting.run_id, "--yes")
    assert ended.code == 1
    assert ended.err.startswith("error: invalid_state: the run is CANCELLED already"), ended.err


def test_runs_cancel_of_an_unknown_run_says_so_and_fails(cli: Cli) -> None:
    missing = "01KBXW8Y2Q7Z3M4N5P6R7S8T9V:1795888800000"
    for argv in (("runs", "cancel", missing, "--yes"), ("runs", "get", missing)):
        result = cli(*argv)
        assert result.code == 1
        assert result.err.startswith("error: not_found: "), result.err
        assert " not found" in result.err
        assert result.out == ""


def test_runs_cancel_without_yes_and_without_a_terminal_changes_nothing(cli: Cli) -> None:
    job_id = pool_job(cli, "export", "cpu")
    waiting = seed_waiting("acme", job_id, "cpu", waited=timedelta(seconds=5))
    refused = cli("runs", "cancel", waiting.run_id)
    assert refused.code == 2
    assert "Add --yes to confirm" in refused.err
    assert cli("runs", "get", waiting.run_id, "-o", "json").json()["status"] == "ENQUEUED"


def test_stats_show_each_pools_waiting_runs_and_oldest_wait(cli: Cli) -> None:
    gpu = pool_job(cli, "train", "gpu")
    cpu = pool_job(cli, "export", "cpu")
    now = datetime.now(UTC)
    for waited in (90, 30):
        seed_waiting("acme", gpu, "gpu", waited=timedelta(seconds=waited), now=now)
    seed_waiting("acme", cpu, "cpu", waited=timedelta(minutes=10), now=now)
    document = cli("stats", "-o", "json")
    assert document.code == 0, document.err
    pools = document.json()["pools"]
    assert [(pool["pool"], pool["waiting"], pool["waiting_capped"]) for pool in pools] == [
        ("cpu", 1, False),
        ("gpu", 2, False),
    ]
    shown = cli("stats")
    assert shown.code == 0, shown.err
    assert "pools (runs waiting for a claim):" in shown.out
    rows = {
        line.split()[0]: line.split() for line in shown.out.splitlines() if line.startswith(("cpu ", "gpu "))
    }
    assert rows["gpu"][1] == "2" and re.fullmatch(r"1m3\ds", rows["gpu"][2]), shown.out
    assert rows["cpu"][1] == "1" and re.fullmatch(r"10m\d?s?", rows["cpu"][2]), shown.out
    json.dumps(pools)  # plain JSON


def test_runs_help_lists_cancel() -> None:
    from tests.integration.test_cli import invoke

    result = invoke("runs", "--help")
    assert result.code == 0
    assert re.search(r"cancel\s+Cancel a run", result.out), result.out
