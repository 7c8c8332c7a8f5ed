"""A tenant's throttle on run starts (``max_runs_per_second`` with ``burst``) on the whole engine: runs over
it wait for the start they reserved, none is dropped, and a tenant without one pays nothing for it."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from tickwork.domain.models import RunStatus
from tickwork.domain.tenants import TenantChanges
from tickwork.testing.world import World

RUNS = 200


def due_at_once(world: World, count: int, tenant: str = "acme") -> list[str]:
    at = (world.clock() + timedelta(seconds=5)).isoformat()
    return [
        world.create(tenant, name=f"once-{tenant}-{n}", schedule={"type": "once", "at": at}).name
        for n in range(count)
    ]


def test_200_runs_due_at_once_start_20_in_the_first_second_then_about_10_a_second() -> None:
    world = World()
    world.tenants.update("acme", TenantChanges(max_runs_per_second=10, burst=20))
    names = due_at_once(world, RUNS)
    world.run_for(40, step=0.1, tick_every=1)

    started = sorted(call.at for call in world.calls)
    assert len(started) == RUNS and {call.job for call in world.calls} == set(names), "a run was dropped"
    first = started[0]
    per_second = Counter(int((at - first).total_seconds()) for at in started)
    assert per_second[0] <= 20
    seconds = sorted(per_second)
    steady = [per_second[s] for s in seconds[1:-1]]
    assert steady and all(9 <= count <= 11 for count in steady), per_second
    # 20 in the first second, then 10 a second: the last start about 18 s after the first.
    assert 17 <= (started[-1] - first).total_seconds() <= 20
    statuses = Counter(run.status for run in world.runs.runs.values())
    assert statuses == Counter({RunStatus.SUCCEEDED: RUNS})
    assert world.letters.letters == []


def test_a_throttle_at_its_rate_alone_starts_at_most_the_rate_in_any_second() -> None:
    """Without a burst no second holds more than the rate: the waiting runs come back on whole seconds
    (the queue's delays are whole seconds), each second's share at once."""
    world = World()
    world.tenants.update("acme", TenantChanges(max_runs_per_second=5))
    due_at_once(world, 20)
    world.run_for(15, step=0.05)
    started = sorted(call.at for call in world.calls)
    assert len(started) == 20
    for index, start in enumerate(started):
        assert sum(1 for later in started[index:] if later - start < timedelta(seconds=1)) <= 5
    assert timedelta(seconds=3) <= started[-1] - started[0] <= timedelta(seconds=5)


def test_another_tenant_is_not_held_by_a_throttled_tenants_backlog() -> None:
    world = World()
    world.tenants.update("acme", TenantChanges(max_runs_per_second=2))
    due = world.clock() + timedelta(seconds=5)
    due_at_once(world, 40)
    theirs = due_at_once(world, 10, tenant="globex")
    world.run_for(30, step=0.1)
    calls = {call.job: call.at for call in world.calls}
    assert all(calls[name] - due < timedelta(seconds=1) for name in theirs)
    acme = sorted(at for name, at in calls.items() if name.startswith("once-acme"))
    assert len(acme) == 40 and acme[-1] - acme[0] >= timedelta(seconds=18)


def test_a_tenant_without_a_throttle_writes_no_throttle_item() -> None:
    world = World()
    due_at_once(world, 30)
    world.run_for(10, step=0.1)
    assert len(world.calls) == 30
    assert world.throttles.writes == 0
    assert world.metrics.counts.get("RunsThrottled", 0) == 0
