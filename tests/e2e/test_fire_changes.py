"""A change made just before a fire stops it, end to end through the local stack, once the fire has been
read ahead and its lane claimed: the planner sends a fire's message ``LOCAL_SEND_LEAD_MS`` (2 s) early, the
worker reads the job, its lane and the run items when it arrives, decides then and claims the lane, and at
the fire one read of the lane checks nothing moved it before the call. A pause, a cancel of the job, a
cancel of the run and a schedule change 200 ms before the fire each move the job's lane, so the fire is
decided again at its time, on the job as changed, and not called.

Each test waits (a bounded poll of the stack's metrics) until the fire has been read ahead and claimed,
makes its change through the HTTP API 200 ms before the fire, and checks the API answered before the fire:
otherwise the change did not race the fire and the test says so rather than pass. The fires are the first
whole second 4 s after the job's creation: the API sends the message at once, timed to arrive 2 s before the
fire (within a second), so on a slow machine the read ahead still ends well before the change.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from tickwork_local.stack import LocalStack

from tests.e2e.conftest import in_process_stack, wait_for
from tests.e2e.test_run_semantics import Api, http, iso, scheduled, sleep_until
from tests.support.engine import Receiver, start_receiver

pytestmark = pytest.mark.e2e

TENANT, TOKEN = "firechanges", "tw_e2e_firechanges"
DUE_AFTER = 4.0  # seconds from the job's creation to its fire (then up to the next whole second)
CHANGE_BEFORE = 0.2  # the change is made this long before the fire
WATCHED_AFTER = 3.0  # the fire's call, had it been made, would be in by then
# What the stack counts (``LocalMetrics``): a fire read ahead, its lane claimed ahead of it, and a fire read
# ahead then decided again at its time because its lane moved.
CLAIMED_AHEAD = "RunsClaimedAhead"
DECIDED_AGAIN = "ReadAheadDecidedAgain"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from in_process_stack(tmp_path_factory, "firechanges", TENANT, TOKEN)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


def counted(stack: LocalStack, name: str, since: float) -> list[float]:
    """When (wall clock) the stack counted ``name`` since ``since``. The tests of this module run one after
    another and each one's job is the only one due meanwhile, so what is counted is its."""
    offset = time.time() - time.monotonic()
    with stack.metrics.lock:
        events = list(stack.metrics.events)
    return [at + offset for at, counted_name, _ in events if counted_name == name and at + offset >= since]


def next_whole_second(after: float) -> float:
    return float(math.ceil(after))


def read_ahead_before(stack: LocalStack, since: float, moment: float) -> float:
    """When the stack read a fire ahead and claimed its lane ahead of it (counted since ``since``), polled
    until ``moment`` at the latest."""
    names = (CLAIMED_AHEAD,)
    wait_for(
        lambda: all(counted(stack, name, since) for name in names),
        timeout=max(0.0, moment - time.time()),
        interval=0.02,
    )
    seen = {name: counted(stack, name, since) for name in names}
    missing = [name for name, times in seen.items() if not times]
    assert not missing, f"premise failed: no {' nor '.join(missing)} within {moment - since:.1f} s"
    return max(times[0] for times in seen.values())


def change_just_before(fire: float, change: Any) -> tuple[int, Any]:
    """``change()`` made ``CHANGE_BEFORE`` before ``fire``; it must be answered before the fire."""
    sleep_until(fire - CHANGE_BEFORE)
    status, body = change()
    answered = time.time()
    assert answered < fire, (
        f"premise failed: the API answered the change {answered - fire:.3f} s after the fire, not before it"
    )
    return status, body


def run_of(api: Api, run_id: str) -> dict[str, Any]:
    status, run = api("GET", f"/v1/runs/{run_id}")
    assert status == 200, run
    return dict(run)


def once(api: Api, receiver: Receiver, name: str, fire: float) -> tuple[str, str]:
    """A one-time job due at ``fire`` calling the receiver; its id and its path at the receiver."""
    path = f"/{name}-{time.time_ns()}"
    job = api.create(name=path[1:], schedule={"type": "once", "at": iso(fire)}, target=http(receiver, path))
    return str(job["job_id"]), path


def test_a_fire_read_ahead_is_called_once_at_its_time(stack: LocalStack, receiver: Receiver) -> None:
    api = Api(stack, TOKEN)
    created = time.time()
    fire = next_whole_second(created + DUE_AFTER)
    job_id, path = once(api, receiver, "control", fire)
    claimed_at = read_ahead_before(stack, created, fire - CHANGE_BEFORE)
    assert wait_for(lambda: api.job(job_id)["status"] == "COMPLETED", timeout=fire + 10 - time.time())
    (call,) = receiver.for_path(path)
    assert call.at >= fire > claimed_at
    assert scheduled(call) == fire
    assert run_of(api, f"{job_id}:{int(fire * 1000)}")["status"] == "SUCCEEDED"
    assert counted(stack, DECIDED_AGAIN, created) == []


