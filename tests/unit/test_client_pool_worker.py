"""The pool worker library (``tickwork_client.worker``) against a loopback stand-in of the pool routes
(``tests/support/fake_pool_api.py``), on a time the test moves: what a handler sees, what the worker sends
when a handler returns, raises, runs long, is cancelled, loses its lease or is stopped, and how often."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tickwork.api.schemas import ClaimedRunOut
from tickwork.domain.models import RunStatus
from tickwork.domain.pools import MAX_CHECKPOINT_BYTES
from tickwork_client import (
    NO_RETRIES,
    Client,
    Interrupted,
    PermanentFailure,
    PoolWorker,
    RunContext,
    Unauthorized,
)
from tickwork_client.worker import heartbeat_timeout_of

from tests.support.fake_pool_api import TOKEN, FakePoolApi, ManualTime, eventually

START = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualTime:
    return ManualTime(START)


@pytest.fixture
def api(clock: ManualTime) -> Iterator[FakePoolApi]:
    with FakePoolApi(clock) as server:
        yield server


@pytest.fixture
def client(api: FakePoolApi) -> Client:
    return Client(api.url, TOKEN, retries=NO_RETRIES)


def make_worker(client: Client, time: ManualTime, **options: Any) -> PoolWorker:
    """A worker on the test's time, whose backoff jitter is always half its cap."""
    options.setdefault("worker_id", "w-1")
    return PoolWorker(client, clock=time, wait=time.wait, draw=lambda: 0.5, **options)


class Running:
    def __init__(self, worker: PoolWorker):
        self.worker = worker
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run(handle_signals=False)
        except BaseException as error:
            self.error = error

    def join(self) -> None:
        self.thread.join(timeout=5)
        assert not self.thread.is_alive(), "run() did not return"


@contextmanager
def running(worker: PoolWorker) -> Iterator[Running]:
    """``worker.run()`` in a thread; stopped at the end, its grace period cut short."""
    runner = Running(worker)
    runner.thread.start()
    try:
        yield runner
    finally:
        worker.stop()
        worker.stop()
        runner.join()


def status_of(api: FakePoolApi, run_id: str) -> RunStatus:
    return api.run(run_id).status


def reaches(count: Callable[[], int], target: int) -> Callable[[], bool]:
    return lambda: count() == target


def heartbeats(api: FakePoolApi, run_id: str) -> list[Any]:
    return [seen.body for seen in api.seen("heartbeat", run_id)]


