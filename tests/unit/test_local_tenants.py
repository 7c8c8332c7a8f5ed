"""The local stack's tenants as ``TICKWORK_LOCAL_TENANTS`` and ``--tenant-setting`` give them: the older
``tenant:token`` entries, settings after the token, and every refusal naming where it comes from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tickwork.domain.tenants import Tenant
from tickwork_local.stack import (
    LocalTenant,
    TenantSettingsError,
    check_settings,
    parse_settings,
    parse_tenants,
    setting_text,
)


def test_the_older_syntax_still_reads() -> None:
    assert parse_tenants("acme:token-a, globex:token-b") == [
        LocalTenant("acme", "token-a"),
        LocalTenant("globex", "token-b"),
    ]
    assert parse_tenants("") == []


def test_an_entry_may_give_its_tenants_settings_after_the_token() -> None:
    (acme, globex) = parse_tenants(
        "acme:tw_a:api_requests_per_second=500:max_jobs=100:max_concurrent_runs=none,"
        "globex:tw_g:max_runs_per_second=10:burst=40:disabled=true"
    )
    assert acme == LocalTenant(
        "acme", "tw_a", {"api_requests_per_second": 500, "max_jobs": 100, "max_concurrent_runs": None}
    )
    assert globex.settings == {"max_runs_per_second": 10, "burst": 40, "disabled": True}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("acme", "entry 'acme' is not tenant:token"),
        ("acme:", "entry 'acme:' is not tenant:token"),
        (":tw_a", "entry ':tw_a' is not tenant:token"),
        ("acme:tw_a:api=500", "entry acme: 'api=500' is not SETTING=VALUE with a setting among"),
        ("acme:tw_a:max_jobs", "entry acme: 'max_jobs' is not SETTING=VALUE"),
        ("acme:tw_a:signing_secret=x", "'signing_secret=x' is not SETTING=VALUE"),
        ("acme:tw_a:max_jobs=many", "entry acme: max_jobs is a whole number, not 'many'"),
        ("acme:tw_a:max_jobs=none", "entry acme: max_jobs is a whole number, not 'none'"),
        ("acme:tw_a:burst=-1", "entry acme: burst is a whole number or none, not '-1'"),
        ("acme:tw_a:disabled=yes", "entry acme: disabled is true or false, not 'yes'"),
        ("acme:tw_a:api_requests_per_second=0", "entry acme: api_requests_per_second: Input should be"),
        ("acme:tw_a:api_requests_per_second=10001", "api_requests_per_second: Input should be less than"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(spec: str, message: str) -> None:
    with pytest.raises(TenantSettingsError) as raised:
        parse_tenants(f"globex:tw_g,{spec}")
    assert str(raised.value).startswith("TICKWORK_LOCAL_TENANTS entry")
    assert message in str(raised.value)


def test_an_entrys_throttle_is_checked_whole_once_the_flags_settings_join_it() -> None:
    # A burst in an entry may rely on a rate that --tenant-setting gives every tenant, and the other way.
    (acme,) = parse_tenants("acme:tw_a:burst=5")
    assert acme.settings == {"burst": 5}
    check_settings({"max_runs_per_second": 5, **acme.settings}, where="acme")
    with pytest.raises(TenantSettingsError, match=r"^acme: burst: burst 5 is below max_runs_per_second 10"):
        check_settings({"max_runs_per_second": 10, **acme.settings}, where="acme")
    with pytest.raises(TenantSettingsError, match=r"^acme: burst: burst 5 needs max_runs_per_second"):
        check_settings(acme.settings, where="acme")


def test_settings_for_every_tenant_are_checked_alike() -> None:
    assert parse_settings(["api_requests_per_second=500", "disabled=false"], where="--tenant-setting") == {
        "api_requests_per_second": 500,
        "disabled": False,
    }
    with pytest.raises(TenantSettingsError, match=r"^--tenant-setting: burst: burst 2 is below"):
        parse_settings(["max_runs_per_second=3", "burst=2"], where="--tenant-setting")


def test_settings_for_a_stored_tenant_are_checked_against_it() -> None:
    stored = Tenant(
        tenant_id="acme",
        name="acme",
        signing_secret="s",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        max_runs_per_second=50,
    )
    check_settings({"burst": 60}, where="here", tenant=stored)
    with pytest.raises(TenantSettingsError, match=r"^here: burst: burst 20 is below max_runs_per_second 50"):
        check_settings({"burst": 20}, where="here", tenant=stored)


@pytest.mark.parametrize(("value", "text"), [(None, "none"), (True, "true"), (False, "false"), (500, "500")])
def test_settings_are_shown_as_they_are_written(value: Any, text: str) -> None:
    assert setting_text(value) == text
