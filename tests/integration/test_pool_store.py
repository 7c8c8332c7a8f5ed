"""The runs table's pool parts under moto: the waiting index, a claim taking a run out of it, the lease token,
progress and output as stored, and checkpoints fenced on the attempt's token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork import tables
from tickwork.adapters.runs import DynamoRunStore
from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunStatus, scheduled_run_id

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def store(dynamodb: Any) -> DynamoRunStore:
    return DynamoRunStore(
        dynamodb, table=tables.RUNS.default_name, retention=timedelta(days=90), attention_shards=2
    )


def waiting(job_id: str, seconds: int, *, tenant: str = "acme", pool: str = "gpu") -> Run:
    at = START + timedelta(seconds=seconds)
    return Run(
        run_id=scheduled_run_id(job_id, at),
        job_id=job_id,
        tenant_id=tenant,
        scheduled_for=at,
        status=RunStatus.ENQUEUED,
        created_at=START,
        enqueued_at=START,
        pool=pool,
        fencing_token=1,
    )


def test_the_pool_index_holds_waiting_runs_oldest_first_per_tenant_and_pool(dynamodb: Any) -> None:
    runs = store(dynamodb)
    for run in (
        waiting("job-b", 30),
        waiting("job-a", 10),
        waiting("job-c", 20),
        waiting("job-d", 5, pool="cpu"),
        waiting("job-e", 1, tenant="globex"),
    ):
        assert runs.put(run, Expect.new()).ok
    found = runs.waiting_in_pool("acme", "gpu", limit=10)
    assert [run.job_id for run in found] == ["job-a", "job-c", "job-b"]
    assert [run.job_id for run in runs.waiting_in_pool("acme", "gpu", limit=2)] == ["job-a", "job-c"]
    assert [run.job_id for run in runs.waiting_in_pool("globex", "gpu", limit=10)] == ["job-e"]


def test_a_claimed_run_leaves_the_index_and_keeps_its_token_progress_and_output(dynamodb: Any) -> None:
    runs = store(dynamodb)
    run = waiting("job-a", 10)
    assert runs.put(run, Expect.new()).ok
    claimed = run.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "attempt": 1,
            "fencing_token": 2,
            "lease_token": "2.abcdefghijklmnopqrstuv",
            "lease_expires_at": START + timedelta(seconds=60),
            "progress": 0.1 + 0.2,  # a float DynamoDB's numbers must not round
            "stage": "epoch 1",
        }
    )
    assert runs.put(claimed, Expect.at(run)).ok
    assert runs.waiting_in_pool("acme", "gpu", limit=10) == []
    stored = runs.get("acme", run.run_id)
    assert stored == claimed
    assert stored.lease_token == "2.abcdefghijklmnopqrstuv"
    assert "lease_token" not in stored.model_dump(mode="json")  # never shown
    done = stored.model_copy(
        update={"status": RunStatus.SUCCEEDED, "output": {"loss": 0.25, "ids": [1, 2.5]}}
    )
    assert runs.put(done, Expect.at(stored)).ok
    assert runs.get("acme", run.run_id).output == {"loss": 0.25, "ids": [1, 2.5]}


def test_a_claim_of_a_run_another_claim_took_is_refused(dynamodb: Any) -> None:
    runs = store(dynamodb)
    run = waiting("job-a", 10)
    assert runs.put(run, Expect.new()).ok
    first = run.model_copy(update={"status": RunStatus.RUNNING, "fencing_token": 2, "lease_token": "2.a"})
    second = run.model_copy(update={"status": RunStatus.RUNNING, "fencing_token": 2, "lease_token": "2.b"})
    assert runs.put(first, Expect.at(run)).ok
    assert not runs.put(second, Expect.at(run)).ok
    assert runs.get("acme", run.run_id).lease_token == "2.a"


def test_checkpoints_are_kept_beside_the_run_and_fenced_on_the_attempts_token(dynamodb: Any) -> None:
    runs = store(dynamodb)
    run = waiting("job-a", 10)
    assert runs.put(run, Expect.new()).ok
    assert runs.checkpoint_of(run) is None
    attempt_2 = run.model_copy(update={"fencing_token": 2})
    attempt_3 = run.model_copy(update={"fencing_token": 3})
    assert runs.save_checkpoint(attempt_2, {"step": 1, "loss": 0.5})
    assert runs.save_checkpoint(attempt_2, {"step": 2, "loss": 0.25})
    assert runs.save_checkpoint(attempt_3, {"step": 3})
    # The attempt before, late, cannot overwrite its successor's
    assert not runs.save_checkpoint(attempt_2, {"step": 99})
    assert runs.checkpoint_of(run) == {"step": 3}
    # Outside the job's history: listing the job's runs shows the run alone
    assert [r.run_id for r in runs.list_for_job("acme", "job-a", limit=10, cursor=None).items] == [run.run_id]


def test_a_pools_backlog_counts_its_runs_due_by_now_up_to_a_cap_and_finds_the_oldest(dynamodb: Any) -> None:
    runs = store(dynamodb)
    for run in (
        waiting("job-a", 10),
        waiting("job-b", 20),
        waiting("job-c", 30),
        waiting("job-d", 90),  # handed over ahead of its time: not waiting yet
        waiting("job-e", 5, pool="cpu"),
        waiting("job-f", 1, tenant="globex"),
    ):
        assert runs.put(run, Expect.new()).ok
    now = START + timedelta(seconds=60)
    backlog = runs.pool_backlog("acme", "gpu", now=now, cap=10)
    assert (backlog.waiting, backlog.capped, backlog.oldest_due) == (3, False, START + timedelta(seconds=10))
    assert backlog.oldest_wait(now) == timedelta(seconds=50)
    capped = runs.pool_backlog("acme", "gpu", now=now, cap=2)
    assert (capped.waiting, capped.capped) == (2, True)
    exact = runs.pool_backlog("acme", "gpu", now=now, cap=3)
    assert (exact.waiting, exact.capped) == (3, False)
    empty = runs.pool_backlog("acme", "tpu", now=now, cap=10)
    assert (empty.waiting, empty.capped, empty.oldest_due, empty.oldest_wait(now)) == (0, False, None, None)
