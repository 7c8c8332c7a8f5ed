"""The `tickwork` CLI, run in-process (Typer's CliRunner) against the real API handlers behind a real HTTP
server (moto), and against a loopback stub where the API must misbehave (429)."""

from __future__ import annotations

import io
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from tickwork import tables
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.tenants import Tenant, TenantChanges
from tickwork.targets.envelope import Delivery, envelope_body, webhook_headers
from tickwork_local.cli import main, make_receiver
from tickwork_local.cli.app import app
from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread
from typer.testing import CliRunner

from tests.conftest import TOKENS
from tests.integration.test_client import JOB, Reply, Stub, rate_limited
from tests.support.apigw import set_run_status
from tests.support.streams import indexed_first

ACME = TOKENS["acme"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
READ_ONLY = {"job_id", "status", "version", "created_at", "updated_at", "next_fire_at", "last_run", "pause"}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def yaml(self) -> Any:
        return yaml.safe_load(self.out)


def invoke(*argv: str, env: dict[str, str | None] | None = None, stdin: str | None = None) -> Result:
    """``tickwork ARGV`` in this process, as Typer's test runner runs it: stdout and stderr apart, no
    terminal (unless ``env`` makes Rich believe in one)."""
    result = CliRunner().invoke(
        app, list(argv), env=env, input=stdin, prog_name="tickwork", catch_exceptions=False
    )
    return Result(result.exit_code, result.stdout, result.stderr)


class Cli:
    """Runs the CLI with the test server's URL and a token."""

    def __init__(self, url: str):
        self.url = url

    def __call__(
        self,
        *argv: str,
        token: str | None = ACME,
        env: dict[str, str | None] | None = None,
        stdin: str | None = None,
    ) -> Result:
        prefix = ["--api-url", self.url] + (["--token", token] if token is not None else [])
        return invoke(*prefix, *argv, env=env, stdin=stdin)

    def create(self, name: str, *flags: str) -> dict[str, Any]:
        result = self("jobs", "create", "--name", name, *(flags or DEFAULT_JOB_FLAGS), "-o", "json")
        assert result.code == 0, result.err
        job: dict[str, Any] = result.json()
        return job


DEFAULT_JOB_FLAGS = (
    "--cron",
    "0 3 * * *",
    "--timezone",
    "Europe/Paris",
    "--url",
    "https://hooks.example.com/run",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A token, URL or colour setting in the developer's shell must not leak into the tests.
    for name in ("TICKWORK_TOKEN", "TICKWORK_API_URL", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def api_url(dynamodb: Any, tenants: dict[str, Tenant], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The API runs in this process: its EMF metrics would print into the CLI's captured output.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    from functions.api.handler import make_handler
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    pool = HandlerPool(indexed_first(make_handler, dynamodb))
    server = serve(Gateway(pool, authorizer_handler), "127.0.0.1", 0)
    thread = start_in_thread(server)  # the socket listens already: no wait needed
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def cli(api_url: str) -> Cli:
    return Cli(api_url)


# --- jobs create --------------------------------------------------------------------------------------------
def test_create_from_flags(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "daily-report", "--cron", "0 9 * * 1-5", "--timezone", "America/New_York",
        "--url", "https://hooks.example.com/report", "--method", "PUT", "--payload", '{"report": "daily"}',
        "--description", "weekday report", "--misfire-policy", "skip", "--overlap-policy", "queue",
        "--max-attempts", "3", "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    job = result.json()
    assert job["schedule"]["type"] == "cron"
    assert job["schedule"]["expression"] == "0 9 * * 1-5"
    assert job["schedule"]["timezone"] == "America/New_York"
    assert job["target"] == {
        "type": "http",
        "url": "https://hooks.example.com/report",
        "method": "PUT",
        "headers": {},
        "timeout_seconds": 30,
    }
    assert job["payload"] == {"report": "daily"}
    assert job["description"] == "weekday report"
    assert (job["misfire_policy"], job["overlap_policy"]) == ("skip", "queue")
    assert job["retry"]["max_attempts"] == 3
    assert cli("jobs", "get", job["job_id"], "-o", "json").json()["name"] == "daily-report"


def test_priority_is_set_at_create_changed_by_update_and_shown(cli: Cli) -> None:
    created = cli(
        "jobs", "create", "--name", "urgent-sync", "--rate", "1m", "--url", "https://hooks.example.com/sync",
        "--priority", "high", "-o", "json",
    )  # fmt: skip
    assert created.code == 0, created.err
    job_id = created.json()["job_id"]
    assert created.json()["priority"] == "high"

    updated = cli("jobs", "update", job_id, "--priority", "low", "-o", "json")
    assert updated.code == 0, updated.err
    assert updated.json()["priority"] == "low"
    assert re.search(r"^priority\s+low$", cli("jobs", "get", job_id).out, re.MULTILINE)

    refused = cli("jobs", "update", job_id, "--priority", "urgent")
    assert refused.code != 0
    assert "urgent" in refused.err
    assert cli("jobs", "get", job_id, "-o", "json").json()["priority"] == "low"


def test_create_prints_a_readable_summary_by_default(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "every-ten", "--rate", "10s", "--url", "https://hooks.example.com/x"
    )
    assert result.code == 0, result.err
    assert re.search(r"^job_id\s+[0-9A-Z]{26}$", result.out, re.MULTILINE)
    assert "every-ten" in result.out
    assert "every 10s" in result.out
    assert "http POST https://hooks.example.com/x" in result.out


def test_create_from_a_yaml_file_with_flags_overriding_it(cli: Cli, tmp_path: Path) -> None:
    at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    spec = tmp_path / "job.yaml"
    # The timestamp is unquoted on purpose: YAML reads it as a datetime, which the CLI must send as text.
    spec.write_text(
        "name: from-yaml\n"
        "schedule:\n"
        "  type: once\n"
        f"  at: {at.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "target:\n"
        "  type: http\n"
        "  url: https://hooks.example.com/yaml\n"
        "  headers: {X-Team: ops}\n"
        "payload:\n"
        "  items: [1, 2]\n"
    )
    result = cli(
        "jobs", "create", "--file", str(spec), "--name", "overridden", "--method", "PATCH", "-o", "json"
    )
    assert result.code == 0, result.err
    job = result.json()
    assert job["name"] == "overridden"
    assert job["schedule"]["type"] == "once"
    assert datetime.fromisoformat(job["schedule"]["at"]) == at
    assert job["target"]["method"] == "PATCH"
    assert job["target"]["headers"] == {"X-Team": "ops"}  # the file's other target fields are kept
    assert job["payload"] == {"items": [1, 2]}


def test_create_from_a_json_file(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {
                "name": "from-json",
                "schedule": {"type": "rate", "every_seconds": 3600},
                "target": {"type": "http", "url": "https://hooks.example.com/json"},
                "tags": {"team": "ops"},
            }
        )
    )
    result = cli("jobs", "create", "-f", str(spec), "--rate", "2h", "-o", "json")
    assert result.code == 0, result.err
    job = result.json()
    assert job["name"] == "from-json"
    assert job["schedule"]["every_seconds"] == 7200  # the flag replaced the file's schedule
    assert job["tags"] == {"team": "ops"}


def test_what_jobs_get_prints_creates_a_job_from_stdin(cli: Cli) -> None:
    shown = cli("jobs", "get", cli.create("original")["job_id"], "-o", "json").out
    result = cli("jobs", "create", "--file", "-", "--name", "copy", "-o", "json", stdin=shown)
    assert result.code == 0, result.err
    assert "left out fields the API sets itself: job_id, status, version" in result.err
    assert result.json()["schedule"]["expression"] == "0 3 * * *"


def test_create_with_any_target_as_json(cli: Cli) -> None:
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
    target = json.dumps({"type": "sqs", "queue_url": queue})
    job = cli.create("to-sqs", "--at", "+1h", "--target-json", target)
    assert job["target"] == {"type": "sqs", "queue_url": queue}
    assert job["schedule"]["type"] == "once"
    assert "sqs " + queue in cli("jobs", "get", job["job_id"]).out


def test_get_shows_a_workflows_tasks_as_a_tree(cli: Cli) -> None:
    # Given a workflow job: extract, then two transforms (one in a pool), then load after both
    hook = {"type": "http", "url": "https://hooks.example.com/etl"}
    target = {
        "type": "workflow",
        "max_parallel": 2,
        "tasks": [
            {"id": "extract", "target": hook},
            {"id": "transform_a", "target": hook, "depends_on": ["extract"]},
            {"id": "transform_b", "target": {"type": "pool", "pool": "gpu"}, "depends_on": ["extract"]},
            {"id": "load", "target": hook, "depends_on": ["transform_a", "transform_b"]},
            {"id": "page", "target": hook, "depends_on": ["load"], "trigger_rule": "one_failed"},
        ],
    }
    job = cli.create("etl", "--cron", "0 2 * * *", "--target-json", json.dumps(target))
    assert [task["id"] for task in job["target"]["tasks"]] == [
        "extract",
        "transform_a",
        "transform_b",
        "load",
        "page",
    ]

    # When it is shown, piped and on a terminal
    piped = cli("jobs", "get", "etl")
    terminal = cli("jobs", "get", "etl", env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})

    # Then the target is summed up, and the tasks are drawn as a tree, each once, under its parents
    assert re.search(r"^target\s+workflow 5 tasks$", piped.out, re.MULTILINE), piped.out
    tree = (
        "workflow: 5 tasks (fail_fast, at most 2 at once)\n"
        "└── extract  http POST https://hooks.example.com/etl\n"
        "    ├── transform_a  http POST https://hooks.example.com/etl\n"
        "    └── transform_b  pool gpu\n"
        "        └── load  http POST https://hooks.example.com/etl  (after transform_a, transform_b)\n"
        "            └── page  http POST https://hooks.example.com/etl  [one_failed]\n"
    )
    assert piped.out.endswith(tree), piped.out
    assert tree in terminal.out, terminal.out


def test_create_with_the_same_idempotency_key_makes_one_job(cli: Cli) -> None:
    first = cli.create("once-only", *DEFAULT_JOB_FLAGS, "--idempotency-key", "create-1")
    again = cli.create("once-only", *DEFAULT_JOB_FLAGS, "--idempotency-key", "create-1")
    assert first["job_id"] == again["job_id"]


def test_create_without_the_needed_fields_is_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "create", "--name", "lonely")
    assert result.code == 2
    assert "a schedule (--at, --cron or --rate)" in result.err
    assert "a target (--url or --target-json)" in result.err


def test_bad_flags_are_usage_errors_and_nothing_is_created(cli: Cli) -> None:
    bad_payload = cli("jobs", "create", "--name", "x", *DEFAULT_JOB_FLAGS, "--payload", "{not json")
    assert bad_payload.code == 2
    assert "--payload is not valid JSON" in bad_payload.err
    two_schedules = cli(
        "jobs", "create", "--name", "x", "--cron", "* * * * *", "--rate", "5m", "--url", "https://a.example"
    )
    assert two_schedules.code == 2
    assert "not --cron and --rate" in two_schedules.err
    bad_rate = cli("jobs", "create", "--name", "x", "--rate", "soon", "--url", "https://a.example")
    assert bad_rate.code == 2
    assert "'soon' is not a duration" in bad_rate.err
    assert "Traceback" not in bad_payload.err + two_schedules.err + bad_rate.err
    assert cli("jobs", "list", "-o", "json").json()["items"] == []


# --- jobs list, get, output formats -------------------------------------------------------------------------
def test_list_as_a_table_and_as_json(cli: Cli) -> None:
    first = cli.create("alpha")
    second = cli.create("beta", "--rate", "90", "--url", "https://hooks.example.com/b")
    table = cli("jobs", "list")
    assert table.code == 0, table.err
    header, *rows = table.out.splitlines()
    assert header.split() == ["ID", "NAME", "STATUS", "SCHEDULE", "NEXT_FIRE_AT"]
    assert len(rows) == 2
    assert rows[0].startswith(second["job_id"])  # newest first
    assert "every 1m30s" in rows[0]
    assert 'cron "0 3 * * *" Europe/Paris' in rows[1]
    # Columns line up: every row's status starts where the header's does.
    assert {row.index("ACTIVE") for row in rows} == {header.index("STATUS")}
    listed = cli("jobs", "list", "-o", "json").json()
    assert [job["job_id"] for job in listed["items"]] == [second["job_id"], first["job_id"]]
    assert listed["next_cursor"] is None


def test_list_follows_every_page_with_all(cli: Cli) -> None:
    ids = {cli.create(f"job-{n}")["job_id"] for n in range(5)}
    one_page = cli("jobs", "list", "--limit", "2", "-o", "json").json()
    assert len(one_page["items"]) == 2
    assert one_page["next_cursor"]
    hint = cli("jobs", "list", "--limit", "2")
    assert "--cursor" in hint.err
    everything = cli("jobs", "list", "--limit", "2", "--all", "-o", "json").json()
    assert {job["job_id"] for job in everything["items"]} == ids
    assert everything["next_cursor"] is None
    table = cli("jobs", "list", "--all", "--limit", "2")
    assert len(table.out.splitlines()) == 1 + 5


def test_list_filters_by_status(cli: Cli) -> None:
    cli.create("running")
    cli.create("resting")
    assert cli("jobs", "pause", "resting").code == 0
    listed = cli("jobs", "list", "--status", "paused", "-o", "json").json()
    assert [job["name"] for job in listed["items"]] == ["resting"]
    assert cli("jobs", "list", "--status", "sleeping").code == 2


def test_get_shows_the_job(cli: Cli) -> None:
    job = cli.create("show-me")
    result = cli("jobs", "get", job["job_id"])
    assert result.code == 0, result.err
    assert f"job_id        {job['job_id']}" in result.out
    assert "status        ACTIVE" in result.out
    assert 'schedule      cron "0 3 * * *" Europe/Paris' in result.out
    assert "in words      At 03:00, Europe/Paris" in result.out
    assert "target        http POST https://hooks.example.com/run" in result.out


def test_every_output_format(cli: Cli) -> None:
    job = cli.create(
        "formats", "--cron", "0 3 * * *", "--url", "https://hooks.example.com/f", "--description", "d1"
    )
    as_json = cli("jobs", "get", "formats", "-o", "json")
    as_yaml = cli("jobs", "get", "formats", "-o", "yaml")
    assert as_json.json() == as_yaml.yaml() == job  # the API's object, either way
    assert "\x1b" not in as_json.out + as_yaml.out
    assert as_yaml.out.startswith("name: formats\n")
    listed = cli("jobs", "list", "-o", "yaml").yaml()
    assert [item["job_id"] for item in listed["items"]] == [job["job_id"]]
    table = cli("jobs", "list", "-o", "table").out.splitlines()
    wide = cli("jobs", "list", "-o", "wide").out.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATUS", "SCHEDULE", "NEXT_FIRE_AT"]
    assert wide[0].split() == [*table[0].split(), "TARGET", "LAST_RUN", "DESCRIPTION"]
    assert "http POST https://hooks.example.com/f" in wide[1]
    assert wide[1].endswith("d1")
    assert cli("jobs", "list", "-o", "xml").code == 2


def test_list_wide_shows_each_jobs_last_run(cli: Cli) -> None:
    # Given a job whose latest run is DEAD, and one never run
    cli.create("never-run")
    ran = cli.create("ran")
    run_id = cli("jobs", "trigger", "ran", "-o", "json").json()["run_id"]
    set_run_status("acme", run_id, "DEAD")

    # When the jobs are listed wide, Then LAST_RUN shows the status of each one's latest run
    wide = cli("jobs", "list", "-o", "wide")
    assert wide.code == 0, wide.err
    header, *rows = wide.out.splitlines()
    column = header.index("LAST_RUN")
    last_runs = {row.split()[1]: row[column:].split()[0] for row in rows}
    assert last_runs == {"ran": "DEAD", "never-run": "-"}
    listed = cli("jobs", "list", "-o", "json").json()["items"]
    assert {job["job_id"]: (job["last_run"] or {}).get("run_id") for job in listed}[ran["job_id"]] == run_id


def test_colours_and_rich_tables_only_on_a_terminal_and_never_with_no_color(cli: Cli) -> None:
    cli.create("coloured")
    piped = cli("jobs", "list")
    assert "\x1b[" not in piped.out
    assert piped.out.startswith("ID  ")  # plain aligned text
    terminal = cli("jobs", "list", env={"TTY_COMPATIBLE": "1"})
    assert "\x1b[32mACTIVE" in terminal.out  # green
    assert "─" in terminal.out  # a Rich table's rule
    no_color = cli("jobs", "list", env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    assert "─" in no_color.out
    assert "\x1b[" not in no_color.out
    assert ANSI.sub("", terminal.out) == no_color.out
    refused = cli("jobs", "get", "no-such-job", env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    assert refused.code == 1
    assert "\x1b[" not in refused.err


def test_ids_names_and_data_are_printed_literally_on_a_terminal(cli: Cli, tmp_path: Path) -> None:
    # Given a job whose description reads like Rich markup and emoji codes, and a manual run of it (its id
    # holds ":m:", Rich's emoji code for Ⓜ)
    description = "[bold]nightly[/bold] :smile: report"
    cli.create("literal", *DEFAULT_JOB_FLAGS, "--description", description)
    terminal: dict[str, str | None] = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}

    # When it is triggered and followed on a terminal until --wait-timeout runs out (no worker runs here)
    waited = cli(
        "jobs", "trigger", "literal", "--wait", "--wait-timeout", "1", "--interval", "0.2", env=terminal
    )

    # Then the run id is printed as it is: in the run shown, in the spinner and in the note on stderr
    assert waited.code == 7, waited.err
    run_id = re.search(r"^run_id\s+(\S+)$", waited.out, re.MULTILINE)
    assert run_id is not None and ":m:" in run_id[1], waited.out
    assert f"run {run_id[1]}: ENQUEUED" in waited.err  # the spinner
    assert f"run {run_id[1]} is still ENQUEUED after 1 s" in waited.err  # the note
    assert "Ⓜ" not in waited.out + waited.err
    # And so in an error that names it, in a job's fields and in a diff
    missing = run_id[1] + "0"
    refused = cli("runs", "get", missing, env=terminal)
    assert refused.code == 1
    assert f"run '{missing}' not found" in refused.err
    shown = cli("jobs", "get", "literal", env=terminal)
    assert description in shown.out
    spec = tmp_path / "literal.yaml"
    spec.write_text(cli("jobs", "export", "literal").out.replace("report", "report :+1: [red]"))
    diff = cli("apply", "-f", str(spec), "--dry-run", env=terminal)
    assert diff.code == 0, diff.err
    assert "[bold]nightly[/bold] :smile: report :+1: [red]" in diff.out
    assert "😄" not in diff.out + shown.out and "👍" not in diff.out


def test_global_options_may_follow_the_command(cli: Cli) -> None:
    cli.create("anywhere")
    result = invoke("jobs", "list", "-o", "json", "--api-url", cli.url, "--token", ACME)
    assert result.code == 0, result.err
    assert [job["name"] for job in result.json()["items"]] == ["anywhere"]
    legacy = invoke("--json", "jobs", "list", "--api", cli.url, "--token", ACME)
    assert [job["name"] for job in legacy.json()["items"]] == ["anywhere"]


# --- jobs by id or by name ----------------------------------------------------------------------------------
def test_jobs_are_named_by_id_or_by_name(cli: Cli) -> None:
    job = cli.create("nightly-report")
    by_name = cli("jobs", "get", "nightly-report", "-o", "json")
    assert by_name.code == 0, by_name.err
    assert by_name.json()["job_id"] == job["job_id"]
    assert cli("jobs", "get", job["job_id"], "-o", "json").json() == by_name.json()
    assert cli("jobs", "pause", "nightly-report", "--reason", "by name").code == 0
    assert cli("jobs", "resume", job["job_id"]).code == 0
    run = cli("jobs", "trigger", "nightly-report", "-o", "json").json()
    assert run["job_id"] == job["job_id"]
    assert run["run_id"] in cli("jobs", "runs", "nightly-report").out

    missing = cli("jobs", "get", "nightly-reports")
    assert missing.code == 1
    assert (
        missing.err.strip()
        == "error: not_found: no job has the id or the name 'nightly-reports' (field: job)"
    )
    unknown_id = cli("jobs", "get", "01JGZ4M8Q3V5XKQ1T7B2N6C9DE")
    assert unknown_id.code == 1
    assert "error: not_found:" in unknown_id.err


def test_a_name_shaped_like_an_id_is_found_by_name(cli: Cli) -> None:
    job = cli.create("01JGZ4M8Q3V5XKQ1T7B2N6C9DE")
    assert cli("jobs", "get", "01JGZ4M8Q3V5XKQ1T7B2N6C9DE", "-o", "json").json()["job_id"] == job["job_id"]


def test_a_name_several_cancelled_jobs_had_is_ambiguous(cli: Cli) -> None:
    ids = []
    for _ in range(2):
        ids.append(cli.create("reused")["job_id"])
        assert cli("jobs", "cancel", "reused", "--yes").code == 0
    ambiguous = cli("jobs", "get", "reused")
    assert ambiguous.code == 2
    assert "2 jobs are named 'reused'" in ambiguous.err
    assert all(job_id in ambiguous.err for job_id in ids)
    live = cli.create("reused")  # the name is free again, and the live job wins
    assert cli("jobs", "get", "reused", "-o", "json").json()["job_id"] == live["job_id"]


# --- update -------------------------------------------------------------------------------------------------
def test_update_changes_only_the_given_fields(cli: Cli) -> None:
    job = cli.create("changing", *DEFAULT_JOB_FLAGS, "--payload", '{"a": 1}', "--max-attempts", "3")
    result = cli(
        "jobs", "update", "changing", "--cron", "30 4 * * *", "--payload", '{"a": 2}', "--tag", "team=ops",
        "--header", "X-Team=ops", "--misfire-policy", "skip", "--jitter", "90s", "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    updated = result.json()
    assert updated["schedule"]["expression"] == "30 4 * * *"
    assert updated["schedule"]["timezone"] == "Europe/Paris"  # a cron keeps the old cron's zone
    assert updated["next_fire_at"] != job["next_fire_at"]
    assert updated["payload"] == {"a": 2}
    assert updated["tags"] == {"team": "ops"}
    assert updated["target"]["headers"] == {"X-Team": "ops"}
    assert updated["target"]["url"] == job["target"]["url"]
    assert (updated["misfire_policy"], updated["jitter_seconds"]) == ("skip", 90)
    assert updated["retry"]["max_attempts"] == 3  # untouched
    assert updated["version"] == job["version"] + 1

    renamed = cli(
        "jobs", "update", job["job_id"], "--name", "changed", "--remove-tag", "team", "--rate", "1h"
    )
    assert renamed.code == 0, renamed.err
    shown = cli("jobs", "get", "changed", "-o", "json").json()
    assert (shown["schedule"]["type"], shown["schedule"]["every_seconds"], shown["tags"]) == (
        "rate",
        3600,
        {},
    )

    stale = cli("jobs", "update", "changed", "--description", "x", "--if-version", str(job["version"]))
    assert stale.code == 1
    assert "error: version_conflict:" in stale.err or "(field: version)" in stale.err
    nothing = cli("jobs", "update", "changed")
    assert nothing.code == 2
    assert "nothing to change" in nothing.err


def test_update_of_a_cancelled_job_is_refused_with_a_hint(cli: Cli) -> None:
    cli.create("gone")
    cli("jobs", "cancel", "gone", "--yes")
    refused = cli("jobs", "update", "gone", "--description", "again")
    assert refused.code == 1
    assert "error: invalid_state: a cancelled job cannot update" in refused.err
    assert "create a new job" in refused.err


def test_update_points_a_completed_one_time_job_at_a_new_time(cli: Cli) -> None:
    from datetime import UTC, datetime, timedelta

    from tickwork.runtime import runtime

    first = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    job = cli.create("report-once", "--at", first.isoformat(), "--url", "https://hooks.example.com/once")
    # Its fire has ended (as a worker leaves it): the job is COMPLETED
    assert runtime().jobs.complete("acme", job["job_id"], through=first + timedelta(seconds=1))
    refused = cli("jobs", "update", "report-once", "--description", "again")
    assert refused.code == 1
    assert "a completed job can be updated only with a schedule that fires again" in refused.err
    later = (first + timedelta(days=1)).replace(microsecond=0)
    moved = cli("jobs", "update", "report-once", "--at", later.isoformat(), "-o", "json")
    assert moved.code == 0, moved.err
    assert moved.json()["status"] == "ACTIVE"
    assert moved.json()["schedule"]["at"] in (later.isoformat(), later.isoformat().replace("+00:00", "Z"))


# --- pause, resume, cancel ----------------------------------------------------------------------------------
def test_pause_with_a_reason_then_resume_then_cancel(cli: Cli) -> None:
    job = cli.create("lifecycle")
    paused = cli("jobs", "pause", job["job_id"], "--reason", "maintenance window")
    assert paused.code == 0, paused.err
    assert f"paused job {job['job_id']} (lifecycle): maintenance window" in paused.out
    state = cli("jobs", "get", job["job_id"], "-o", "json").json()
    assert state["status"] == "PAUSED"
    assert state["pause"]["reason"] == "maintenance window"
    assert "maintenance window" in cli("jobs", "get", job["job_id"]).out

    resumed = cli("jobs", "resume", "lifecycle", "-o", "json")
    assert resumed.code == 0, resumed.err
    assert resumed.json()["status"] == "ACTIVE"
    assert resumed.json()["pause"] is None

    unconfirmed = cli("jobs", "cancel", "lifecycle")  # no terminal to ask on
    assert unconfirmed.code == 2
    assert "--yes" in unconfirmed.err
    assert cli("jobs", "get", "lifecycle", "-o", "json").json()["status"] == "ACTIVE"
    cancelled = cli("jobs", "cancel", "lifecycle", "--yes")
    assert cancelled.code == 0, cancelled.err
    assert f"cancelled job {job['job_id']}" in cancelled.out
    assert cli("jobs", "get", job["job_id"], "-o", "json").json()["status"] == "CANCELLED"


def in_a_terminal(argv: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str]:
    """``tickwork ARGV`` in a child process on a pseudo-terminal, typing ``answer`` at its first question."""
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwork_local.cli", *argv],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, **env},
        close_fds=True,
    )
    os.close(terminal)
    output, answered = b"", False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the child closed the terminal
                break
            output += chunk
            if not answered and b"[y/N]" in output:
                os.write(controller, answer)
                answered = True
        elif process.poll() is not None:
            break
    os.close(controller)
    return process.wait(timeout=30), output.decode(errors="replace")


def test_cancel_asks_on_a_terminal_and_shows_a_rich_table(cli: Cli) -> None:
    job = cli.create("asked")
    env = {"TICKWORK_API_URL": cli.url, "TICKWORK_TOKEN": ACME, "COLUMNS": "200", "TERM": "xterm-256color"}
    code, shown = in_a_terminal(["jobs", "list"], b"", env)
    assert code == 0, shown
    assert "─" in shown and "\x1b[" in shown  # a Rich table, in colour
    code, said_no = in_a_terminal(["jobs", "cancel", "asked"], b"n\n", env)
    assert code == 1, said_no
    assert f"cancel job {job['job_id']} (asked) for good? [y/N]" in said_no
    assert cli("jobs", "get", "asked", "-o", "json").json()["status"] == "ACTIVE"
    code, said_yes = in_a_terminal(["jobs", "cancel", "asked"], b"y\n", env)
    assert code == 0, said_yes
    assert cli("jobs", "get", "asked", "-o", "json").json()["status"] == "CANCELLED"


# --- trigger, runs ------------------------------------------------------------------------------------------
def test_trigger_with_the_same_key_gives_the_same_run(cli: Cli) -> None:
    job = cli.create("manual")
    first = cli("jobs", "trigger", job["job_id"], "--idempotency-key", "deploy-42", "-o", "json")
    again = cli("jobs", "trigger", "manual", "--idempotency-key", "deploy-42", "-o", "json")
    assert (first.code, again.code) == (0, 0)
    assert first.json()["run_id"] == again.json()["run_id"]
    assert first.json()["trigger"] == "manual"
    other = cli("jobs", "trigger", job["job_id"])
    assert other.code == 0
    assert "triggered job" in other.out
    assert first.json()["run_id"] not in other.out


def test_job_runs_and_run_details(cli: Cli) -> None:
    job = cli.create("history")
    run = cli("jobs", "trigger", job["job_id"], "-o", "json").json()
    table = cli("jobs", "runs", job["job_id"])
    assert table.code == 0, table.err
    header, *rows = table.out.splitlines()
    assert header.split() == ["RUN_ID", "SCHEDULED_FOR", "STATUS", "ATTEMPT", "LAG_MS"]
    # Triggered runs are sent at once: the history shows the fire waiting in the queue.
    assert any(row.startswith(run["run_id"]) and "ENQUEUED" in row for row in rows)
    wide = cli("jobs", "runs", "history", "-o", "wide").out.splitlines()[0].split()
    assert wide[-4:] == ["TRIGGER", "STARTED_AT", "FINISHED_AT", "ERROR"]

    detail = cli("runs", "get", run["run_id"])
    assert detail.code == 0, detail.err
    assert re.search(rf"^run_id\s+{re.escape(run['run_id'])}$", detail.out, re.MULTILINE)
    assert "attempts       none yet" in detail.out
    assert cli("runs", "get", run["run_id"], "-o", "json").json()["attempts"] == []


def test_job_runs_follow_every_page_with_all(cli: Cli) -> None:
    # Every 30 s over the 15-minute planning horizon: 30 fires are sent at once, and listed as ENQUEUED.
    job = cli.create("often", "--rate", "30s", "--url", "https://hooks.example.com/often")
    page = cli("jobs", "runs", job["job_id"], "--limit", "4", "-o", "json").json()
    assert len(page["items"]) == 4
    everything = cli("jobs", "runs", job["job_id"], "--limit", "4", "--all", "-o", "json").json()
    times = [run["scheduled_for"] for run in everything["items"]]
    assert len(times) == len(set(times)) == 30
    assert times == sorted(times, reverse=True)


def test_runs_retry_reopens_a_dead_run(cli: Cli) -> None:
    job = cli.create("retry-me")
    run = cli("jobs", "trigger", job["job_id"], "-o", "json").json()
    # A run still waiting in the queue can't be retried: the API says why.
    refused = cli("runs", "retry", run["run_id"])
    assert refused.code == 1
    assert "error: invalid_state:" in refused.err
    set_run_status("acme", run["run_id"], "DEAD")
    retried = cli("runs", "retry", run["run_id"])
    assert retried.code == 0, retried.err
    assert f"retrying run {run['run_id']}: ENQUEUED" in retried.out


def triggered(cli: Cli, job: str, statuses: list[str]) -> list[str]:
    """Runs of ``job`` triggered by hand, in order (each scheduled when it is triggered), put in
    ``statuses``."""
    run_ids = []
    for status in statuses:
        run_id = cli("jobs", "trigger", job, "-o", "json").json()["run_id"]
        set_run_status("acme", run_id, status)
        run_ids.append(run_id)
    return run_ids


def test_runs_list_filters_by_status_job_and_time(cli: Cli) -> None:
    cli.create("first")
    cli.create("second")
    ones = triggered(cli, "first", ["DEAD", "FAILED", "SUCCEEDED"])
    twos = triggered(cli, "second", ["DEAD"])

    def listed(*flags: str) -> list[str]:
        result = cli("runs", "list", *flags, "-o", "json")
        assert result.code == 0, result.err
        return [run["run_id"] for run in result.json()["items"]]

    assert listed() == [twos[0], *ones[::-1]]
    assert listed("--status", "dead") == [twos[0], ones[0]]
    assert listed("--status", "DEAD", "--status", "FAILED", "--job", "first") == [ones[1], ones[0]]
    assert listed("--job", "second") == twos
    assert listed("--limit", "2") == [twos[0], ones[2]]
    middle = cli("runs", "get", ones[1], "-o", "json").json()["scheduled_for"]
    assert listed("--since", middle, "--job", "first") == [ones[2], ones[1]]
    assert listed("--until", middle, "--job", "first") == [ones[0]]
    assert listed("--since", "1h") == listed()
    table = cli("runs", "list", "--status", "DEAD")
    assert [row.split()[0] for row in table.out.splitlines()[1:]] == [twos[0], ones[0]]
    assert cli("runs", "list", "--status", "NAPPING").code == 2


def test_dead_letters_lists_the_dead_runs_and_retries_them(cli: Cli) -> None:
    cli.create("failing")
    dead = triggered(cli, "failing", ["DEAD", "SUCCEEDED", "DEAD"])
    listed = cli("dead-letters")
    assert listed.code == 0, listed.err
    assert [row.split()[0] for row in listed.out.splitlines()[1:]] == [dead[2], dead[0]]
    assert [
        run["run_id"] for run in cli("dead-letters", "--job", "failing", "-o", "json").json()["items"]
    ] == [
        dead[2],
        dead[0],
    ]
    retried = cli("dead-letters", "--retry")
    assert retried.code == 0, retried.err
    assert f"retrying run {dead[2]}: ENQUEUED" in retried.out
    assert f"retrying run {dead[0]}: ENQUEUED" in retried.out
    assert "retried 2 of 2 runs" in retried.err
    assert cli("dead-letters").out.strip() == "no runs"
    assert cli("dead-letters", "--retry").err.strip() == "no dead runs to retry"


def test_dead_letters_and_watch_name_each_runs_job_with_few_calls(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given dead runs of two jobs
    cli.create("nightly")
    cli.create("hourly")
    nightly = triggered(cli, "nightly", ["DEAD", "DEAD"])
    hourly = triggered(cli, "hourly", ["DEAD"])
    named = {nightly[0]: "nightly", nightly[1]: "nightly", hourly[0]: "hourly"}
    calls = count_job_reads(monkeypatch)

    # When dead-letters lists them
    listed = cli("dead-letters")

    # Then each row names its run's job, all found with one page of the job list
    assert listed.code == 0, listed.err
    header, *rows = listed.out.splitlines()
    assert header.split()[:3] == ["RUN_ID", "JOB", "SCHEDULED_FOR"]
    assert {row.split()[0]: row.split()[1] for row in rows} == named
    assert calls == {"list_jobs": 1}
    # And -o json is the API's objects, as they were
    assert "JOB" not in cli("dead-letters", "-o", "json").out
    # And with --job, the job found by its name is not looked up again
    calls.clear()
    only = cli("dead-letters", "--job", "hourly")
    assert [row.split()[:2] for row in only.out.splitlines()[1:]] == [[hourly[0], "hourly"]]
    assert calls == {"list_jobs": 1, "get_job": 1}  # the name found in the list, then the job read by id

    # When runs watch follows them, Then each line names the run's job beside its status
    calls.clear()
    watched = cli("runs", "watch", "--status", "DEAD", "--since", "1h", "--count", "3", "--interval", "0.1")
    assert watched.code == 0, watched.err
    lines = [line.split() for line in watched.out.splitlines()]
    assert {line[1]: line[3] for line in lines} == {run_id: f"job={name}" for run_id, name in named.items()}
    assert {line[2] for line in lines} == {"DEAD"}
    assert calls == {"list_jobs": 1}


def count_job_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the CLI reads one job (``get_job``) or a page of jobs (``list_jobs``) from now on."""
    from tickwork_client import Client

    calls: dict[str, int] = {}
    for name in ("get_job", "list_jobs"):
        original = getattr(Client, name)

        def counted(
            self: Client, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any
        ) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Client, name, counted)
    return calls


# --- apply, export ------------------------------------------------------------------------------------------
SPECS = """\
name: nightly-report
schedule: {type: cron, expression: "0 3 * * *", timezone: Europe/Paris}
target: {type: http, url: "https://hooks.example.com/nightly"}
payload: {report: nightly}
retry: {max_attempts: 3}
---
name: hourly-sync
schedule: {type: rate, every_seconds: 3600}
target: {type: http, url: "https://hooks.example.com/sync", headers: {X-Team: ops}}
tags: {team: ops}
"""


def test_apply_creates_then_updates_by_name_and_then_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    cli.create("hourly-sync", "--rate", "1h", "--url", "https://hooks.example.com/sync")  # exists already
    specs = tmp_path / "jobs.yaml"
    specs.write_text(SPECS)
    applied = cli("apply", "-f", str(specs))
    assert applied.code == 0, applied.err
    created = re.search(r"^job nightly-report created \(([0-9A-Z]{26})\)$", applied.out, re.MULTILINE)
    assert created
    assert "job hourly-sync updated: target, tags" in applied.out
    assert applied.out.splitlines()[-1] == "applied 2 specs: 1 created, 1 updated, 0 unchanged, 0 failed"
    nightly = cli("jobs", "get", created.group(1), "-o", "json").json()
    assert (nightly["payload"], nightly["retry"]["max_attempts"]) == ({"report": "nightly"}, 3)
    sync = cli("jobs", "get", "hourly-sync", "-o", "json").json()
    assert (sync["target"]["headers"], sync["tags"]) == ({"X-Team": "ops"}, {"team": "ops"})

    again = cli("apply", "-f", str(specs))
    assert again.code == 0, again.err
    assert "job nightly-report unchanged" in again.out
    assert "job hourly-sync unchanged" in again.out
    assert cli("jobs", "get", "hourly-sync", "-o", "json").json()["version"] == sync["version"]

    # A list in JSON, from stdin: a field left out of a spec goes back to its default.
    as_list = json.dumps([{**yaml.safe_load(SPECS.split("---")[0]), "retry": {"max_attempts": 4}}])
    changed = cli("apply", "-f", "-", "-o", "json", stdin=as_list)
    assert changed.code == 0, changed.err
    [outcome] = changed.json()
    assert (outcome["name"], outcome["action"], outcome["changes"]) == (
        "nightly-report",
        "updated",
        ["retry"],
    )
    assert outcome["job"]["retry"]["max_attempts"] == 4


def test_apply_dry_run_shows_a_diff_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    before = cli.create(
        "nightly-report",
        "--cron",
        "0 2 * * *",
        "--timezone",
        "Europe/Paris",
        "--url",
        "https://hooks.example.com/nightly",
    )
    specs = tmp_path / "jobs.yaml"
    specs.write_text(SPECS)
    dry = cli("apply", "-f", str(specs), "--dry-run")
    assert dry.code == 0, dry.err
    assert "job nightly-report would be updated: schedule, payload, retry" in dry.out
    assert "--- nightly-report (current)\n+++ nightly-report (applied)" in dry.out
    assert "-  expression: 0 2 * * *\n+  expression: 0 3 * * *" in dry.out
    assert "+payload:\n+  report: nightly" in dry.out
    assert "job hourly-sync would be created" in dry.out
    assert "+name: hourly-sync" in dry.out
    assert dry.out.splitlines()[-1] == "dry run: 1 to create, 1 to update, 0 unchanged; nothing was changed"
    listed = cli("jobs", "list", "-o", "json").json()["items"]
    assert listed == [cli("jobs", "get", before["job_id"], "-o", "json").json()]
    assert listed[0]["version"] == before["version"]
    as_json = cli("apply", "-f", str(specs), "--dry-run", "-o", "json").json()
    assert [(outcome["action"], outcome["changes"]) for outcome in as_json] == [
        ("updated", ["schedule", "payload", "retry"]),
        ("created", ["name", "schedule", "target", "tags"]),
    ]
    assert as_json[0]["patch"]["schedule"] == {"expression": "0 3 * * *"}


def test_export_prints_only_what_a_user_sets_and_apply_takes_it_back(cli: Cli) -> None:
    job = cli.create(
        "exported", "--cron", "0 9 * * 1-5", "--timezone", "America/New_York", "--exclude-holidays", "US-NY",
        "--url", "https://hooks.example.com/e", "--payload", '{"k": [1, 2]}', "--max-attempts", "2",
    )  # fmt: skip
    exported = cli("jobs", "export", "exported")
    assert exported.code == 0, exported.err
    assert exported.yaml() == {
        "name": "exported",
        "schedule": {
            "exclude": {"holidays": ["US-NY"]},
            "type": "cron",
            "expression": "0 9 * * 1-5",
            "timezone": "America/New_York",
        },
        "target": {"type": "http", "url": "https://hooks.example.com/e"},
        "payload": {"k": [1, 2]},
        "retry": {"max_attempts": 2},
    }
    assert cli("export", job["job_id"], "-o", "json").json() == exported.yaml()
    round_trip = cli("apply", "-f", "-", stdin=exported.out)
    assert round_trip.code == 0, round_trip.err
    assert "job exported unchanged" in round_trip.out
    assert cli("jobs", "get", "exported", "-o", "json").json()["version"] == job["version"]

    cli.create("second")
    everything = cli("jobs", "export", "--all")
    documents = list(yaml.safe_load_all(everything.out))
    assert [document["name"] for document in documents] == ["second", "exported"]
    assert not any(READ_ONLY & set(document) for document in documents)
    assert "unchanged" in cli("apply", "-f", "-", stdin=everything.out).out
    assert cli("jobs", "export").code == 2  # neither names nor --all


def test_apply_refuses_bad_specs_and_still_applies_the_good_ones(cli: Cli, tmp_path: Path) -> None:
    no_name = cli("apply", "-f", "-", stdin="schedule: {type: rate, every_seconds: 60}\n")
    assert no_name.code == 2
    assert "has no name" in no_name.err
    twice = cli("apply", "-f", "-", stdin=SPECS + "---\n" + SPECS.split("---")[0])
    assert twice.code == 2
    assert "more than one spec names 'nightly-report'" in twice.err
    bad = SPECS.replace('expression: "0 3 * * *"', 'expression: "0 3 * *"')
    partly = cli("apply", "-f", "-", stdin=bad)
    assert partly.code == 1
    assert "error: invalid_schedule: job nightly-report:" in partly.err
    assert "(field: schedule.expression)" in partly.err
    assert "job hourly-sync created" in partly.out
    assert [job["name"] for job in cli("jobs", "list", "-o", "json").json()["items"]] == ["hourly-sync"]
    missing = cli("apply", "-f", str(tmp_path / "absent.yaml"))
    assert missing.code == 2
    assert "cannot read" in missing.err


# --- preview, stats -----------------------------------------------------------------------------------------
def test_preview_lists_fire_times_across_a_dst_change(cli: Cli) -> None:
    args = ("preview", "--cron", "30 2 * * *", "--timezone", "America/New_York")
    window = ("--after", "2025-03-08T12:00:00-05:00", "--count", "2")
    document = cli(*args, *window, "-o", "json")
    assert document.code == 0, document.err
    assert document.json()["fire_times"] == ["2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"]
    assert document.json()["description"] == "At 02:30, America/New_York"
    assert [fire["dst"] for fire in document.json()["fires"]] == ["shifted", None]
    table = cli(*args, *window)
    assert table.code == 0
    described, *lines = table.out.splitlines()
    assert described == "At 02:30, America/New_York"
    assert lines[0].split() == ["FIRE_TIME", "LOCAL", "(America/New_York)", "NOTE"]
    assert lines[1].split()[:4] == ["2025-03-09T07:00:00Z", "2025-03-09", "03:00:00", "EDT"]
    assert "fires at the end of the gap" in lines[1]  # shifted past the gap, and the table says so
    assert lines[2].split() == ["2025-03-10T06:30:00Z", "2025-03-10", "02:30:00", "EDT", "-"]


def test_preview_marks_holidays_windows_and_jitter(cli: Cli) -> None:
    args = (
        "preview", "--cron", "0 9 * * *", "--timezone", "America/New_York",
        "--exclude-holidays", "US-NY", "--exclude-window", "* * * * SAT,SUN", "--jitter", "10m",
        "--after", "2026-11-24T00:00:00Z", "--count", "3",
    )  # fmt: skip
    document = cli(*args, "-o", "json")
    assert document.code == 0, document.err
    sent = document.json()
    assert sent["fire_times"] == ["2026-11-24T14:00:00Z", "2026-11-25T14:00:00Z", "2026-11-27T14:00:00Z"]
    assert sent["fires"][2]["excluded"] == "excluded: holiday Thanksgiving Day (US-NY)"
    assert sent["fires"][0]["starts_by"] == "2026-11-24T14:10:00Z"
    table = cli(*args)
    assert table.code == 0, table.err
    described, _, *rows = table.out.splitlines()
    assert "except on US-NY holidays" in described
    assert rows[0].endswith("starts by 2026-11-24 09:10:00 EST")
    assert rows[2].split()[0] == "2026-11-26T14:00:00Z"
    assert "not fired: holiday Thanksgiving Day (US-NY)" in rows[2]


def test_jobs_create_takes_exclusions_and_jitter_as_flags(cli: Cli) -> None:
    job = cli.create(
        "holiday-aware", "--cron", "0 9 * * 1-5", "--timezone", "America/New_York",
        "--exclude-holidays", "US-NY", "--exclude-holidays", "NYSE", "--exclude-date", "2026-12-24",
        "--exclude-date", "2026-12-28..2026-12-31", "--exclude-window", "* 9 * * 5", "--jitter", "90",
        "--url", "https://hooks.example.com/report",
    )  # fmt: skip
    assert job["jitter_seconds"] == 90
    assert job["schedule"]["exclude"] == {
        "dates": ["2026-12-24"],
        "date_ranges": [{"start": "2026-12-28", "end": "2026-12-31"}],
        "windows": ["* 9 * * 5"],
        "holidays": ["US-NY", "NYSE"],
        "timezone": None,
    }
    shown = cli("jobs", "get", job["job_id"])
    assert "except on US-NY holidays, NYSE holidays, 2026-12-24 and 2026-12-28 to 2026-12-31" in shown.out


def test_exclusions_on_a_one_time_job_are_refused_by_the_cli(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "once", "--at", "+1h", "--exclude-date", "2026-12-24",
        "--url", "https://hooks.example.com/x",
    )  # fmt: skip
    assert result.code == 2
    assert "--exclude-* apply to --cron and --rate schedules" in result.err


def test_a_bad_holiday_calendar_is_named_by_the_api(cli: Cli) -> None:
    result = cli("preview", "--cron", "0 9 * * *", "--exclude-holidays", "Atlantis")
    assert result.code == 1
    assert "schedule.exclude.holidays.0" in result.err and "unknown holiday calendar Atlantis" in result.err


def test_preview_needs_a_schedule(cli: Cli) -> None:
    result = cli("preview", "--count", "3")
    assert result.code == 2
    assert "preview needs a schedule: one of --at, --cron or --rate" in result.err


def test_stats(cli: Cli) -> None:
    cli.create("a")
    cli.create("b")
    cli("jobs", "pause", "b")
    cli("jobs", "trigger", "b")
    document = cli("stats", "-o", "json")
    assert document.code == 0, document.err
    assert document.json()["jobs"]["ACTIVE"] == 1
    assert document.json()["jobs"]["PAUSED"] == 1
    table = cli("stats")
    assert "ACTIVE 1, PAUSED 1" in table.out
    assert "ENQUEUED 1" in table.out
    assert "queue depth" in table.out


def test_stats_show_flow_control_for_the_tenant_and_each_concurrency_key(cli: Cli, dynamodb: Any) -> None:
    DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).update(
        "acme", TenantChanges(max_concurrent_runs=4, max_runs_per_second=10, burst=20)
    )
    keyed = {
        "name": "etl",
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
        "target": {"type": "http", "url": "https://hooks.example.com/etl"},
        "concurrency_key": "warehouse-db",
        "max_concurrency": 2,
    }
    assert cli("apply", "-f", "-", stdin=json.dumps([keyed])).code == 0
    document = cli("stats", "-o", "json").json()
    assert document["flow"]["keys"] == [
        {"key": "warehouse-db", "max_concurrency": 2, "running": 0, "waiting": 0, "waiting_capped": False}
    ]
    table = cli("stats")
    assert "flow control:" in table.out
    assert re.search(r"tenant\s.*max 4, throttle 10/s, burst 20\s.*0\s.*0\s.*0", table.out), table.out
    assert re.search(r"key warehouse-db\s.*max 2\s.*0\s.*0", table.out), table.out


# --- errors -------------------------------------------------------------------------------------------------
def test_an_api_error_prints_code_message_and_field(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "bad", "--cron", "not a cron", "--url", "https://hooks.example.com/"
    )
    assert result.code == 1
    assert result.err.startswith("error: invalid_schedule: ")
    assert "(field: schedule.expression)" in result.err
    assert "Traceback" not in result.err
    assert result.out == ""
    assert cli("jobs", "list", "-o", "json").json()["items"] == []


def test_every_detail_of_a_refusal_is_shown(cli: Cli) -> None:
    result = cli("jobs", "create", "--name", "bad", "--cron", "x y", "--url", "ftp://hooks.example.com/")
    assert result.code == 1
    first, *others = result.err.splitlines()
    assert first.startswith("error: invalid_schedule: ")
    assert any(line.startswith("  - invalid_target: ") and "(field: target.url)" in line for line in others)


def test_a_wrong_token_is_unauthorized_and_never_printed(cli: Cli) -> None:
    result = cli("jobs", "list", token="tw_wrong-token")
    assert result.code == 1
    assert result.err.startswith("error: unauthorized:")
    assert "tw_wrong-token" not in result.out + result.err


def test_no_token_is_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "list", token=None)
    assert result.code == 2
    assert "TICKWORK_TOKEN" in result.err


def test_the_url_and_token_come_from_the_environment(cli: Cli) -> None:
    result = invoke("stats", "-o", "json", env={"TICKWORK_TOKEN": ACME, "TICKWORK_API_URL": cli.url})
    assert result.code == 0, result.err
    assert "queue_depth" in result.json()
    assert ACME not in result.out


def test_an_api_url_ending_in_v1_is_read_without_it(cli: Cli) -> None:
    # Given the API's URL with /v1 on its end, as copied from a route (from the environment, or a flag)
    for url in (f"{cli.url}/v1", f"{cli.url}/v1/"):
        # When a command calls the API, Then it reaches the routes (not "no such route")
        result = invoke("stats", "-o", "json", env={"TICKWORK_TOKEN": ACME, "TICKWORK_API_URL": url})
        assert result.code == 0, result.err
        assert "queue_depth" in result.json()
    flag = invoke("jobs", "list", "--api-url", f"{cli.url}/v1", "--token", ACME)
    assert (flag.code, flag.out.strip()) == (0, "no jobs"), flag.err


def test_an_unreachable_api_exits_3_with_the_url() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = invoke("--api-url", url, "--token", ACME, "--timeout", "5", "--retries", "0", "jobs", "list")
    assert result.code == 3
    assert f"GET {url}/v1/jobs: cannot reach the API" in result.err
    assert ACME not in result.err


# --- retries: a stub that answers 429 first -----------------------------------------------------------------
JOB_ID = "01JGZ4M8Q3V5XKQ1T7B2N6C9DE"


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    thread = start_in_thread(server.server)
    yield server
    server.server.shutdown()
    server.server.server_close()
    thread.join(timeout=5)


def test_a_429_is_sent_again_after_its_retry_after(stub: Stub) -> None:
    stub.script(rate_limited("1"), Reply(200, {**JOB, "job_id": JOB_ID}))
    started = time.monotonic()
    result = invoke("--api-url", stub.url, "--token", "tw_x", "jobs", "get", JOB_ID, "-o", "json")
    assert result.code == 0, result.err
    assert time.monotonic() - started >= 1.0  # the wait the API asked for
    assert result.json()["job_id"] == JOB_ID
    assert [seen.path for seen in stub.seen] == [f"/v1/jobs/{JOB_ID}"] * 2

    stub.script(rate_limited("1"), Reply(200, {**JOB, "job_id": JOB_ID}))
    refused = invoke("--api-url", stub.url, "--token", "tw_x", "--retries", "0", "jobs", "get", JOB_ID)
    assert refused.code == 1
    assert refused.err.startswith("error: rate_limited: slow down")
    assert len(stub.seen) == 3


# --- help, completion, version ------------------------------------------------------------------------------
def command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as the words that name it."""
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str], parent: Any) -> None:
        paths.append(path)
        ctx = command.make_context(
            path[-1] if path else "tickwork", [], parent=parent, resilient_parsing=True
        )
        for name in getattr(command, "list_commands", lambda ctx: [])(ctx):
            walk(command.get_command(ctx, name), [*path, name], ctx)

    walk(typer.main.get_command(app), [], None)
    return paths


COMMANDS = command_paths()


def test_the_command_tree_is_the_one_documented() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert names >= {
        "jobs create", "jobs list", "jobs get", "jobs update", "jobs pause", "jobs resume", "jobs cancel",
        "jobs trigger", "jobs runs", "jobs export", "runs list", "runs get", "runs retry", "runs watch",
        "dead-letters", "apply", "export", "preview", "stats", "tenants create", "local", "receive",
    }  # fmt: skip


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "tickwork")
def test_every_command_has_help_with_an_example(path: list[str]) -> None:
    result = invoke(*path, "--help")
    assert result.code == 0, result.err
    assert result.out.lstrip().startswith(f"Usage: {' '.join(['tickwork', *path])}")
    assert "Example" in result.out


@pytest.fixture
def shell_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The completion options take the shell's name rather than guess it from the parent process (Typer
    reads this variable when it builds the command, before the test runner sets its environment)."""
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")


@pytest.mark.usefixtures("shell_named")
def test_the_show_completion_option_prints_a_bash_script() -> None:
    shown = invoke("--show-completion", "bash")
    assert shown.code == 0, shown.err
    assert "_TICKWORK_COMPLETE=complete_bash" in shown.out
    assert "complete -o default -F _tickwork_completion tickwork" in shown.out
    # The script's protocol: given the words typed so far, the CLI answers with what may come next.
    words = invoke(
        env={"_TICKWORK_COMPLETE": "complete_bash", "COMP_WORDS": "tickwork jo", "COMP_CWORD": "1"}
    )
    assert words.out.split() == ["jobs"]
    words = invoke(
        env={"_TICKWORK_COMPLETE": "complete_bash", "COMP_WORDS": "tickwork runs w", "COMP_CWORD": "2"}
    )
    assert words.out.split() == ["watch"]


@pytest.mark.usefixtures("shell_named")
def test_installing_completion_writes_a_completion_file(tmp_path: Path) -> None:
    installed = invoke("--install-completion", "bash", env={"HOME": str(tmp_path)})
    assert installed.code == 0, installed.err
    script = tmp_path / ".bash_completions" / "tickwork.sh"
    assert "_tickwork_completion" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


def test_version() -> None:
    result = invoke("--version")
    assert result.code == 0
    assert result.out.startswith("tickwork ")


HEAVY = ("tickwork", "tickwork_client", "boto3", "botocore", "moto")
LOADED = f"""
import sys
from tickwork_local.cli import main
code = main(sys.argv[1:])
print(sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r})), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("argv", [["--help"], ["jobs", "--help"], ["apply", "--help"]])
def test_help_loads_no_server_code_boto3_or_moto(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"
    assert "Example" in done.stdout


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwork_local.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tickwork ")


def test_main_returns_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "--help"]) == 0
    assert main(["jobs", "frobnicate"]) == 2
    assert "No such command" in capsys.readouterr().err


