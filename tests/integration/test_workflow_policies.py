"""A workflow job's policies, as any job's (moto, the real planner and worker on a fake clock, a loopback
receiver): a workflow run holds its job's lane until its last task ends, so `skip` skips the next fire and
`queue` starts it after; a paused job's fires fall in its pause and its misfire policy decides them; a
cancelled job's tasks not started end CANCELLED, and its running ones finish; a trigger starts a run of its
own."""

from __future__ import annotations

from typing import Any

from tickwork.domain.models import RunStatus
from tickwork.domain.pools import ClaimRequest, CompleteRequest
from tickwork.domain.workflow import child_run_id

from tests.integration.conftest import Engine

EVERY_MINUTE = {"type": "cron", "expression": "* * * * *", "timezone": "UTC"}


def held_then_hook(engine: Engine, name: str) -> dict[str, Any]:
    """hold (a pool task, held until the test completes it) -> after (a webhook)."""
    return {
        "type": "workflow",
        "tasks": [
            {"id": "hold", "target": {"type": "pool", "pool": name}},
            {"id": "after", "target": engine.http(f"/{name}/after"), "depends_on": ["hold"]},
        ],
    }


def fire_and_drain(engine: Engine, minutes: int = 1) -> None:
    """Let the planner plan and the worker run what falls due in the next ``minutes``."""
    for _ in range(minutes * 6):
        engine.clock.advance(seconds=10)
        engine.tick()
        engine.drain()


def complete_held(engine: Engine, pool: str) -> list[str]:
    """Every run waiting in ``pool`` claimed and completed; their run ids."""
    pools = engine.runtime.pools
    claimed = pools.claim("acme", pool, ClaimRequest(worker_id="w", max_runs=10, wait_seconds=0))
    for each in claimed:
        token = each.run.lease_token
        assert token is not None
        pools.complete("acme", each.run.run_id, CompleteRequest(lease_token=token))
    return [each.run.run_id for each in claimed]


def workflow_runs(engine: Engine, job_id: str) -> dict[str, RunStatus]:
    return {run.run_id: run.status for run in engine.runs_of("acme", job_id)}


def running_runs(engine: Engine, job_id: str) -> list[str]:
    return [run_id for run_id, status in workflow_runs(engine, job_id).items() if status is RunStatus.RUNNING]


def test_overlap_skip_skips_a_fire_while_the_workflow_run_before_it_runs(engine: Engine) -> None:
    job_id = engine.create(
        schedule=EVERY_MINUTE, target=held_then_hook(engine, "ov-skip"), overlap_policy="skip"
    ).job.job_id
    fire_and_drain(engine)
    [first] = running_runs(engine, job_id)

    # The next minutes' fires come while the first run's held task runs: skipped, their tasks never started
    fire_and_drain(engine, minutes=2)
    statuses = workflow_runs(engine, job_id)
    assert running_runs(engine, job_id) == [first]
    skipped = [run_id for run_id, status in statuses.items() if status is RunStatus.SKIPPED]
    assert len(skipped) >= 2 and set(statuses) == {first, *skipped}
    for run_id in skipped:
        assert engine.runtime.runs.tasks_of("acme", engine.run("acme", run_id)) == []

    # The first run ends with its tasks
    assert complete_held(engine, "ov-skip") == [child_run_id(first, "hold")]
    engine.drain()
    assert engine.run("acme", first).status is RunStatus.SUCCEEDED
    assert len(engine.receiver.for_path("/ov-skip/after")) == 1


def test_overlap_queue_starts_the_next_fire_once_the_workflow_run_before_it_ended(engine: Engine) -> None:
    job_id = engine.create(
        schedule=EVERY_MINUTE, target=held_then_hook(engine, "ov-queue"), overlap_policy="queue"
    ).job.job_id
    fire_and_drain(engine)
    [first] = running_runs(engine, job_id)
    fire_and_drain(engine)
    # The next fire waits its turn: not skipped, not started (no task of it in the pool)
    assert running_runs(engine, job_id) == [first]
    assert RunStatus.SKIPPED not in workflow_runs(engine, job_id).values()
    # When the first ends, the next starts: its own held task waits in the pool
    assert complete_held(engine, "ov-queue") == [child_run_id(first, "hold")]
    fire_and_drain(engine)
    assert engine.run("acme", first).status is RunStatus.SUCCEEDED
    [second] = running_runs(engine, job_id)
    assert second != first
    assert complete_held(engine, "ov-queue") == [child_run_id(second, "hold")]


def test_a_paused_workflow_jobs_fire_is_missed_and_none_of_its_tasks_runs(engine: Engine) -> None:
    hook = engine.http
    target = {"type": "workflow", "tasks": [{"id": "only", "target": hook("/paused/only")}]}
    job_id = engine.create(schedule=EVERY_MINUTE, target=target, misfire_policy="skip").job.job_id
    engine.runtime.service.pause_job("acme", job_id, reason="maintenance", actor="ops", now=engine.clock())

    fire_and_drain(engine, minutes=2)

    assert engine.receiver.for_path("/paused/only") == []
    assert RunStatus.RUNNING not in workflow_runs(engine, job_id).values()
    # Resumed, its next fire runs its tasks
    engine.runtime.service.resume_job("acme", job_id, engine.clock())
    fire_and_drain(engine)
    assert len(engine.receiver.for_path("/paused/only")) >= 1
    assert RunStatus.SUCCEEDED in workflow_runs(engine, job_id).values()


def test_a_cancelled_workflow_jobs_tasks_not_started_end_cancelled_and_its_running_ones_finish(
    engine: Engine,
) -> None:
    job_id = engine.create(schedule=EVERY_MINUTE, target=held_then_hook(engine, "cancelled")).job.job_id
    fire_and_drain(engine)
    [run_id] = running_runs(engine, job_id)
    pools = engine.runtime.pools
    [held] = pools.claim("acme", "cancelled", ClaimRequest(worker_id="w", max_runs=1, wait_seconds=0))
    assert held.run.lease_token is not None

    engine.runtime.service.cancel_job("acme", job_id, engine.clock())
    # The held task, running, finishes; the task after it is not started: CANCELLED, never called
    pools.complete("acme", held.run.run_id, CompleteRequest(lease_token=held.run.lease_token))
    fire_and_drain(engine)

    tasks = {
        run.run_id.rsplit("/", 1)[1]: run.status
        for run in engine.runtime.runs.tasks_of("acme", engine.run("acme", run_id))
    }
    assert tasks == {"hold": RunStatus.SUCCEEDED, "after": RunStatus.CANCELLED}
    assert engine.receiver.for_path("/cancelled/after") == []
    assert engine.run("acme", run_id).status is RunStatus.CANCELLED
    # and no fire after the cancel started a run
    assert running_runs(engine, job_id) == []


def test_a_trigger_of_a_workflow_job_starts_a_run_of_its_own(engine: Engine) -> None:
    hook = engine.http
    target = {"type": "workflow", "tasks": [{"id": "only", "target": hook("/triggered-own/only")}]}
    schedule = {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"}
    job_id = engine.create(schedule=schedule, target=target).job.job_id

    run = engine.runtime.service.trigger_job("acme", job_id, idempotency_key="now", now=engine.clock())
    engine.drain()

    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED
    [call] = engine.receiver.for_path("/triggered-own/only")
    assert call.json()["run_id"] == child_run_id(run.run_id, "only")
