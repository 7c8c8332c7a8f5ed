"""What one run costs in AWS requests and capacity units, counted through the real path under moto, and the
proof that it does not grow: the same for a job with 10 or 5,000 runs of history, and for a tenant with 10
or 5,000 jobs.

The counts come from botocore event hooks (``bench._cost_meter``), the meter ``python -m bench.cost`` uses,
which charges every item a query evaluates and every index entry a write touches.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from tickwork import tables
from tickwork.adapters.jobs import job_to_item
from tickwork.domain.models import Attempt, Job, JobSpec, Run, RunStatus, scheduled_run_id
from tickwork.domain.run_listing import RunFilter

from bench._cost_meter import Meter, Tally
from tests.integration.conftest import START, Engine
from tests.support.streams import StreamIndexer

# The worker's part of one successful run of a job whose runs may not overlap (the default): one query of
# the job with its lane, one of the run items it needs (this run's and the last holder's, neighbours in the
# job's history), the lane claim (the lease), and the run item's one write.
WORKER_REQUESTS = {"dynamodb.Query": 2, "dynamodb.UpdateItem": 1, "dynamodb.PutItem": 1}
WORKER_WRU = 2
WORKER_RRU = 2  # both reads strongly consistent, each under 4 KB


def metered(engine: Engine) -> Meter:
    meter = Meter(boto3.client("dynamodb", region_name="eu-west-1"))
    meter.attach(engine.dynamodb)
    meter.attach(engine.sqs)
    return meter


def every_minute(engine: Engine, tenant: str = "acme") -> str:
    job = engine.create(
        tenant,
        schedule={"type": "rate", "every_seconds": 60, "start_at": START.isoformat()},
        target=engine.http(f"/budget-{tenant}"),
    ).job
    return job.job_id


def seed_history(engine: Engine, job_id: str, runs: int) -> None:
    """``runs`` past SUCCEEDED runs of the job, as the worker leaves them, written straight to the table."""
    written: list[Run] = []
    for index in range(runs):
        fire = START - timedelta(minutes=index + 1)
        attempt = Attempt(
            attempt=1, started_at=fire, finished_at=fire, duration_ms=3, outcome="succeeded", worker_id="w"
        )
        run = Run(
            run_id=scheduled_run_id(job_id, fire),
            job_id=job_id,
            tenant_id="acme",
            scheduled_for=fire,
            status=RunStatus.SUCCEEDED,
            attempt=1,
            created_at=fire,
            started_at=fire,
            finished_at=fire,
            lag_ms=2,
            attempts=[attempt],
            fencing_token=index + 1,
        )
        written.append(run)
    write_runs(engine, written)


def write_runs(engine: Engine, runs: list[Run]) -> None:
    """Runs as the worker leaves them, written straight to the table in batches."""
    peek = boto3.client("dynamodb", region_name="eu-west-1")
    items: list[Any] = [{"PutRequest": {"Item": engine.runtime.runs.run_to_item(run)}} for run in runs]
    for start in range(0, len(items), 25):
        peek.batch_write_item(RequestItems={tables.RUNS.default_name: items[start : start + 25]})


def seed_jobs(engine: Engine, count: int) -> None:
    """``count`` other jobs of the tenant, far from due, written straight to the table."""
    peek = boto3.client("dynamodb", region_name="eu-west-1")
    spec = JobSpec.model_validate(
        {
            "name": "x",
            "schedule": {"type": "cron", "expression": "0 0 1 1 *"},
            "target": engine.http("/other"),
        }
    )
    items: list[Any] = []
    for index in range(count):
        job = Job(
            **spec.model_dump(exclude={"name"}),
            name=f"other-{index}",
            job_id=f"01OTHER{index:019d}",
            tenant_id="acme",
            created_at=START,
            updated_at=START,
            next_fire_at=START + timedelta(days=300),
        )
        items.append(
            {"PutRequest": {"Item": job_to_item(job, due_shards=engine.runtime.settings.due_shards)}}
        )
    for start in range(0, len(items), 25):
        peek.batch_write_item(RequestItems={tables.JOBS.default_name: items[start : start + 25]})


def one_run(engine: Engine, job_id: str) -> tuple[Tally, Tally]:
    """(the planner's tally, the worker's tally) of the job's next fire, at steady state."""
    meter = metered(engine)
    engine.clock.advance(minutes=1)
    engine.tick()
    planner = meter.tally.snapshot()
    assert engine.drain() == 1
    worker = meter.tally.minus(planner)
    # the event source mapping's, not the run's
    for name in ("sqs.ReceiveMessage", "sqs.DeleteMessage", "sqs.DeleteMessageBatch"):
        worker.requests.pop(name, None)
    return planner, worker


