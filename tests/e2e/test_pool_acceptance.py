"""Pools accepted end to end, through the local stack's real API and the client's worker library: racing
workers claim each run once, a cancel reaches a running worker within a heartbeat interval (and a waiting run
at once), another tenant can touch nothing, a worker paused past its heartbeat timeout finds its lease lost
(409) and stops, and a restarted stack keeps its waiting and leased runs."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tickwork_client import Client, PoolWorker, RunContext

from tests.e2e.conftest import TOKENS, Local, start_local, stop_local, wait_for
from tests.e2e.test_pool_worker import ExampleWorker, run_of

HEARTBEAT_TIMEOUT = 10  # the contract's least
HEARTBEAT_INTERVAL = HEARTBEAT_TIMEOUT / 3  # the library's
RETRY = {"max_attempts": 3, "initial_delay_seconds": 1, "jitter": "none"}


def unique_pool(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def pool_job(local: Local, pool: str, *, name: str | None = None, **fields: Any) -> str:
    """A one-time job of ``pool``, due in a second; its id."""
    body = {
        "name": name or f"{pool}-{uuid.uuid4().hex[:8]}",
        "schedule": {"type": "once", "at": (datetime.now(UTC) + timedelta(seconds=1)).isoformat()},
        "target": {
            "type": "pool",
            "pool": pool,
            "heartbeat_timeout_seconds": fields.pop("heartbeat_timeout_seconds", HEARTBEAT_TIMEOUT),
        },
        "retry": fields.pop("retry", RETRY),
        **fields,
    }
    status, created = local.call("POST", "/v1/jobs", body=body)
    assert status == 201, created
    return str(created["job_id"])


def waiting(local: Local, job_id: str) -> dict[str, Any]:
    """The job's run once it waits in its pool (stored there: not a fire still in the run queue)."""

    def in_pool() -> Any:
        run = run_of(local, job_id)
        return run is not None and run["status"] == "ENQUEUED" and run.get("pool") is not None and run

    run = wait_for(in_pool, timeout=10)
    assert run, run_of(local, job_id)
    return dict(run)


def ended(local: Local, job_id: str, status: str, *, timeout: float) -> dict[str, Any]:
    run = wait_for(
        lambda: (r := run_of(local, job_id)) is not None and r["status"] == status and r, timeout=timeout
    )
    assert run, run_of(local, job_id)
    return dict(run)


def claim(local: Local, pool: str, *, tenant: str = "acme", wait: int = 0, worker: str = "raw") -> list[Any]:
    status, answer = local.call(
        "POST",
        f"/v1/pools/{pool}/claim",
        tenant=tenant,
        body={"worker_id": worker, "max_runs": 10, "wait_seconds": wait},
    )
    assert status == 200, answer
    return list(answer["runs"])


@contextmanager
def library_workers(
    local: Local, pool: str, handler: Callable[[RunContext], Any], count: int
) -> Iterator[list[PoolWorker]]:
    """``count`` library workers of ``pool``, each claiming in a thread of its own until the block ends."""
    workers = [
        PoolWorker(Client(local.url, TOKENS["acme"]), worker_id=f"w{n}", wait_seconds=1, grace_seconds=5)
        for n in range(count)
    ]
    threads = []
    for worker in workers:
        worker.register(pool, handler)
        thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
        thread.start()
        threads.append(thread)
    try:
        yield workers
    finally:
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(timeout=15)
        assert not any(thread.is_alive() for thread in threads), "a worker did not stop"


def test_six_library_workers_racing_for_20_runs_claim_each_once_and_all_succeed_at_attempt_1(
    local: Local,
) -> None:
    pool = unique_pool("race")
    handled: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def handler(ctx: RunContext) -> dict[str, Any]:
        with lock:
            handled.append((ctx.run_id, ctx.attempt, threading.current_thread().name))
        ctx.wait(0.2)
        return {"run": ctx.run_id}

    job_ids = [pool_job(local, pool) for _ in range(20)]
    with library_workers(local, pool, handler, 6):
        runs = [ended(local, job_id, "SUCCEEDED", timeout=30) for job_id in job_ids]
        time.sleep(1)  # a second claim of any run, if there were one, would come now
    run_ids = sorted(run["run_id"] for run in runs)
    assert sorted(run_id for run_id, _, _ in handled) == run_ids  # each handled once
    assert {attempt for _, attempt, _ in handled} == {1}
    assert all(run["attempt"] == 1 and len(run["attempts"]) == 1 for run in runs)
    assert all(run["output"] == {"run": run["run_id"]} for run in runs)
    assert len({run["attempts"][0]["worker_id"] for run in runs}) > 1  # the workers shared them


