"""The tenant-wide run list on the whole engine (fakes): failures and successes of several jobs as the
worker records them, listed newest first."""

from __future__ import annotations

from tickwork.domain.models import Run, RunStatus
from tickwork.domain.run_listing import RunFilter, position_of
from tickwork.testing.world import GONE, World


def every_page(world: World, only: RunFilter, limit: int) -> list[Run]:
    listed: list[Run] = []
    cursor = None
    while True:
        page = world.service.list_tenant_runs("acme", only, limit=limit, cursor=cursor)
        listed += page.items
        if page.next_cursor is None:
            return listed
        cursor = page.next_cursor


def test_failed_runs_of_a_failing_job_are_listed_among_the_successes_of_another() -> None:
    world = World()
    failing = world.create(name="failing", schedule={"type": "rate", "every_seconds": 10})
    fine = world.create(name="fine", schedule={"type": "rate", "every_seconds": 15})
    world.create("globex", name="theirs", schedule={"type": "rate", "every_seconds": 10})
    world.script["failing"] = [GONE]
    world.run_for(120)
    stored = sorted(world.runs_of(failing) + world.runs_of(fine), key=position_of, reverse=True)
    failed = [run for run in stored if run.status is RunStatus.FAILED]
    assert failed and {run.job_id for run in failed} == {failing.job_id}
    assert every_page(world, RunFilter(statuses=frozenset({RunStatus.FAILED})), 3) == failed
    assert every_page(world, RunFilter(), 4) == stored
    succeeded = RunFilter(statuses=frozenset({RunStatus.SUCCEEDED}), job_id=fine.job_id)
    assert every_page(world, succeeded, 2) == [run for run in stored if run.job_id == fine.job_id]
