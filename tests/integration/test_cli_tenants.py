"""`tickwork tenants list | get | update | disable | enable | rotate-token`, run in-process against the
tenants table under moto, and the API's answers to what they changed (through the real handlers behind a
real HTTP server)."""

from __future__ import annotations

from typing import Any

import pytest
from tickwork import tables
from tickwork.adapters.dynamo import to_item
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.domain.tenants import MAX_BURST, MAX_RUNS_PER_SECOND, Tenant, hash_token
from tickwork_local.cli import options

from tests.conftest import TOKENS, item_counts, scan_all, seed_tenant
from tests.integration.test_cli import (  # noqa: F401 - fixtures
    Cli,
    api_url,
    clean_environment,
    cli,
    command_paths,
    invoke,
)

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]
TABLE = tables.TENANTS.default_name


def stored(dynamodb: Any, tenant_id: str = "acme") -> Tenant:
    return DynamoTenantStore(dynamodb, table=TABLE).get(tenant_id)


def set_job_count(dynamodb: Any, tenant_id: str, count: int) -> None:
    dynamodb.update_item(
        TableName=TABLE,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
        UpdateExpression="SET job_count = :n",
        ExpressionAttributeValues=to_item({":n": count}),
    )


def test_the_tenants_commands_exist_and_help_needs_no_tickwork() -> None:
    names = {" ".join(path) for path in command_paths()}
    assert names >= {
        "tenants create", "tenants list", "tenants get", "tenants update", "tenants disable",
        "tenants enable", "tenants rotate-token",
    }  # fmt: skip
    assert (options.MAX_RUNS_PER_SECOND, options.MAX_BURST) == (MAX_RUNS_PER_SECOND, MAX_BURST)
    shown = invoke("tenants", "--help")
    assert "AWS_ENDPOINT_URL" in shown.out  # how to reach a local stack's tables


# --- list ---------------------------------------------------------------------------------------------------
def test_list_shows_every_tenant_by_id_with_its_settings_and_no_secret(
    tenants: dict[str, Tenant], dynamodb: Any
) -> None:
    seed_tenant(dynamodb, "initech", "tw_initech", max_concurrent_runs=5, max_runs_per_second=10, burst=40)
    set_job_count(dynamodb, "acme", 3)

    listed = invoke("tenants", "list", "-o", "json")

    assert listed.code == 0, listed.err
    page = listed.json()
    assert [item["tenant_id"] for item in page["items"]] == ["acme", "globex", "initech"]
    assert page["next_cursor"] is None
    acme, _, initech = page["items"]
    assert (acme["job_count"], acme["disabled"], acme["api_requests_per_second"]) == (3, False, 50)
    assert (initech["max_concurrent_runs"], initech["max_runs_per_second"], initech["burst"]) == (5, 10, 40)
    for item in page["items"]:
        assert "signing_secret" not in item
    table = invoke("tenants", "list")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "TENANT",
        "STATE",
        "JOBS",
        "MAX_CONCURRENT_RUNS",
        "RUNS_PER_SECOND",
        "API_RPS",
    ]
    assert lines[1].split() == ["acme", "enabled", "3/10000", "-", "-", "50"]
    assert lines[3].split() == ["initech", "enabled", "0/10000", "5", "10", "(burst", "40)", "50"]
    for secret in ("secret-acme", hash_token(ACME), ACME):
        assert secret not in table.out + listed.out