def test_a_cancel_reaches_a_running_library_worker_within_a_heartbeat_interval_and_is_not_retried(
    local: Local,
) -> None:
    pool = unique_pool("cancel")
    started: list[tuple[int, float]] = []
    heard: list[float] = []

    def handler(ctx: RunContext) -> None:
        started.append((ctx.attempt, time.monotonic()))
        while not ctx.wait(30):
            pass
        if ctx.cancelled:
            heard.append(time.monotonic())
        ctx.check()  # raises: the library fails the run as cancelled

    job_id = pool_job(local, pool)
    with library_workers(local, pool, handler, 2):
        assert wait_for(lambda: started, timeout=10)
        run_id = run_of(local, job_id)["run_id"]  # type: ignore[index]
        asked_at = time.monotonic()
        status, asked = local.call("POST", f"/v1/runs/{run_id}/cancel")
        assert status == 200, asked
        assert asked["status"] == "RUNNING"
        assert wait_for(lambda: heard, timeout=HEARTBEAT_INTERVAL + 2)
        assert heard[0] - asked_at <= HEARTBEAT_INTERVAL + 0.5
        run = ended(local, job_id, "CANCELLED", timeout=5)
        time.sleep(2)  # a retry, if there were one, would be claimed now
    assert [attempt for attempt, _ in started] == [1]
    assert run["attempt"] == 1 and len(run["attempts"]) == 1
    assert run["attempts"][0]["error_code"] == "cancelled"
    assert run_of(local, job_id)["status"] == "CANCELLED"  # type: ignore[index]


def test_a_waiting_run_is_cancelled_at_once_and_never_claimed(local: Local) -> None:
    pool = unique_pool("queued")
    job_id = pool_job(local, pool)
    run_id = waiting(local, job_id)["run_id"]
    status, cancelled = local.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status == 200, cancelled
    assert cancelled["status"] == "CANCELLED"
    assert claim(local, pool, wait=2) == []
    assert run_of(local, job_id)["status"] == "CANCELLED"  # type: ignore[index]
    status, again = local.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status == 409, again


def test_another_tenants_worker_can_neither_claim_nor_touch_the_runs(local: Local) -> None:
    pool = unique_pool("tenant")
    job_id = pool_job(local, pool)
    run_id = waiting(local, job_id)["run_id"]
    # Another tenant's claim of the same pool name finds nothing: the pool is the tenant's own
    assert claim(local, pool, tenant="globex", wait=1) == []
    [claimed] = claim(local, pool)
    token = claimed["lease_token"]
    before = run_of(local, job_id)
    # Nor can it heartbeat, complete, fail or cancel it, even with the lease token: each is a 404
    bodies = {
        "heartbeat": {"lease_token": token, "progress": 0.5},
        "complete": {"lease_token": token, "output": {"stolen": True}},
        "fail": {"lease_token": token, "error": {"code": "x", "message": "x"}, "retryable": False},
        "cancel": None,
    }
    for route, body in bodies.items():
        status, answer = local.call("POST", f"/v1/runs/{run_id}/{route}", tenant="globex", body=body)
        assert (route, status) == (route, 404), answer
    status, answer = local.call("GET", f"/v1/runs/{run_id}", tenant="globex")
    assert status == 404, answer
    assert run_of(local, job_id) == before
    status, done = local.call("POST", f"/v1/runs/{run_id}/complete", body={"lease_token": token})
    assert (status, done["status"]) == (200, "SUCCEEDED")


def test_a_late_heartbeat_complete_and_fail_after_a_takeover_get_lease_lost(local: Local) -> None:
    pool = unique_pool("takeover")
    job_id = pool_job(local, pool)
    waiting(local, job_id)
    [first] = claim(local, pool, worker="first")
    run_id, stale = first["run_id"], first["lease_token"]
    # The first worker goes quiet: its lease lapses, and a second worker takes the run over
    takeover = wait_for(lambda: claim(local, pool, wait=2, worker="second"), timeout=HEARTBEAT_TIMEOUT + 10)
    assert takeover, run_of(local, job_id)
    [second] = takeover
    assert (second["run_id"], second["attempt"]) == (run_id, 2)
    for route, body in {
        "heartbeat": {"lease_token": stale, "progress": 0.9, "checkpoint": {"from": "first"}},
        "complete": {"lease_token": stale, "output": {"from": "first"}},
        "fail": {"lease_token": stale, "error": {"code": "late", "message": "late"}, "retryable": False},
    }.items():
        status, answer = local.call("POST", f"/v1/runs/{run_id}/{route}", body=body)
        assert (route, status, answer["error"]["code"]) == (route, 409, "lease_lost"), answer
    running = run_of(local, job_id)
    assert running is not None and running["status"] == "RUNNING" and running["attempt"] == 2
    status, done = local.call(
        "POST", f"/v1/runs/{run_id}/complete", body={"lease_token": second["lease_token"]}
    )
    assert (status, done["status"], done.get("output")) == (200, "SUCCEEDED", None)