def steady(engine: Engine, job_id: str) -> None:
    """Run the job's first fires, so the lane holds the last run and the measured one is like any other."""
    for _ in range(2):
        engine.clock.advance(minutes=1)
        engine.tick()
        engine.drain()


def test_a_successful_run_makes_two_reads_and_two_writes(engine: Engine) -> None:
    job_id = every_minute(engine)
    steady(engine, job_id)
    _, worker = one_run(engine, job_id)
    assert dict(worker.requests) == WORKER_REQUESTS
    assert (worker.total("wru"), worker.total("rru"), worker.total("index_wru")) == (
        WORKER_WRU,
        WORKER_RRU,
        0,
    )
    assert "dynamodb.TransactWriteItems" not in worker.requests
    # each write is of an item under 1 KB: one unit
    assert max(worker.item_bytes[t] for t in (tables.RUNS.default_name,)) < 1024
    assert engine.runs_of("acme", job_id)[0].status is RunStatus.SUCCEEDED


def test_a_run_of_a_job_whose_runs_may_overlap_makes_three_requests(engine: Engine) -> None:
    # A job with no lane: its run item is its lease, so the run's own item is not read first
    job = engine.create(
        schedule={"type": "rate", "every_seconds": 60, "start_at": START.isoformat()},
        target=engine.http("/budget-allow"),
        overlap_policy="allow",
    ).job
    steady(engine, job.job_id)
    _, worker = one_run(engine, job.job_id)
    # the job (with its lane, none), the run item's claim, its outcome
    assert dict(worker.requests) == {"dynamodb.Query": 1, "dynamodb.PutItem": 2}
    assert (worker.total("wru"), worker.total("rru")) == (2, 1)


@pytest.mark.parametrize("history", [10, 5000])
def test_per_run_work_does_not_grow_with_the_jobs_history(engine: Engine, history: int) -> None:
    job_id = every_minute(engine)
    seed_history(engine, job_id, history)
    steady(engine, job_id)
    planner, worker = one_run(engine, job_id)
    assert dict(worker.requests) == WORKER_REQUESTS
    assert (worker.total("wru"), worker.total("rru"), worker.total("index_wru")) == (
        WORKER_WRU,
        WORKER_RRU,
        0,
    )
    SEEN[("history", history)] = (_figures(planner), _figures(worker))
    if ("history", 10) in SEEN and ("history", 5000) in SEEN:
        assert SEEN[("history", 10)] == SEEN[("history", 5000)]


@pytest.mark.parametrize("jobs", [10, 5000])
def test_per_run_work_does_not_grow_with_the_tenants_jobs(engine: Engine, jobs: int) -> None:
    seed_jobs(engine, jobs)
    job_id = every_minute(engine)
    steady(engine, job_id)
    planner, worker = one_run(engine, job_id)
    assert dict(worker.requests) == WORKER_REQUESTS
    SEEN[("jobs", jobs)] = (_figures(planner), _figures(worker))
    if ("jobs", 10) in SEEN and ("jobs", 5000) in SEEN:
        assert SEEN[("jobs", 10)] == SEEN[("jobs", 5000)]


# Figures of the parametrized cases above, compared once both have run (same test session).
SEEN: dict[tuple[str, int], Any] = {}