def test_list_pages_with_limit_and_cursor(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    seed_tenant(dynamodb, "initech", "tw_initech")
    seen: list[str] = []
    argv = ["tenants", "list", "--limit", "2", "-o", "json"]
    while True:
        result = invoke(*argv)
        assert result.code == 0, result.err
        page = result.json()
        seen += [item["tenant_id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        argv = ["tenants", "list", "--limit", "2", "--cursor", page["next_cursor"], "-o", "json"]
    assert sorted(seen) == ["acme", "globex", "initech"]
    first = invoke("tenants", "list", "--limit", "1")
    assert "more tenants: add --cursor" in first.err


def test_list_without_tenants_and_a_cursor_without_a_limit(dynamodb: Any) -> None:
    assert invoke("tenants", "list").out.strip() == "no tenants"
    refused = invoke("tenants", "list", "--cursor", "acme")
    assert refused.code == 2
    assert "--cursor goes with --limit" in refused.err


# --- get ----------------------------------------------------------------------------------------------------
def test_get_shows_one_tenant(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    set_job_count(dynamodb, "acme", 2)
    shown = invoke("tenants", "get", "acme")
    assert shown.code == 0, shown.err
    fields = dict(line.split(None, 1) for line in shown.out.splitlines())
    assert fields["tenant_id"] == "acme"
    assert fields["state"] == "enabled"
    assert fields["jobs"] == "2 of 10000"
    assert fields["api_requests_per_second"] == "50"
    assert "secret-acme" not in shown.out
    document = invoke("tenants", "get", "acme", "-o", "yaml").yaml()
    assert (document["tenant_id"], document["job_count"]) == ("acme", 2)


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [("initech", 1, "error: not_found: tenant 'initech' not found"), ("Bad Name", 2, "is not valid")],
)
def test_get_refuses_an_unknown_or_malformed_tenant(
    tenants: dict[str, Tenant], name: str, code: int, message: str
) -> None:
    result = invoke("tenants", "get", name)
    assert (result.code, message in result.err) == (code, True), result.err


# --- update -------------------------------------------------------------------------------------------------
def test_update_changes_the_settings_given_and_nothing_else(
    tenants: dict[str, Tenant], dynamodb: Any
) -> None:
    before = stored(dynamodb)
    result = invoke(
        "tenants", "update", "acme", "--api-requests-per-second", "200", "--max-runs-per-second", "20",
        "--burst", "50", "--max-concurrent-runs", "8", "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    changed = {
        "api_requests_per_second": 200,
        "max_runs_per_second": 20,
        "burst": 50,
        "max_concurrent_runs": 8,
    }
    assert stored(dynamodb) == before.model_copy(update=changed)
    assert {key: result.json()[key] for key in changed} == changed
    text = invoke("tenants", "update", "acme", "--display-name", "Acme Corp")
    assert text.code == 0, text.err
    assert text.out.splitlines()[0] == "updated tenant acme"
    assert stored(dynamodb).name == "Acme Corp"
    assert stored(dynamodb, "globex") == tenants["globex"]


def test_update_with_none_removes_a_limit(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    invoke("tenants", "update", "acme", "--max-concurrent-runs", "4", "--max-runs-per-second", "5")
    result = invoke(
        "tenants", "update", "acme", "--max-concurrent-runs", "none", "--max-runs-per-second", "none"
    )
    assert result.code == 0, result.err
    assert (stored(dynamodb).max_concurrent_runs, stored(dynamodb).max_runs_per_second) == (None, None)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--burst", "5"], "error: invalid_setting: burst: burst 5 is below max_runs_per_second 10"),
        (["--max-runs-per-second", "none"], "burst 40 needs max_runs_per_second"),
        (["--max-runs-per-second", "41"], "burst 40 is below max_runs_per_second 41"),
    ],
)
def test_a_burst_below_the_rate_is_refused_naming_the_flag_and_nothing_is_written(
    dynamodb: Any, flags: list[str], message: str
) -> None:
    seed_tenant(dynamodb, "acme", ACME, max_runs_per_second=10, burst=40)
    if flags[0] == "--burst":
        invoke("tenants", "update", "acme", "--burst", "none")
    before = scan_all(dynamodb, TABLE)
    result = invoke("tenants", "update", "acme", *flags)
    assert result.code == 2
    assert message in result.err
    assert "(field: --burst)" in result.err
    assert scan_all(dynamodb, TABLE) == before


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--burst", "0"], "--burst"),
        (["--max-runs-per-second", "fast"], "--max-runs-per-second"),
        (["--max-runs-per-second", str(MAX_RUNS_PER_SECOND + 1)], "--max-runs-per-second"),
        (["--burst", str(MAX_BURST + 1)], "--burst"),
        (["--max-concurrent-runs", "-1"], "--max-concurrent-runs"),
        (["--api-requests-per-second", "0"], "--api-requests-per-second"),
        (["--api-requests-per-second", "10001"], "--api-requests-per-second"),
        (["--max-jobs", "0"], "--max-jobs"),
        (["--display-name", ""], "--display-name"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_its_flag(
    tenants: dict[str, Tenant], dynamodb: Any, flags: list[str], flag: str
) -> None:
    before = scan_all(dynamodb, TABLE)
    result = invoke("tenants", "update", "acme", *flags)
    assert result.code == 2, result.err
    assert flag in result.err
    assert scan_all(dynamodb, TABLE) == before


def test_update_needs_a_setting_and_an_existing_tenant(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    nothing = invoke("tenants", "update", "acme")
    assert nothing.code == 2
    assert "nothing to change: give at least one of --display-name, --max-jobs" in nothing.err
    before = item_counts(dynamodb)
    unknown = invoke("tenants", "update", "initech", "--max-jobs", "5")
    assert unknown.code == 1
    assert "error: not_found: tenant 'initech' not found" in unknown.err
    assert item_counts(dynamodb) == before


def test_a_raised_api_limit_is_what_the_api_applies(cli: Cli, dynamodb: Any) -> None:  # noqa: F811
    # Given acme at one request a second: a quick second request is refused (no retries, to see it)
    assert invoke("tenants", "update", "acme", "--api-requests-per-second", "1").code == 0
    statuses = [cli("jobs", "list", "--retries", "0").code for _ in range(3)]
    assert 1 in statuses
    # When the operator raises it, the same quick requests all pass
    assert invoke("tenants", "update", "acme", "--api-requests-per-second", "1000").code == 0
    assert [cli("jobs", "list", "--retries", "0").code for _ in range(5)] == [0] * 5


# --- disable and enable -------------------------------------------------------------------------------------
def test_disable_refuses_the_tenants_requests_and_enable_restores_them(
    cli: Cli,  # noqa: F811
    dynamodb: Any,
) -> None:
    job = cli.create("kept")
    counts = item_counts(dynamodb)

    disabled = invoke("tenants", "disable", "acme")

    assert disabled.code == 0, disabled.err
    assert disabled.out.splitlines()[0] == "disabled tenant acme: its API requests get 403, its fires wait"
    assert "disabled" in disabled.out.splitlines()[3]
    refused = cli("jobs", "get", job["job_id"])
    assert refused.code == 1
    assert "error: tenant_disabled: tenant 'acme' is disabled" in refused.err
    assert cli("jobs", "list", token=GLOBEX).code == 0
    # nothing deleted (the pause of the job moved its lane, which made the lane's item)
    assert item_counts(dynamodb) == {**counts, "jobs": counts["jobs"] + 1}
    assert invoke("tenants", "get", "acme", "-o", "json").json()["disabled"] is True

    enabled = invoke("tenants", "enable", "acme", "-o", "json")

    assert enabled.code == 0, enabled.err
    assert enabled.json()["disabled"] is False
    again = cli("jobs", "get", job["job_id"], "-o", "json")
    assert (again.code, again.json()["status"]) == (0, "ACTIVE")


def test_disabling_an_unknown_tenant_is_refused(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    result = invoke("tenants", "disable", "initech")
    assert (result.code, "not_found" in result.err) == (1, True)
    assert item_counts(dynamodb) == before


# --- rotate-token -------------------------------------------------------------------------------------------
def test_rotate_token_prints_the_new_token_once_and_the_old_one_stops_at_once(
    cli: Cli,  # noqa: F811
    dynamodb: Any,
) -> None:
    assert cli("jobs", "list").code == 0

    rotated = invoke("tenants", "rotate-token", "acme")

    assert rotated.code == 0, rotated.err
    assert rotated.out.splitlines()[0] == "rotated the default token of tenant acme"
    token_lines = [line for line in rotated.out.splitlines() if line.startswith("token ")]
    assert len(token_lines) == 1 and "shown once" in token_lines[0]
    token = token_lines[0].split()[1]
    assert token.startswith("tw_")
    assert "revoked 1 old token, refused from now" in " ".join(rotated.out.split())
    old = cli("jobs", "list")
    assert (old.code, "error: unauthorized" in old.err) == (1, True)
    assert cli("jobs", "list", token=token).code == 0
    assert cli("jobs", "list", token=GLOBEX).code == 0
    assert token not in str(scan_all(dynamodb, TABLE))  # only its hash is stored


def test_rotate_token_in_json_and_by_label(tenants: dict[str, Tenant], dynamodb: Any) -> None:
    made = invoke("tenants", "rotate-token", "acme", "--label", "ci", "-o", "json")
    assert made.code == 0, made.err
    document = made.json()
    assert (document["tenant_id"], document["label"], document["revoked"]) == ("acme", "ci", 0)
    store = DynamoTenantStore(dynamodb, table=TABLE)
    principal = store.by_token(document["token"])
    assert principal is not None and principal.actor == "acme:ci"
    assert store.by_token(ACME) is not None  # the default token is another label's


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["initech"], 1, "error: not_found: tenant 'initech' not found"),
        (["acme", "--label", "bad label"], 2, "label 'bad label' is not valid"),
        (["Acme"], 2, "tenant id 'Acme' is not valid"),
    ],
)
def test_rotate_token_refusals_write_nothing(
    tenants: dict[str, Tenant], dynamodb: Any, argv: list[str], code: int, message: str
) -> None:
    before = scan_all(dynamodb, TABLE)
    result = invoke("tenants", "rotate-token", *argv)
    assert (result.code, message in result.err) == (code, True), result.err
    assert "tw_" not in result.out + result.err
    assert scan_all(dynamodb, TABLE) == before


# --- the local stack's tenants ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "tenants", "message"),
    [
        (["--tenant-setting", "burst=5"], None, "--tenant-setting: burst: burst 5 needs max_runs_per_second"),
        (["--tenant-setting", "api=5"], None, "--tenant-setting: 'api=5' is not SETTING=VALUE"),
        ([], "acme:tw_a:max_jobs=0", "TICKWORK_LOCAL_TENANTS entry acme: max_jobs: Input should be greater"),
        ([], "acme", "TICKWORK_LOCAL_TENANTS entry 'acme' is not tenant:token"),
        (
            ["--tenant-setting", "burst=50"],
            "acme:tw_a:max_runs_per_second=100",
            "entry acme with --tenant-setting: burst: burst 50 is below max_runs_per_second 100",
        ),
        (
            [],
            "acme:tw_a:burst=5",
            "entry acme with --tenant-setting: burst: burst 5 needs max_runs_per_second",
        ),
    ],
)
def test_local_refuses_bad_tenant_settings_before_it_starts(
    argv: list[str], tenants: str | None, message: str
) -> None:
    # Port 1 cannot be bound: had the settings passed, the command would stop there rather than start.
    result = invoke("local", "--ephemeral", "--port", "1", *argv, env={"TICKWORK_LOCAL_TENANTS": tenants})
    assert result.code == 2, result.err
    assert message in result.err
