"""Tenant isolation over the whole v1 contract: globex's token with acme's ids, on every method and path.

Every id route is a plain 404 that names nothing of acme's (job name, payload, URL, description, other run
ids, tenant id), and every item of acme's, in every table, is exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from tickwork import tables

from tests.conftest import TOKENS, scan_all, seed_tenant
from tests.support.apigw import ApiGateway, set_run_status

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]
SECRET_PAYLOAD = "acme-payload-4f1c"
DESCRIPTION = "acme-description-9b2e"
HOOK = "https://acme-hooks.example.com/private-4d2a"


@dataclass
class AcmeData:
    job_id: str
    paused_job_id: str
    run_id: str
    dead_run_id: str
    job_cursor: str
    run_cursor: str

    def leaks(self, text: str, *, asked: set[str]) -> list[str]:
        """Which of acme's values appear in ``text``, other than the ids the caller named."""
        values = {
            "acme",
            "acme-private",
            "acme-paused",
            SECRET_PAYLOAD,
            DESCRIPTION,
            "acme-hooks",
            "private-4d2a",
            "secret-acme",  # acme's signing secret
            self.job_id,
            self.paused_job_id,
            self.run_id,
            self.dead_run_id,
        }
        # A run id starts with its job's id: asking for the run names the job already.
        named = {value for value in values if any(value in id_ for id_ in asked)}
        return sorted(value for value in values - named if value in text)


def _job(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"type": "rate", "every_seconds": 3600},
        "target": {"type": "http", "url": HOOK, "headers": {"X-Acme-Key": "acme-header-value"}},
        "payload": {"secret": SECRET_PAYLOAD},
        "description": DESCRIPTION,
        "tags": {"team": "acme"},
    }


@pytest.fixture
def acme(api: ApiGateway, dynamodb: Any) -> AcmeData:
    # globex probes quickly: let it, so that no answer is a 429 for speed alone.
    seed_tenant(dynamodb, "globex", GLOBEX, api_requests_per_second=10_000)
    job = api.request("POST", "/v1/jobs", token=ACME, body=_job("acme-private")).body
    paused = api.request("POST", "/v1/jobs", token=ACME, body=_job("acme-paused")).body
    assert api.request("POST", f"/v1/jobs/{paused['job_id']}/pause", token=ACME).status == 200
    path = f"/v1/jobs/{job['job_id']}/trigger"
    run = api.request("POST", path, token=ACME, headers={"Idempotency-Key": "shared-key"}).body
    dead = api.request("POST", path, token=ACME).body
    # A DEAD run, so that even the retry route would act if isolation failed.
    set_run_status("acme", dead["run_id"], "DEAD")
    jobs_page = api.request("GET", "/v1/jobs", token=ACME, query={"limit": "1"}).body
    runs_page = api.request("GET", f"{path[: -len('/trigger')]}/runs", token=ACME, query={"limit": "1"}).body
    assert jobs_page["next_cursor"] and runs_page["next_cursor"]
    stored = acme_items(dynamodb)
    # Two jobs and their name locks (and the paused one's lane, which its pause moved), two manual runs and
    # their pointers, the tenant, its token and its request counter.
    assert [len(stored[table.logical_name]) for table in (tables.JOBS, tables.RUNS, tables.TENANTS)] == [
        5,
        4,
        3,
    ]
    return AcmeData(
        job["job_id"],
        paused["job_id"],
        run["run_id"],
        dead["run_id"],
        jobs_page["next_cursor"],
        runs_page["next_cursor"],
    )


def _owned_by_acme(table: str, item: dict[str, Any]) -> bool:
    if table == tables.IDEMPOTENCY.logical_name:
        return True  # records are keyed by a hash of tenant and key: keep them all
    key = item[tables.JOBS_PK]["S"]  # "pk" in jobs, runs and tenants alike
    if table in (tables.JOBS.logical_name, tables.RUNS.logical_name):
        return bool(key.startswith("acme/"))  # a job's partition, or a name lock
    if table == tables.TENANTS.logical_name:
        return key in (tables.tenant_key("acme"), tables.rate_limit_key("acme")) or (
            item.get("tenant_id", {}).get("S") == "acme"
        )
    return False


