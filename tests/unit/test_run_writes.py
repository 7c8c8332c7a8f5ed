"""Every write of a run's status goes through one owner, which refuses a move the lifecycle does not allow.

Each case drives one caller (the worker, the API's service, the sweeper, the planner) on the in-memory engine
to one of its writes, with that move taken out of the lifecycle's table: the caller must fail with
IllegalTransition and write nothing. The callers never ask for an illegal move on their own (each decides
from the status it read), so the table is narrowed instead: a caller that wrote around the owner, or wrote
before checking, fails here. A static check finds any run write in ``tickwork/app`` outside the owner.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tickwork.app import planner, sweeper
from tickwork.app.ports import Expect, Written
from tickwork.domain.lifecycle import TRANSITIONS, IllegalTransition
from tickwork.domain.models import Job, Run, RunStatus
from tickwork.targets import TargetResult
from tickwork.testing.world import START, UNAVAILABLE, World

APP = Path(__file__).resolve().parents[2] / "layers" / "tickwork" / "python" / "tickwork" / "app"
OWNER = "lifecycle.py"

P, E, R, W = RunStatus.PLANNED, RunStatus.ENQUEUED, RunStatus.RUNNING, RunStatus.RETRY_WAIT
OK, DEAD, ABANDONED = RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.ABANDONED
MISSED, CANCELLED = RunStatus.MISSED, RunStatus.CANCELLED


class WorkerDied(BaseException):
    """A worker process killed mid-call: nothing it would have done afterwards happens."""


Move = tuple[RunStatus | None, RunStatus]


def statuses_written(world: World, monkeypatch: pytest.MonkeyPatch) -> list[RunStatus]:
    """The status of every run write asked of the store from now on, whether or not its condition held."""
    written: list[RunStatus] = []
    put = world.runs.put

    def recorded(run: Run, expect: Expect) -> Written:
        written.append(run.status)
        return put(run, expect)

    monkeypatch.setattr(world.runs, "put", recorded)
    return written


def once_at(world: World, seconds: float, **spec: Any) -> Job:
    return world.create(
        schedule={"type": "once", "at": (START + timedelta(seconds=seconds)).isoformat()}, **spec
    )


def failures_logged(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[BaseException | None]:
    """The exceptions a caller that logs and goes on (the planner, the sweeper) logged."""
    logged: list[BaseException | None] = []
    monkeypatch.setattr(module.logger, "exception", lambda *args, **kwargs: logged.append(sys.exc_info()[1]))
    return logged


# --- the callers, each driven up to one write -----------------------------------------------------------
# A case sets the world up with the full table (``arrange``), then does what must fail (``act``) once the move
# is illegal; ``act`` raises IllegalTransition itself, or returns what the caller logged.
Arrange = Callable[[World], Any]
Act = Callable[[World, Any, pytest.MonkeyPatch], list[BaseException | None] | None]


@dataclass(frozen=True)
class Case:
    caller: str
    move: Move
    arrange: Arrange
    act: Act
    in_lane: bool = False
    """The move is made by a lane claim (its run item is written when the attempt ends), not a run write."""


def a_fire_of(overlap: str) -> Arrange:
    def arrange(world: World) -> Job:
        return once_at(world, 0, name="fire", overlap_policy=overlap)

    return arrange


def deliver(world: World, _: Any, __: pytest.MonkeyPatch) -> None:
    world.deliver()


def a_cancelled_fire(world: World) -> Job:
    job = once_at(world, 5, name="cancelled")
    world.service.cancel_job("acme", job.job_id, world.clock())
    world.clock.advance(seconds=5)
    return job


def a_lost_attempt(world: World) -> Job:
    job = once_at(world, 0, name="lost", delivery="at_most_once")

    def die() -> TargetResult:
        raise WorkerDied

    world.script["lost"] = [die]
    with pytest.raises(WorkerDied):
        world.deliver()
    world.clock.advance(seconds=91)  # past the lease (30 s timeout, 30 s margin) and the message's return
    return job


def a_failing_fire(world: World) -> Job:
    job = once_at(world, 0, name="failing", retry={"max_attempts": 3})
    world.script["failing"] = [UNAVAILABLE]
    return job


def a_dead_run(world: World) -> Run:
    job = once_at(world, 0, name="dead", retry={"max_attempts": 1})
    world.script["dead"] = [UNAVAILABLE]
    world.deliver()
    (run,) = world.runs_of(job)
    assert run.status is DEAD
    return run


def a_job(world: World) -> Job:
    return once_at(world, 600, name="manual")


def trigger(world: World, job: Job, _: pytest.MonkeyPatch) -> None:
    world.service.trigger_job("acme", job.job_id, idempotency_key="k", now=world.clock())


def retry_by_hand(world: World, run: Run, _: pytest.MonkeyPatch) -> None:
    world.service.retry_run("acme", run.run_id, world.clock())


def a_manual_run_whose_send_failed(world: World) -> Run:
    job = once_at(world, 600, name="unsent")
    world.queue.fail_sends = 1
    run = world.service.trigger_job("acme", job.job_id, idempotency_key="k", now=world.clock())
    assert run.status is P
    world.clock.advance(seconds=31)  # due for the sweeper's attention
    return run


def sweep(world: World, _: Any, monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    logged = failures_logged(monkeypatch, sweeper)
    world.sweeper.sweep(world.clock())
    return logged


def missed_fires(world: World) -> Job:
    job = world.create(name="missed", schedule={"type": "rate", "every_seconds": 60}, misfire_policy="skip")
    world.clock.advance(minutes=10)  # an outage: the fires since are overdue
    return job


def plan(world: World, _: Any, monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    logged = failures_logged(monkeypatch, planner)
    world.tick()
    return logged


CASES = [
    Case("worker: a run-item lease", (None, R), a_fire_of("allow"), deliver),
    Case("worker: a lane holder's run", (None, R), a_fire_of("skip"), deliver, in_lane=True),
    Case("worker: an attempt that succeeded", (R, OK), a_fire_of("skip"), deliver),
    Case("worker: an attempt to retry", (R, W), a_failing_fire, deliver),
    Case("worker: a fire of a cancelled job", (None, CANCELLED), a_cancelled_fire, deliver),
    Case("worker: a lost attempt at most once", (R, ABANDONED), a_lost_attempt, deliver),
    Case("service: a manual run", (None, P), a_job, trigger),
    Case("service: a manual run sent", (P, E), a_job, trigger),
    Case("service: a re-run by hand", (DEAD, P), a_dead_run, retry_by_hand),
    Case("sweeper: a run sent again", (P, E), a_manual_run_whose_send_failed, sweep),
    Case("planner: a missed fire", (None, MISSED), missed_fires, plan),
]


@pytest.fixture
def world() -> World:
    return World()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.caller)
def test_an_illegal_move_from_any_caller_raises_and_writes_nothing(
    case: Case, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a caller about to make its move, and the move taken out of the lifecycle
    arranged = case.arrange(world)
    written = statuses_written(world, monkeypatch)
    old, new = case.move
    monkeypatch.setitem(TRANSITIONS, old, TRANSITIONS[old] - {new})
    lanes_before = world.lanes.writes

    # When it makes it
    try:
        logged = case.act(world, arranged, monkeypatch)
    except IllegalTransition:
        logged = None
    else:
        # Then a caller that goes on after a failure logged this one
        assert logged is not None, f"{case.caller} made an illegal move without raising"
        assert [type(error) for error in logged] == [IllegalTransition]

    # Then nothing was written for that move, nor did a lane holder take a place in its lane
    assert new not in written
    if case.in_lane:
        assert world.lanes.writes == lanes_before and world.calls == []


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.caller)
def test_each_case_makes_its_move_when_the_lifecycle_allows_it(
    case: Case, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cases above reach the write they claim to: with the full table the move is made."""
    arranged = case.arrange(world)
    written = statuses_written(world, monkeypatch)
    lanes_before = world.lanes.writes
    assert not case.act(world, arranged, monkeypatch)
    if case.in_lane:
        assert world.lanes.writes > lanes_before and len(world.calls) == 1
    else:
        assert case.move[1] in written


# --- no run write outside the owner ---------------------------------------------------------------------
def run_writes(tree: ast.AST) -> list[int]:
    """Lines that call ``put`` on a ``runs`` store (``runs.put``, ``self.runs.put``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "put":
            store = node.func.value
            name = store.attr if isinstance(store, ast.Attribute) else getattr(store, "id", None)
            if name == "runs":
                found.append(node.lineno)
    return found


def conditions(tree: ast.AST) -> list[int]:
    """Lines that name ``Expect``, the condition of a run write."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "Expect"]


def test_only_the_lifecycle_module_writes_runs() -> None:
    modules = {path.name: ast.parse(path.read_text(), str(path)) for path in sorted(APP.glob("*.py"))}
    assert OWNER in modules and run_writes(modules[OWNER])  # the check looks where the writes are
    elsewhere = {name: run_writes(tree) for name, tree in modules.items() if name != OWNER}
    assert {name: lines for name, lines in elsewhere.items() if lines} == {}
    # Nor does any other module of the engine build a run write's condition (ports.py defines it).
    built = {name: conditions(tree) for name, tree in modules.items() if name not in (OWNER, "ports.py")}
    assert {name: lines for name, lines in built.items() if lines} == {}
