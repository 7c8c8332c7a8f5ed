"""The local stack's planner loop and worker pollers stop and start again while the rest of it runs, and
a run due while either was down is delivered once when it is back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tickwork.domain.models import JobSpec
from tickwork.runtime import runtime
from tickwork_local.stack import LocalStack, running_in_thread

from tests.e2e.conftest import restore_logging, saved_logging, wait_for
from tests.support.engine import Receiver, start_receiver

TENANT = "restarts"
HORIZON_SECONDS = 1


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The local stack in threads of this process; the environment comes back as it was."""
    logs = saved_logging()
    environment = {
        "TICKWORK_LOCAL_TENANTS": f"{TENANT}:tw_e2e_restarts",
        # Creating a job plans the fires within the horizon itself: keep it short, so the planner test's
        # fire is left to the planner loop.
        "TICKWORK_PLANNER_HORIZON_SECONDS": str(HORIZON_SECONDS),
    }
    try:
        with running_in_thread(
            environment=environment,
            ready_seconds=60,
            log_file=str(tmp_path / "tickwork.log"),
            tick_seconds=0.5,
            workers=2,
        ) as running:
            yield running
    finally:
        restore_logging(logs)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


def one_time_job(receiver: Receiver, path: str, at: datetime) -> str:
    spec = JobSpec.model_validate(
        {
            "name": f"restart{path.replace('/', '-')}",
            "schedule": {"type": "once", "at": at.isoformat()},
            "target": {"type": "http", "url": receiver.url(path), "timeout_seconds": 5},
        }
    )
    return runtime().service.create_job(TENANT, spec, datetime.now(UTC)).job.job_id


def run_statuses(job_id: str) -> list[str]:
    page = runtime().service.list_runs(TENANT, job_id, limit=10, cursor=None, now=datetime.now(UTC))
    return [run.status.value for run in page.items]


def test_a_run_due_while_the_workers_were_stopped_is_delivered_once_after_the_restart(
    stack: LocalStack, receiver: Receiver
) -> None:
    first_pollers = list(stack.worker_threads)
    assert stack.stop_workers(timeout=10), "the pollers did not stop"
    assert not any(thread.is_alive() for thread in first_pollers)
    due = datetime.now(UTC) + timedelta(seconds=1)
    job_id = one_time_job(receiver, "/workers", due)
    # The planner keeps planning: the run is enqueued, but no poller takes it.
    assert wait_for(lambda: run_statuses(job_id) == ["ENQUEUED"], timeout=5)
    time.sleep(max(0.0, due.timestamp() + 1.5 - time.time()))
    assert receiver.for_path("/workers") == []

    stack.start_workers()
    assert len(stack.worker_threads) == 2 and all(thread.is_alive() for thread in stack.worker_threads)
    assert wait_for(lambda: run_statuses(job_id) == ["SUCCEEDED"], timeout=10)
    time.sleep(1)  # a second delivery, if there were one, would come now
    assert len(receiver.for_path("/workers")) == 1


def test_a_fire_due_while_the_planner_was_stopped_runs_once_it_is_back(
    stack: LocalStack, receiver: Receiver
) -> None:
    assert stack.stop_planner(timeout=10), "the planner loop did not stop"
    due = datetime.now(UTC) + timedelta(seconds=HORIZON_SECONDS + 2)
    job_id = one_time_job(receiver, "/planner", due)
    time.sleep(max(0.0, due.timestamp() + 1.5 - time.time()))
    assert run_statuses(job_id) == []  # nothing plans it

    stack.start_planner()
    with pytest.raises(RuntimeError, match="already running"):
        stack.start_planner()
    assert wait_for(lambda: run_statuses(job_id) == ["SUCCEEDED"], timeout=10)
    (request,) = receiver.for_path("/planner")
    assert request.at - due.timestamp() >= 1.5  # late, as the misfire policy (fire_once) allows


def test_moto_keeps_no_copy_of_every_item_and_message_it_made(stack: LocalStack, receiver: Receiver) -> None:
    """Left to itself moto keeps them all for its dashboard, and the local stack grew by gigabytes."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.sqs.models import Message

    job_id = one_time_job(receiver, "/tracking", datetime.now(UTC) + timedelta(seconds=1))
    assert wait_for(lambda: run_statuses(job_id) == ["SUCCEEDED"], timeout=10)
    assert len(Item.instances_tracked) == 0  # type: ignore[attr-defined]
    assert len(Message.instances_tracked) == 0  # type: ignore[attr-defined]