# --- returning and raising ----------------------------------------------------------------------------------
def test_a_handler_that_returns_completes_the_run_with_its_output(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run("gpu", payload={"n": 21})
    seen: list[tuple[Any, ...]] = []
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def double(ctx: RunContext) -> dict[str, int]:
        seen.append((ctx.run_id, ctx.pool, ctx.attempt, ctx.payload, ctx.checkpoint, ctx.scheduled_for))
        return {"n": ctx.payload["n"] * 2}

    with running(worker):
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
    assert seen == [(run_id, "gpu", 1, {"n": 21}, None, START)]
    assert api.run(run_id).output == {"n": 42}
    assert heartbeats(api, run_id) == []  # done within its first third of the heartbeat timeout


def test_a_handler_returning_none_completes_the_run_without_output(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run()
    worker = make_worker(client, clock)
    worker.register("gpu", lambda ctx: None)
    with running(worker):
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
    assert [seen.body for seen in api.seen("complete")] == [{"lease_token": api.seen("complete")[0].token}]


def test_a_handler_that_raises_fails_the_run_as_retryable_and_the_retry_resumes_from_its_checkpoint(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(max_attempts=3)
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def flaky(ctx: RunContext) -> Any:
        if ctx.attempt == 1:
            ctx.save_checkpoint({"step": 7})
            raise RuntimeError("disk full")
        return {"resumed_from": ctx.checkpoint}

    with running(worker):
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
    run = api.run(run_id)
    assert run.output == {"resumed_from": {"step": 7}}
    first, second = run.attempts
    assert (first["outcome"], first["error_code"], first["error_message"]) == (
        "retryable_error",
        "handler_error",
        "RuntimeError: disk full",
    )
    assert second["outcome"] == "succeeded"
    # The checkpoint noted since the last heartbeat went in one more, just before the fail.
    routes = [seen.route for seen in api.requests if seen.route != "claim"]
    assert routes == ["heartbeat", "fail", "complete"]


def test_a_permanent_failure_ends_the_run_without_a_retry(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(max_attempts=3)
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def refuse(ctx: RunContext) -> None:
        raise PermanentFailure("input file missing", code="missing_input")

    with running(worker):
        eventually(lambda: status_of(api, run_id) is RunStatus.FAILED)
    run = api.run(run_id)
    assert run.attempt == 1
    assert (run.attempts[0]["error_code"], run.attempts[0]["error_message"]) == (
        "missing_input",
        "input file missing",
    )
    assert api.seen("fail")[0].body["retryable"] is False


def test_an_output_the_api_would_refuse_fails_the_run_for_good(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run()
    worker = make_worker(client, clock)
    worker.register("gpu", lambda ctx: {"blob": "x" * 20_000})
    with running(worker):
        eventually(lambda: status_of(api, run_id) is RunStatus.FAILED)
    assert api.run(run_id).attempts[0]["error_code"] == "invalid_output"
    assert api.seen("complete") == []


# --- heartbeats ---------------------------------------------------------------------------------------------
def test_heartbeats_keep_the_lease_of_a_handler_that_runs_for_several_heartbeat_timeouts(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)  # a heartbeat every 10 s
    started, release = threading.Event(), threading.Event()
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def long_job(ctx: RunContext) -> str:
        started.set()
        release.wait(10)
        return "done"

    with running(worker):
        assert started.wait(5)
        token = api.run(run_id).lease_token
        for beat in range(1, 13):  # 120 s: four heartbeat timeouts
            clock.advance(10)
            eventually(reaches(lambda: len(heartbeats(api, run_id)), beat), what=f"heartbeat {beat}")
        run = api.run(run_id)
        assert (run.status, run.lease_token, run.attempt) == (RunStatus.RUNNING, token, 1)
        release.set()
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
    assert len(api.run(run_id).attempts) == 1
    assert heartbeats(api, run_id) == [{"lease_token": token}] * 12


def test_a_chatty_handler_sends_no_more_heartbeats_than_the_schedule(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)
    noted, release = threading.Event(), threading.Event()
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def chatty(ctx: RunContext) -> int:
        for item in range(1, 1001):
            ctx.progress(item / 1000, stage=f"item {item}")
            ctx.save_checkpoint({"item": item})
        noted.set()
        release.wait(10)
        return item

    with running(worker):
        assert noted.wait(5)
        time.sleep(0.05)
        assert heartbeats(api, run_id) == []  # 2,000 notes, no heartbeat before the first is due
        clock.advance(10)
        eventually(lambda: len(heartbeats(api, run_id)) == 1)
        token = heartbeats(api, run_id)[0]["lease_token"]
        assert heartbeats(api, run_id)[0] == {
            "lease_token": token,
            "progress": 1.0,
            "stage": "item 1000",
            "checkpoint": {"item": 1000},
        }
        clock.advance(10)
        eventually(lambda: len(heartbeats(api, run_id)) == 2)
        assert heartbeats(api, run_id)[1] == {"lease_token": token}  # nothing new: no field, never null
        release.set()
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
    assert len(heartbeats(api, run_id)) == 2
    assert api.run(run_id).checkpoint == {"item": 1000}


def test_a_heartbeat_that_failed_goes_again_sooner_with_what_it_carried(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)
    started, release = threading.Event(), threading.Event()
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def job(ctx: RunContext) -> None:
        ctx.save_checkpoint({"step": 1})
        started.set()
        release.wait(10)

    api.fault("heartbeat", None)  # the first heartbeat gets no answer
    with running(worker):
        assert started.wait(5)
        clock.advance(10)
        eventually(lambda: len(heartbeats(api, run_id)) == 1)
        clock.advance(4)  # a third of the interval later, not a whole one
        eventually(lambda: len(heartbeats(api, run_id)) == 2)
        assert heartbeats(api, run_id)[1]["checkpoint"] == {"step": 1}
        assert api.run(run_id).checkpoint == {"step": 1}
        release.set()
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)


def test_a_cancel_reaches_the_handler_within_one_heartbeat_and_the_run_is_not_retried(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30, max_attempts=3)
    started = threading.Event()
    interrupted: list[str] = []
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def steps(ctx: RunContext) -> None:
        started.set()
        while True:
            ctx.wait(1)  # one step of work, on the test's time
            try:
                ctx.check()
            except Interrupted as stop:
                interrupted.append(stop.reason)
                raise

    with running(worker):
        assert started.wait(5)
        client.cancel_run(run_id)
        clock.advance(10)
        eventually(lambda: status_of(api, run_id) is RunStatus.CANCELLED)
    assert interrupted == ["cancelled"]
    assert len(heartbeats(api, run_id)) == 1
    run = api.run(run_id)
    assert (run.attempt, run.attempts[0]["error_code"], run.attempts[0]["outcome"]) == (
        1,
        "cancelled",
        "permanent_error",
    )


# --- a lost lease -------------------------------------------------------------------------------------------
def test_a_second_worker_takes_over_from_the_checkpoint_when_the_first_stops_heartbeating(
    api: FakePoolApi, client: Client, clock: ManualTime, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)
    # The first worker's time stands still while the API's moves on: a frozen host, no more heartbeats.
    frozen = ManualTime(START)
    first = make_worker(client, frozen, worker_id="w-1")
    second = make_worker(client, clock, worker_id="w-2")
    started = threading.Event()
    seen_by_first: list[bool] = []
    resumed: list[tuple[int, Any]] = []

    @first.handler("gpu")
    def stalls(ctx: RunContext) -> str:
        ctx.save_checkpoint({"step": 3})
        ctx.progress(0.3, stage="step 3")
        started.set()
        ctx.interrupted.wait(10)
        seen_by_first.append(ctx.lost)
        return "late output"

    @second.handler("gpu")
    def resumes(ctx: RunContext) -> dict[str, Any]:
        resumed.append((ctx.attempt, ctx.checkpoint))
        return {"resumed_from": ctx.checkpoint["step"]}

    with running(first):
        assert started.wait(5)
        token = api.run(run_id).lease_token
        frozen.advance(10)
        clock.advance(10)
        eventually(lambda: api.run(run_id).checkpoint == {"step": 3})
        clock.advance(31)  # past the lease the last heartbeat gave (until 40 s)
        with running(second):
            eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
        assert resumed == [(2, {"step": 3})]
        with caplog.at_level(logging.WARNING, logger="tickwork_client.worker"):
            frozen.advance(10)  # the first worker wakes up: its next heartbeat is refused
            eventually(lambda: seen_by_first, what="the first handler's end")
            eventually(lambda: "dropped" in caplog.text)
    assert seen_by_first == [True]
    assert all(seen.token != token for seen in api.seen("complete") + api.seen("fail"))
    run = api.run(run_id)
    assert run.output == {"resumed_from": 3}
    assert [(a["worker_id"], a["outcome"], a.get("error_code")) for a in run.attempts] == [
        ("w-1", "retryable_error", "heartbeat_timeout"),
        ("w-2", "succeeded", None),
    ]
    assert "lease is lost" in caplog.text


# --- stopping -----------------------------------------------------------------------------------------------
def test_stop_lets_a_handler_finish_within_the_grace_period(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run()
    started = threading.Event()
    worker = make_worker(client, clock, grace_seconds=30)

    @worker.handler("gpu")
    def finishes(ctx: RunContext) -> dict[str, bool]:
        started.set()
        ctx.interrupted.wait(10)
        return {"saw_stopping": ctx.stopping}

    with running(worker) as runner:
        assert started.wait(5)
        worker.stop()
        runner.join()  # no time passed: the handler ended at once
        assert runner.error is None
    run = api.run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, {"saw_stopping": True})
    assert len(api.seen("claim")) == 1


def test_a_handler_that_checks_stops_at_once_and_another_worker_resumes_at_once(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=60)
    started = threading.Event()
    worker = make_worker(client, clock)

    @worker.handler("gpu")
    def steps(ctx: RunContext) -> None:
        ctx.save_checkpoint({"step": 5})
        started.set()
        ctx.interrupted.wait(10)
        ctx.check()

    with running(worker) as runner:
        assert started.wait(5)
        worker.stop()
        runner.join()
    run = api.run(run_id)
    assert (run.status, run.attempts[0]["error_code"], run.checkpoint) == (
        RunStatus.RETRY_WAIT,
        "worker_stopped",
        {"step": 5},
    )
    # Taken over with no heartbeat timeout to wait out: the time has not moved.
    [again] = client.claim("gpu", worker_id="w-2", wait_seconds=0).runs
    assert (again.attempt, again.checkpoint) == (2, {"step": 5})


def test_a_handler_still_running_after_the_grace_period_is_failed_for_another_worker(
    api: FakePoolApi, client: Client, clock: ManualTime, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=60)
    started, release = threading.Event(), threading.Event()
    worker = make_worker(client, clock, grace_seconds=5)

    @worker.handler("gpu")
    def ignores_stop(ctx: RunContext) -> str:
        ctx.save_checkpoint({"step": 9})
        started.set()
        release.wait(10)
        return "too late"

    with running(worker) as runner:
        assert started.wait(5)
        token = api.run(run_id).lease_token
        worker.stop()
        time.sleep(0.05)
        assert status_of(api, run_id) is RunStatus.RUNNING  # within the grace period
        clock.advance(5)
        runner.join()
        run = api.run(run_id)
        assert (run.status, run.attempts[0]["error_code"], run.checkpoint) == (
            RunStatus.RETRY_WAIT,
            "worker_stopped",
            {"step": 9},
        )
        [again] = client.claim("gpu", worker_id="w-2", wait_seconds=0).runs
        assert (again.attempt, again.checkpoint) == (2, {"step": 9})
        with caplog.at_level(logging.WARNING, logger="tickwork_client.worker"):
            release.set()
            eventually(lambda: "dropped" in caplog.text)
    assert all(seen.token != token for seen in api.seen("complete"))


SIGNALLED_WORKER = """
import sys, threading, time
from tickwork_client import NO_RETRIES, Client, PoolWorker

url, token, mode, grace = sys.argv[1:5]
worker = PoolWorker(Client(url, token, retries=NO_RETRIES), worker_id="proc-1", grace_seconds=float(grace))

@worker.handler("gpu")
def work(ctx):
    ctx.save_checkpoint({"step": 1})
    print("started", flush=True)
    while not ctx.stopping:
        time.sleep(0.01)
    if mode == "finish":
        return {"finished": True}
    threading.Event().wait()  # never ends

worker.run()
print("run() returned", flush=True)
"""


@pytest.mark.parametrize(
    ("signum", "mode", "status"),
    [
        (signal.SIGTERM, "finish", RunStatus.SUCCEEDED),
        (signal.SIGINT, "hang", RunStatus.RETRY_WAIT),
    ],
    ids=["SIGTERM, the handler finishes", "SIGINT, the handler outlives the grace period"],
)
def test_a_signal_stops_a_worker_process_cleanly(signum: int, mode: str, status: RunStatus) -> None:
    with FakePoolApi(ManualTime(datetime.now(UTC))) as api:
        run_id = api.add_run()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        process = subprocess.Popen(
            [sys.executable, "-c", SIGNALLED_WORKER, api.url, TOKEN, mode, "0.3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "started"
            process.send_signal(signum)
            out, err = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 0, err
        assert "run() returned" in out
        run = api.run(run_id)
        assert run.status is status
        if mode == "hang":
            assert run.attempts[0]["error_code"] == "worker_stopped"
            assert run.checkpoint == {"step": 1}


# --- the example in docs/examples ---------------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pool_worker.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_pool_worker", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_resumes_after_the_last_step_saved_when_its_worker_dies(
    api: FakePoolApi, client: Client, clock: ManualTime, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example()
    run_id = api.add_run(example.POOL, payload={"steps": 8, "step_seconds": 1}, heartbeat_timeout_seconds=10)
    frozen = ManualTime(START)  # the first worker's host: its time stops when it is killed
    first = make_worker(client, frozen, worker_id="w-1")
    first.register(example.POOL, example.work)
    second = make_worker(client, clock, worker_id="w-2")
    second.register(example.POOL, example.work)

    with running(first):
        [ctx] = eventually(first.active_runs)
        for step in range(1, 5):  # 4 s: one heartbeat (due at 3.3 s) has saved step 3 or 4
            eventually(reaches(lambda: len(frozen.waits_of("tickwork-run")), step), what=f"step {step}")
            frozen.advance(1)
            clock.advance(1)
        eventually(lambda: (ctx.checkpoint or {}).get("done") == 4, what="step 4 done")
        saved = eventually(lambda: api.run(run_id).checkpoint, what="a checkpoint saved")
        assert saved["done"] in (3, 4)
        token = api.run(run_id).lease_token
        clock.advance(11)  # killed: no more heartbeats, and the lease lapses
        with running(second):
            for step in range(1, 9 - saved["done"]):
                eventually(reaches(lambda: len(clock.waits_of("tickwork-run")), step), what=f"step {step}")
                clock.advance(1)
            eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)
        assert api.run(run_id).output == {
            "steps": 8,
            "total": sum(range(1, 9)),
            "attempt": 2,
            "resumed_from": saved["done"],
        }
        frozen.advance(10)  # the killed worker can change nothing any more
        eventually(lambda: ctx.lost)
    assert f"attempt 2: resuming after step {saved['done']} of 8" in capsys.readouterr().out
    assert all(seen.token != token for seen in api.seen("complete") + api.seen("fail"))


# --- claiming -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", [None, 503], ids=["no answer", "503"])
def test_a_claim_that_failed_is_sent_again_after_a_backoff_with_jitter(
    api: FakePoolApi, client: Client, clock: ManualTime, fault: int | None
) -> None:
    run_id = api.add_run()
    api.fault("claim", fault, times=2)
    worker = make_worker(client, clock)
    worker.register("gpu", lambda ctx: "ok")
    with running(worker):
        eventually(lambda: clock.waits_of("tickwork-claim") == [0.5])  # half of 1 s
        clock.advance(0.5)
        eventually(lambda: clock.waits_of("tickwork-claim") == [0.5, 1.0])  # half of 2 s
        assert len(api.seen("claim")) == 2
        clock.advance(1.0)
        eventually(lambda: status_of(api, run_id) is RunStatus.SUCCEEDED)


def test_a_claim_that_cannot_succeed_stops_the_worker_and_run_raises_it(
    api: FakePoolApi, clock: ManualTime
) -> None:
    worker = make_worker(Client(api.url, "tw_wrong", retries=NO_RETRIES), clock)
    worker.register("gpu", lambda ctx: None)
    with pytest.raises(Unauthorized):
        worker.run(handle_signals=False)
    assert len(api.seen("claim")) == 1


def test_at_most_max_runs_run_at_once(api: FakePoolApi, client: Client, clock: ManualTime) -> None:
    run_ids = [api.add_run() for _ in range(3)]
    gate = threading.Event()
    lock = threading.Lock()
    inside: list[str] = []
    peak = [0]
    worker = make_worker(client, clock, max_runs=2)

    @worker.handler("gpu")
    def job(ctx: RunContext) -> None:
        with lock:
            inside.append(ctx.run_id)
            peak[0] = max(peak[0], len(inside))
        gate.wait(10)
        with lock:
            inside.remove(ctx.run_id)

    with running(worker):
        eventually(lambda: len(inside) == 2)
        time.sleep(0.1)
        assert len(inside) == 2
        gate.set()
        eventually(lambda: all(status_of(api, r) is RunStatus.SUCCEEDED for r in run_ids))
    assert peak == [2]
    assert api.seen("claim")[0].body["max_runs"] == 2


def test_each_pool_has_its_handler(api: FakePoolApi, client: Client, clock: ManualTime) -> None:
    gpu, cpu = api.add_run("gpu"), api.add_run("cpu")
    worker = make_worker(client, clock, max_runs=2)
    worker.register("gpu", lambda ctx: "gpu")
    worker.register("cpu", lambda ctx: "cpu")
    with running(worker):
        eventually(lambda: {status_of(api, gpu), status_of(api, cpu)} == {RunStatus.SUCCEEDED})
    assert (api.run(gpu).output, api.run(cpu).output) == ("gpu", "cpu")


# --- the parts, without a server ----------------------------------------------------------------------------
def claimed(**fields: Any) -> ClaimedRunOut:
    return ClaimedRunOut.model_validate(
        {
            "run_id": "01JOB:1",
            "job_id": "01JOB",
            "attempt": 1,
            "scheduled_for": "2026-11-28T12:00:00Z",
            "lease_token": "1.abcdefghijklmnopqrstuv",
            "lease_expires_at": "2026-11-28T12:01:00Z",
            **fields,
        }
    )


@pytest.mark.parametrize(
    ("lease_seconds", "timeout"),
    [(60, 60), (10, 10), (600, 600), (3, 10), (-50, 10), (5000, 600)],
)
def test_the_heartbeat_timeout_is_read_from_the_claims_lease_within_the_contracts_range(
    lease_seconds: float, timeout: float
) -> None:
    expires = START.timestamp() + 60
    assert heartbeat_timeout_of(claimed(), expires - lease_seconds) == timeout


@pytest.mark.parametrize(
    ("fraction", "stage"), [(-0.1, None), (1.5, None), (float("nan"), None), (0.5, "x" * 201)]
)
def test_progress_out_of_range_raises_in_the_handler(fraction: float, stage: str | None) -> None:
    with pytest.raises(ValueError, match=r"progress|stage"):
        RunContext(claimed(), pool="gpu").progress(fraction, stage)


@pytest.mark.parametrize(
    "value", [None, {"s": "x" * MAX_CHECKPOINT_BYTES}, {"n": float("inf")}], ids=["none", "too large", "inf"]
)
def test_a_checkpoint_the_api_would_refuse_raises_in_the_handler(value: Any) -> None:
    ctx = RunContext(claimed(checkpoint={"step": 1}), pool="gpu")
    with pytest.raises(ValueError, match="checkpoint"):
        ctx.save_checkpoint(value)
    assert ctx.checkpoint == {"step": 1}


def test_the_checkpoint_is_the_last_saved_from_any_attempt() -> None:
    ctx = RunContext(claimed(attempt=2, checkpoint={"step": 4}), pool="gpu")
    assert ctx.checkpoint == {"step": 4}
    ctx.save_checkpoint({"step": 5})
    assert ctx.checkpoint == {"step": 5}


@pytest.mark.parametrize(
    ("reasons", "raised"),
    [
        ((), None),
        (("stopping",), "stopping"),
        (("stopping", "cancelled"), "cancelled"),
        (("cancelled", "lost"), "lost"),
    ],
)
def test_check_raises_the_weightiest_reason_to_stop(reasons: tuple[Any, ...], raised: str | None) -> None:
    ctx = RunContext(claimed(), pool="gpu")
    for reason in reasons:
        ctx._interrupt(reason)
    assert ctx.interrupted.is_set() is bool(reasons)
    if raised is None:
        ctx.check()
    else:
        with pytest.raises(Interrupted) as caught:
            ctx.check()
        assert caught.value.reason == raised


@pytest.mark.parametrize("code", ["", "has space", "x" * 65, "é", "code\n"])
def test_a_permanent_failure_needs_a_code_the_api_takes(code: str) -> None:
    with pytest.raises(ValueError, match="code"):
        PermanentFailure("no", code=code)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"worker_id": "has space"}, "worker_id"),
        ({"worker_id": "w", "wait_seconds": 21}, "wait_seconds"),
        ({"worker_id": "w", "max_runs": 0}, "max_runs"),
        ({"worker_id": "w", "grace_seconds": -1}, "grace_seconds"),
    ],
)
def test_a_worker_that_could_not_claim_is_refused_at_once(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PoolWorker(Client("http://127.0.0.1:9", TOKEN), **options)


@pytest.mark.parametrize("pool", ["GPU", "-gpu", "", "a" * 65, "gpu\n"])
def test_a_pool_name_the_contract_refuses_is_refused_at_registration(pool: str) -> None:
    worker = PoolWorker(Client("http://127.0.0.1:9", TOKEN), worker_id="w")
    with pytest.raises(ValueError, match="pool"):
        worker.register(pool, lambda ctx: None)
