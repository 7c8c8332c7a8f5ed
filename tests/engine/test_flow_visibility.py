"""Flow control made visible on the whole engine (fakes): the stats' running, waiting and throttled counts
per tenant and per concurrency key, and the per-tenant gauges the workers put while runs wait."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from tickwork.app.flow import RUNNING_GAUGE, THROTTLED_GAUGE, WAITING_GAUGE
from tickwork.domain.flow import TenantFlow
from tickwork.domain.lanes import WAITER_LEASE
from tickwork.domain.models import Job, RunStatus
from tickwork.domain.tenants import TenantChanges
from tickwork.targets import TargetResult
from tickwork.testing.world import OK, World


def once(world: World, name: str, tenant: str = "acme", **spec: object) -> Job:
    at = (world.clock() + timedelta(seconds=1)).isoformat()
    return world.create(tenant, name=name, schedule={"type": "once", "at": at}, **spec)


def keyed(world: World, name: str, key: str = "warehouse-db", limit: int = 1, tenant: str = "acme") -> Job:
    return once(world, name, tenant, concurrency_key=key, max_concurrency=limit)


def flow_of(world: World, tenant: str = "acme") -> TenantFlow:
    flow = world.service.stats(tenant, world.clock()).flow
    assert flow is not None
    return flow


def calling(action: Callable[[], object]) -> Callable[[], TargetResult]:
    def call() -> TargetResult:
        action()
        return OK

    return call


def test_the_waiting_count_goes_up_while_a_key_is_full_and_back_to_0_once_the_runs_start() -> None:
    world = World()
    keyed(world, "first")
    for n in range(3):
        keyed(world, f"held-{n}")
    during: list[TenantFlow] = []

    def others_arrive() -> None:
        world.deliver(world.worker("w2"))  # the three others find the key full
        during.append(flow_of(world))

    world.script["first"] = [calling(others_arrive)]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)

    (flow,) = during
    (key,) = flow.keys
    assert (key.key, key.max_concurrency, key.running, key.waiting) == ("warehouse-db", 1, 1, 3)
    assert flow.waiting == 3 and flow.running_from == "sampled_runs"
    world.run_for(6, step=0.5)
    assert all(world.statuses(job) == [RunStatus.SUCCEEDED] for job in world.jobs.jobs.values())
    after = flow_of(world)
    assert (after.keys[0].running, after.keys[0].waiting, after.waiting) == (0, 0, 0)


def test_a_run_that_starts_at_once_writes_nothing_for_the_counts() -> None:
    world = World()
    keyed(world, "alone", limit=2)
    world.clock.advance(seconds=1)
    before = world.slots.writes
    world.deliver()
    # The claim of a slot and its release at the attempt's end, as before the counts: no note, no other write.
    assert world.slots.writes - before == 2
    assert world.slots.items[next(iter(world.slots.items))].waiters == {}
    assert world.gauges.recorded == []


def test_a_waiting_note_of_a_run_that_stopped_waiting_lapses_on_its_own() -> None:
    world = World()
    keyed(world, "first")
    keyed(world, "held")
    world.script["first"] = [calling(lambda: world.deliver(world.worker("w2")))]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)
    # The held run's message is lost (cancelled, dead-lettered): its note still counts for a while
    world.queue.messages.clear()
    assert flow_of(world).keys[0].waiting == 1
    world.clock.advance(seconds=WAITER_LEASE.total_seconds())
    assert flow_of(world).keys[0].waiting == 0


def test_the_running_count_of_a_tenant_with_an_in_flight_limit_is_its_live_slots() -> None:
    world = World()
    world.tenants.update("acme", TenantChanges(max_concurrent_runs=1))
    once(world, "first")
    once(world, "second")
    during: list[TenantFlow] = []

    def other_arrives() -> None:
        world.deliver(world.worker("w2"))
        during.append(flow_of(world))

    world.script["first"] = [calling(other_arrives)]
    world.script["second"] = [calling(other_arrives)]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)
    flow = during[0]
    assert (flow.running, flow.running_from, flow.waiting, flow.max_concurrent_runs) == (
        1,
        "in_flight_slots",
        1,
        1,
    )
    (tenant, gauges) = world.gauges.recorded[0]
    assert tenant == "acme" and gauges[RUNNING_GAUGE] == 1 and WAITING_GAUGE in gauges


def test_a_throttled_tenant_shows_its_runs_booked_ahead_and_puts_its_gauges() -> None:
    world = World()
    world.tenants.update("acme", TenantChanges(max_runs_per_second=10, burst=20))
    at = (world.clock() + timedelta(seconds=5)).isoformat()
    for n in range(200):
        world.create("acme", name=f"once-{n}", schedule={"type": "once", "at": at})
    world.run_for(6, step=0.1, tick_every=1)
    flow = flow_of(world)
    started = len(world.calls)
    # Every run not started is booked ahead, but for the second's worth whose start came and whose message
    # comes back on the next whole second (the queue's delays are whole seconds).
    assert 0 < 200 - started - 10 <= flow.throttled <= 200 - started
    assert (flow.max_runs_per_second, flow.burst) == (10, 20)
    assert any(values.get(THROTTLED_GAUGE, 0) > 0 for tenant, values in world.gauges.recorded)
    assert {tenant for tenant, _ in world.gauges.recorded} == {"acme"}
    world.run_for(30, step=0.1, tick_every=1)
    assert flow_of(world).throttled == 0 and len(world.calls) == 200


def test_another_tenants_keys_are_never_shown() -> None:
    world = World()
    keyed(world, "mine", key="acme-db", limit=3)
    keyed(world, "theirs", key="globex-db", limit=5, tenant="globex")
    assert [(key.key, key.max_concurrency) for key in flow_of(world).keys] == [("acme-db", 3)]
    assert [(key.key, key.max_concurrency) for key in flow_of(world, "globex").keys] == [("globex-db", 5)]
