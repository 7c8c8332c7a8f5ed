"""The client's pool routes (claim, heartbeat, complete, fail, cancel) against a loopback stand-in of the API
that keeps the contract's leases in memory (``tests/support/fake_pool_api.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from tickwork.api.schemas import ClaimedRunOut, ClaimOut, HeartbeatOut, RunOut
from tickwork.domain.models import RunStatus
from tickwork.domain.pools import fencing_token_of
from tickwork_client import NO_RETRIES, Client, Conflict, LeaseLost

from tests.support.fake_pool_api import TOKEN, FakePoolApi, ManualTime

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


def claim_one(client: Client, pool: str = "gpu", worker_id: str = "w-1") -> ClaimedRunOut:
    answer = client.claim(pool, worker_id=worker_id, wait_seconds=0)
    assert len(answer.runs) == 1
    return answer.runs[0]


def test_a_claim_answers_what_a_worker_needs_and_nothing_saved_on_a_first_attempt(
    api: FakePoolApi, client: Client
) -> None:
    run_id = api.add_run("gpu", payload={"model": "m1"}, heartbeat_timeout_seconds=30)
    api.add_run("cpu")
    answer = client.claim("gpu", worker_id="host-1", max_runs=5, wait_seconds=0)
    assert isinstance(answer, ClaimOut)
    [run] = answer.runs
    assert (run.run_id, run.attempt, run.payload, run.scheduled_for) == (run_id, 1, {"model": "m1"}, START)
    assert run.lease_expires_at == START + timedelta(seconds=30)
    assert (run.progress, run.stage, run.checkpoint) == (None, None, None)
    assert fencing_token_of(run.lease_token) == 1
    assert api.seen("claim")[0].body == {"worker_id": "host-1", "max_runs": 5, "wait_seconds": 0}


def test_a_claim_with_no_run_is_answered_empty(client: Client) -> None:
    assert client.claim("gpu", worker_id="host-1", wait_seconds=0).runs == []


def test_a_claims_timeout_is_its_wait_plus_the_clients_timeout(api: FakePoolApi) -> None:
    # The API holds the claim 0.3 s (its wait, scaled down), longer than the client's timeout of 0.1 s: the
    # claim must still be answered, not taken for a lost answer.
    api.hold_scale = 0.3
    client = Client(api.url, TOKEN, retries=NO_RETRIES, timeout=0.1)
    started = time.monotonic()
    assert client.claim("gpu", worker_id="host-1", wait_seconds=1).runs == []
    assert time.monotonic() - started >= 0.25


def test_a_heartbeat_saves_what_it_is_given_and_extends_the_lease(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)
    run = claim_one(client)
    clock.advance(20)
    answer = client.heartbeat(
        run_id, lease_token=run.lease_token, progress=0.25, stage="epoch 1", checkpoint={"epoch": 1}
    )
    assert isinstance(answer, HeartbeatOut)
    assert answer == HeartbeatOut(lease_expires_at=START + timedelta(seconds=50), cancel_requested=False)
    stored = api.run(run_id)
    assert (stored.progress, stored.stage, stored.checkpoint) == (0.25, "epoch 1", {"epoch": 1})
    assert api.seen("heartbeat")[0].body == {
        "lease_token": run.lease_token,
        "progress": 0.25,
        "stage": "epoch 1",
        "checkpoint": {"epoch": 1},
    }


def test_a_heartbeat_without_a_checkpoint_sends_no_null_and_keeps_the_checkpoint(
    api: FakePoolApi, client: Client
) -> None:
    run_id = api.add_run()
    run = claim_one(client)
    client.heartbeat(run_id, lease_token=run.lease_token, checkpoint={"step": 3}, stage="a")
    client.heartbeat(run_id, lease_token=run.lease_token, progress=0.5)
    client.heartbeat(run_id, lease_token=run.lease_token)
    bodies = [seen.body for seen in api.seen("heartbeat")]
    assert bodies[1:] == [{"lease_token": run.lease_token, "progress": 0.5}, {"lease_token": run.lease_token}]
    stored = api.run(run_id)
    assert (stored.checkpoint, stored.stage, stored.progress) == ({"step": 3}, "a", 0.5)


def test_falsy_values_are_sent_they_are_not_none(api: FakePoolApi, client: Client) -> None:
    run_id = api.add_run()
    run = claim_one(client)
    client.heartbeat(run_id, lease_token=run.lease_token, progress=0.0, stage="", checkpoint=0)
    assert api.seen("heartbeat")[0].body == {
        "lease_token": run.lease_token,
        "progress": 0.0,
        "stage": "",
        "checkpoint": 0,
    }


def test_complete_ends_the_run_and_sends_no_output_when_none(api: FakePoolApi, client: Client) -> None:
    first, second = api.add_run(), api.add_run()
    runs = client.claim("gpu", worker_id="w-1", max_runs=2, wait_seconds=0).runs
    done = client.complete(first, lease_token=runs[0].lease_token)
    assert isinstance(done, RunOut)
    assert (done.status, done.attempts[0].outcome) == (RunStatus.SUCCEEDED, "succeeded")
    client.complete(second, lease_token=runs[1].lease_token, output={"rows": 10})
    assert [seen.body for seen in api.seen("complete")] == [
        {"lease_token": runs[0].lease_token},
        {"lease_token": runs[1].lease_token, "output": {"rows": 10}},
    ]
    assert api.run(second).output == {"rows": 10}


def test_a_retryable_fail_lets_the_next_claim_resume_from_the_checkpoint(
    api: FakePoolApi, client: Client
) -> None:
    run_id = api.add_run()
    first = claim_one(client)
    client.heartbeat(run_id, lease_token=first.lease_token, progress=0.4, checkpoint={"step": 4})
    failed = client.fail(run_id, lease_token=first.lease_token, code="oom", message="out of memory")
    assert failed.status is RunStatus.RETRY_WAIT
    assert (failed.attempts[0].error_code, failed.attempts[0].error_message) == ("oom", "out of memory")
    assert api.seen("fail")[0].body == {
        "lease_token": first.lease_token,
        "error": {"code": "oom", "message": "out of memory"},
        "retryable": True,
    }
    second = claim_one(client, worker_id="w-2")
    assert (second.attempt, second.checkpoint, second.progress) == (2, {"step": 4}, 0.4)
    assert second.lease_token != first.lease_token
    assert fencing_token_of(second.lease_token) == 2


def test_a_fail_that_is_not_retryable_ends_the_run_failed(api: FakePoolApi, client: Client) -> None:
    run_id = api.add_run()
    run = claim_one(client)
    failed = client.fail(run_id, lease_token=run.lease_token, code="bad_input", retryable=False)
    assert failed.status is RunStatus.FAILED
    assert api.seen("fail")[0].body["error"] == {"code": "bad_input", "message": ""}
    assert client.claim("gpu", worker_id="w-1", wait_seconds=0).runs == []


def test_a_lapsed_lease_is_lost_and_the_next_claim_takes_the_run(
    api: FakePoolApi, client: Client, clock: ManualTime
) -> None:
    run_id = api.add_run(heartbeat_timeout_seconds=30)
    first = claim_one(client, worker_id="w-1")
    client.heartbeat(run_id, lease_token=first.lease_token, checkpoint={"step": 2})
    clock.advance(31)
    second = claim_one(client, worker_id="w-2")
    assert (second.attempt, second.checkpoint) == (2, {"step": 2})
    assert api.run(run_id).attempts[0]["error_code"] == "heartbeat_timeout"
    for call in (
        lambda: client.heartbeat(run_id, lease_token=first.lease_token),
        lambda: client.complete(run_id, lease_token=first.lease_token, output=1),
        lambda: client.fail(run_id, lease_token=first.lease_token, code="x"),
    ):
        with pytest.raises(LeaseLost) as raised:
            call()
        assert isinstance(raised.value, Conflict)
        assert (raised.value.status, raised.value.code) == (409, "lease_lost")
    # The stale calls changed nothing: the second worker's lease still holds.
    assert client.complete(run_id, lease_token=second.lease_token, output=2).status is RunStatus.SUCCEEDED
    assert api.run(run_id).output == 2


def test_a_cancel_reaches_a_running_run_at_its_next_heartbeat(api: FakePoolApi, client: Client) -> None:
    run_id = api.add_run()
    run = claim_one(client)
    assert client.cancel_run(run_id).status is RunStatus.RUNNING
    assert client.heartbeat(run_id, lease_token=run.lease_token).cancel_requested is True
    ended = client.fail(run_id, lease_token=run.lease_token, code="cancelled", retryable=False)
    assert ended.status is RunStatus.CANCELLED


def test_a_queued_run_is_cancelled_at_once(api: FakePoolApi, client: Client) -> None:
    run_id = api.add_run()
    assert client.cancel_run(run_id).status is RunStatus.CANCELLED
    assert client.claim("gpu", worker_id="w-1", wait_seconds=0).runs == []