CHANGES = ["pause", "cancel job", "cancel run", "schedule change"]


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_200_ms_before_a_fire_read_ahead_stops_it(
    stack: LocalStack, receiver: Receiver, change: str
) -> None:
    api = Api(stack, TOKEN)
    created = time.time()
    fire = next_whole_second(created + DUE_AFTER)
    job_id, path = once(api, receiver, change.replace(" ", "-"), fire)
    run_id = f"{job_id}:{int(fire * 1000)}"
    later = fire + 3600
    requests = {
        "pause": ("POST", f"/v1/jobs/{job_id}/pause", {"reason": "just before"}),
        "cancel job": ("DELETE", f"/v1/jobs/{job_id}", None),
        "cancel run": ("POST", f"/v1/runs/{run_id}/cancel", None),
        "schedule change": ("PATCH", f"/v1/jobs/{job_id}", {"schedule": {"type": "once", "at": iso(later)}}),
    }
    method, request_path, body = requests[change]
    # Given the fire read ahead and its lane claimed
    read_ahead_before(stack, created, fire - CHANGE_BEFORE)
    # When the change is made 200 ms before it
    changed_at = fire - CHANGE_BEFORE
    status, answer = change_just_before(fire, lambda: api(method, request_path, body))
    assert status == 200, answer
    # Then it is not called, and was decided again at its time
    sleep_until(fire + WATCHED_AFTER)
    assert receiver.for_path(path) == [], f"called after a {change} 200 ms before the fire"
    again = counted(stack, DECIDED_AGAIN, changed_at)
    assert again, f"the fire was not decided again at its time after a {change}"
    assert all(at >= fire for at in again), again
    # And the job and its run show the change
    job = api.job(job_id)
    if change == "pause":
        assert job["status"] == "PAUSED"
        # Nothing recorded of the fire: resuming the job plans it again, under its misfire policy.
        assert api.runs(job_id) == []
    elif change == "schedule change":
        assert job["status"] == "ACTIVE"
        assert datetime.fromisoformat(job["next_fire_at"]).timestamp() == later
        run = run_of(api, run_id)
        assert (run["status"], run["reason"]) == ("CANCELLED", "schedule_changed")
    else:
        assert job["status"] == ("CANCELLED" if change == "cancel job" else "COMPLETED")
        assert run_of(api, run_id)["status"] == "CANCELLED"


def test_a_recurring_job_paused_200_ms_before_a_fire_read_ahead_is_not_called_then(
    stack: LocalStack, receiver: Receiver
) -> None:
    api = Api(stack, TOKEN)
    path = f"/recurring-{time.time_ns()}"
    job = api.create(
        name=path[1:],
        schedule={"type": "rate", "every_seconds": 2},
        target=http(receiver, path),
        overlap_policy="skip",
    )
    job_id = str(job["job_id"])
    try:
        # Given a job every two seconds that ran twice, and its next fire read ahead. Its message comes about
        # as the fire before it is called (within a second either side): its lane is claimed ahead when
        # that call has ended, else at its time.
        assert wait_for(lambda: len(receiver.for_path(path)) >= 2, timeout=12)
        first, second = (scheduled(call) for call in receiver.for_path(path)[:2])
        assert second - first == 2, "a fire between the first two was not called"
        fire = second + 2
        # When it is paused 200 ms before the next fire
        status, answer = change_just_before(
            fire, lambda: api("POST", f"/v1/jobs/{job_id}/pause", {"reason": "just before"})
        )
        assert status == 200, answer
        # Then that fire is not called, nor any after it
        sleep_until(fire + WATCHED_AFTER)
        assert [scheduled(call) for call in receiver.for_path(path)] == [first, second]
        # it had been read ahead: its claim at its time found the lane moved, and it was decided again
        assert counted(stack, DECIDED_AGAIN, fire - 1), "premise failed: the fire was not read ahead"
        assert api.job(job_id)["status"] == "PAUSED"
        runs = {run["run_id"]: run["status"] for run in api.runs(job_id)}
        assert [runs[f"{job_id}:{int(at * 1000)}"] for at in (first, second)] == ["SUCCEEDED"] * 2
    finally:
        api("DELETE", f"/v1/jobs/{job_id}")


def test_a_job_every_second_whose_fires_are_claimed_ahead_runs_each_of_them(
    stack: LocalStack, receiver: Receiver
) -> None:
    """Overlap `skip` skips a fire only while the run before it is running: a later fire's lane claimed
    ahead of its time is not a run, and does not make the fire before it SKIPPED."""
    api = Api(stack, TOKEN)
    path = f"/every-second-{time.time_ns()}"
    created = time.time()
    job = api.create(
        name=path[1:],
        schedule={"type": "rate", "every_seconds": 1},
        target=http(receiver, path),
        overlap_policy="skip",
    )
    job_id = str(job["job_id"])
    try:
        # Given a job every second whose target answers at once, its fires read and claimed ahead
        assert wait_for(lambda: receiver.for_path(path), timeout=6)
        first = scheduled(receiver.for_path(path)[0])
        sleep_until(first + 4.5)
        status, answer = api("POST", f"/v1/jobs/{job_id}/pause", {"reason": "done"})
        assert status == 200, answer
        assert counted(stack, CLAIMED_AHEAD, created), "no fire was claimed ahead"
        # Then each of its five fires was called, none skipped
        fires = [round(first + second, 3) for second in range(5)]
        runs = {
            round(datetime.fromisoformat(run["scheduled_for"]).timestamp(), 3): (run["status"], run["reason"])
            for run in api.runs(job_id)
        }
        shown = [(round(fire - first), *runs.get(fire, ("not recorded", None))) for fire in fires]
        assert shown == [(second, "SUCCEEDED", None) for second in range(5)]
        called = [round(scheduled(call), 3) for call in receiver.for_path(path)]
        assert called[: len(fires)] == fires
    finally:
        api("DELETE", f"/v1/jobs/{job_id}")
