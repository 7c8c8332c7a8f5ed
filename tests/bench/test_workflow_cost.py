"""The workflow cost workload runs at a tiny size and counts what it says: every task run once, every request
of the metered worker attributed to the code that made it, the price spread over the task runs, a fleet's task
messages sharing the mapping's batches and priced as a plain fleet is; and the tables in docs/cost.md are the
ones the saved figures give."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import workflow_cost
from bench._cost_workload import measure
from bench.cost import (
    DEPLOYMENT_RUNS_PER_S,
    DOC,
    WRU_PRICE,
    Model,
    indexer_function,
    records_per_invocation,
    total,
)

WIDTH = 3


@pytest.fixture(scope="module")
def fan_in() -> dict[str, Any]:
    """One metered workflow run of split -> 3 parts -> merge, a run every minute."""
    shape = workflow_cost.WorkflowShape(60, 1, 0, worker_seconds=60, dag="fan-in", width=WIDTH)
    return measure(shape, workload_type=workflow_cost.WorkflowWorkload, site_of=workflow_cost.site_of)


@pytest.fixture(scope="module")
def fan_in_fleet() -> dict[str, Any]:
    """Two jobs of split -> 3 parts -> merge, each every minute, firing in the same second."""
    shape = workflow_cost.WorkflowShape(60, 2, 0, worker_seconds=60, dag="fan-in", width=WIDTH)
    return measure(shape, workload_type=workflow_cost.WorkflowWorkload, site_of=workflow_cost.site_of)


def test_a_metered_workflow_run_runs_each_task_once(fan_in: dict[str, Any]) -> None:
    # The workload's own check passed: the run and each task SUCCEEDED at their first attempt
    assert fan_in["tasks"] == WIDTH + 2
    assert fan_in["workflow_runs"] == 1
    assert fan_in["task_runs"] == WIDTH + 2
    # one message for the workflow run, one per task
    assert fan_in["runs"] == 1 + WIDTH + 2
    # the workflow run's invocation, split's, the parts' (one batch), merge's
    assert fan_in["worker"]["count"] == 4
    assert fan_in["esm"] == {"sqs.ReceiveMessage": 4, "sqs.DeleteMessageBatch": 4}


def test_a_fleets_task_messages_share_the_mappings_batches(
    fan_in: dict[str, Any], fan_in_fleet: dict[str, Any]
) -> None:
    # Both workflow runs, each task of each once, SUCCEEDED at their first attempt (the workload's check)
    assert fan_in_fleet["jobs"] == 2
    assert fan_in_fleet["workflow_runs"] == 2
    assert fan_in_fleet["task_runs"] == 2 * (WIDTH + 2)
    assert fan_in_fleet["runs"] == 2 * (1 + WIDTH + 2)
    # The two workflow runs' messages, the two splits', the six parts', the two merges': one batch each,
    # as many invocations as the lone workflow's for twice its messages
    assert fan_in_fleet["worker"]["count"] == fan_in["worker"]["count"] == 4
    assert fan_in_fleet["esm"] == {"sqs.ReceiveMessage": 4, "sqs.DeleteMessageBatch": 4}


def test_a_fleet_is_priced_as_a_plain_fleet(fan_in: dict[str, Any], fan_in_fleet: dict[str, Any]) -> None:
    fleet, lone = workflow_cost.per_task_shape(fan_in_fleet), workflow_cost.per_task_shape(fan_in)
    # The indexer: a fleet's batches of stream records are the deployment's (ten runs a second, a task run
    # counted as a run, in the 2 s window), as for the plain fleet; a lone job's as measured
    records = fan_in_fleet["indexer"]["records"] / fan_in_fleet["task_runs"]
    assert records_per_invocation(fleet) == pytest.approx(DEPLOYMENT_RUNS_PER_S * records * 2.0)
    assert records_per_invocation(lone) == fan_in["indexer"]["records"] / fan_in["indexer"]["count"]
    indexer = indexer_function(fleet)
    assert indexer is not None
    assert indexer["count"] == pytest.approx(
        fan_in_fleet["indexer"]["records"] / records_per_invocation(fleet)
    )
    # Set against the plain run of its own kind
    assert workflow_cost.plain_of(fan_in_fleet) == "60s fleet"
    assert workflow_cost.plain_of(fan_in) == "60s lone"


def test_the_saved_fleets_are_set_against_the_plain_fleet() -> None:
    figures = json.loads(workflow_cost.FIGURES.read_text())
    fleets = {name: w for name, w in figures["workflows"].items() if workflow_cost.is_fleet(w)}
    assert {w["dag"] for w in fleets.values()} == {"diamond", "fan-in"}
    plain = sum(workflow_cost.plain_dollars(figures, "60s fleet").values())
    for name in fleets:
        per_task = sum(workflow_cost.task_dollars(figures, name).values())
        assert workflow_cost.ratio_of(figures, name) == pytest.approx(per_task / plain)
        # a fleet's task messages came ten to a batch about as often as the plain fleet's runs
        workflow = fleets[name]
        assert workflow["runs"] / workflow["worker"]["count"] > 5


def test_every_request_of_the_metered_worker_is_attributed_to_its_code(fan_in: dict[str, Any]) -> None:
    sites = fan_in["sites"]
    for what in ("requests", "wru", "index_wru", "rru"):
        assert sum(total(part, what) for part in sites.values()) == total(fan_in["worker"], what), what
    tasks = fan_in["task_runs"]

    def requests(site: str) -> int:
        return int(total(sites[site], "requests"))

    # each task's end recorded once in the fan-in; its run claimed once (its first write) and ended once
    assert requests("fan-in: the task's end recorded") == tasks
    assert requests("the task's run claimed (its first write: RUNNING)") == tasks
    assert requests("the task's run ended (its attempt written)") == tasks
    # no task's run is stored before its claim: the root sent at the start, split's three parts in one
    # request, merge by the one part's end that completes its parents (the others send nothing)
    assert requests("start: the roots' messages sent") == 1
    assert requests("the children's messages sent") == 2
    # the workflow run itself: its lease, its start (then one read of its ends), and at its last task's end
    # one read of it and one write
    assert requests("the workflow run's lane lease") == 1
    assert requests("start: the workflow run written RUNNING") == 1
    assert requests("start: the ends read once RUNNING") == 1
    assert requests("end: the workflow run read") == 1
    assert requests("end: the workflow run's end written") == 1
    # each part reads split's run, merge reads the three parts'
    assert requests("the parents' runs read (their outputs, for the task's envelope)") == 2 * WIDTH
    assert not [site for site in sites if site.startswith(("Dynamo", "Sqs", "outside"))], sites


def test_a_workflow_is_priced_per_task_run(fan_in: dict[str, Any]) -> None:
    figures = {
        "workflows": {"fan-in": fan_in},
        "create": {"invocations": 2, "own_cpu_s": 0.0, "requests": {}, "wru": {}, "index_wru": {}, "rru": {}},
        "botocore_ms": 0.0,
    }
    priced = workflow_cost.task_dollars(figures, "fan-in", Model(botocore_ms=0.0))
    worker, indexer = fan_in["worker"], fan_in["indexer"]
    writes = (
        total(worker, "wru")
        + total(worker, "index_wru")
        + total(indexer, "wru")
        + total(indexer, "index_wru")
    )
    # The worker's writes over the task runs (the indexer's, a share of its own, are apart)
    assert priced["DynamoDB writes"] == pytest.approx(
        (total(worker, "wru") + total(worker, "index_wru")) * WRU_PRICE / fan_in["task_runs"]
    )
    assert writes > total(worker, "wru")
    # The planner's marginal work for the one fire is spread over the fire's task runs
    shape = workflow_cost.per_task_shape(fan_in)
    assert shape["planned_runs"] == fan_in["planned_runs"] * (WIDTH + 2)
    # The profile's rows add up to the total
    rows = workflow_cost.profile_rows(fan_in, Model(botocore_ms=0.0))
    assert sum(row[5] for row in rows) + priced["API create share"] == pytest.approx(sum(priced.values()))


def test_the_doc_shows_the_saved_figures() -> None:
    figures = json.loads(workflow_cost.FIGURES.read_text())
    stale = "docs/cost.md is stale: python -m bench.workflow_cost --figures bench/workflow_cost_figures.json"
    assert workflow_cost.doc_blocks(DOC.read_text()) == workflow_cost.blocks(figures), stale
