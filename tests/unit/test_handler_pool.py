"""The local gateway's pool of handler instances: each takes one event at a time, as a Lambda environment
does, and requests still run side by side."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from tickwork_local.gateway import HandlerPool


class Environment:
    """A handler instance that notices if two events ever reach it at once."""

    def __init__(self) -> None:
        self.busy = threading.Lock()
        self.overlaps = 0
        self.events: list[Any] = []

    def __call__(self, event: Any, context: Any) -> Any:
        if not self.busy.acquire(blocking=False):
            self.overlaps += 1
            return None
        try:
            self.events.append(event)
            time.sleep(0.002)  # hold the instance, so that concurrent requests need others
            return {"answer_to": event}
        finally:
            self.busy.release()


def test_concurrent_events_never_share_an_instance_and_each_gets_its_own_answer() -> None:
    made: list[Environment] = []

    def make() -> Environment:
        environment = Environment()
        made.append(environment)
        return environment

    pool = HandlerPool(make)
    threads, calls = 16, 20
    barrier = threading.Barrier(threads)
    wrong: list[Any] = []

    def client(index: int) -> None:
        barrier.wait()
        for call in range(calls):
            event = {"request": f"{index}-{call}"}
            answer = pool(event, None)
            if answer != {"answer_to": event}:
                wrong.append((event, answer))

    workers = [threading.Thread(target=client, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert wrong == []
    assert sum(environment.overlaps for environment in made) == 0
    assert sum(len(environment.events) for environment in made) == threads * calls
    # As many instances as requests were ever in flight at once: more than one, never more than the clients
    assert 1 < pool.size == len(made) <= threads


def test_requests_one_after_another_reuse_one_instance() -> None:
    made: list[Environment] = []

    def make() -> Environment:
        made.append(Environment())
        return made[-1]

    pool = HandlerPool(make)
    for call in range(5):
        assert pool({"request": call}, None) == {"answer_to": {"request": call}}
    assert (pool.size, len(made), [event["request"] for event in made[0].events]) == (1, 1, [0, 1, 2, 3, 4])


def test_an_instance_whose_event_raised_goes_back_to_the_pool() -> None:
    calls: list[Any] = []

    def flaky(event: Any, context: Any) -> Any:
        calls.append(event)
        if event["request"] == "boom":
            raise RuntimeError("handler failed")
        return event

    pool = HandlerPool(lambda: flaky)
    with pytest.raises(RuntimeError, match="handler failed"):
        pool({"request": "boom"}, None)
    assert pool({"request": "fine"}, None) == {"request": "fine"}
    assert pool.size == 1
