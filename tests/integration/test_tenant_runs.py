"""GET /v1/runs: the tenant's runs across its jobs, newest first, through the authorizer and the API handler,
under moto; and the sparse failure index it reads, which a run that succeeds never enters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork import tables
from tickwork.app.ports import Expect
from tickwork.domain.models import Run, RunStatus, scheduled_run_id

from tests.conftest import TOKENS, item_counts, scan_all
from tests.support.apigw import ApiGateway, HttpResult, rest_event
from tests.support.streams import StreamIndexer

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]
BASE = datetime(2030, 1, 1, tzinfo=UTC)
FAILURE_KEYS = {tables.FAILURE_TENANT, tables.FAILURE_AT}


def new_job(api: ApiGateway, name: str, token: str = ACME) -> str:
    body = {
        "name": name,
        "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
        "target": {"type": "http", "url": "https://hooks.example.com/run"},
    }
    response = api.request("POST", "/v1/jobs", token=token, body=body)
    assert response.status == 201, response.body
    job_id: str = response.body["job_id"]
    return job_id


def store_run(job_id: str, minute: int, status: RunStatus, tenant_id: str = "acme") -> str:
    """A stored run of the job, scheduled ``minute`` minutes after BASE, written as the worker would."""
    from tickwork.runtime import runtime

    fire = BASE + timedelta(minutes=minute)
    run = Run(
        run_id=scheduled_run_id(job_id, fire),
        job_id=job_id,
        tenant_id=tenant_id,
        scheduled_for=fire,
        status=status,
        created_at=fire,
    )
    assert runtime().runs.put(run, Expect.new()).ok
    return run.run_id


def list_runs(api: ApiGateway, token: str = ACME, /, **query: str | list[str]) -> HttpResult:
    """GET /v1/runs with the query as API Gateway passes it: a repeated parameter's last value in
    ``queryStringParameters``, every value in ``multiValueQueryStringParameters``."""
    multi = {key: value if isinstance(value, list) else [value] for key, value in query.items()}
    event = rest_event("GET", "/v1/runs", query={key: values[-1] for key, values in multi.items()})
    event["multiValueQueryStringParameters"] = multi or None
    return api.send(event, authorization=f"Bearer {token}")


def all_pages(api: ApiGateway, token: str = ACME, /, **query: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    while True:
        response = list_runs(api, token, **query)
        assert response.status == 200, response.body
        pages.append([run["run_id"] for run in response.body["items"]])
        if not response.body["next_cursor"]:
            return pages
        query = {**query, "cursor": response.body["next_cursor"]}


@pytest.fixture
def seeded(api: ApiGateway, dynamodb: Any) -> dict[str, Any]:
    """Three acme jobs with DEAD, FAILED, SUCCEEDED and RETRY_WAIT runs interleaved in time, and a globex job
    with a DEAD run; the runs table's stream read into the run index."""
    jobs = [new_job(api, f"job-{index}") for index in range(3)]
    runs: dict[str, list[tuple[int, str]]] = {}
    statuses = [RunStatus.DEAD, RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.RETRY_WAIT]
    for minute in range(12):
        job_id = jobs[minute % 3]
        status = statuses[minute % 4]
        runs.setdefault(status.value, []).append((minute, store_run(job_id, minute, status)))
    other = new_job(api, "elsewhere", GLOBEX)
    store_run(other, 5, RunStatus.DEAD, "globex")
    StreamIndexer(dynamodb).index()
    return {"jobs": jobs, "runs": runs, "other": other}


def newest_first(entries: list[tuple[int, str]]) -> list[str]:
    return [run_id for _, run_id in sorted(entries, reverse=True)]


def seeded_newest_first(
    seeded: dict[str, Any], statuses: list[str], keep: Callable[[tuple[int, str]], bool]
) -> list[str]:
    """The seeded runs in ``statuses`` (all when empty) that ``keep`` keeps, newest first."""
    return newest_first(
        [
            entry
            for status, entries in seeded["runs"].items()
            if not statuses or status in statuses
            for entry in entries
            if keep(entry)
        ]
    )


def test_the_dead_letter_view_lists_dead_runs_of_every_job_newest_first_across_pages(
    api: ApiGateway, seeded: dict[str, Any]
) -> None:
    pages = all_pages(api, status="DEAD", limit="2")
    assert [run for page in pages for run in page] == newest_first(seeded["runs"]["DEAD"])
    assert all(len(page) <= 2 for page in pages) and len(pages) >= 2
    assert {run.split(":")[0] for page in pages for run in page} == set(seeded["jobs"])


def test_several_statuses_are_one_list(api: ApiGateway, seeded: dict[str, Any]) -> None:
    pages = all_pages(api, status=["FAILED", "DEAD"], limit="2")
    expected = newest_first(seeded["runs"]["FAILED"] + seeded["runs"]["DEAD"])
    assert [run for page in pages for run in page] == expected


