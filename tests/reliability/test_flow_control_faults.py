"""Concurrency keys under duplicate deliveries and racing workers (moto, the real worker, a loopback
receiver): every message of a keyed job's fire reaches two workers at once; no more than ``max_concurrency``
calls of the jobs sharing the key run at once, no fire runs twice, and no held run is dead-lettered."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from tickwork.domain.models import RunMessage, RunStatus
from tickwork.targets import TargetResult

from tests.integration.conftest import START, Engine

KEY_LIMIT = 2


def test_a_concurrency_key_holds_under_duplicate_deliveries_and_racing_workers(engine: Engine) -> None:
    in_flight, peak, lock = 0, 0, threading.Lock()

    def slow(job: Any, run: Any, tenant: Any) -> TargetResult:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        threading.Event().wait(0.2)
        try:
            return engine.runtime.execute(job, run, tenant)
        finally:
            with lock:
                in_flight -= 1

    jobs = [
        engine.create(
            schedule={"type": "once", "at": START.isoformat()},
            target=engine.http("/keyed"),
            concurrency_key="warehouse-db",
            max_concurrency=KEY_LIMIT,
        ).job
        for _ in range(8)
    ]
    for _ in range(40):
        threads: list[threading.Thread] = []

        def to_two_workers(record: Any, threads: list[threading.Thread] = threads) -> str:
            body = RunMessage.model_validate_json(record.body)
            for copy in range(2):  # the same message, delivered twice at once
                worker = engine.runtime.worker(
                    clock=engine.clock,
                    sleep=engine.clock.sleep,
                    execute=slow,
                    worker_id=f"w{len(threads)}-{copy}",
                )
                threads.append(threading.Thread(target=worker.handle, args=(body,)))
            return "handed to two workers"

        if not engine.pump(to_two_workers).once():
            engine.clock.advance(seconds=1)
            if all(engine.runs_of("acme", job.job_id)[0].status is RunStatus.SUCCEEDED for job in jobs):
                break
            continue
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert peak <= KEY_LIMIT
    calls = Counter(request.headers["Idempotency-Key"] for request in engine.receiver.for_path("/keyed"))
    assert len(calls) == len(jobs) and set(calls.values()) == {1}, calls
    for job in jobs:
        (run,) = engine.runs_of("acme", job.job_id)
        assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert engine.dead_letters() == []


def test_the_waiting_count_holds_under_duplicate_deliveries_and_racing_workers(engine: Engine) -> None:
    """Every message of eight keyed fires reaches two workers at once: while they run, the key's counts never
    show more running than its limit nor more running and waiting runs than there are fires; once all have
    run, none is counted as running or waiting."""
    seen: list[tuple[int, int]] = []

    def slow(job: Any, run: Any, tenant: Any) -> TargetResult:
        flow = engine.runtime.flow.tenant_flow("acme", engine.clock())
        seen.append((flow.keys[0].running, flow.keys[0].waiting))
        threading.Event().wait(0.1)
        return engine.runtime.execute(job, run, tenant)

    jobs = [
        engine.create(
            schedule={"type": "once", "at": START.isoformat()},
            target=engine.http("/keyed"),
            concurrency_key="warehouse-db",
            max_concurrency=KEY_LIMIT,
        ).job
        for _ in range(8)
    ]
    for _ in range(40):
        threads: list[threading.Thread] = []

        def to_two_workers(record: Any, threads: list[threading.Thread] = threads) -> str:
            body = RunMessage.model_validate_json(record.body)
            for copy in range(2):
                worker = engine.runtime.worker(
                    clock=engine.clock,
                    sleep=engine.clock.sleep,
                    execute=slow,
                    worker_id=f"w{len(threads)}-{copy}",
                )
                threads.append(threading.Thread(target=worker.handle, args=(body,)))
            return "handed to two workers"

        if not engine.pump(to_two_workers).once():
            engine.clock.advance(seconds=1)
            if all(engine.runs_of("acme", job.job_id)[0].status is RunStatus.SUCCEEDED for job in jobs):
                break
            continue
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len(seen) == len(jobs)
    assert all(1 <= running <= KEY_LIMIT and running + waiting <= len(jobs) for running, waiting in seen), (
        seen
    )
    assert any(waiting > 0 for _, waiting in seen), seen
    flow = engine.runtime.flow.tenant_flow("acme", engine.clock())
    assert (flow.keys[0].running, flow.keys[0].waiting, flow.waiting) == (0, 0, 0)
