"""The AWS request and write-unit budget of a run, counted through the real path under moto.

The counts come from botocore event hooks (``bench._cost_meter``), the same meter ``python -m bench.cost``
uses; a change that adds a call or a write to the hot path fails here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.adapters.dynamo import to_item
from tickwork.adapters.runs import SLOT
from tickwork.domain.models import RunStatus
from tickwork.runtime import build_runtime

from bench._cost_meter import Meter, Tally
from tests.conftest import seed_tenant
from tests.integration.conftest import START, Engine

# As deployed: the worker's event source mapping runs at most this many invocations at once.
MAX_CONCURRENCY = 50
# One successful scheduled run, its planner tick (2 due shards, 2 attention shards) included.
WRU_BUDGET = 6
REQUESTS_BUDGET = {
    # planner tick: due-index queries, one batched job read, the run put, one send, the cursor
    "dynamodb.Query": 2 + 2 + 1,  # + the worker's overlap check
    "dynamodb.BatchGetItem": 1,
    "dynamodb.PutItem": 1 + 1,  # the run, and the attempt's idempotency record
    "sqs.SendMessageBatch": 1,
    # worker: run, job and tenant reads; lease, idempotency record completed, finish; cursor (planner)
    "dynamodb.GetItem": 3,
    "dynamodb.UpdateItem": 1 + 1 + 1 + 1,
    "sqs.ReceiveMessage": 2,  # the batch, and the poll that finds the queue empty
    "sqs.DeleteMessage": 1,
}


def deployed(engine: Engine) -> None:
    settings = engine.runtime.settings.model_copy(update={"worker_max_concurrency": MAX_CONCURRENCY})
    engine.runtime = build_runtime(settings, dynamodb=engine.dynamodb, sqs=engine.sqs, metrics=engine.metrics)


def metered(engine: Engine) -> Meter:
    meter = Meter(boto3.client("dynamodb", region_name="eu-west-1"))
    meter.attach(engine.dynamodb)
    meter.attach(engine.sqs)
    return meter


def in_flight(engine: Engine, tenant_id: str) -> int:
    item = engine.dynamodb.get_item(
        TableName=tables.TENANTS.default_name,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}),
        ConsistentRead=True,
    )["Item"]
    return int(item.get("in_flight", {"N": "0"})["N"])


def every_minute(engine: Engine, tenant: str = "acme") -> str:
    start = (START + timedelta(minutes=1)).isoformat()
    job = engine.create(
        tenant,
        schedule={"type": "rate", "every_seconds": 60, "start_at": start},
        target=engine.http(f"/budget-{tenant}"),
    ).job
    return job.job_id


def test_one_scheduled_run_stays_within_its_request_and_write_budget(engine: Engine) -> None:
    deployed(engine)
    job_id = every_minute(engine)
    engine.clock.advance(minutes=1)
    engine.tick()
    engine.drain()  # the first fire warms the path up; the second is measured
    meter = metered(engine)
    engine.clock.advance(minutes=1)
    engine.tick()
    engine.drain()
    tally: Tally = meter.tally.snapshot()
    runs = engine.runs_of("acme", job_id)
    assert [run.status for run in runs] == [RunStatus.SUCCEEDED] * 2
    assert dict(tally.requests) == REQUESTS_BUDGET
    assert tally.total("wru") <= WRU_BUDGET
    assert "dynamodb.TransactWriteItems" not in tally.requests
    # the hot path's items stay under 1 KB, so each write is one unit
    assert max(tally.item_bytes.values()) < 1024


def test_the_planner_sends_runs_of_different_jobs_ten_to_a_request(engine: Engine) -> None:
    deployed(engine)
    for _ in range(12):
        every_minute(engine)
    meter = metered(engine)
    engine.clock.advance(minutes=1)
    report = engine.tick()
    assert report.planned_runs == 12
    assert tally_requests(meter, "sqs.SendMessageBatch") == 2
    assert tally_requests(meter, "dynamodb.BatchGetItem") == 1
    assert tally_requests(meter, "dynamodb.UpdateItem") == 12  # the cursors; no second write per run
    assert engine.drain() == 12
    assert len([r for r in engine.receiver.requests if r.path.startswith("/budget-")]) == 12


def tally_requests(meter: Meter, operation: str) -> int:
    return int(meter.tally.requests.get(operation, 0))


def test_a_tenant_whose_limit_the_workers_cannot_reach_skips_the_in_flight_counter(engine: Engine) -> None:
    deployed(engine)
    job_id = every_minute(engine)  # acme's limit is 100, above the 50 workers
    engine.clock.advance(minutes=1)
    engine.tick()
    (run,) = engine.runs_of("acme", job_id)
    seen: list[int] = []
    original = engine.runtime.execute

    def watching(job: Any, leased: Any, tenant: Any) -> Any:
        seen.append(in_flight(engine, "acme"))
        return original(job, leased, tenant)

    executor = engine.executor()
    executor.execute = watching
    engine.drain(executor=executor)
    assert seen == [0]
    assert in_flight(engine, "acme") == 0
    assert engine.run("acme", run.run_id).status is RunStatus.SUCCEEDED


@pytest.mark.parametrize(("max_in_flight", "counted"), [(100, False), (10, True)])
def test_an_expired_lease_gives_back_exactly_the_slot_it_took(
    engine: Engine, dynamodb: Any, max_in_flight: int, counted: bool
) -> None:
    deployed(engine)
    seed_tenant(dynamodb, "bounded", "tw_bounded", max_in_flight=max_in_flight)
    job_id = every_minute(engine, "bounded")
    engine.clock.advance(minutes=1)
    engine.tick()
    (run,) = engine.runs_of("bounded", job_id)
    # Given a worker that took the lease the way the executor does, then died
    engine.runtime.leases.take(
        run,
        owner="dead-worker",
        now=engine.clock(),
        lease_for=timedelta(seconds=35),
        max_in_flight=max_in_flight,
        count_slot=max_in_flight < MAX_CONCURRENCY,
    )
    item = engine.dynamodb.get_item(
        TableName=tables.RUNS.default_name,
        Key=to_item({tables.RUNS_PK: tables.run_key("bounded", run.run_id)}),
    )["Item"]
    assert item[SLOT] == {"BOOL": counted}
    assert in_flight(engine, "bounded") == (1 if counted else 0)
    engine.sqs.purge_queue(QueueUrl=engine.queue_url)
    # When the lease expires, the sweeper requeues it and a second attempt succeeds
    engine.clock.advance(seconds=36)
    report = engine.tick()
    engine.drain()
    assert report.sweep.requeued == [run.run_id]
    final = engine.run("bounded", run.run_id)
    assert final.status is RunStatus.SUCCEEDED
    assert [attempt.outcome for attempt in final.attempts] == ["abandoned", "succeeded"]
    # Then the counter is back where it started: never below zero, never a slot leaked
    assert in_flight(engine, "bounded") == 0