# --- tenants create -----------------------------------------------------------------------------------------
def test_tenants_create_makes_a_tenant_whose_token_works(cli: Cli, dynamodb: Any) -> None:
    made = invoke("tenants", "create", "initech", "--max-jobs", "7", "-o", "json")
    assert made.code == 0, made.err
    created = made.json()
    assert created["tenant_id"] == "initech"
    assert created["token"].startswith("tw_")
    stored = DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).get("initech")
    assert stored.signing_secret == created["signing_secret"]
    assert stored.max_jobs == 7
    # The new token works against the API, and sees only the new tenant's (empty) list.
    cli.create("acme-only")
    assert cli("jobs", "list", "-o", "json", token=created["token"]).json()["items"] == []
    job = cli("jobs", "create", "--name", "initech-job", *DEFAULT_JOB_FLAGS, token=created["token"])
    assert job.code == 0, job.err
    assert [job["name"] for job in cli("jobs", "list", "-o", "json").json()["items"]] == ["acme-only"]


def test_tenants_create_prints_the_token_once_in_text(dynamodb: Any) -> None:
    result = invoke("tenants", "create", "hooli")
    assert result.code == 0, result.err
    assert "created tenant hooli" in result.out
    token_lines = [line for line in result.out.splitlines() if line.startswith("token ")]
    assert len(token_lines) == 1
    assert "tw_" in token_lines[0]
    assert "shown once" in token_lines[0]


