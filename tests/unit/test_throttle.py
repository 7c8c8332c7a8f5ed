"""The GCRA throttle of :mod:`tickwork.domain.throttle`, as a pure function of times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tickwork.domain.tenants import Tenant
from tickwork.domain.throttle import MAX_STARTS_PER_ITEM, throttle_of

NOW = 1_000_000_000_000


def tenant(**settings: int) -> Tenant:
    created = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return Tenant.model_validate(
        {"tenant_id": "acme", "name": "acme", "signing_secret": "s", "created_at": created, **settings}
    )


def starts(rate: int, burst: int | None, count: int) -> list[int]:
    """When ``count`` starts asked for at the same moment may happen, in microseconds from then."""
    throttle = throttle_of(tenant(max_runs_per_second=rate, **({"burst": burst} if burst else {})))
    assert throttle is not None and throttle.shards == 1
    tat, found = NOW, []
    for _ in range(count):
        tat = max(tat, NOW) + throttle.interval_us
        found.append(throttle.start_us(tat, NOW) - NOW)
    return found


def test_no_rate_is_no_throttle() -> None:
    assert throttle_of(tenant()) is None


@pytest.mark.parametrize(("rate", "burst"), [(10, 20), (10, None), (3, 7), (100, 100), (1, 5)])
def test_no_one_second_window_holds_more_than_the_burst_and_the_pace_is_the_rate(
    rate: int, burst: int | None
) -> None:
    found = starts(rate, burst, 10 * rate)
    allowed = burst or rate
    for index, start in enumerate(found):
        in_window = sum(1 for other in found[index:] if other < start + 1_000_000)
        assert in_window <= allowed
    assert sum(1 for start in found if start < 1_000_000) == allowed
    # After the first second: the rate.
    later = [start for start in found if 1_000_000 <= start < 3_000_000]
    assert abs(len(later) - 2 * rate) <= 1


def test_a_high_rate_is_split_over_items_each_under_the_items_share() -> None:
    throttle = throttle_of(tenant(max_runs_per_second=2_000, burst=4_000))
    assert throttle is not None
    assert throttle.shards == 4
    assert throttle.interval_us == 1_000_000 // (2_000 // 4)
    assert 2_000 / throttle.shards <= MAX_STARTS_PER_ITEM


# --- runs booked ahead: the throttled count -----------------------------------------------------------------
def booked(rate: int, burst: int | None, count: int, later_us: int) -> tuple[int, int]:
    """(the count from the TAT alone, the count of the ``count`` starts asked for at once that are still
    after ``later_us``), for a throttle at rest before them."""
    throttle = throttle_of(tenant(max_runs_per_second=rate, **({"burst": burst} if burst else {})))
    assert throttle is not None
    tat, found = NOW, []
    for _ in range(count):
        tat = max(tat, NOW) + throttle.interval_us
        found.append(throttle.start_us(tat, NOW))
    now = NOW + later_us
    return throttle.booked_ahead(tat, now), sum(1 for start in found if start > now)


@pytest.mark.parametrize(("rate", "burst"), [(10, 20), (10, None), (3, 7), (100, 100), (1, 5)])
@pytest.mark.parametrize("later_us", [0, 1, 99_999, 100_000, 1_000_000, 5_432_100, 60_000_000])
def test_the_runs_booked_ahead_are_exactly_the_starts_reserved_after_now(
    rate: int, burst: int | None, later_us: int
) -> None:
    from_tat, counted = booked(rate, burst, 20 * rate, later_us)
    assert from_tat == counted


def test_200_runs_at_once_under_10_a_second_with_a_burst_of_20_leave_all_but_the_burst_throttled() -> None:
    throttle = throttle_of(tenant(max_runs_per_second=10, burst=20))
    assert throttle is not None
    from_tat, counted = booked(10, 20, 200, 0)
    assert from_tat == counted == 200 - throttle.capacity
    # Ten a second come off it.
    assert booked(10, 20, 200, 1_000_000)[0] == 200 - throttle.capacity - 10


def test_a_throttle_at_rest_or_within_its_burst_books_nothing_ahead() -> None:
    throttle = throttle_of(tenant(max_runs_per_second=10, burst=20))
    assert throttle is not None
    assert throttle.booked_ahead(None, NOW) == 0
    assert throttle.booked_ahead(NOW - 1, NOW) == 0
    assert throttle.booked_ahead(NOW + throttle.capacity * throttle.interval_us, NOW) == 0
