"""The `tickwork` CLI, run in-process against the real API handlers behind a real HTTP server (moto)."""

from __future__ import annotations

import argparse
import io
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tickwork import tables
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.tenants import Tenant
from tickwork.targets.envelope import Delivery, envelope_body, webhook_headers
from tickwork_local.cli import build_parser, main, make_receiver
from tickwork_local.gateway import Gateway, HandlerPool, serve, start_in_thread

from tests.conftest import TOKENS
from tests.support.apigw import set_run_status

ACME = TOKENS["acme"]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    """Runs ``main`` with the test server's URL and a token, and captures what it printed."""

    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]):
        self.url = url
        self.capsys = capsys

    def __call__(self, *argv: str, token: str | None = ACME) -> Result:
        prefix = ["--api-url", self.url] + (["--token", token] if token is not None else [])
        code = main([*prefix, *argv])
        out, err = self.capsys.readouterr()
        return Result(code, out, err)

    def create(self, name: str, *flags: str) -> dict[str, Any]:
        result = self("--json", "jobs", "create", "--name", name, *(flags or DEFAULT_JOB_FLAGS))
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


@pytest.fixture
def api_url(tenants: dict[str, Tenant], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # A token or URL in the developer's shell must not leak into the tests.
    monkeypatch.delenv("TICKWORK_TOKEN", raising=False)
    # The API runs in this process: its EMF metrics would print into the CLI's captured output.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.delenv("TICKWORK_API_URL", raising=False)
    from functions.api.handler import make_handler
    from functions.authorizer.handler import lambda_handler as authorizer_handler

    server = serve(Gateway(HandlerPool(make_handler), authorizer_handler), "127.0.0.1", 0)
    thread = start_in_thread(server)  # the socket listens already: no wait needed
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def cli(api_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(api_url, capsys)


# --- jobs create --------------------------------------------------------------------------------------------
def test_create_from_flags(cli: Cli) -> None:
    result = cli(
        "--json",
        "jobs",
        "create",
        "--name",
        "daily-report",
        "--cron",
        "0 9 * * 1-5",
        "--timezone",
        "America/New_York",
        "--url",
        "https://hooks.example.com/report",
        "--method",
        "PUT",
        "--payload",
        '{"report": "daily"}',
        "--description",
        "weekday report",
        "--misfire-policy",
        "skip",
        "--overlap-policy",
        "queue",
        "--max-attempts",
        "3",
    )
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
    fetched = cli("--json", "jobs", "get", job["job_id"]).json()
    assert fetched["name"] == "daily-report"


def test_create_prints_a_readable_summary_by_default(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "every-ten", "--rate", "10s", "--url", "https://hooks.example.com/x"
    )
    assert result.code == 0, result.err
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
    result = cli("--json", "jobs", "create", "--file", str(spec), "--name", "overridden", "--method", "PATCH")
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
    result = cli("--json", "jobs", "create", "-f", str(spec), "--rate", "2h")
    assert result.code == 0, result.err
    job = result.json()
    assert job["name"] == "from-json"
    assert job["schedule"]["every_seconds"] == 7200  # the flag replaced the file's schedule
    assert job["tags"] == {"team": "ops"}


def test_create_with_any_target_as_json(cli: Cli) -> None:
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
    target = json.dumps({"type": "sqs", "queue_url": queue})
    job = cli.create("to-sqs", "--at", "+1h", "--target-json", target)
    assert job["target"] == {"type": "sqs", "queue_url": queue}
    assert job["schedule"]["type"] == "once"
    assert "sqs " + queue in cli("jobs", "get", job["job_id"]).out


def test_create_with_the_same_idempotency_key_makes_one_job(cli: Cli) -> None:
    first = cli.create("once-only", *DEFAULT_JOB_FLAGS, "--idempotency-key", "create-1")
    again = cli.create("once-only", *DEFAULT_JOB_FLAGS, "--idempotency-key", "create-1")
    assert first["job_id"] == again["job_id"]


def test_create_without_the_needed_fields_is_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "create", "--name", "lonely")
    assert result.code == 2
    assert "a schedule (--at, --cron or --rate)" in result.err
    assert "a target (--url or --target-json)" in result.err


def test_create_with_bad_payload_json_is_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "create", "--name", "x", *DEFAULT_JOB_FLAGS, "--payload", "{not json")
    assert result.code == 2
    assert "--payload is not valid JSON" in result.err
    assert cli("--json", "jobs", "list").json()["items"] == []


