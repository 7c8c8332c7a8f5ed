"""``concurrency_key`` with ``max_concurrency`` on the whole engine (fakes): at most N runs of a tenant's jobs
sharing a key run at once; the others wait (never failed, never dead-lettered) and start within a second of
a place freeing; other keys and other tenants are not held."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from tickwork.domain.models import Job, RunStatus
from tickwork.targets import TargetResult
from tickwork.testing.world import OK, World


def once(world: World, name: str, tenant: str = "acme", **spec: object) -> Job:
    at = (world.clock() + timedelta(seconds=1)).isoformat()
    return world.create(tenant, name=name, schedule={"type": "once", "at": at}, **spec)


def keyed(world: World, name: str, key: str = "warehouse-db", limit: int = 1, tenant: str = "acme") -> Job:
    return once(world, name, tenant, concurrency_key=key, max_concurrency=limit)


def while_running(world: World, action: Callable[[], None]) -> Callable[[], TargetResult]:
    """A call that, while it is in progress, lets another worker handle what is due."""

    def call() -> TargetResult:
        action()
        return OK

    return call


def test_a_second_run_sharing_a_key_waits_for_the_first_and_starts_within_a_second() -> None:
    world = World()
    first, second = keyed(world, "first"), keyed(world, "second")
    notes: list[str] = []
    world.script["first"] = [while_running(world, lambda: notes.extend(world.deliver(world.worker("w2"))))]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)  # the first run starts; during it the second is delivered to another worker
    assert "held back: its concurrency key is at max_concurrency" in notes
    assert world.statuses(first) == [RunStatus.SUCCEEDED]
    assert world.statuses(second) in ([], [RunStatus.ENQUEUED])
    freed = world.clock()
    world.run_for(2, step=0.5)
    (call,) = world.calls_of(second)
    assert call.at - freed <= timedelta(seconds=1)
    assert world.statuses(second) == [RunStatus.SUCCEEDED]
    assert world.letters.letters == []
    assert world.most_in_flight.get("first", 0) + world.most_in_flight.get("second", 0) == 2


def test_up_to_max_concurrency_run_side_by_side() -> None:
    world = World()
    names = [f"job-{n}" for n in range(4)]
    for name in names:
        keyed(world, name, limit=3)
    running: list[str] = []
    held: list[str] = []

    def nested(name: str, rest: list[str]) -> Callable[[], TargetResult]:
        def call() -> TargetResult:
            running.append(name)
            if rest:
                world.script[rest[0]] = [nested(rest[0], rest[1:])]
                held.extend(world.deliver(world.worker(f"w-{name}"), limit=1))
            return OK

        return call

    for name in names:
        world.script[name] = [nested(name, [])]
    world.script[names[0]] = [nested(names[0], names[1:])]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)
    # Three at once: the fourth, delivered while three ran, waited.
    assert running[:3] == names[:3]
    assert "held back: its concurrency key is at max_concurrency" in held
    world.run_for(3, step=0.5)
    assert sorted(running) == sorted(names)


def test_other_keys_and_other_tenants_are_not_held() -> None:
    world = World()
    keyed(world, "mine")
    other_key = keyed(world, "other-key", key="another-db")
    same_key_elsewhere = keyed(world, "elsewhere", tenant="globex")
    unkeyed = once(world, "unkeyed")
    notes: list[str] = []
    world.script["mine"] = [while_running(world, lambda: notes.extend(world.deliver(world.worker("w2"))))]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)
    assert not any("held back" in note for note in notes), notes
    for job in (other_key, same_key_elsewhere, unkeyed):
        assert world.statuses(job) == [RunStatus.SUCCEEDED]


def test_a_run_held_by_its_key_is_never_failed_or_dead_lettered() -> None:
    world = World()
    holder = keyed(world, "holder")
    waiting = keyed(world, "waiting")
    seen: list[str] = []

    def long_call() -> TargetResult:
        # 50 s (within the holder's lease) of other workers finding the key full.
        for _ in range(50):
            world.clock.advance(seconds=1)
            seen.extend(world.deliver(world.worker("w2")))
        return OK

    world.script["holder"] = [long_call]
    world.clock.advance(seconds=1)
    world.deliver(limit=1)
    assert seen.count("held back: its concurrency key is at max_concurrency") >= 20
    assert world.statuses(holder) == [RunStatus.SUCCEEDED]
    world.run_for(3, step=0.5)
    (run,) = world.runs_of(waiting)
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert world.letters.letters == []
