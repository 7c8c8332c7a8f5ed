"""Unit tests for the tenant model: its settings, their limits, partial changes and the older names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError
from tickwork.domain.tenants import (
    DEFAULT_API_REQUESTS_PER_SECOND,
    MAX_API_REQUESTS_PER_SECOND,
    MAX_BURST,
    MAX_RUNS_PER_SECOND,
    Tenant,
    TenantChanges,
)
from tickwork.errors import TenantDisabled

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def tenant(**settings: Any) -> Tenant:
    return Tenant.model_validate(
        {"tenant_id": "acme", "name": "Acme", "signing_secret": "s", "created_at": CREATED, **settings}
    )


def refusal(error: ValidationError) -> tuple[str, str]:
    """The field and the message of the first error."""
    first = error.errors()[0]
    return ".".join(str(part) for part in first["loc"]), str(first["msg"])


# --- defaults ---------------------------------------------------------------------------------------------
def test_a_new_tenant_is_enabled_unthrottled_and_without_a_run_limit() -> None:
    made = tenant()
    assert made.disabled is False
    assert (made.max_concurrent_runs, made.max_runs_per_second, made.burst) == (None, None, None)
    assert made.api_requests_per_second == DEFAULT_API_REQUESTS_PER_SECOND


# --- every limit, on both sides -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "accepted", "refused"),
    [
        ("max_jobs", [1, 10_000_000], [0, -1]),
        ("max_concurrent_runs", [1, 100_000], [0, -5]),
        ("max_runs_per_second", [1, MAX_RUNS_PER_SECOND], [0, MAX_RUNS_PER_SECOND + 1]),
        ("api_requests_per_second", [1, MAX_API_REQUESTS_PER_SECOND], [0, MAX_API_REQUESTS_PER_SECOND + 1]),
    ],
)
def test_each_limit_is_bounded(field: str, accepted: list[int], refused: list[int]) -> None:
    for value in accepted:
        assert getattr(tenant(**{field: value}), field) == value
    for value in refused:
        with pytest.raises(ValidationError) as raised:
            tenant(**{field: value})
        assert refusal(raised.value)[0] == field


@pytest.mark.parametrize(
    ("rate", "burst"), [(1, 1), (10, 10), (10, 11), (MAX_RUNS_PER_SECOND, MAX_BURST), (5, None)]
)
def test_a_burst_of_at_least_the_rate_is_accepted(rate: int, burst: int | None) -> None:
    made = tenant(max_runs_per_second=rate, burst=burst)
    assert (made.max_runs_per_second, made.burst) == (rate, burst)


@pytest.mark.parametrize(
    ("rate", "burst", "message"),
    [
        (10, 9, "burst 9 is below max_runs_per_second 10"),
        (2, 1, "burst 1 is below max_runs_per_second 2"),
        (None, 5, "burst 5 needs max_runs_per_second"),
        (10, 0, "greater than or equal to 1"),
        (10, MAX_BURST + 1, f"less than or equal to {MAX_BURST}"),
    ],
)
def test_a_burst_below_the_rate_or_without_one_is_refused_naming_the_field(
    rate: int | None, burst: int, message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        tenant(max_runs_per_second=rate, burst=burst)
    field, text = refusal(raised.value)
    assert field == "burst"
    assert message in text


def test_a_refused_rate_is_reported_once_not_again_through_the_burst() -> None:
    with pytest.raises(ValidationError) as raised:
        tenant(max_runs_per_second=0, burst=5)
    assert [error["loc"] for error in raised.value.errors()] == [("max_runs_per_second",)]


@pytest.mark.parametrize("value", ["yes", 2, None])
def test_disabled_is_a_boolean(value: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        tenant(disabled=value)
    assert refusal(raised.value)[0] == "disabled"


# --- the older name of max_concurrent_runs -----------------------------------------------------------------
def test_an_item_written_with_max_in_flight_reads_as_max_concurrent_runs() -> None:
    older = tenant(max_in_flight=7)
    assert older.max_concurrent_runs == 7
    assert older.max_in_flight == 7  # what the worker reads
    assert "max_in_flight" not in older.model_dump()


def test_the_new_name_wins_over_the_old_one() -> None:
    assert tenant(max_in_flight=7, max_concurrent_runs=9).max_in_flight == 9


def test_the_old_name_is_validated_like_the_new_one() -> None:
    with pytest.raises(ValidationError) as raised:
        tenant(max_in_flight=0)
    assert refusal(raised.value)[0] == "max_concurrent_runs"


# --- disabled -----------------------------------------------------------------------------------------------
def test_only_a_disabled_tenant_is_refused() -> None:
    tenant().check_enabled()
    with pytest.raises(TenantDisabled) as raised:
        tenant(disabled=True).check_enabled()
    assert raised.value.code == "tenant_disabled"
    assert "tenant 'acme' is disabled" in raised.value.message


# --- partial changes ----------------------------------------------------------------------------------------
def test_changes_hold_only_the_fields_given() -> None:
    assert TenantChanges(api_requests_per_second=200).given() == {"api_requests_per_second": 200}
    assert TenantChanges(max_concurrent_runs=None).given() == {"max_concurrent_runs": None}
    assert TenantChanges().given() == {}


def test_a_change_leaves_the_other_settings_as_they_were() -> None:
    before = tenant(max_jobs=5, max_concurrent_runs=3, max_runs_per_second=4, burst=8)
    after = before.changed(TenantChanges(api_requests_per_second=200))
    assert after == before.model_copy(update={"api_requests_per_second": 200})


def test_a_change_can_clear_an_optional_limit() -> None:
    before = tenant(max_concurrent_runs=3, max_runs_per_second=4, burst=8)
    after = before.changed(TenantChanges(max_concurrent_runs=None, max_runs_per_second=None, burst=None))
    assert (after.max_concurrent_runs, after.max_runs_per_second, after.burst) == (None, None, None)


@pytest.mark.parametrize(
    ("stored", "changes", "message"),
    [
        ({"max_runs_per_second": 10}, {"burst": 5}, "burst 5 is below max_runs_per_second 10"),
        ({"max_runs_per_second": 10, "burst": 20}, {"max_runs_per_second": 30}, "burst 20 is below"),
        ({"max_runs_per_second": 10, "burst": 20}, {"max_runs_per_second": None}, "needs max_runs_per"),
        ({}, {"burst": 5}, "burst 5 needs max_runs_per_second"),
    ],
)
def test_a_change_is_checked_against_the_stored_settings(
    stored: dict[str, Any], changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        tenant(**stored).changed(TenantChanges.model_validate(changes))
    field, text = refusal(raised.value)
    assert (field, message in text) == ("burst", True)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_jobs", 0),
        ("max_concurrent_runs", 0),
        ("max_runs_per_second", MAX_RUNS_PER_SECOND + 1),
        ("burst", 0),
        ("api_requests_per_second", MAX_API_REQUESTS_PER_SECOND + 1),
        ("disabled", "maybe"),
        ("name", ""),
        ("signing_secret", "new"),
    ],
)
def test_a_change_out_of_bounds_or_unknown_is_refused_at_the_edge(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        TenantChanges.model_validate({field: value})
    assert refusal(raised.value)[0] == field


@pytest.mark.parametrize("field", ["max_jobs", "api_requests_per_second", "disabled", "name"])
def test_a_setting_that_always_has_a_value_cannot_be_cleared(field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        tenant().changed(TenantChanges.model_validate({field: None}))
    assert refusal(raised.value)[0] == field