# --- jobs list, get -----------------------------------------------------------------------------------------
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
    # Columns line up: every row's schedule starts where the header's does.
    assert {row.index("ACTIVE") for row in rows} == {header.index("STATUS")}
    listed = cli("--json", "jobs", "list").json()
    assert [job["job_id"] for job in listed["items"]] == [second["job_id"], first["job_id"]]
    assert listed["next_cursor"] is None


def test_list_follows_every_page_with_all(cli: Cli) -> None:
    ids = {cli.create(f"job-{n}")["job_id"] for n in range(5)}
    one_page = cli("--json", "jobs", "list", "--limit", "2").json()
    assert len(one_page["items"]) == 2
    assert one_page["next_cursor"]
    hint = cli("jobs", "list", "--limit", "2")
    assert "--cursor" in hint.err
    everything = cli("--json", "jobs", "list", "--limit", "2", "--all").json()
    assert {job["job_id"] for job in everything["items"]} == ids
    assert everything["next_cursor"] is None
    table = cli("jobs", "list", "--all", "--limit", "2")
    assert len(table.out.splitlines()) == 1 + 5


def test_list_filters_by_status(cli: Cli) -> None:
    cli.create("running")
    paused = cli.create("resting")
    assert cli("jobs", "pause", paused["job_id"]).code == 0
    listed = cli("--json", "jobs", "list", "--status", "paused").json()
    assert [job["name"] for job in listed["items"]] == ["resting"]


def test_get_shows_the_job(cli: Cli) -> None:
    job = cli.create("show-me")
    result = cli("jobs", "get", job["job_id"])
    assert result.code == 0, result.err
    assert f"job_id        {job['job_id']}" in result.out
    assert "status        ACTIVE" in result.out
    assert 'schedule      cron "0 3 * * *" Europe/Paris' in result.out
    assert "in words      At 03:00, Europe/Paris" in result.out
    assert "target        http POST https://hooks.example.com/run" in result.out