def test_tenants_create_refuses_a_bad_name(dynamodb: Any) -> None:
    before = dynamodb.scan(TableName=tables.TENANTS.default_name)["Count"]
    result = invoke("tenants", "create", "Bad Name!")
    assert result.code == 2
    assert "tenant id 'Bad Name!' is not valid" in result.err
    assert dynamodb.scan(TableName=tables.TENANTS.default_name)["Count"] == before


def test_tenants_create_refuses_an_existing_tenant(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    result = invoke("tenants", "create", "acme")
    assert result.code == 1
    assert "error: conflict: tenant 'acme' already exists" in result.err
    # The existing signing secret, which acme's receivers check, is untouched.
    stored = DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).get("acme")
    assert stored.signing_secret == tenants["acme"].signing_secret


# --- receive ------------------------------------------------------------------------------------------------
SECRET = "receiver-secret"


@pytest.fixture
def receiver() -> Iterator[tuple[str, io.StringIO]]:
    out = io.StringIO()
    server = make_receiver("127.0.0.1", 0, SECRET, 202, out=out)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", out
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def deliver(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        status: int = response.status
        return status


def signed_delivery(secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    delivery = Delivery(
        job_id="01JOB",
        run_id="01JOB:1767225600000",
        scheduled_for=datetime.now(UTC) - timedelta(milliseconds=250),
        attempt=2,
        fencing_token=3,
        payload={"report": "daily"},
        tenant_secret=secret,
    )
    body = envelope_body(delivery)
    now = int(datetime.now(UTC).timestamp())
    return body, webhook_headers(delivery, body, now_epoch=now)


def test_receive_prints_a_verified_delivery(receiver: tuple[str, io.StringIO]) -> None:
    url, out = receiver
    body, headers = signed_delivery()
    assert deliver(url, body, headers) == 202
    (line,) = out.getvalue().splitlines()  # printed before the answer is sent
    assert "run=01JOB:1767225600000" in line
    assert "attempt=2" in line
    assert "signature verified" in line
    assert 'payload={"report":"daily"}' in line
    lag_ms = int(line.split("lag_ms=")[1].split()[0])
    assert 250 <= lag_ms < 60_000


def test_receive_flags_a_tampered_body(receiver: tuple[str, io.StringIO]) -> None:
    url, out = receiver
    body, headers = signed_delivery()
    tampered = body.replace(b'"daily"', b'"weekly"')
    assert deliver(url, tampered, headers) == 202
    (line,) = out.getvalue().splitlines()
    assert "signature INVALID" in line
    assert "signature verified" not in line


def test_receive_flags_another_secret(receiver: tuple[str, io.StringIO]) -> None:
    url, out = receiver
    body, headers = signed_delivery(secret="someone-else")
    deliver(url, body, headers)
    assert "signature INVALID" in out.getvalue()


def test_receive_without_a_secret_prints_json_lines() -> None:
    out = io.StringIO()
    server = make_receiver("127.0.0.1", 0, None, 200, out=out, as_json=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        body, headers = signed_delivery()
        assert deliver(f"http://127.0.0.1:{server.server_address[1]}/x", body, headers) == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    record = json.loads(out.getvalue())
    assert record["run_id"] == "01JOB:1767225600000"
    assert record["attempt"] == 2
    assert record["payload"] == {"report": "daily"}
    assert "signature" not in record  # nothing was checked without --secret


def test_receive_on_a_port_in_use_is_one_error_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("receive", "--port", str(port))
    assert result.code == 1
    assert result.err.strip().startswith(f"error: cannot_listen: cannot listen on 127.0.0.1:{port}")