def acme_items(dynamodb: Any) -> dict[str, dict[str, Any]]:
    """Every item of acme's in every table (and every idempotency record), by key."""
    snapshot: dict[str, dict[str, Any]] = {}
    for definition in tables.ALL_TABLES:
        name = definition.logical_name
        key = definition.partition_key.name
        snapshot[name] = {
            str(item[key]) + str(item.get(tables.JOBS_SK, "")): item
            for item in scan_all(dynamodb, definition.default_name)
            if _owned_by_acme(name, item)
        }
    return snapshot


def changed(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """The tables in which an item of acme's changed, appeared or went."""
    tables_changed = []
    for table, items in before.items():
        if table == tables.IDEMPOTENCY.logical_name:
            # Another tenant may add its own records, but none that was there may change.
            if {key: after[table].get(key) for key in items} != items:
                tables_changed.append(table)
        elif after[table] != items:
            tables_changed.append(table)
    return tables_changed


def assert_untouched(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> None:
    assert changed(before, after) == []


JOB_ROUTES: list[tuple[str, str, Any, dict[str, str]]] = [
    ("GET", "/v1/jobs/{job}", None, {}),
    ("PATCH", "/v1/jobs/{job}", {"description": "taken over"}, {}),
    ("PATCH", "/v1/jobs/{job}", {"payload": {"mine": True}, "version": 1}, {}),
    (
        "PATCH",
        "/v1/jobs/{job}",
        {"target": {"type": "http", "url": "https://evil.example.com/"}},
        {"If-Match": '"1"'},
    ),
    ("PATCH", "/v1/jobs/{job}", {"name": "renamed"}, {}),
    ("DELETE", "/v1/jobs/{job}", None, {}),
    ("POST", "/v1/jobs/{job}/pause", {"reason": "hostile"}, {}),
    ("POST", "/v1/jobs/{job}/pause", None, {}),
    ("POST", "/v1/jobs/{job}/resume", None, {}),
    ("POST", "/v1/jobs/{job}/trigger", None, {}),
    ("POST", "/v1/jobs/{job}/trigger", None, {"Idempotency-Key": "shared-key"}),
    ("GET", "/v1/jobs/{job}/runs", None, {}),
    ("GET", "/v1/jobs/{job}/runs?cursor", None, {}),
]
RUN_ROUTES: list[tuple[str, str, Any, dict[str, str]]] = [
    ("GET", "/v1/runs/{run}", None, {}),
    ("POST", "/v1/runs/{run}/retry", None, {}),
]


CASES = [
    (method, template, body, headers, which)
    for routes, ids in ((JOB_ROUTES, ("job_id", "paused_job_id")), (RUN_ROUTES, ("run_id", "dead_run_id")))
    for method, template, body, headers in routes
    for which in ids
]


def test_acmes_ids_are_a_404_to_globex_on_every_route_that_leaks_and_changes_nothing(
    api: ApiGateway, dynamodb: Any, acme: AcmeData
) -> None:
    outcomes = {}
    for number, (method, template, body, headers, which) in enumerate(CASES):
        # Given acme's jobs and runs, and everything acme has stored
        asked = getattr(acme, which)
        path, _, cursor = template.partition("?")
        path = path.format(job=asked, run=asked)
        query = {"cursor": acme.run_cursor} if cursor else None
        before = acme_items(dynamodb)
        # When globex calls the route with acme's id
        response = api.request(method, path, token=GLOBEX, body=body, headers=headers, query=query)
        after = acme_items(dynamodb)
        outcomes[f"{number}: {method} {template} {sorted(headers)} {which}"] = (
            response.status,
            response.body["error"]["code"],
            acme.leaks(f"{response.body} {response.headers}", asked={asked}),
            changed(before, after),
        )
    # Then each is a plain 404 naming nothing of acme's but the id asked, and acme's items are untouched
    assert outcomes == dict.fromkeys(outcomes, (404, "not_found", [], []))
    assert len(outcomes) == 2 * (len(JOB_ROUTES) + len(RUN_ROUTES))


def test_routes_without_ids_show_globex_none_of_acmes_data(
    api: ApiGateway, dynamodb: Any, acme: AcmeData
) -> None:
    before = acme_items(dynamodb)
    responses = {
        "list": api.request("GET", "/v1/jobs", token=GLOBEX),
        "list paused": api.request("GET", "/v1/jobs", token=GLOBEX, query={"status": "PAUSED"}),
        "list cancelled": api.request("GET", "/v1/jobs", token=GLOBEX, query={"status": "CANCELLED"}),
        "stats": api.request("GET", "/v1/stats", token=GLOBEX),
        "preview": api.request(
            "POST",
            "/v1/schedule-preview",
            token=GLOBEX,
            body={"schedule": {"type": "rate", "every_seconds": 60}, "count": 2},
        ),
    }
    for name, response in responses.items():
        assert response.status == 200, name
        assert acme.leaks(str(response.body), asked=set()) == [], name
    assert responses["list"].body["items"] == responses["list paused"].body["items"] == []
    stats = responses["stats"].body
    assert sum(stats["jobs"].values()) == sum(stats["runs"].values()) == 0
    assert_untouched(before, acme_items(dynamodb))


def test_acmes_list_cursor_opens_nothing_for_globex(api: ApiGateway, acme: AcmeData) -> None:
    response = api.request("GET", "/v1/jobs", token=GLOBEX, query={"cursor": acme.job_cursor})
    assert response.status in (200, 400)
    assert acme.leaks(str(response.body), asked=set()) == []
    if response.status == 200:
        assert response.body["items"] == []
    else:
        assert response.body["error"]["field"] == "cursor"


def test_globex_may_reuse_acmes_job_name_and_idempotency_key_without_touching_acmes(
    api: ApiGateway, dynamodb: Any, acme: AcmeData
) -> None:
    before = acme_items(dynamodb)
    # Names are per tenant: a 409 here would tell globex that acme has a job of that name.
    created = api.request("POST", "/v1/jobs", token=GLOBEX, body=_job("acme-private"))
    assert created.status == 201
    job_id = created.body["job_id"]
    assert job_id not in (acme.job_id, acme.paused_job_id)
    # The same Idempotency-Key as acme's trigger gives globex its own run, not acme's.
    triggered = api.request(
        "POST", f"/v1/jobs/{job_id}/trigger", token=GLOBEX, headers={"Idempotency-Key": "shared-key"}
    )
    assert triggered.status == 202
    assert triggered.body["run_id"] not in (acme.run_id, acme.dead_run_id)
    assert triggered.body["job_id"] == job_id
    assert_untouched(before, acme_items(dynamodb))
    # And acme still sees exactly its own two jobs.
    names = sorted(job["name"] for job in api.request("GET", "/v1/jobs", token=ACME).body["items"])
    assert names == ["acme-paused", "acme-private"]


def test_a_run_id_naming_acmes_job_under_globexs_own_job_is_not_acmes_run(
    api: ApiGateway, acme: AcmeData
) -> None:
    own = api.request("POST", "/v1/jobs", token=GLOBEX, body=_job("globex-own")).body
    # Run ids are "<job id>:...": globex cannot reach acme's run by writing acme's job id into one.
    suffix = acme.run_id.split(":", 1)[1]
    for run_id in (f"{acme.job_id}:{suffix}", f"{own['job_id']}:{suffix}", f"../acme/{acme.run_id}"):
        response = api.request("GET", f"/v1/runs/{run_id}", token=GLOBEX)
        assert response.status in (400, 404), run_id
        assert acme.leaks(str(response.body), asked={run_id}) == []