def test_global_options_may_follow_the_subcommand(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    cli.create("anywhere")
    code = main(["jobs", "list", "--json", "--api-url", cli.url, "--token", ACME])
    out, _ = capsys.readouterr()
    assert code == 0
    assert [job["name"] for job in json.loads(out)["items"]] == ["anywhere"]


# --- pause, resume, cancel ----------------------------------------------------------------------------------
def test_pause_with_a_reason_then_resume_then_cancel(cli: Cli) -> None:
    job = cli.create("lifecycle")
    paused = cli("jobs", "pause", job["job_id"], "--reason", "maintenance window")
    assert paused.code == 0, paused.err
    assert f"paused job {job['job_id']}" in paused.out
    state = cli("--json", "jobs", "get", job["job_id"]).json()
    assert state["status"] == "PAUSED"
    assert state["pause"]["reason"] == "maintenance window"
    assert "maintenance window" in cli("jobs", "get", job["job_id"]).out

    resumed = cli("--json", "jobs", "resume", job["job_id"])
    assert resumed.code == 0, resumed.err
    assert resumed.json()["status"] == "ACTIVE"
    assert resumed.json()["pause"] is None

    cancelled = cli("jobs", "cancel", job["job_id"])
    assert cancelled.code == 0, cancelled.err
    assert f"cancelled job {job['job_id']}" in cancelled.out
    assert cli("--json", "jobs", "get", job["job_id"]).json()["status"] == "CANCELLED"


# --- trigger, runs ------------------------------------------------------------------------------------------
def test_trigger_with_the_same_key_gives_the_same_run(cli: Cli) -> None:
    job = cli.create("manual")
    first = cli("--json", "jobs", "trigger", job["job_id"], "--idempotency-key", "deploy-42")
    again = cli("--json", "jobs", "trigger", job["job_id"], "--idempotency-key", "deploy-42")
    assert (first.code, again.code) == (0, 0)
    assert first.json()["run_id"] == again.json()["run_id"]
    assert first.json()["trigger"] == "manual"
    other = cli("jobs", "trigger", job["job_id"])
    assert other.code == 0
    assert "triggered job" in other.out
    assert first.json()["run_id"] not in other.out


def test_job_runs_and_run_details(cli: Cli) -> None:
    job = cli.create("history")
    run = cli("--json", "jobs", "trigger", job["job_id"]).json()
    table = cli("jobs", "runs", job["job_id"])
    assert table.code == 0, table.err
    header, *rows = table.out.splitlines()
    assert header.split() == ["RUN_ID", "SCHEDULED_FOR", "STATUS", "ATTEMPT", "LAG_MS"]
    # Triggered runs are sent at once: the history shows the fire waiting in the queue.
    assert any(row.startswith(run["run_id"]) and "ENQUEUED" in row for row in rows)

    detail = cli("runs", "get", run["run_id"])
    assert detail.code == 0, detail.err
    assert run["run_id"] in detail.out
    assert "attempts       none yet" in detail.out
    assert cli("--json", "runs", "get", run["run_id"]).json()["attempts"] == []


def test_job_runs_follow_every_page_with_all(cli: Cli) -> None:
    # Every 30 s over the 15-minute planning horizon: 30 fires are sent at once, and listed as ENQUEUED.
    job = cli.create("often", "--rate", "30s", "--url", "https://hooks.example.com/often")
    page = cli("--json", "jobs", "runs", job["job_id"], "--limit", "4").json()
    assert len(page["items"]) == 4
    everything = cli("--json", "jobs", "runs", job["job_id"], "--limit", "4", "--all").json()
    times = [run["scheduled_for"] for run in everything["items"]]
    assert len(times) == len(set(times)) == 30
    assert times == sorted(times, reverse=True)


def test_runs_retry_reopens_a_dead_run(cli: Cli) -> None:
    job = cli.create("retry-me")
    run = cli("--json", "jobs", "trigger", job["job_id"]).json()
    # A run still waiting in the queue can't be retried: the API says why.
    refused = cli("runs", "retry", run["run_id"])
    assert refused.code == 1
    assert "error: invalid_state:" in refused.err
    set_run_status("acme", run["run_id"], "DEAD")
    retried = cli("runs", "retry", run["run_id"])
    assert retried.code == 0, retried.err
    assert f"retrying run {run['run_id']}: ENQUEUED" in retried.out


# --- preview, stats -----------------------------------------------------------------------------------------
def test_preview_lists_fire_times_across_a_dst_change(cli: Cli) -> None:
    args = ("preview", "--cron", "30 2 * * *", "--timezone", "America/New_York")
    window = ("--after", "2025-03-08T12:00:00-05:00", "--count", "2")
    document = cli("--json", *args, *window)
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
    document = cli("--json", *args)
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
    assert "one of the arguments --at --cron --rate is required" in result.err


def test_stats(cli: Cli) -> None:
    cli.create("a")
    paused = cli.create("b")
    cli("jobs", "pause", paused["job_id"])
    cli("jobs", "trigger", paused["job_id"])
    document = cli("--json", "stats")
    assert document.code == 0, document.err
    assert document.json()["jobs"]["ACTIVE"] == 1
    assert document.json()["jobs"]["PAUSED"] == 1
    table = cli("stats")
    assert "ACTIVE 1, PAUSED 1" in table.out
    assert "ENQUEUED 1" in table.out
    assert "queue depth" in table.out


# --- errors -------------------------------------------------------------------------------------------------
def test_an_api_error_prints_code_message_and_field(cli: Cli) -> None:
    result = cli(
        "jobs", "create", "--name", "bad", "--cron", "not a cron", "--url", "https://hooks.example.com/"
    )
    assert result.code == 1
    assert result.err.startswith("error: invalid_schedule: ")
    assert "(field: schedule.expression)" in result.err
    assert result.out == ""
    assert cli("--json", "jobs", "list").json()["items"] == []


def test_every_detail_of_a_refusal_is_shown(cli: Cli) -> None:
    result = cli("jobs", "create", "--name", "bad", "--cron", "x y", "--url", "ftp://hooks.example.com/")
    assert result.code == 1
    first, *others = result.err.splitlines()
    assert first.startswith("error: invalid_schedule: ")
    assert any(line.startswith("  - invalid_target: ") and "(field: target.url)" in line for line in others)


def test_an_unknown_job_is_not_found(cli: Cli) -> None:
    result = cli("jobs", "get", "01NOSUCHJOB")
    assert result.code == 1
    assert "error: not_found:" in result.err


def test_a_wrong_token_is_unauthorized_and_never_printed(cli: Cli) -> None:
    result = cli("jobs", "list", token="tw_wrong-token")
    assert result.code == 1
    assert result.err.startswith("error: unauthorized:")
    assert "tw_wrong-token" not in result.out + result.err


def test_no_token_is_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "list", token=None)
    assert result.code == 2
    assert "TICKWORK_TOKEN" in result.err


