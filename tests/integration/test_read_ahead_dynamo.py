"""Fires read ahead on the real stores (moto): the claim taken on arrival, the lanes of a moment's claims read
together at their fire, a pause 200 ms before the fire stopping it, and the requests each path makes.

The message is handed to the worker a second before its fire, as the local stack's lead brings it; the
worker's waits move the engine's clock (and make the change, 200 ms before the fire).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import boto3
from tickwork.domain.models import RunMessage, RunStatus, scheduled_run_id

from bench._cost_meter import Meter
from tests.integration.conftest import START, Engine

FIRE = START + timedelta(minutes=5)
BEFORE = timedelta(milliseconds=200)


def calls_to(engine: Engine, path: str) -> list[object]:
    return [request for request in engine.receiver.requests if request.path == path]


def one_time(engine: Engine, name: str) -> tuple[str, RunMessage]:
    job = engine.create(
        name=name, schedule={"type": "once", "at": FIRE.isoformat()}, target=engine.http(f"/{name}")
    ).job
    # planned (its message sent: the one handed over here stands for it), then a second before the fire
    engine.clock.advance(seconds=(FIRE - timedelta(seconds=5) - engine.clock()).total_seconds())
    engine.tick()
    engine.clock.advance(seconds=4)
    message = RunMessage(tenant_id="acme", run_id=scheduled_run_id(job.job_id, FIRE), ahead=True)
    return job.job_id, message


def waiting(engine: Engine, change: Callable[[], object] | None) -> Callable[[float], None]:
    """The worker's sleep: the clock moved on by as long, with ``change`` made 200 ms before the fire."""

    def sleep(seconds: float) -> None:
        end = engine.clock() + timedelta(seconds=seconds)
        if change is not None and end == FIRE:
            engine.clock.advance(seconds=(FIRE - BEFORE - engine.clock()).total_seconds())
            change()
        engine.clock.advance(seconds=max(0.0, (end - engine.clock()).total_seconds()))

    return sleep


def test_a_fire_claimed_ahead_is_called_at_its_time_after_one_read_of_its_lane(engine: Engine) -> None:
    _, message = one_time(engine, "ahead")
    engine.runtime.cached_tenants.get("acme")  # a warm worker's: read at most every 10 s
    meter = Meter(boto3.client("dynamodb", region_name="eu-west-1"))
    meter.attach(engine.dynamodb)
    at_fire: list[dict[str, int]] = []

    def sleep(seconds: float) -> None:
        at_fire.append(dict(meter.tally.requests))
        waiting(engine, None)(seconds)

    worker = engine.runtime.worker(clock=engine.clock, sleep=sleep)

    note = worker.handle(message)

    assert note == "attempt 1: success"
    assert len(calls_to(engine, "/ahead")) == 1
    run = engine.run("acme", message.run_id)
    assert run.status is RunStatus.SUCCEEDED and run.started_at == FIRE
    # on arrival: the job with its lane, the run's item, the claim; at the fire: one read of the lane
    assert at_fire[0] == {"dynamodb.Query": 1, "dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}
    after = dict(meter.tally.requests)
    assert after["dynamodb.BatchGetItem"] == 1
    assert after["dynamodb.PutItem"] == 1  # the outcome


def test_a_pause_200_ms_before_the_fire_stops_a_fire_claimed_ahead(engine: Engine) -> None:
    job_id, message = one_time(engine, "paused")
    pause = lambda: engine.runtime.service.pause_job(  # noqa: E731
        "acme", job_id, reason="hold", actor="acme:ops", now=engine.clock()
    )
    worker = engine.runtime.worker(clock=engine.clock, sleep=waiting(engine, pause))

    worker.handle(message)

    assert calls_to(engine, "/paused") == []
    lane = engine.runtime.lanes.get("acme", job_id)
    assert message.run_id not in lane.holders  # the claim taken ahead was let go
    assert engine.metrics.counts.get("RunsClaimedAhead") == 1
    assert engine.metrics.counts.get("ReadAheadDecidedAgain") == 1


def test_a_cancel_of_the_run_200_ms_before_the_fire_stops_it(engine: Engine) -> None:
    _, message = one_time(engine, "cancelled")
    shown: list[RunStatus] = []

    def cancel() -> None:
        shown.append(engine.run("acme", message.run_id).status)
        engine.runtime.service.cancel_unrecorded("acme", message.run_id, engine.clock())

    worker = engine.runtime.worker(clock=engine.clock, sleep=waiting(engine, cancel))

    worker.handle(message)

    assert shown == [RunStatus.ENQUEUED]  # claimed ahead, not started: still cancellable
    assert calls_to(engine, "/cancelled") == []
    assert engine.run("acme", message.run_id).status is RunStatus.CANCELLED
