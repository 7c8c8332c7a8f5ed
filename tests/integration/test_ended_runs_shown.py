"""A one-time job whose run ended badly is COMPLETED, and says how its run ended: ``GET /v1/jobs/{job_id}``
shows the run as ``last_run``, and the log has one INFO line for it, without a traceback.

The engine runs under moto on a fake clock (``tests/integration/conftest.py``); the job's view is the API's
``JobOut`` of what the service returns.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tickwork.api.schemas import JobOut
from tickwork.observability import logger
from tickwork.targets import TargetResult

from tests.integration.conftest import START, Engine
from tests.support.engine import WorkerDied


@pytest.fixture
def info_log() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Reads tickwork's log lines so far, at INFO and above, parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    underlying = logging.getLogger(logger.name)
    level = logger.log_level
    underlying.addHandler(handler)
    logger.setLevel("INFO")
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    finally:
        underlying.removeHandler(handler)
        logger.setLevel(level)


def once(engine: Engine, path: str, **spec: Any) -> str:
    job = engine.create(schedule={"type": "once", "at": START.isoformat()}, target=engine.http(path), **spec)
    return job.job.job_id


def dead(engine: Engine) -> str:
    engine.receiver.script["/down"] = [503]
    job_id = once(engine, "/down", retry={"max_attempts": 1, "jitter": "none"})
    engine.drain()
    return job_id


def failed(engine: Engine) -> str:
    engine.receiver.script["/gone"] = [404]
    job_id = once(engine, "/gone")
    engine.drain()
    return job_id


def abandoned(engine: Engine) -> str:
    job_id = once(engine, "/crash", delivery="at_most_once")

    def die(job: Any, run: Any, tenant: Any) -> TargetResult:
        raise WorkerDied

    with pytest.raises(WorkerDied):
        engine.drain(worker=engine.runtime.worker(clock=engine.clock, sleep=engine.clock.sleep, execute=die))
    for _ in range(4):  # the message comes back after its visibility timeout, then after the lease
        engine.clock.advance(seconds=30)
        engine.drain()
    return job_id


ENDS = [
    (dead, "DEAD", "run dead-lettered"),
    (failed, "FAILED", "run failed"),
    (abandoned, "ABANDONED", "run abandoned"),
]


@pytest.mark.parametrize(("end", "status", "message"), ENDS, ids=["dead", "failed", "abandoned"])
def test_a_completed_one_time_job_shows_how_its_run_ended(
    engine: Engine, end: Callable[[Engine], str], status: str, message: str
) -> None:
    # Given a one-time job whose only run ended without success
    job_id = end(engine)
    (run,) = engine.runs_of("acme", job_id)
    assert run.status.value == status

    # When the job is read
    shown = JobOut.of(engine.runtime.service.get_job("acme", job_id, engine.clock())).model_dump(mode="json")

    # Then it is COMPLETED, and its last run says how it ended
    assert shown["status"] == "COMPLETED"
    assert shown["last_run"] is not None
    assert (shown["last_run"]["run_id"], shown["last_run"]["status"]) == (run.run_id, status)


@pytest.mark.parametrize(("end", "status", "message"), ENDS, ids=["dead", "failed", "abandoned"])
def test_a_run_that_ended_badly_is_one_info_line_without_a_traceback(
    engine: Engine,
    info_log: Callable[[], list[dict[str, Any]]],
    end: Callable[[Engine], str],
    status: str,
    message: str,
) -> None:
    # Given a one-time job whose only run ended without success, logged at INFO
    job_id = end(engine)
    (run,) = engine.runs_of("acme", job_id)
    lines = info_log()

    # Then its end is one INFO line naming the tenant, job and run, with its status and reason
    about = [line for line in lines if line.get("run_id") == run.run_id]
    assert [(line["level"], line["message"]) for line in about] == [("INFO", message)]
    assert (about[0]["tenant_id"], about[0]["job_id"]) == ("acme", job_id)
    assert (about[0]["status"], about[0]["reason"]) == (status, run.reason)
    # And no line carries a traceback: a target's answer or a lost lease is an outcome, not a fault
    assert not any("exception" in line or "stack_trace" in line for line in lines)
