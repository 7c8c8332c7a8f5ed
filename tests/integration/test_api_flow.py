"""Flow control in ``GET /v1/stats`` (moto, the API handler, the workers' admission on DynamoDB): per tenant
and per concurrency key, the running, waiting and throttled runs, read from the limits' own items; another
tenant's keys never shown."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork import tables
from tickwork.adapters.jobs import DynamoJobStore
from tickwork.adapters.lanes import DynamoLanes, DynamoTenantSlots
from tickwork.adapters.runs import DynamoRunStore
from tickwork.adapters.tenants import DynamoTenantStore
from tickwork.adapters.throttles import DynamoTenantThrottles
from tickwork.app.claims import Claims, Slot, Wait
from tickwork.app.lifecycle import RunLifecycle
from tickwork.domain.models import Job, Run, RunMessage, RunStatus, scheduled_run_id
from tickwork.domain.tenants import TenantChanges

from tests.conftest import TOKENS
from tests.support.apigw import ApiGateway
from tests.support.engine import RecordingMetrics

ACME = TOKENS["acme"]


def keyed_job(api: ApiGateway, name: str, key: str | None, limit: int, token: str = ACME) -> str:
    keyed = {"concurrency_key": key, "max_concurrency": limit} if key is not None else {}
    created = api.request(
        "POST",
        "/v1/jobs",
        token=token,
        body={
            "name": name,
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "target": {"type": "http", "url": "https://example.com/hook"},
            **keyed,
        },
    )
    assert created.status == 201, created.body
    job_id: str = created.body["job_id"]
    return job_id


def claims(dynamodb: Any, worker_id: str = "w1") -> Claims:
    return Claims(
        lanes=DynamoLanes(dynamodb, table=tables.JOBS.default_name),
        slots=DynamoTenantSlots(dynamodb, table=tables.TENANTS.default_name),
        throttles=DynamoTenantThrottles(dynamodb, table=tables.TENANTS.default_name),
        tenants=DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name),
        lifecycle=RunLifecycle(
            DynamoRunStore(
                dynamodb, table=tables.RUNS.default_name, retention=timedelta(days=1), attention_shards=2
            )
        ),
        metrics=RecordingMetrics(),
        worker_id=worker_id,
        lease_margin=timedelta(seconds=30),
    )


def job_of(dynamodb: Any, tenant: str, job_id: str) -> Job:
    store = DynamoJobStore(
        dynamodb, table=tables.JOBS.default_name, tenants_table=tables.TENANTS.default_name, due_shards=2
    )
    return store.get(tenant, job_id)


def run_of(job: Job, minute: int) -> Run:
    at = datetime(2026, 11, 22, 9, minute, tzinfo=UTC)
    return Run(
        run_id=scheduled_run_id(job.job_id, at),
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        scheduled_for=at,
        status=RunStatus.ENQUEUED,
        created_at=at,
    )


def flow(api: ApiGateway, token: str = ACME) -> dict[str, Any]:
    stats = api.request("GET", "/v1/stats", token=token)
    assert stats.status == 200, stats.body
    body: dict[str, Any] = stats.body["flow"]
    return body


def test_a_full_key_shows_its_running_run_and_its_waiting_runs_until_they_start(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given three runs of acme's jobs sharing a key of max_concurrency 1, and globex's own key
    jobs = [job_of(dynamodb, "acme", keyed_job(api, f"etl-{n}", "warehouse-db", 1)) for n in range(3)]
    keyed_job(api, "theirs", "globex-db", 4, token=TOKENS["globex"])
    first, second, third = (run_of(job, n) for n, job in enumerate(jobs))
    admission = claims(dynamodb)
    now = datetime.now(UTC)
    # When the first takes the key's slot and the other two arrive (the second one twice, at once)
    held = admission.take_slot(jobs[0], first, now)
    assert isinstance(held, tuple) and len(held) == 1
    waits: list[object] = []
    racing = [
        threading.Thread(
            target=lambda j=job, r=run: waits.append(claims(dynamodb, "w2").take_slot(j, r, now))
        )
        for job, run in ((jobs[1], second), (jobs[1], second), (jobs[2], third))
    ]
    for thread in racing:
        thread.start()
    for thread in racing:
        thread.join()
    assert all(isinstance(wait, Wait) for wait in waits)
    # Then the key shows one running and two waiting, and so does the tenant
    shown = flow(api)
    assert shown["keys"] == [
        {"key": "warehouse-db", "max_concurrency": 1, "running": 1, "waiting": 2, "waiting_capped": False}
    ]
    assert (shown["waiting"], shown["running_from"], shown["throttled"]) == (2, "sampled_runs", 0)
    # And as each finishes and the next starts, the waiting count comes back to 0
    admission.give_back(jobs[0], held)
    taken = admission.take_slot(jobs[1], second, now)
    assert isinstance(taken, tuple) and isinstance(taken[0], Slot)
    assert flow(api)["keys"][0]["waiting"] == 1
    admission.give_back(jobs[1], taken)
    last = admission.take_slot(jobs[2], third, now)
    assert isinstance(last, tuple)
    after = flow(api)
    assert (after["keys"][0]["running"], after["keys"][0]["waiting"], after["waiting"]) == (1, 0, 0)
    # And globex sees its own key only
    assert [key["key"] for key in flow(api, TOKENS["globex"])["keys"]] == ["globex-db"]


def test_the_tenants_in_flight_limit_shows_its_running_attempts(api: ApiGateway, dynamodb: Any) -> None:
    DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).update(
        "acme", TenantChanges(max_concurrent_runs=3)
    )
    job = job_of(dynamodb, "acme", keyed_job(api, "etl", "warehouse-db", 5))
    admission = claims(dynamodb)
    now = datetime.now(UTC)
    for minute in range(2):
        assert isinstance(admission.take_slot(job, run_of(job, minute), now), tuple)
    shown = flow(api)
    assert (shown["running"], shown["running_from"], shown["max_concurrent_runs"]) == (
        2,
        "in_flight_slots",
        3,
    )
    assert shown["keys"][0]["running"] == 2


def test_a_10_a_second_burst_20_tenant_shows_its_throttled_runs_after_200(
    api: ApiGateway, dynamodb: Any
) -> None:
    DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).update(
        "acme", TenantChanges(max_runs_per_second=10, burst=20)
    )
    job = job_of(dynamodb, "acme", keyed_job(api, "etl", None, 0))
    admission = claims(dynamodb)
    now = datetime.now(UTC)
    later = 0
    for n in range(200):
        run = run_of(job, 0).model_copy(update={"run_id": f"{job.job_id}:{n}"})
        message = RunMessage(tenant_id="acme", run_id=run.run_id)
        if isinstance(admission.admit(job, run, message, now), Wait):
            later += 1
    shown = flow(api)
    # The burst's 11 (20 - 10 + 1) start at once; the others are booked ahead, ten a second coming off.
    assert later == 189
    assert 189 - 10 * 2 <= shown["throttled"] <= 189  # the requests took a moment
    assert (shown["max_runs_per_second"], shown["burst"]) == (10, 20)
    assert flow(api, TOKENS["globex"])["throttled"] == 0
