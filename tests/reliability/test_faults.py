"""Fault injection: each scenario of ``bench.faults`` (the same code ``python -m bench.faults`` reports on),
at a smaller number of fires, must end with every fire accounted for.

Given a workload of one-time, rate and cron jobs (some targets failing a few times, one always) on a fake
clock, when AWS calls fail, processes die, messages arrive twice, planners race or worker clocks drift,
then: every expected fire exists as a run in a terminal status, no run has overlapping attempts or two
calls in progress at once, no fire produced two successful calls unless a lost result excuses it (and then
with the same Idempotency-Key), no fire ran early, every DEAD run has its dead letter, and the counts by
status add up to the runs planned.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError
from tickwork.domain.models import RunStatus

from bench._faults import SQS_SENDS, FaultInjector, FaultRule
from bench.faults import SCENARIOS, Outcome, run_scenario
from tests.integration.conftest import START
from tests.reliability.conftest import Engine

FIRES = 30
SEED = 11


def assert_nothing_lost_or_doubled(outcome: Outcome) -> None:
    assert outcome.runs == outcome.expected
    assert outcome.lost == []
    assert outcome.not_terminal == []
    assert outcome.terminal == outcome.runs
    assert sum(outcome.statuses.values()) == outcome.runs  # the counters balance
    assert not outcome.unbalanced
    assert outcome.overlapping_attempts == []
    assert outcome.concurrent_calls == []
    assert outcome.duplicated == []
    assert outcome.wrong_keys == []
    assert outcome.early == []
    assert outcome.dead_without_letter == []
    assert outcome.recovered == outcome.hit
    # The workload did what it is for: successes, retries that ended well, and dead runs
    assert outcome.statuses["SUCCEEDED"] > 0
    assert outcome.statuses["DEAD"] > 0


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("dynamodb-throttled", {"throttle"}),
        ("dynamodb-errors", {"internal", "connection", "timeout"}),
        # SQS sends are few at this size: a handful of faults, drawn from every kind in turn
        ("sqs-sends", {"throttle", "internal", "connection", "timeout", "partial"}),
        ("workers-killed", {"worker killed after the lease", "worker killed after the call"}),
        ("planner-killed", {"crash_before", "crash_after"}),
        ("duplicate-deliveries", {"message delivered twice", "concurrent double deliveries"}),
    ],
)
def test_faults_lose_nothing_and_never_run_a_fire_twice_at_once(name: str, kinds: set[str]) -> None:
    outcome = run_scenario(SCENARIOS[name], fires=FIRES, seed=SEED)
    injected = set(outcome.injected)
    assert kinds <= injected if name != "sqs-sends" else len(kinds & injected) >= 2, outcome.injected
    assert outcome.hit > 0
    assert_nothing_lost_or_doubled(outcome)


def test_racing_planners_plan_each_fire_once() -> None:
    outcome = run_scenario(SCENARIOS["racing-planners"], fires=FIRES, seed=SEED)
    assert_nothing_lost_or_doubled(outcome)
    # Both planners put and sent, yet each fire was counted planned once
    assert outcome.metric_balance["planned"] == outcome.runs


def test_skewed_worker_clocks_lose_nothing_and_fire_early_by_less_than_a_second() -> None:
    outcome = run_scenario(SCENARIOS["clock-skew"], fires=FIRES, seed=SEED)
    # A fast worker clock can fire early (see the next test), never by a whole second or more
    assert outcome.max_early_seconds < 1.0
    outcome.early.clear()
    assert_nothing_lost_or_doubled(outcome)


@pytest.mark.xfail(
    strict=True,
    reason="a worker whose clock runs ahead fires early: SQS delays are whole seconds rounded down "
    "(design), so a message arrives up to 1 s before its fire and the worker waits out the rest by its "
    "own clock; a clock 2 s fast waits nothing",
)
def test_a_worker_clock_two_seconds_fast_does_not_fire_early(engine: Engine) -> None:
    # Given a fire at 09:00:10 and a planner tick at 09:00:09.25 (the message is visible at once)
    fire_at = START + timedelta(seconds=10)
    job = engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/skew")).job
    engine.clock.advance(seconds=9.25)
    engine.tick()
    (run,) = engine.runs_of("acme", job.job_id)
    # When a worker whose clock is 2 s fast takes the message
    worker = engine.runtime.worker(
        clock=lambda: engine.clock() + timedelta(seconds=2), sleep=engine.clock.sleep
    )
    worker.handle(engine.message_for(run))
    # Then the target was called, and (true, fake) time had reached the fire when it was
    assert len(engine.receiver.for_path("/skew")) == 1
    assert engine.clock() >= fire_at


def test_a_dead_letter_whose_send_failed_is_sent_when_the_message_comes_back(engine: Engine) -> None:
    # Given a run whose only attempt fails, and the dead-letter send right after the DEAD write failing
    engine.receiver.script["/down"] = [503]
    job = engine.create(
        schedule={"type": "once", "at": START.isoformat()},
        target=engine.http("/down"),
        retry={"max_attempts": 1},
    ).job
    (run,) = engine.runs_of("acme", job.job_id)
    faults = FaultInjector([FaultRule("sqs", frozenset({"SendMessage"}), 1.0, ("connection",))])
    faults.install(engine.sqs)
    with pytest.raises(BotoCoreError):
        engine.worker().handle(engine.message_for(run))
    faults.uninstall(engine.sqs)
    assert engine.run("acme", run.run_id).status is RunStatus.DEAD
    assert faults.counts == {"connection": 1}
    assert engine.dead_letters() == []
    # When the message comes back (it was not deleted) and again after that
    engine.worker().handle(engine.message_for(run))
    engine.worker().handle(engine.message_for(run))
    # Then the dead letter was sent once, and the target was not called again
    (letter,) = engine.dead_letters()
    assert letter["run_id"] == run.run_id
    assert letter["reason"] == "max_attempts"
    assert letter["last_error"]["code"] is not None
    assert len(engine.receiver.for_path("/down")) == 1


class Died(BaseException):
    """The planner process dying mid-tick."""


def lost_trigger(engine: Engine, job_id: str) -> str:
    """A manual run whose message never went out (every send failing): stored PLANNED, for the sweeper."""
    faults = FaultInjector([FaultRule("sqs", SQS_SENDS, 1.0, ("throttle",))])
    faults.install(engine.sqs)
    run = engine.runtime.service.trigger_job("acme", job_id, idempotency_key=None, now=engine.clock())
    faults.uninstall(engine.sqs)
    assert faults.counts == {"throttle": 1}
    assert run.status is RunStatus.PLANNED
    return run.run_id


def test_one_jobs_failed_cursor_write_does_not_stop_the_others_or_the_sweep(engine: Engine) -> None:
    # Given two jobs due in the same tick, a manual run whose send was lost, and every write of the first
    # job's cursor throttled
    fire_at = START + timedelta(minutes=10)
    first, second = (
        engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http(path)).job
        for path in ("/first", "/second")
    )
    manual = engine.create(schedule={"type": "rate", "every_seconds": 86_400}, target=engine.http("/old")).job
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    lost = lost_trigger(engine, manual.job_id)

    def throttle_first(params: dict[str, Any], **_: Any) -> None:
        if first.job_id in str(params.get("Key", {})):
            raise engine.dynamodb.exceptions.ProvisionedThroughputExceededException(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}},
                "UpdateItem",
            )

    engine.dynamodb.meta.events.register_first("before-parameter-build.dynamodb.UpdateItem", throttle_first)
    engine.clock.advance(minutes=10)
    # When the planner ticks
    report = engine.tick()
    engine.dynamodb.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", throttle_first)
    # Then both fires were sent, the second job's cursor moved, the sweep resent the lost run, and the first
    # job is still due
    assert report.planned_runs == 2
    assert engine.runtime.jobs.get("acme", second.job_id).next_fire_at is None
    assert engine.runtime.jobs.get("acme", first.job_id).next_fire_at == fire_at
    assert report.swept == 1
    assert engine.run("acme", lost).status is RunStatus.ENQUEUED
    # And the next tick sends the first job's fire again: the duplicate is absorbed, each target called once
    assert engine.tick().planned_runs == 1
    assert engine.runtime.jobs.get("acme", first.job_id).next_fire_at is None
    engine.drain()
    assert sorted(call.path for call in engine.receiver.requests) == ["/first", "/old", "/second"]
    assert engine.metrics.counts["DuplicateDeliveriesAbsorbed"] == 1


def test_a_planner_that_dies_mid_tick_keeps_the_cursors_it_moved_and_sends_the_rest_again(
    engine: Engine,
) -> None:
    # Given twelve one-time jobs due in the same tick, and a planner that dies on the eleventh cursor write
    engine.tick()  # a deployment's first tick records the due shard count, once
    fire_at = START + timedelta(minutes=10)
    jobs = [
        engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/batch")).job
        for _ in range(12)
    ]
    writes = {"count": 0}

    def die_on_the_eleventh(**_: Any) -> None:
        writes["count"] += 1
        if writes["count"] == 11:
            raise Died

    engine.dynamodb.meta.events.register_first(
        "before-parameter-build.dynamodb.UpdateItem", die_on_the_eleventh
    )
    engine.clock.advance(minutes=10)
    with pytest.raises(Died):
        engine.tick()
    engine.dynamodb.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", die_on_the_eleventh)
    # Then every fire was sent, and ten cursors moved; a new tick plans only the other two, again
    cursors = [engine.runtime.jobs.get("acme", job.job_id).next_fire_at for job in jobs]
    assert cursors.count(None) == 10
    report = engine.tick()
    assert (report.due_jobs, report.planned_runs) == (2, 2)
    # And each fire ran once: the two sent twice were absorbed
    engine.drain()
    assert len(engine.receiver.for_path("/batch")) == 12
    assert engine.metrics.counts["DuplicateDeliveriesAbsorbed"] == 2


def test_a_planner_that_dies_between_two_sends_moves_no_cursor_and_loses_nothing(engine: Engine) -> None:
    # Given twelve one-time jobs due in the same tick (two send requests), and a planner that dies after the
    # first request
    fire_at = START + timedelta(minutes=10)
    for _ in range(12):
        engine.create(schedule={"type": "once", "at": fire_at.isoformat()}, target=engine.http("/batch"))
    sends = {"count": 0}

    def die_on_the_second(**_: Any) -> None:
        sends["count"] += 1
        if sends["count"] == 2:
            raise Died

    engine.clock.advance(minutes=10)
    engine.sqs.meta.events.register_first("before-parameter-build.sqs.SendMessageBatch", die_on_the_second)
    with pytest.raises(Died):
        engine.tick()
    engine.sqs.meta.events.unregister("before-parameter-build.sqs.SendMessageBatch", die_on_the_second)
    assert len(engine.pump().receive()) == 10
    # When the next tick runs
    report = engine.tick()
    # Then it plans every job (the cursors waited for every send), and each fire runs once
    assert report.due_jobs == 12
    engine.drain()
    assert len(engine.receiver.for_path("/batch")) == 12


def test_one_runs_failed_repair_does_not_stop_the_sweep(engine: Engine) -> None:
    # Given two manual runs whose sends were lost, and the sweeper's first send failing
    jobs = [
        engine.create(schedule={"type": "rate", "every_seconds": 86_400}, target=engine.http("/swept")).job
        for _ in range(2)
    ]
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    lost = [lost_trigger(engine, job.job_id) for job in jobs]
    faults = FaultInjector([FaultRule("sqs", frozenset({"SendMessageBatch"}), 0.5, ("throttle",))], seed=1)
    faults.install(engine.sqs)
    engine.clock.advance(seconds=31)
    # When the sweeper runs
    report = engine.tick()
    faults.uninstall(engine.sqs)
    # Then the other run was sent, and the failed one is sent by the next sweep
    assert faults.counts == {"throttle": 1}
    assert report.swept == 1
    engine.clock.advance(seconds=31)
    assert engine.tick().swept == 1
    assert {engine.run("acme", run_id).status for run_id in lost} == {RunStatus.ENQUEUED}
    engine.drain()
    assert len(engine.receiver.for_path("/swept")) == 2
