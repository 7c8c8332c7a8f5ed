"""The tenants table's administration under moto: listing page by page, partial updates, disabling and
enabling, and token rotation (the old token refused at once, the new one accepted)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tickwork import tables
from tickwork.adapters.dynamo import to_item
from tickwork.adapters.tenants import DynamoApiRateLimiter, DynamoTenantStore
from tickwork.domain.tenants import TenantChanges, hash_token
from tickwork.errors import NotFound

from tests.conftest import TOKENS, item_counts, scan_all, seed_tenant
from tests.security.test_rate_limit import START

TABLE = tables.TENANTS.default_name


def store(dynamodb: Any, *, scan_page_size: int | None = None) -> DynamoTenantStore:
    return DynamoTenantStore(dynamodb, table=TABLE, scan_page_size=scan_page_size)


def raw_tenant_item(dynamodb: Any, tenant_id: str) -> dict[str, Any]:
    item: dict[str, Any] = dynamodb.get_item(
        TableName=TABLE, Key=to_item({tables.TENANTS_PK: tables.tenant_key(tenant_id)}), ConsistentRead=True
    )["Item"]
    return item


# --- list ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("scan_page_size", "limit"), [(None, 2), (3, 2), (1, 3), (4, 100), (2, 7)])
def test_tenants_are_listed_page_by_page_each_once_and_nothing_else(
    dynamodb: Any, scan_page_size: int | None, limit: int
) -> None:
    # Given seven tenants, each with a token and a request counter beside it in the table
    ids = [f"t{index}" for index in range(7)]
    for tenant_id in ids:
        seed_tenant(dynamodb, tenant_id, f"tw_{tenant_id}")
    DynamoApiRateLimiter(dynamodb, table=TABLE).take("t0", limit=5, now=START)
    listing = store(dynamodb, scan_page_size=scan_page_size)

    # When the operator follows the pages
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = listing.list_tenants(limit=limit, cursor=cursor)
        pages += 1
        assert len(page.items) <= limit
        seen += [record.tenant.tenant_id for record in page.items]
        if page.next_cursor is None:
            break
        assert page.next_cursor == seen[-1]
        cursor = page.next_cursor

    # Then every tenant came once, no token or counter came, and the pages were as many as the limit asks
    assert sorted(seen) == ids
    assert pages <= len(ids) // limit + 1
    assert sorted(record.tenant.tenant_id for record in listing.iter_tenants(page_size=limit)) == ids


def test_a_listed_tenant_shows_its_job_count(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    dynamodb.update_item(
        TableName=TABLE,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key("acme")}),
        UpdateExpression="SET job_count = :n",
        ExpressionAttributeValues=to_item({":n": 3}),
    )
    (record,) = store(dynamodb).list_tenants().items
    assert (record.tenant.tenant_id, record.job_count) == ("acme", 3)
    assert store(dynamodb).record("acme").job_count == 3


def test_an_empty_table_lists_no_tenant(dynamodb: Any) -> None:
    page = store(dynamodb).list_tenants()
    assert (page.items, page.next_cursor) == ([], None)


# --- update -------------------------------------------------------------------------------------------------
def test_an_update_changes_the_fields_given_and_nothing_else(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], max_jobs=20, max_concurrent_runs=4)
    dynamodb.update_item(
        TableName=TABLE,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key("acme")}),
        UpdateExpression="SET job_count = :n",
        ExpressionAttributeValues=to_item({":n": 5}),
    )
    before = store(dynamodb).get("acme")

    changes = TenantChanges(api_requests_per_second=400, max_runs_per_second=20)
    changed = store(dynamodb).update("acme", changes)

    assert changed == before.model_copy(update={"api_requests_per_second": 400, "max_runs_per_second": 20})
    assert store(dynamodb).get("acme") == changed
    assert store(dynamodb).record("acme").job_count == 5  # written by the API, kept
    principal = store(dynamodb).by_token(TOKENS["acme"])
    assert principal is not None and principal.tenant == changed  # the token still works


def test_an_update_can_clear_an_optional_limit(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], max_concurrent_runs=4, max_runs_per_second=5, burst=10)
    changed = store(dynamodb).update(
        "acme", TenantChanges(max_concurrent_runs=None, max_runs_per_second=None, burst=None)
    )
    assert (changed.max_concurrent_runs, changed.max_runs_per_second, changed.burst) == (None, None, None)
    item = raw_tenant_item(dynamodb, "acme")
    assert not {"max_concurrent_runs", "max_runs_per_second", "burst"} & set(item)


def test_an_older_item_with_max_in_flight_is_read_and_updated_under_the_new_name(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    dynamodb.update_item(
        TableName=TABLE,
        Key=to_item({tables.TENANTS_PK: tables.tenant_key("acme")}),
        UpdateExpression="SET max_in_flight = :n REMOVE max_concurrent_runs",
        ExpressionAttributeValues=to_item({":n": 6}),
    )
    assert store(dynamodb).get("acme").max_in_flight == 6
    assert store(dynamodb).get("acme").max_concurrent_runs == 6

    store(dynamodb).update("acme", TenantChanges(max_concurrent_runs=9))

    item = raw_tenant_item(dynamodb, "acme")
    assert "max_in_flight" not in item
    assert store(dynamodb).get("acme").max_in_flight == 9


def test_an_unknown_tenant_is_not_found_and_nothing_is_written(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    before = item_counts(dynamodb)
    with pytest.raises(NotFound):
        store(dynamodb).update("initech", TenantChanges(disabled=True))
    assert item_counts(dynamodb) == before


def test_a_burst_below_the_stored_rate_is_refused_and_nothing_is_written(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], max_runs_per_second=10)
    before = raw_tenant_item(dynamodb, "acme")
    with pytest.raises(ValidationError, match="burst 5 is below max_runs_per_second 10"):
        store(dynamodb).update("acme", TenantChanges(burst=5))
    assert raw_tenant_item(dynamodb, "acme") == before


class RacingOperator:
    """A DynamoDB client through which another operator changes the tenant's rate just before this one's
    write lands."""

    def __init__(self, client: Any, change: dict[str, Any]):
        self.client = client
        self.change = change
        self.raced = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def update_item(self, **request: Any) -> Any:
        if not self.raced:
            self.raced = True
            changes = TenantChanges.model_validate(self.change)
            DynamoTenantStore(self.client, table=TABLE).update("acme", changes)
        return self.client.update_item(**request)


def test_two_operators_never_leave_a_burst_below_the_rate(dynamodb: Any) -> None:
    # Given a throttle of 10 a second, and an operator setting a burst of 15 while another sets the rate to 20
    seed_tenant(dynamodb, "acme", TOKENS["acme"], max_runs_per_second=10)
    racing: Any = RacingOperator(dynamodb, {"max_runs_per_second": 20})

    # Then the burst, checked against the rate it was read with, is refused once the rate has moved on
    with pytest.raises(ValidationError, match="burst 15 is below max_runs_per_second 20"):
        DynamoTenantStore(racing, table=TABLE).update("acme", TenantChanges(burst=15))
    stored = store(dynamodb).get("acme")
    assert (stored.max_runs_per_second, stored.burst) == (20, None)


def test_a_change_that_does_not_touch_the_throttle_is_written_over_another(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    racing: Any = RacingOperator(dynamodb, {"max_jobs": 99})
    DynamoTenantStore(racing, table=TABLE).update("acme", TenantChanges(api_requests_per_second=300))
    stored = store(dynamodb).get("acme")
    assert (stored.max_jobs, stored.api_requests_per_second) == (99, 300)


# --- disable and enable ---------------------------------------------------------------------------------
def test_disabling_keeps_everything_and_enabling_restores_it(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], api_requests_per_second=80)
    before = {key: value for key, value in raw_tenant_item(dynamodb, "acme").items() if key != "disabled"}
    counts = item_counts(dynamodb)

    disabled = store(dynamodb).update("acme", TenantChanges(disabled=True))
    assert disabled.disabled is True
    # The token still names the tenant (the API refuses it as disabled), and nothing was deleted
    admitted = store(dynamodb).admitted("acme", hash_token(TOKENS["acme"]))
    assert admitted is not None and admitted.tenant.disabled
    assert item_counts(dynamodb) == counts

    enabled = store(dynamodb).update("acme", TenantChanges(disabled=False))
    assert enabled.disabled is False
    after = {key: value for key, value in raw_tenant_item(dynamodb, "acme").items() if key != "disabled"}
    assert after == before


# --- rotate-token ---------------------------------------------------------------------------------------
def test_a_rotated_token_is_refused_at_once_and_the_new_one_accepted(dynamodb: Any) -> None:
    for tenant_id, token in TOKENS.items():
        seed_tenant(dynamodb, tenant_id, token)
    tenants = store(dynamodb)

    rotated = tenants.rotate_token("acme", token="tw_rotated-acme")

    assert (rotated.tenant_id, rotated.label, rotated.revoked) == ("acme", "default", 1)
    assert "tw_rotated-acme" not in repr(rotated)
    assert tenants.by_token(TOKENS["acme"]) is None
    assert tenants.admitted("acme", hash_token(TOKENS["acme"])) is None
    principal = tenants.by_token("tw_rotated-acme")
    assert principal is not None and principal.actor == "acme:default"
    assert tenants.admitted("acme", hash_token("tw_rotated-acme")) is not None
    # Another tenant's token is untouched, and no token is stored in clear
    assert tenants.by_token(TOKENS["globex"]) is not None
    stored = str(scan_all(dynamodb, TABLE))
    assert "tw_rotated-acme" not in stored
    assert hash_token("tw_rotated-acme") in stored
    assert hash_token(TOKENS["acme"]) not in stored


def test_rotation_replaces_only_the_tokens_of_its_label(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    tenants = store(dynamodb)
    tenants.rotate_token("acme", token="tw_acme-ci", label="ci")  # a second token, of its own label
    assert tenants.by_token(TOKENS["acme"]) is not None

    rotated = tenants.rotate_token("acme", token="tw_acme-ci-2", label="ci")

    assert rotated.revoked == 1
    assert tenants.by_token("tw_acme-ci") is None
    assert tenants.by_token(TOKENS["acme"]) is not None
    principal = tenants.by_token("tw_acme-ci-2")
    assert principal is not None and principal.actor == "acme:ci"


def test_rotating_an_unknown_tenants_token_writes_nothing(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    before = item_counts(dynamodb)
    with pytest.raises(NotFound):
        store(dynamodb).rotate_token("initech", token="tw_new")
    assert item_counts(dynamodb) == before
    assert store(dynamodb).by_token("tw_new") is None


# --- what the API reads on every request ------------------------------------------------------------------
def test_a_token_is_admitted_only_for_its_own_tenant(dynamodb: Any) -> None:
    for tenant_id, token in TOKENS.items():
        seed_tenant(dynamodb, tenant_id, token)
    tenants = store(dynamodb)
    admitted = tenants.admitted("acme", hash_token(TOKENS["acme"]))
    assert admitted is not None and admitted.actor == "acme:default"
    assert tenants.admitted("acme", hash_token(TOKENS["globex"])) is None
    assert tenants.admitted("acme", hash_token("tw_unknown")) is None
    assert tenants.admitted("initech", hash_token(TOKENS["acme"])) is None


def test_without_a_token_hash_only_the_tenant_is_read(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    admitted = store(dynamodb).admitted("acme", None)
    assert admitted is not None and admitted.tenant.tenant_id == "acme"
    assert store(dynamodb).admitted("initech", None) is None


def test_a_tenant_that_is_not_active_is_not_admitted(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"], status="DELETED")
    assert store(dynamodb).admitted("acme", hash_token(TOKENS["acme"])) is None


class Throttled:
    """A DynamoDB client whose ``BatchGetItem`` leaves every key unprocessed, as a throttled table may."""

    def __init__(self, client: Any):
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        return {"Responses": {}, "UnprocessedKeys": RequestItems}


def test_keys_left_unprocessed_are_read_one_by_one(dynamodb: Any) -> None:
    seed_tenant(dynamodb, "acme", TOKENS["acme"])
    throttled: Any = Throttled(dynamodb)
    admitted = DynamoTenantStore(throttled, table=TABLE).admitted("acme", hash_token(TOKENS["acme"]))
    assert admitted is not None and admitted.actor == "acme:default"
