"""Flow control's counts as pure functions (:mod:`tickwork.domain.flow`): the keys kept on a tenant's item,
and a limit's slot items counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.domain.flow import count_slots, key_entry, keys_of
from tickwork.domain.lanes import MAX_WAITERS_PER_SHARD, WAITER_LEASE, Holder, Lane, needs_waiter_note

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def holder(run_id: str, lease: timedelta) -> Holder:
    return Holder(
        run_id=run_id,
        token=1,
        attempt=1,
        scheduled_for=NOW,
        started_at=NOW,
        lease_until=NOW + lease,
        worker_id="w",
    )


def test_a_key_is_kept_with_its_limit_and_shown_with_the_largest_named() -> None:
    entries = [key_entry("db", 2), key_entry("db", 5), key_entry("a:b", 1), "junk", ":nokey"]
    assert keys_of(entries) == {"db": 5, "a:b": 1}


def test_running_is_the_live_holders_and_waiting_the_live_notes_of_runs_not_holding() -> None:
    items = [
        Lane(
            holders={
                "r1": holder("r1", timedelta(seconds=30)),
                "gone": holder("gone", -timedelta(seconds=1)),
            },
            waiters={
                "w1": NOW + WAITER_LEASE,
                "lapsed": NOW - timedelta(seconds=1),
                "r2": NOW + WAITER_LEASE,
            },
        ),
        Lane(holders={"r2": holder("r2", timedelta(seconds=30))}, waiters={"w1": NOW + WAITER_LEASE}),
    ]
    counts = count_slots(items, NOW, cap=MAX_WAITERS_PER_SHARD)
    # r2 holds a slot of the second item: its note on the first counts it as running only; w1 once.
    assert (counts.running, counts.waiting, counts.waiting_capped) == (2, 1, False)


def test_a_note_is_written_once_renewed_at_half_its_lease_and_never_past_the_cap() -> None:
    assert needs_waiter_note(Lane(), "r", NOW)
    noted = Lane(waiters={"r": NOW + WAITER_LEASE})
    assert not needs_waiter_note(noted, "r", NOW)
    assert not needs_waiter_note(noted, "r", NOW + WAITER_LEASE / 2 - timedelta(seconds=1))
    assert needs_waiter_note(noted, "r", NOW + WAITER_LEASE / 2 + timedelta(seconds=1))
    full = Lane(waiters={f"w{n}": NOW + WAITER_LEASE for n in range(MAX_WAITERS_PER_SHARD)})
    assert not needs_waiter_note(full, "r", NOW)
    assert count_slots([full], NOW, cap=MAX_WAITERS_PER_SHARD).waiting_capped
