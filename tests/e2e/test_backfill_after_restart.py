"""A `backfill` job whose local stack was stopped for twenty seconds: after the restart every fire of the
outage runs once, oldest first, at most ten a second, starting within seconds of the stack being healthy,
whatever the queue held when it stopped (fires sent ahead, restored from the data folder)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import start_local, stop_local, wait_for
from tests.support.engine import Received, Receiver, start_receiver

pytestmark = pytest.mark.e2e

TENANTS = "acme:tw_e2e_acme"
PATH = "/backfill"
OUTAGE_SECONDS = 20
PACE_PER_SECOND = 10
FIRST_FIRE_WITHIN = 5.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


def scheduled(request: Received) -> float:
    return datetime.fromisoformat(request.headers["X-Tickwork-Scheduled-For"]).timestamp()


def most_in_one_second(moments: list[float]) -> int:
    """The most of ``moments`` that fall in any window [t, t + 1 s)."""
    ordered = sorted(moments)
    most, start = 0, 0
    for end, moment in enumerate(ordered):
        while moment - ordered[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


@pytest.mark.parametrize("stop", ["ctrl-c", "kill-9"])
def test_backfill_after_a_restart_runs_every_outage_fire_once_in_order_paced(
    tmp_path: Path, receiver: Receiver, stop: str
) -> None:
    data_dir = tmp_path / "data"
    local = start_local(data_dir, tenants=TENANTS)
    try:
        # Given a one-second backfill job with a one-second grace, running on time
        status, job = local.call(
            "POST",
            "/v1/jobs",
            body={
                "name": "backfill-restart",
                "schedule": {"type": "rate", "every_seconds": 1},
                "target": {"type": "http", "url": receiver.url(PATH), "timeout_seconds": 5},
                "misfire_policy": "backfill",
                "misfire_grace_seconds": 1,
            },
        )
        assert status == 201, job
        assert wait_for(lambda: len(receiver.for_path(PATH)) >= 3, timeout=10)
        # When the stack stops between two fires (its queue holds the fires sent ahead: a fire whose call
        # is under way when it is killed is taken over only once its lease has passed), and is down for
        # twenty seconds
        time.sleep(max(0.0, receiver.for_path(PATH)[-1].at + 0.5 - time.time()))
        stopped = time.time()
        if stop == "kill-9":
            local.process.send_signal(signal.SIGKILL)
            local.process.wait(timeout=10)
        stop_local(local)
        before = len(receiver.requests)
        time.sleep(OUTAGE_SECONDS)
        assert len(receiver.requests) == before
        local = start_local(data_dir, tenants=TENANTS)
        healthy = time.time()
        # and has caught up
        assert wait_for(
            lambda: any(scheduled(request) > healthy + 3 for request in receiver.for_path(PATH)), timeout=30
        ), [scheduled(request) - stopped for request in receiver.for_path(PATH)]
    finally:
        stop_local(local)

    calls = receiver.for_path(PATH)
    after = [request for request in calls if request.at >= healthy - 1]
    fires = [round(scheduled(request) - stopped, 3) for request in after]
    seen = [(fire, round(request.at - healthy, 3)) for fire, request in zip(fires, after, strict=True)]
    print("calls after the restart (fire, called after health):", seen)
    outage = sorted({scheduled(request) for request in calls if stopped < scheduled(request) <= healthy})
    # Then every fire of the outage was called, each once
    first_fire = min(scheduled(request) for request in calls if scheduled(request) > stopped)
    expected = [first_fire + second for second in range(int(healthy - first_fire) + 1)]
    expected = [fire for fire in expected if fire <= healthy]
    assert len(expected) >= OUTAGE_SECONDS
    assert [round(fire, 3) for fire in outage] == [round(fire, 3) for fire in expected], fires
    outage_calls = [request for request in calls if stopped < scheduled(request) <= healthy]
    assert len(outage_calls) == len(outage), seen
    # in scheduled order (the fires after the outage following them)
    assert fires == sorted(fires), seen
    # never more than ten in a second
    busiest = most_in_one_second([request.at for request in after])
    assert busiest <= PACE_PER_SECOND, (busiest, seen)
    # and the first of them within a few seconds of the stack being healthy again
    first_call = min(request.at for request in outage_calls if scheduled(request) == first_fire)
    assert first_call - healthy <= FIRST_FIRE_WITHIN, (first_call - healthy, seen)
