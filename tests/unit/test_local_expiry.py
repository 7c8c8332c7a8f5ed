"""The local stack's time to live (``tickwork_local.expiry``): items whose TTL attribute has passed are
deleted, a bounded number of items looked at per pass, each delete conditional and journaled."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from tickwork import tables
from tickwork_local import moto_dynamodb
from tickwork_local.expiry import OLDEST_SECONDS, Expiry, expiry_loop, is_expired
from tickwork_local.journal import Journal, replay

RUNS = tables.RUNS.default_name
TENANTS = tables.TENANTS.default_name
NOW = 1_800_000_000


@pytest.fixture
def session() -> Any:
    moto_dynamodb.install()
    with mock_aws():
        session = boto3.Session()  # the region moto_dynamodb reads, as the local stack's clients do
        client = session.client("dynamodb")
        for definition in (tables.RUNS, tables.TENANTS, tables.JOBS):
            client.create_table(**definition.create_table_kwargs())
        for definition in (tables.RUNS, tables.TENANTS):  # the jobs table has no TTL
            assert definition.ttl_attribute is not None
            client.update_time_to_live(
                TableName=definition.default_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": definition.ttl_attribute},
            )
        yield session


def run_item(job: str, sort_key: int, expires_at: Any) -> dict[str, Any]:
    item: dict[str, Any] = {tables.RUNS_PK: {"S": f"acme/{job}"}, tables.RUNS_SK: {"S": f"{sort_key:013d}"}}
    if expires_at is not None:
        item[tables.RUNS_TTL] = expires_at
    return item


def sort_keys(client: Any, table: str = RUNS) -> set[tuple[str, str]]:
    items = client.scan(TableName=table)["Items"]
    return {(item["pk"]["S"], item.get("sk", {}).get("S", "")) for item in items}


@pytest.mark.parametrize(
    ("value", "expired"),
    [
        ({"N": str(NOW - 1)}, True),
        ({"N": str(NOW - 0.5)}, True),
        ({"N": str(NOW)}, False),  # not yet: its second has not passed
        ({"N": str(NOW + 60)}, False),
        ({"N": str(NOW - OLDEST_SECONDS)}, True),
        ({"N": str(NOW - OLDEST_SECONDS - 1)}, False),  # more than five years past: DynamoDB keeps it
        ({"S": str(NOW - 1)}, False),  # not a number
        (None, False),
    ],
)
def test_an_item_expires_once_its_ttl_second_has_passed(value: Any, expired: bool) -> None:
    assert is_expired(value, NOW) is expired


def test_a_pass_deletes_the_expired_items_of_tables_whose_ttl_is_enabled(session: Any) -> None:
    client = session.client("dynamodb")
    kept_values = [{"N": str(NOW + 10)}, None, {"S": "1"}, {"N": str(NOW - OLDEST_SECONDS - 5)}]
    for number in range(20):
        client.put_item(TableName=RUNS, Item=run_item("job-a", number, {"N": str(NOW - 100 + number)}))
    for number, value in enumerate(kept_values):
        client.put_item(TableName=RUNS, Item=run_item("job-b", number, value))
    client.put_item(
        TableName=TENANTS, Item={"pk": {"S": "ratelimit#acme"}, "expires_at": {"N": str(NOW - 1)}}
    )
    client.put_item(TableName=TENANTS, Item={"pk": {"S": "tenant#acme"}})
    job = {tables.JOBS_PK: {"S": "acme#job"}, tables.JOBS_SK: {"S": tables.JOB_SK}, "expires_at": {"N": "1"}}
    client.put_item(TableName=tables.JOBS.default_name, Item=job)

    expiry = Expiry(client, clock=lambda: NOW)
    assert expiry.run_pass() == 21
    assert sort_keys(client) == {("acme/job-b", f"{number:013d}") for number in range(len(kept_values))}
    assert sort_keys(client, TENANTS) == {("tenant#acme", "")}
    assert len(client.scan(TableName=tables.JOBS.default_name)["Items"]) == 1  # no TTL on that table
    assert expiry.run_pass() == 0


def test_each_pass_looks_at_a_bounded_number_of_items_and_the_next_goes_on_from_there(
    session: Any, monkeypatch: Any
) -> None:
    client = session.client("dynamodb")
    for start in range(0, 300, 25):
        client.batch_write_item(
            RequestItems={
                RUNS: [
                    {"PutRequest": {"Item": run_item("job-big", n, {"N": str(NOW - (n % 2))})}}
                    for n in range(start, start + 25)
                ]
            }
        )
    for number in range(10):
        client.put_item(TableName=RUNS, Item=run_item(f"job-{number}", 1, {"N": str(NOW - 5)}))
    looked: list[int] = []
    original = moto_dynamodb.walk_items

    def counted(walk: Any, count: int, attribute: str) -> Any:
        found = original(walk, count, attribute)
        looked.append(len(found))
        return found

    monkeypatch.setattr(moto_dynamodb, "walk_items", counted)
    expiry = Expiry(client, clock=lambda: NOW, look_per_pass=40, look_per_hold=15, delete_per_pass=100)
    deleted = []
    for _ in range(20):
        before = len(looked)
        deleted.append(expiry.run_pass())
        # At most 40 items a pass, at most 15 while the lock is held
        assert sum(looked[before:]) <= 40 and all(count <= 15 for count in looked[before:])
    # Every other run of the big job was due (NOW - 1), and all of the small jobs' runs
    assert sum(deleted) == 150 + 10
    assert sort_keys(client) == {("acme/job-big", f"{n:013d}") for n in range(0, 300, 2)}


def test_an_item_written_again_with_a_later_time_is_not_deleted(session: Any) -> None:
    client = session.client("dynamodb")
    client.put_item(TableName=RUNS, Item=run_item("job", 1, {"N": str(NOW + 3600)}))
    key = {tables.RUNS_PK: {"S": "acme/job"}, tables.RUNS_SK: {"S": f"{1:013d}"}}
    # found expired by a pass, then written again before its delete
    assert Expiry(client).delete(RUNS, tables.RUNS_TTL, key, NOW) is False
    assert client.get_item(TableName=RUNS, Key=key)["Item"][tables.RUNS_TTL] == {"N": str(NOW + 3600)}


def test_expiry_deletes_are_journaled_and_a_restart_does_not_bring_them_back(
    session: Any, tmp_path: Path
) -> None:
    journal = Journal(tmp_path, moto_dynamodb.stored_item, sync=lambda _: None)
    journal.attach(session.events)
    client = session.client("dynamodb")
    client.put_item(TableName=RUNS, Item=run_item("job", 1, {"N": str(NOW - 1)}))
    client.put_item(TableName=RUNS, Item=run_item("job", 2, {"N": str(NOW + 1)}))
    try:
        assert Expiry(client, clock=lambda: NOW).run_pass() == 1
    finally:
        journal.close()
    states = list(replay(tmp_path))
    assert states[-1] == {
        "table": RUNS,
        "key": {tables.RUNS_PK: {"S": "acme/job"}, tables.RUNS_SK: {"S": f"{1:013d}"}},
        "item": None,
    }


def test_the_loop_runs_passes_until_stopped(session: Any) -> None:
    client = session.client("dynamodb")
    client.put_item(TableName=RUNS, Item=run_item("job", 1, {"N": str(NOW - 1)}))
    stop = threading.Event()
    expiry = Expiry(client, clock=lambda: NOW)
    thread = threading.Thread(target=expiry_loop, args=(stop, 0.01, expiry))
    thread.start()
    try:
        for _ in range(500):
            if expiry.deleted:
                break
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert expiry.deleted == 1 and not thread.is_alive()
