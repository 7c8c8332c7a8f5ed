"""Cancelling a fire that is still in the queue (shown ENQUEUED, with no run item yet): it is recorded
CANCELLED at once, its message is absorbed when it arrives, and its target is never called."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tickwork.domain.models import JobStatus, RunStatus, scheduled_run_id
from tickwork.errors import InvalidState, NotFound
from tickwork.testing.world import World


def test_a_queued_fire_is_cancelled_at_once_and_never_called() -> None:
    world = World()
    at = world.clock() + timedelta(seconds=5)
    job = world.create(name="report", schedule={"type": "once", "at": at.isoformat()})
    world.tick()  # the fire is sent, with its delay
    run_id = scheduled_run_id(job.job_id, at)
    assert world.service.get_run("acme", run_id, world.clock()).status is RunStatus.ENQUEUED

    cancelled = world.service.cancel_unrecorded("acme", run_id, world.clock())

    assert cancelled.status is RunStatus.CANCELLED
    assert world.runs.get("acme", run_id).status is RunStatus.CANCELLED
    world.run_for(10)
    assert world.calls_of(job) == []
    assert world.statuses(job) == [RunStatus.CANCELLED]
    assert world.job(job).status is JobStatus.COMPLETED
    with pytest.raises(InvalidState):
        world.service.cancel_unrecorded("acme", run_id, world.clock())


def test_a_fire_not_sent_yet_or_of_another_tenant_is_not_found() -> None:
    world = World()
    job = world.create(name="hourly", schedule={"type": "rate", "every_seconds": 3600})
    later = job.created_at + timedelta(hours=5)
    with pytest.raises(NotFound):
        world.service.cancel_unrecorded("acme", scheduled_run_id(job.job_id, later), world.clock())
    world.clock.advance(seconds=3600)
    world.tick()
    due = world.job(job).last_fire_at or job.created_at + timedelta(hours=1)
    with pytest.raises(NotFound):
        world.service.cancel_unrecorded("globex", scheduled_run_id(job.job_id, due), world.clock())