def test_without_a_status_every_stored_run_is_listed_newest_first(
    api: ApiGateway, seeded: dict[str, Any]
) -> None:
    pages = all_pages(api, limit="5")
    everything = [entry for entries in seeded["runs"].values() for entry in entries]
    assert [run for page in pages for run in page] == newest_first(everything)


def test_non_failure_statuses_merge_the_jobs_histories(api: ApiGateway, seeded: dict[str, Any]) -> None:
    pages = all_pages(api, status=["SUCCEEDED", "DEAD"], limit="3")
    expected = newest_first(seeded["runs"]["SUCCEEDED"] + seeded["runs"]["DEAD"])
    assert [run for page in pages for run in page] == expected


@pytest.mark.parametrize("statuses", [["DEAD"], ["SUCCEEDED"], []])
def test_job_id_keeps_that_jobs_runs(api: ApiGateway, seeded: dict[str, Any], statuses: list[str]) -> None:
    job_id = seeded["jobs"][1]
    query: dict[str, str | list[str]] = {"job_id": job_id, "limit": "2"}
    if statuses:
        query["status"] = statuses
    pages = all_pages(api, **query)
    expected = seeded_newest_first(seeded, statuses, lambda entry: entry[1].startswith(f"{job_id}:"))
    assert expected
    assert [run for page in pages for run in page] == expected


@pytest.mark.parametrize("statuses", [["DEAD", "FAILED"], []])
def test_since_is_inclusive_and_until_exclusive(
    api: ApiGateway, seeded: dict[str, Any], statuses: list[str]
) -> None:
    since, until = BASE + timedelta(minutes=2), BASE + timedelta(minutes=8)
    query: dict[str, str | list[str]] = {"since": since.isoformat(), "until": until.isoformat(), "limit": "2"}
    if statuses:
        query["status"] = statuses
    pages = all_pages(api, **query)
    expected = seeded_newest_first(seeded, statuses, lambda entry: 2 <= entry[0] < 8)
    assert [run for page in pages for run in page] == expected


def test_a_retried_dead_run_leaves_the_dead_letter_view(api: ApiGateway, seeded: dict[str, Any]) -> None:
    newest_dead = newest_first(seeded["runs"]["DEAD"])[0]
    assert api.request("POST", f"/v1/runs/{newest_dead}/retry", token=ACME).status == 202
    listed = [run for page in all_pages(api, status="DEAD") for run in page]
    assert listed == newest_first(seeded["runs"]["DEAD"])[1:]


def test_another_tenant_sees_none_of_them(api: ApiGateway, seeded: dict[str, Any]) -> None:
    theirs = [run for page in all_pages(api, GLOBEX, status="DEAD") for run in page]
    assert theirs == [scheduled_run_id(seeded["other"], BASE + timedelta(minutes=5))]
    assert [run for page in all_pages(api, GLOBEX) for run in page] == theirs
    response = list_runs(api, GLOBEX, job_id=seeded["jobs"][0])
    assert response.status == 404
    assert response.body["error"]["field"] == "job_id"


def test_a_cursor_from_one_tenant_opens_nothing_of_another(api: ApiGateway, seeded: dict[str, Any]) -> None:
    cursor = list_runs(api, status="DEAD", limit="1").body["next_cursor"]
    response = list_runs(api, GLOBEX, status="DEAD", cursor=cursor)
    assert response.status == 200
    assert all(run["job_id"] == seeded["other"] for run in response.body["items"])


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "BROKEN"}, "status"),
        ({"status": ["DEAD", "dead"]}, "status"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "eyJiZWZvcmUiOiBbLTEsICJ4Il19"}, "cursor"),  # {"before": [-1, "x"]}
        ({"cursor": "W10"}, "cursor"),  # []
        ({"since": "yesterday"}, "since"),
        ({"until": "2030-01-01"}, "until"),
        ({"since": "2030-01-02T00:00:00Z", "until": "2030-01-01T00:00:00Z"}, "since"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"job_id": "no/such"}, "job_id"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(
    api: ApiGateway, dynamodb: Any, seeded: dict[str, Any], query: dict[str, Any], field: str
) -> None:
    before = item_counts(dynamodb)
    response = list_runs(api, **query)
    assert response.status == 400, response.body
    # A repeated parameter's bad value is named by its place: status.1
    assert response.body["error"]["field"].split(".")[0] == field
    assert item_counts(dynamodb) == before


def test_only_runs_an_operator_acts_on_carry_the_failure_index_keys(
    api: ApiGateway, dynamodb: Any, seeded: dict[str, Any]
) -> None:
    items = [item for item in scan_all(dynamodb, tables.RUNS.default_name) if "status" in item]
    indexed = {item["status"]["S"] for item in items if FAILURE_KEYS & set(item)}
    plain = {item["status"]["S"] for item in items if not FAILURE_KEYS & set(item)}
    assert indexed == {"DEAD", "FAILED"}
    assert plain == {"SUCCEEDED", "RETRY_WAIT"}
    assert all(set(item) >= FAILURE_KEYS for item in items if item["status"]["S"] in indexed)