@pytest.mark.parametrize("history", [10, 2000])
def test_a_page_of_jobs_reads_each_last_run_with_one_query_whatever_the_history(
    engine: Engine, history: int
) -> None:
    # Given three jobs, each with a history of runs
    job_ids = [every_minute(engine) for _ in range(3)]
    for job_id in job_ids:
        seed_history(engine, job_id, history)

    # When a page of the tenant's jobs is listed
    meter = metered(engine)
    page = engine.runtime.service.list_jobs("acme", status=None, limit=50, cursor=None, now=engine.clock())

    # Then each job carries its newest run, read with one query of one item per job: the index's page, one
    # batch of the jobs with their lanes, and nothing written
    last_runs = {details.job.job_id: details.last_run for details in page.items}
    assert {job_id: run.status if run else None for job_id, run in last_runs.items()} == dict.fromkeys(
        job_ids, RunStatus.SUCCEEDED
    )
    assert dict(meter.tally.requests) == {"dynamodb.Query": 1 + len(job_ids), "dynamodb.BatchGetItem": 1}
    assert meter.tally.total("wru") == 0
    SEEN[("listed", history)] = _figures(meter.tally)
    if ("listed", 10) in SEEN and ("listed", 2000) in SEEN:
        assert SEEN[("listed", 10)] == SEEN[("listed", 2000)]


def _figures(tally: Tally) -> tuple[Any, ...]:
    return (
        tuple(sorted(tally.requests.items())),
        round(tally.total("wru"), 3),
        round(tally.total("rru"), 3),
        round(tally.total("index_wru"), 3),
    )


def test_the_planner_sends_fires_of_different_jobs_ten_to_a_request(engine: Engine) -> None:
    engine.tick()  # a deployment's first tick records the due shard count, once
    jobs = [every_minute(engine) for _ in range(12)]
    engine.drain()  # the API sent each job's fires of the first minute (0:00, 1:00)
    engine.clock.advance(minutes=1)
    assert engine.drain() == 12
    meter = metered(engine)
    engine.clock.advance(seconds=55)  # 2:00 is due within the lookahead
    report = engine.tick()
    assert report.planned_runs == 12  # each job's next fire, within the minute's horizon
    assert meter.tally.requests.get("sqs.SendMessageBatch") == 2
    assert meter.tally.requests.get("dynamodb.BatchGetItem") == 1
    assert meter.tally.requests.get("dynamodb.UpdateItem") == 12  # the cursors; no write per fire
    assert "dynamodb.PutItem" not in meter.tally.requests
    engine.clock.advance(seconds=5)
    assert engine.drain() == 12
    assert len(jobs) == 12


# --- the tenant-wide run index ----------------------------------------------------------------------------
# Twenty jobs of one tenant fire in the same minute: the indexer writes their summaries as one chunk, in one
# request, whatever the tenant's size. The chunk (twenty compressed summaries) is under 1 KB: one unit for the
# twenty runs, and the hour's entry once per process.
INDEXED_JOBS = 20


@pytest.mark.parametrize("jobs", [10, 2000])
def test_indexing_runs_costs_a_share_of_one_write_whatever_the_tenants_size(
    engine: Engine, jobs: int
) -> None:
    # Given a tenant with many other jobs and twenty jobs at steady state, their past runs indexed
    seed_jobs(engine, jobs)
    job_ids = [every_minute(engine) for _ in range(INDEXED_JOBS)]
    stream = StreamIndexer(engine.dynamodb)
    for job_id in job_ids:
        seed_history(engine, job_id, 30)
    steady(engine, job_ids[0])
    stream.index(engine.runtime)

    # When the twenty jobs' next fires run and the runs table's stream is indexed
    engine.clock.advance(minutes=1)
    engine.tick()
    assert engine.drain() == INDEXED_JOBS
    meter = metered(engine)
    indexed = stream.index(engine.runtime)

    # Then one request wrote one chunk for all of them: a share of one write unit per run
    assert indexed["records"] == INDEXED_JOBS
    assert dict(meter.tally.requests) == {"dynamodb.BatchWriteItem": 1}
    assert meter.tally.total("wru") == 1 and meter.tally.total("index_wru") == 0
    SEEN[("indexed", jobs)] = _figures(meter.tally)
    if ("indexed", 10) in SEEN and ("indexed", 2000) in SEEN:
        assert SEEN[("indexed", 10)] == SEEN[("indexed", 2000)]


