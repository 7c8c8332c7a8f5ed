"""The pool cost scenario counts what it says: an idle long poll's queries and wait, one run write per call
of an hour's run, and the table in docs/cost.md is the one its saved figures give."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tickwork.app.pools import POLL_EVERY

from bench import pool_cost
from bench.cost import DOC, Model


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return pool_cost.measure()


def test_an_idle_claim_queries_the_pool_every_poll_interval_and_waits_its_whole_wait(
    measured: dict[str, Any],
) -> None:
    polls = pool_cost.WAIT_SECONDS / POLL_EVERY.total_seconds()
    idle = measured["idle_poll"]
    # One query at once, then one after each interval, the last at the end of the wait
    assert measured["idle_queries_per_poll"] == idle["requests"]["dynamodb.Query"] == polls + 1
    assert idle["slept_s"] == pool_cost.WAIT_SECONDS
    assert idle["count"] == 1
    # Nothing of the pool is written while it waits (only the tenant's request counter)
    assert set(idle["wru"]) == {"dynamodb.UpdateItem"}
    assert measured["polls_per_month"] == 30 * 24 * 180


def test_an_hours_run_writes_its_run_item_once_per_call(measured: dict[str, Any]) -> None:
    run = measured["run"]
    assert run["heartbeats"] == pool_cost.HEARTBEATS == 180
    assert run["heartbeats_part"]["count"] == 180
    assert run["heartbeats_part"]["requests"]["dynamodb.PutItem"] == 180
    assert pool_cost.run_item_writes(measured) == 182 <= 200


def test_the_month_is_the_poll_priced_129600_times() -> None:
    figures = json.loads(pool_cost.FIGURES.read_text())
    priced: dict[str, float] = pool_cost._dollars(figures["idle_poll"], figures["api_memory_mb"], Model())
    one = sum(priced.values())
    month = sum(pool_cost.idle_month(figures).values())
    authorizations = 129_600 * 20 / 300
    assert one * 129_600 < month < one * 129_600 + authorizations * 1e-5
    # The wait is most of it: 20 s at 512 MB on arm64
    assert pool_cost.idle_month(figures)["Lambda duration"] > 129_600 * 20 * 0.5 * 0.0000133334


def test_the_doc_shows_the_saved_figures() -> None:
    figures = json.loads(pool_cost.FIGURES.read_text())
    stale = (
        "docs/cost.md is stale: python -m bench.pool_cost --write-doc --figures bench/pool_cost_figures.json"
    )
    assert pool_cost.doc_blocks(DOC.read_text()) == pool_cost.blocks(figures), stale
