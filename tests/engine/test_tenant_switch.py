"""A disabled tenant's fires wait as in a pause of each of its jobs; enabling it plans the fires that fell in
the pause under each job's misfire policy, and nothing is lost (the whole engine, on fakes)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.app.tenant_switch import PAUSED_BY_TENANT_SWITCH
from tickwork.domain.models import Job, JobStatus, RunStatus
from tickwork.domain.tenants import TenantChanges
from tickwork.testing.world import OK, UNAVAILABLE, World

EVERY_10_S = {"type": "rate", "every_seconds": 10}


def fires_between(job: Job, world: World, start: datetime, end: datetime) -> list[datetime]:
    return [call.scheduled_for for call in world.calls_of(job) if start <= call.scheduled_for < end]


def test_a_disabled_tenants_fires_stop_and_another_tenants_go_on() -> None:
    world = World()
    ours = world.create(name="ours", schedule=EVERY_10_S)
    theirs = world.create("globex", name="theirs", schedule=EVERY_10_S)
    world.run_for(60)
    disabled = world.switch.disable("acme")
    assert disabled.disabled and disabled.disabled_at == world.clock()
    called_before = len(world.calls_of(ours))
    theirs_before = len(world.calls_of(theirs))
    world.run_for(120)
    assert len(world.calls_of(ours)) == called_before
    assert len(world.calls_of(theirs)) >= theirs_before + 11
    held = world.job(ours)
    assert held.status is JobStatus.PAUSED and held.pause is not None
    assert held.pause.paused_by == PAUSED_BY_TENANT_SWITCH and held.pause.paused_at == disabled.disabled_at


def test_enabling_backfills_every_fire_that_fell_in_the_disabled_time_once() -> None:
    world = World()
    job = world.create(name="ledger", schedule=EVERY_10_S, misfire_policy="backfill")
    start = world.clock()
    world.run_for(45)
    world.switch.disable("acme")
    world.run_for(120)
    enabled = world.switch.enable("acme")
    assert not enabled.disabled and enabled.disabled_at is None
    world.run_for(120)
    fired = [call.scheduled_for for call in world.calls_of(job)]
    assert len(fired) == len(set(fired)), "a fire ran twice"
    expected = [start + timedelta(seconds=10 * n) for n in range(1, len(fired) + 1)]
    assert fired == expected, "a fire was lost"
    assert world.clock() - fired[-1] < timedelta(seconds=20)
    assert world.job(job).status is JobStatus.ACTIVE


def test_enabling_records_the_fires_missed_under_a_skip_policy_and_goes_on() -> None:
    world = World()
    job = world.create(name="report", schedule=EVERY_10_S, misfire_policy="skip", misfire_grace_seconds=5)
    world.run_for(35)
    world.switch.disable("acme")
    world.run_for(100)
    enabled_at = world.clock()
    world.switch.enable("acme")
    world.run_for(60)
    runs = world.runs_of(job)
    missed = [run for run in runs if run.status is RunStatus.MISSED]
    assert missed, "the fires in the disabled time were not recorded"
    assert all(run.scheduled_for < enabled_at for run in missed)
    after = [run for run in runs if run.scheduled_for >= enabled_at]
    assert after and all(run.status is RunStatus.SUCCEEDED for run in after)
    # Every fire of the schedule is accounted for, once: run before, missed, or run after.
    times = [run.scheduled_for for run in runs]
    assert len(times) == len(set(times))
    assert times == [times[0] + timedelta(seconds=10 * n) for n in range(len(times))]


def test_a_job_its_tenant_had_paused_stays_paused_after_enabling() -> None:
    world = World()
    paused = world.create(name="paused", schedule=EVERY_10_S)
    active = world.create(name="active", schedule=EVERY_10_S)
    world.service.pause_job("acme", paused.job_id, reason="mine", actor="ops", now=world.clock())
    world.switch.disable("acme")
    world.run_for(30)
    world.switch.enable("acme")
    assert world.job(paused).status is JobStatus.PAUSED
    mine = world.job(paused).pause
    assert mine is not None and mine.paused_by == "ops"
    assert world.job(active).status is JobStatus.ACTIVE


def test_disabling_again_keeps_the_first_time_and_enabling_again_changes_nothing() -> None:
    world = World()
    job = world.create(name="twice", schedule=EVERY_10_S)
    first = world.switch.disable("acme")
    world.clock.advance(seconds=30)
    again = world.switch.disable("acme")
    assert again.disabled_at == first.disabled_at
    pause = world.job(job).pause
    assert pause is not None and pause.paused_at == first.disabled_at
    world.switch.enable("acme")
    version = world.job(job).version
    world.switch.enable("acme")
    assert world.job(job).version == version


def test_a_fire_reaching_a_worker_before_its_jobs_pause_waits_and_is_not_lost() -> None:
    """The flag reaches the workers before the switch has paused every job: a fire then waits in the
    queue; once its job is paused it is dropped as in any pause, and enabling plans it again."""
    world = World()
    job = world.create(name="early", schedule=EVERY_10_S, misfire_policy="backfill")
    world.run_for(25)
    world.tenants.update("acme", TenantChanges(disabled=True, disabled_at=world.clock()))
    notes: list[str] = []
    for _ in range(12):
        world.tick()
        notes += world.deliver()
        world.clock.advance(seconds=1)
    assert "waits: the tenant is disabled" in notes
    waiting_calls = len(world.calls_of(job))
    world.switch.disable("acme")  # the switch catches up with the flag: the job is paused as of it
    world.run_for(60)
    assert len(world.calls_of(job)) == waiting_calls
    world.switch.enable("acme")
    world.run_for(60)
    fired = [call.scheduled_for for call in world.calls_of(job)]
    assert fired == [fired[0] + timedelta(seconds=10 * n) for n in range(len(fired))]
    assert len(fired) >= 11


def test_a_retry_of_a_disabled_tenant_waits_and_runs_once_enabled() -> None:
    world = World()
    job = world.create(
        name="flaky",
        schedule={"type": "once", "at": (world.clock() + timedelta(seconds=5)).isoformat()},
        retry={"max_attempts": 3, "initial_delay_seconds": 5, "multiplier": 1, "jitter": "none"},
    )
    world.script["flaky"] = [UNAVAILABLE, UNAVAILABLE, OK]
    world.run_for(8)
    assert [call.attempt for call in world.calls_of(job)] == [1]
    world.switch.disable("acme")
    world.run_for(120)
    assert [call.attempt for call in world.calls_of(job)] == [1], "a retry ran while the tenant was disabled"
    world.switch.enable("acme")
    world.run_for(60)
    assert [call.attempt for call in world.calls_of(job)] == [1, 2, 3]
    assert world.statuses(job) == [RunStatus.SUCCEEDED]


def test_a_disabled_tenants_waiting_runs_take_no_place_under_its_throttle() -> None:
    world = World()
    world.tenants.update("acme", TenantChanges(max_runs_per_second=1))
    job = world.create(
        name="throttled",
        schedule={"type": "once", "at": (world.clock() + timedelta(seconds=5)).isoformat()},
        retry={"max_attempts": 3, "initial_delay_seconds": 5, "multiplier": 1, "jitter": "none"},
    )
    world.script["throttled"] = [UNAVAILABLE, OK]
    world.run_for(8)
    writes = world.throttles.writes
    world.switch.disable("acme")
    world.run_for(60)  # the retry comes and waits, again and again
    assert world.throttles.writes == writes
    world.switch.enable("acme")
    world.run_for(30)
    assert [call.attempt for call in world.calls_of(job)] == [1, 2]
