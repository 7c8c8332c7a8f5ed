"""Job priorities end to end under moto: each priority's runs go to its own run queue (and come back to it
when they wait), and the local stack's pollers serve a backlog in the priority order, with aging."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from tickwork import tables
from tickwork.domain.lanes import Holder
from tickwork.domain.models import RunMessage, scheduled_run_id
from tickwork.domain.priority import PRIORITIES, Priority
from tickwork.runtime import build_runtime
from tickwork_local.harness import Pump, partial_batches
from tickwork_local.priorities import IDLE_ROTATION, ServeOrder

from tests.integration.conftest import Engine


@pytest.fixture
def queues(engine: Engine) -> dict[Priority, str]:
    return {
        priority: engine.sqs.get_queue_url(QueueName=tables.RUN_QUEUES_BY_PRIORITY[priority].default_name)[
            "QueueUrl"
        ]
        for priority in PRIORITIES
    }


@pytest.fixture
def prioritized(engine: Engine, queues: dict[Priority, str]) -> Engine:
    """The engine with the high and low priority queues configured, as the stack configures them."""
    settings = engine.runtime.settings.model_copy(
        update={"run_queue_high_url": queues["high"], "run_queue_low_url": queues["low"]}
    )
    runtime = build_runtime(settings, dynamodb=engine.dynamodb, sqs=engine.sqs, metrics=engine.metrics)
    return replace(engine, runtime=runtime)


def bodies(engine: Engine, queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, delayed ones included (the clock moved past them), left in place."""
    engine.clock.advance(seconds=900)
    found = engine.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [json.loads(message["Body"]) for message in found.get("Messages", [])]


def once(engine: Engine, seconds: int, name: str, priority: Priority, **fields: Any) -> str:
    at = engine.clock() + timedelta(seconds=seconds)
    spec = {
        "name": name,
        "schedule": {"type": "once", "at": at.isoformat()},
        "target": engine.http(f"/{name}"),
        "priority": priority,
        **fields,
    }
    return engine.create(**spec).job.job_id


def test_each_jobs_fires_go_to_the_queue_of_its_priority(
    prioritized: Engine, queues: dict[Priority, str]
) -> None:
    # Given a job of each priority with a fire in 30 s
    ids = {priority: once(prioritized, 30, f"p-{priority}", priority) for priority in PRIORITIES}

    # When the planner sends the fires
    prioritized.tick()

    # Then each fire is in its priority's queue, and only there
    for priority in PRIORITIES:
        found = bodies(prioritized, queues[priority])
        assert [body["run_id"].split(":")[0] for body in found] == [ids[priority]]
        # a normal run's message is as it was before priorities: no field for it
        assert found[0].get("priority") == (None if priority == "normal" else priority)


def test_without_the_priority_queues_every_run_goes_to_the_run_queue(
    engine: Engine, queues: dict[Priority, str]
) -> None:
    # Given a runtime configured with the run queue alone (an older stack)
    for priority in PRIORITIES:
        once(engine, 30, f"only-{priority}", priority)

    # When the planner sends the fires
    engine.tick()

    # Then all three are in the run queue, none lost
    assert len(bodies(engine, queues["normal"])) == 3
    assert bodies(engine, queues["high"]) == bodies(engine, queues["low"]) == []


def hold_key(engine: Engine, key: str) -> None:
    """The only place of the tenant's concurrency key ``key`` taken by a live attempt of another job."""
    now = engine.clock()
    group = tables.slot_group("acme", key)
    slots = engine.runtime.slots
    holder = Holder(
        run_id="other:1",
        token=1,
        attempt=1,
        scheduled_for=now,
        started_at=now,
        lease_until=now + timedelta(minutes=5),
        worker_id="elsewhere",
    )
    assert slots.claim(group, 0, seen=slots.get(group, 0), holder=holder, drop=[]) is None  # None: taken


def deliver_once(engine: Engine, queue_url: str) -> list[str]:
    """One batch of the queue's mapping into the worker; what the worker did with each record."""
    outcomes: list[str] = []
    handler = engine.record_handler()

    def handle(record: Any) -> str:
        outcomes.append(handler(record))
        return outcomes[-1]

    Pump(engine.sqs, queue_url, partial_batches(handle), visibility_timeout=30).once()
    return outcomes


