"""Priorities at a full limit (moto, the workers' admission on DynamoDB): a run of lower priority leaves a
freed slot of a concurrency key or of the tenant's in-flight limit to higher priority runs waiting for it,
until it has itself waited the difference of their offsets; the waiting runs' notes cost writes only while
runs wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickwork import tables
from tickwork.adapters.lanes import DynamoTenantSlots
from tickwork.app.claims import Slot, Wait
from tickwork.domain.models import Job, RunMessage
from tickwork.domain.priority import AHEAD_NOTE, Priority

from tests.conftest import TOKENS
from tests.integration.test_api_flow import claims, job_of, run_of
from tests.support.apigw import ApiGateway

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
ACME = TOKENS["acme"]


def keyed(api: ApiGateway, dynamodb: Any, name: str, priority: Priority, key: str = "db") -> Job:
    created = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body={
            "name": name,
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "target": {"type": "http", "url": "https://example.com/hook"},
            "concurrency_key": key,
            "max_concurrency": 1,
            "priority": priority,
        },
    )
    assert created.status == 201, created.body
    return job_of(dynamodb, "acme", created.body["job_id"])


def message_for(job: Job, minute: int, held_since: datetime | None = None) -> RunMessage:
    run = run_of(job, minute)
    since = None if held_since is None else int(held_since.timestamp() * 1000)
    return RunMessage(tenant_id="acme", run_id=run.run_id, held_since=since)


def test_a_freed_slot_goes_to_the_waiting_high_run_not_to_a_low_one(api: ApiGateway, dynamodb: Any) -> None:
    # Given a key of one place held by a running job, and a high run that found it full
    busy = keyed(api, dynamodb, "busy", "normal")
    urgent = keyed(api, dynamodb, "urgent", "high")
    bulk = keyed(api, dynamodb, "bulk", "low")
    admission = claims(dynamodb)
    running = admission.take_slot(busy, run_of(busy, 0), NOW)
    assert isinstance(running, tuple) and len(running) == 1
    waiting = admission.take_slot(urgent, run_of(urgent, 1), NOW, message_for(urgent, 1))
    assert isinstance(waiting, Wait)
    # its message now says when it was first held
    assert waiting.message is not None and waiting.message.held_since == int(NOW.timestamp() * 1000)

    # When the running one ends and a low run comes for the slot before the high one looks again
    admission.give_back(busy, running)
    low = admission.take_slot(bulk, run_of(bulk, 2), NOW + timedelta(seconds=0.5), message_for(bulk, 2))

    # Then the low run leaves it, and the high one takes it at its next look
    assert isinstance(low, Wait)
    assert low.reason == "held back: its place goes to high priority runs waiting for the same limit"
    later = NOW + timedelta(seconds=1)
    taken = admission.take_slot(urgent, run_of(urgent, 1), later, waiting.message)
    assert isinstance(taken, tuple) and isinstance(taken[0], Slot)


@pytest.mark.parametrize(
    ("priority", "waited", "takes"),
    [("low", 299, False), ("low", 301, True), ("normal", 149, False), ("normal", 151, True)],
)
def test_a_lower_run_that_waited_past_the_offsets_difference_takes_the_slot(
    api: ApiGateway, dynamodb: Any, priority: Priority, waited: int, takes: bool
) -> None:
    # Given high runs noted as waiting for a key whose one place is free
    urgent, other = keyed(api, dynamodb, "urgent", "high"), keyed(api, dynamodb, "other", priority)
    slots = DynamoTenantSlots(dynamodb, table=tables.TENANTS.default_name)
    group = tables.slot_group("acme", "db")
    slots.note_ahead(group, 0, "high", NOW + AHEAD_NOTE)
    assert job_of(dynamodb, "acme", urgent.job_id).priority == "high"

    # When a run of lower priority first held ``waited`` seconds ago asks for it
    since = NOW - timedelta(seconds=waited)
    taken = claims(dynamodb).take_slot(other, run_of(other, 3), NOW, message_for(other, 3, held_since=since))

    # Then it takes it once it has waited longer than its offset over high (300 s low, 150 s normal)
    assert isinstance(taken, tuple) is takes
    if not takes:
        # and its held_since is kept, so its wait keeps counting
        assert isinstance(taken, Wait) and taken.message is not None
        assert taken.message.held_since == int(since.timestamp() * 1000)


def test_a_note_lapses_so_a_low_run_is_not_kept_waiting_after_the_high_ones_left(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given a high runs' note on a free key
    bulk = keyed(api, dynamodb, "bulk", "low")
    slots = DynamoTenantSlots(dynamodb, table=tables.TENANTS.default_name)
    slots.note_ahead(tables.slot_group("acme", "db"), 0, "high", NOW + AHEAD_NOTE)

    # Then a low run yields while the note is live, and takes the slot once it lapsed
    assert isinstance(claims(dynamodb).take_slot(bulk, run_of(bulk, 4), NOW, message_for(bulk, 4)), Wait)
    after = NOW + AHEAD_NOTE + timedelta(milliseconds=1)
    assert isinstance(claims(dynamodb).take_slot(bulk, run_of(bulk, 4), after, message_for(bulk, 4)), tuple)


def test_only_higher_priorities_note_and_a_note_is_renewed_not_rewritten_each_look(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given a key of one place held, and runs of each priority held by it
    busy = keyed(api, dynamodb, "busy", "normal")
    admission = claims(dynamodb)
    assert isinstance(admission.take_slot(busy, run_of(busy, 0), NOW), tuple)
    slots = DynamoTenantSlots(dynamodb, table=tables.TENANTS.default_name)
    group = tables.slot_group("acme", "db")
    ranked: tuple[Priority, ...] = ("high", "normal", "low")
    for index, priority in enumerate(ranked, start=1):
        job = keyed(api, dynamodb, f"held-{priority}", priority)
        assert isinstance(admission.take_slot(job, run_of(job, index), NOW, message_for(job, index)), Wait)

    # Then the item notes high and normal (low has no one below it), each until AHEAD_NOTE from now
    assert slots.get(group, 0).ahead == {"high": NOW + AHEAD_NOTE, "normal": NOW + AHEAD_NOTE}

    # And a look a second later leaves the notes (more than the renewal margin left), one 3 s later renews
    urgent = keyed(api, dynamodb, "urgent-2", "high")
    admission.take_slot(urgent, run_of(urgent, 9), NOW + timedelta(seconds=1), message_for(urgent, 9))
    assert slots.get(group, 0).ahead["high"] == NOW + AHEAD_NOTE
    admission.take_slot(urgent, run_of(urgent, 9), NOW + timedelta(seconds=3), message_for(urgent, 9))
    assert slots.get(group, 0).ahead["high"] == NOW + timedelta(seconds=3) + AHEAD_NOTE


def test_the_tenants_in_flight_limit_orders_its_waiting_runs_the_same_way(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given a tenant limited to one run at once, running a normal job's run, and a high run held by it
    from tickwork.adapters.tenants import DynamoTenantStore
    from tickwork.domain.tenants import TenantChanges

    DynamoTenantStore(dynamodb, table=tables.TENANTS.default_name).update(
        "acme", TenantChanges(max_concurrent_runs=1)
    )
    plain = [
        job_of(dynamodb, "acme", api.request("POST", "/v1/jobs", token=ACME, body={
            "name": f"plain-{priority}",
            "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "UTC"},
            "target": {"type": "http", "url": "https://example.com/hook"},
            "priority": priority,
        }).body["job_id"])
        for priority in ("normal", "high", "low")
    ]  # fmt: skip
    busy, urgent, bulk = plain
    admission = claims(dynamodb)
    running = admission.take_slot(busy, run_of(busy, 0), NOW)
    assert isinstance(running, tuple)
    assert isinstance(admission.take_slot(urgent, run_of(urgent, 1), NOW, message_for(urgent, 1)), Wait)

    # When the slot frees: the low run leaves it, the high one takes it
    admission.give_back(busy, running)
    assert isinstance(admission.take_slot(bulk, run_of(bulk, 2), NOW, message_for(bulk, 2)), Wait)
    assert isinstance(admission.take_slot(urgent, run_of(urgent, 1), NOW, message_for(urgent, 1)), tuple)