def test_a_worker_paused_past_its_heartbeat_timeout_finds_its_lease_lost_and_stops_working(
    local: Local,
) -> None:
    # Given the example worker half through a run of 40 short steps, in a pool of this test's own: a long
    # poll a stopped worker left pending at the API would otherwise claim another test's run
    pool = unique_pool("paused")
    job_id = pool_job(local, pool, payload={"steps": 40, "step_seconds": 0.5})
    paused = ExampleWorker(local, pool)
    try:
        assert wait_for(lambda: len(paused.steps()) >= 2, timeout=20), paused.lines
        # When it is paused (SIGSTOP) past its heartbeat timeout, and the run is taken over meanwhile
        os.kill(paused.process.pid, signal.SIGSTOP)
        steps_before = len(paused.steps())
        takeover = wait_for(
            lambda: claim(local, pool, wait=2, worker="taker"), timeout=HEARTBEAT_TIMEOUT + 10
        )
        assert takeover, run_of(local, job_id)
        [taken] = takeover
        assert taken["attempt"] == 2
        # And then continued (SIGCONT)
        os.kill(paused.process.pid, signal.SIGCONT)
        # Then its next heartbeat is refused (409 lease_lost), and it stops working on the run
        assert wait_for(lambda: any("the lease is lost" in line for line in paused.lines), timeout=5), (
            paused.lines
        )
        time.sleep(1.5)  # three of its steps' time
        late = [step for attempt, step in paused.steps()[steps_before:] if attempt == 1]
        assert len(late) <= 1, paused.lines  # at most the step under way as it was paused
        run = run_of(local, job_id)
        assert run is not None and run["status"] == "RUNNING" and run["attempt"] == 2
        assert run["attempts"][-1]["worker_id"] == "taker"
        status, done = local.call(
            "POST", f"/v1/runs/{taken['run_id']}/complete", body={"lease_token": taken["lease_token"]}
        )
        assert (status, done["status"]) == (200, "SUCCEEDED")
        assert [a["error_code"] for a in done["attempts"]] == ["heartbeat_timeout", None]
    finally:
        if paused.process.poll() is None:
            os.kill(paused.process.pid, signal.SIGCONT)
        paused.stop()


def test_a_restarted_stack_keeps_its_waiting_and_leased_pool_runs(tmp_path: Path) -> None:
    tenants = f"acme:{TOKENS['acme']}"
    data_dir = tmp_path / "data"
    first = start_local(data_dir, tenants=tenants)
    try:
        pool = unique_pool("restart")
        leased_job, waiting_job = (pool_job(first, pool, heartbeat_timeout_seconds=120) for _ in range(2))
        for job_id in (leased_job, waiting_job):
            waiting(first, job_id)
        status, answer = first.call(
            "POST", f"/v1/pools/{pool}/claim", body={"worker_id": "w", "max_runs": 1, "wait_seconds": 0}
        )
        assert status == 200, answer
        [leased] = answer["runs"]
        waiting_id = ({leased_job, waiting_job} - {leased["job_id"]}).pop()
    finally:
        first.process.kill()  # kill -9: no goodbye
        first.process.wait(timeout=10)
        if first.reader is not None:
            first.reader.join(timeout=5)
        if first.process.stdout is not None:
            first.process.stdout.close()
    again = start_local(data_dir, tenants=tenants)
    try:
        # The leased run is still its worker's: its token still works
        status, beat = again.call(
            "POST", f"/v1/runs/{leased['run_id']}/heartbeat", body={"lease_token": leased["lease_token"]}
        )
        assert status == 200, beat
        # And the waiting run is claimable, at its first attempt, and it alone
        [claimed] = claim(again, pool)
        assert (claimed["job_id"], claimed["attempt"]) == (waiting_id, 1)
        status, done = again.call(
            "POST", f"/v1/runs/{leased['run_id']}/complete", body={"lease_token": leased["lease_token"]}
        )
        assert (status, done["status"], done["attempt"]) == (200, "SUCCEEDED", 1)
    finally:
        stop_local(again)