def test_a_run_held_by_its_concurrency_key_waits_in_its_prioritys_queue(
    prioritized: Engine, queues: dict[Priority, str]
) -> None:
    # Given a high priority job with a concurrency key of one place, due now, and that place held by a live
    # attempt of another job
    once(prioritized, 0, "held", "high", concurrency_key="db", max_concurrency=1)
    prioritized.tick()
    hold_key(prioritized, "db")

    # When the high queue's mapping delivers the run
    outcomes = deliver_once(prioritized, queues["high"])

    # Then it waits for the key in the high queue, not in the normal one
    assert outcomes == ["held back: its concurrency key is at max_concurrency"]
    assert [body.get("priority") for body in bodies(prioritized, queues["high"])] == ["high"]
    assert bodies(prioritized, queues["normal"]) == []


def test_a_message_sent_without_its_jobs_priority_waits_in_the_jobs_queue(
    prioritized: Engine, queues: dict[Priority, str]
) -> None:
    # Given a low priority job whose concurrency key is full, and a message for its fire with no priority in
    # the normal queue (as the sweeper resends one)
    job_id = once(prioritized, 0, "resent", "low", concurrency_key="db", max_concurrency=1)
    hold_key(prioritized, "db")
    message = RunMessage(tenant_id="acme", run_id=scheduled_run_id(job_id, prioritized.clock()))
    body = message.model_dump_json(exclude_none=True)
    prioritized.sqs.send_message(QueueUrl=queues["normal"], MessageBody=body)

    # When the worker takes it from the normal queue
    outcomes = deliver_once(prioritized, queues["normal"])

    # Then it waits for its key in the low priority queue, beside the fire's own message (sent there when
    # the job was created)
    assert outcomes == ["held back: its concurrency key is at max_concurrency"]
    assert [body["run_id"] for body in bodies(prioritized, queues["low"])] == [message.run_id] * 2
    assert bodies(prioritized, queues["normal"]) == []


# --- the local stack's serve order --------------------------------------------------------------------------
def send(engine: Engine, queue_url: str, count: int = 1) -> None:
    for index in range(count):
        engine.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"n": index}))


def test_the_pollers_serve_a_higher_priority_first_under_a_backlog(
    engine: Engine, queues: dict[Priority, str]
) -> None:
    # Given a backlog of low runs visible for 100 s, then a high run that just came due
    send(engine, queues["low"], 30)
    engine.clock.advance(seconds=100)
    send(engine, queues["high"])
    order = ServeOrder(queues, poller=0)

    # Then the high queue is served first, and the low one after it
    assert order() == [queues["high"], queues["low"]]


@pytest.mark.parametrize(
    ("lower", "waited", "first"),
    [
        ("low", 299, "high"),
        ("low", 301, "low"),  # aged past the bound: 300 s
        ("normal", 149, "high"),
        ("normal", 151, "normal"),  # aged past its offset: half the bound
    ],
)
def test_a_lower_priority_that_waited_longer_than_its_offset_is_served_first(
    engine: Engine, queues: dict[Priority, str], lower: Priority, waited: int, first: Priority
) -> None:
    # Given a run of a lower priority visible for ``waited`` s, and a high one that just came due
    send(engine, queues[lower])
    engine.clock.advance(seconds=waited)
    send(engine, queues["high"])

    # Then the lower one comes first once it has waited longer than its priority's offset
    assert ServeOrder(queues, poller=0)()[0] == queues[first]


def test_a_poller_with_nothing_visible_long_polls_the_queue_it_watches(
    engine: Engine, queues: dict[Priority, str]
) -> None:
    # Given empty queues, and one poller more than there are queues
    watched = [ServeOrder(queues, poller=index)() for index in range(len(IDLE_ROTATION) + 1)]

    # Then each queue is watched by a poller, the normal one by two
    assert watched == [[queues["normal"]], [queues["high"]], [queues["low"]], [queues["normal"]]]


def test_a_shared_poller_delivers_the_high_run_before_the_low_backlog(
    engine: Engine, queues: dict[Priority, str]
) -> None:
    # Given 30 low runs visible for a minute, then a high one
    send(engine, queues["low"], 30)
    engine.clock.advance(seconds=60)
    send(engine, queues["high"])
    delivered: list[str] = []

    def handle(event: dict[str, Any]) -> dict[str, Any]:
        delivered.extend(record["eventSourceARN"].rsplit(":", 1)[-1] for record in event["Records"])
        return {"batchItemFailures": []}

    # When a poller of the three queues takes two batches
    pump = Pump(
        engine.sqs, queues["normal"], handle, serve_order=ServeOrder(queues, poller=0), wait_seconds=0
    )
    pump.once()
    pump.once()

    # Then its first batch was the high run alone, its second ten low ones
    high, low = tables.RUN_QUEUE_HIGH.default_name, tables.RUN_QUEUE_LOW.default_name
    assert delivered == [high] + [low] * 10