def seed_tenant_runs(engine: Engine, job_ids: list[str], minutes: int) -> None:
    """A run of each job every minute for ``minutes`` minutes before START, written as the worker writes."""
    write_runs(
        engine,
        [
            finished_run(job_id, START - timedelta(minutes=minute + 1, seconds=index % 60))
            for minute in range(minutes)
            for index, job_id in enumerate(job_ids)
        ],
    )


def finished_run(job_id: str, fire: datetime) -> Run:
    return Run(
        run_id=scheduled_run_id(job_id, fire),
        job_id=job_id,
        tenant_id="acme",
        scheduled_for=fire,
        status=RunStatus.SUCCEEDED,
        attempt=1,
        created_at=fire,
        lag_ms=3,
    )


@pytest.mark.parametrize("jobs", [60, 1200])
def test_a_page_of_the_tenants_runs_reads_the_same_whatever_its_job_count(engine: Engine, jobs: int) -> None:
    # Given a tenant whose newest minutes hold the same sixty runs, and older history across ``jobs`` jobs
    recent = [f"01RECENT{index:018d}" for index in range(60)]
    older = [f"01OLDER{index:019d}" for index in range(jobs)]
    seed_tenant_runs(engine, recent, 2)
    stream = StreamIndexer(engine.dynamodb)
    stream.index(engine.runtime)
    write_runs(
        engine,
        [finished_run(job_id, START - timedelta(hours=3, seconds=i)) for i, job_id in enumerate(older)],
    )
    stream.index(engine.runtime)

    # When the first page of 100 runs across the tenant is read
    meter = metered(engine)
    page = engine.runtime.service.list_tenant_runs("acme", RunFilter(), limit=100, cursor=None)

    # Then it holds the newest 100 runs, read from a few chunks and one batch of run items, the same
    # requests and units for either tenant
    assert len(page.items) == 100 and page.next_cursor is not None
    assert {run.job_id for run in page.items} <= set(recent)
    assert meter.tally.requests["dynamodb.BatchGetItem"] == 1
    assert meter.tally.requests["dynamodb.Query"] <= 4  # the tenant's hours, then its newest hour's chunks
    assert meter.tally.total("wru") == 0
    SEEN[("page", jobs)] = _figures(meter.tally)
    if ("page", 60) in SEEN and ("page", 1200) in SEEN:
        assert SEEN[("page", 60)] == SEEN[("page", 1200)]


@pytest.mark.parametrize("jobs", [10, 2000])
def test_stats_read_the_same_requests_whatever_the_tenants_job_count(engine: Engine, jobs: int) -> None:
    # Given a tenant with sixty runs in the last hour, indexed, and ``jobs`` other jobs
    seed_jobs(engine, jobs)
    seed_tenant_runs(engine, [f"01RECENT{index:018d}" for index in range(60)], 1)
    StreamIndexer(engine.dynamodb).index(engine.runtime)

    # When its stats are read
    counting = metered(engine)
    engine.runtime.jobs.count_by_status("acme")
    job_counts = counting.tally.requests["dynamodb.Query"]
    meter = metered(engine)
    stats = engine.runtime.service.stats("acme", START)

    # Then the runs come from the index, and no job is read one by one: besides the job counts (the
    # jobs-by-tenant index's small entries, a page a megabyte), a few queries of the run index, and three
    # reads of the tenant's item: its pools (it has none), its settings and its concurrency keys (none, and
    # no limit or throttle: no slot or throttle item is read)
    assert stats.sampled_runs == 60 and stats.runs["SUCCEEDED"] == 60
    assert stats.jobs["ACTIVE"] == jobs
    assert stats.pools == []
    assert set(meter.tally.requests) == {"dynamodb.Query", "dynamodb.GetItem"}
    assert meter.tally.requests["dynamodb.GetItem"] == 3
    SEEN[("stats", jobs)] = meter.tally.requests["dynamodb.Query"] - job_counts
    if ("stats", 10) in SEEN and ("stats", 2000) in SEEN:
        assert SEEN[("stats", 10)] == SEEN[("stats", 2000)]