def test_the_token_comes_from_the_environment(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_TOKEN", ACME)
    monkeypatch.setenv("TICKWORK_API_URL", cli.url)
    code = main(["--json", "stats"])
    out, _ = cli.capsys.readouterr()
    assert code == 0
    assert "queue_depth" in json.loads(out)
    assert ACME not in out


def test_an_unreachable_api_exits_3_with_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code = main(["--api-url", url, "--token", ACME, "--timeout", "5", "jobs", "list"])
    _, err = capsys.readouterr()
    assert code == 3
    assert f"cannot reach the tickwork API at {url}/v1/jobs" in err
    assert ACME not in err


# --- help ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "manage jobs of the tickwork scheduler"),
        (["local"], "Run tickwork locally"),
        (["jobs"], "Create, list, inspect and manage jobs"),
        (["jobs", "create"], "Create a job"),
        (["jobs", "list"], "List the tenant's jobs"),
        (["jobs", "get"], "Show one job"),
        (["jobs", "pause"], "Pause a job"),
        (["jobs", "resume"], "Resume a paused job"),
        (["jobs", "cancel"], "Cancel a job"),
        (["jobs", "trigger"], "Run a job now"),
        (["jobs", "runs"], "List a job's run history"),
        (["runs"], "Inspect one run, or retry"),
        (["runs", "get"], "Show one run with all its attempts"),
        (["runs", "retry"], "Retry a FAILED, DEAD or ABANDONED run"),
        (["preview"], "Show the next fire times of a schedule"),
        (["stats"], "Show the tenant's health"),
        (["tenants"], "Administer tenants"),
        (["tenants", "create"], "Create a tenant"),
        (["receive"], "Run a small webhook receiver"),
    ],
)
def test_help_exits_0_and_says_what_the_command_does(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # undo the help formatter's line wrapping
    assert out.startswith("usage: tickwork")
    assert says in out


def test_every_option_has_a_help_string() -> None:
    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}")
            else:
                yield path, action

    missing = [(path, action.dest) for path, action in walk(build_parser(), "tickwork") if not action.help]
    assert missing == []


# --- tenants create -----------------------------------------------------------------------------------------
def test_tenants_create_makes_a_tenant_whose_token_works(
    cli: Cli, dynamodb: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--json", "tenants", "create", "initech", "--max-jobs", "7"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["tenant_id"] == "initech"
    assert created["token"].startswith("tw_")
    stored = DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).get("initech")
    assert stored.signing_secret == created["signing_secret"]
    assert stored.max_jobs == 7
    # The new token works against the API, and sees only the new tenant's (empty) list.
    cli.create("acme-only")
    assert cli("--json", "jobs", "list", token=created["token"]).json()["items"] == []
    made = cli(
        "--json", "jobs", "create", "--name", "initech-job", *DEFAULT_JOB_FLAGS, token=created["token"]
    )
    assert made.code == 0, made.err
    assert [job["name"] for job in cli("--json", "jobs", "list").json()["items"]] == ["acme-only"]


def test_tenants_create_prints_the_token_once_in_text(
    capsys: pytest.CaptureFixture[str], dynamodb: Any
) -> None:
    assert main(["tenants", "create", "hooli"]) == 0
    out = capsys.readouterr().out
    assert "created tenant hooli" in out
    token_lines = [line for line in out.splitlines() if line.startswith("token ")]
    assert len(token_lines) == 1
    assert "tw_" in token_lines[0]
    assert "shown once" in token_lines[0]


def test_tenants_create_refuses_a_bad_name(capsys: pytest.CaptureFixture[str], dynamodb: Any) -> None:
    before = dynamodb.scan(TableName=tables.TENANTS.default_name)["Count"]
    assert main(["tenants", "create", "Bad Name!"]) == 2
    err = capsys.readouterr().err
    assert "tenant id 'Bad Name!' is not valid" in err
    assert dynamodb.scan(TableName=tables.TENANTS.default_name)["Count"] == before


def test_tenants_create_refuses_an_existing_tenant(
    tenants: dict[str, Tenant], capsys: pytest.CaptureFixture[str], dynamodb: Any
) -> None:
    assert main(["tenants", "create", "acme"]) == 1
    assert "error: conflict: tenant 'acme' already exists" in capsys.readouterr().err
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
