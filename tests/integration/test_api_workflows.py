"""Workflow definitions through the job routes: created, read back whole, listed and patched to and from a
workflow under the same checks as a create. (The refusals are in ``test_bad_input``.)"""

from __future__ import annotations

from typing import Any

from tests.conftest import TOKENS, item_counts
from tests.support.apigw import ApiGateway

ACME = TOKENS["acme"]
HOOK = {"type": "http", "url": "https://hooks.example.com/etl"}


def workflow_job(name: str, tasks: list[dict[str, Any]], **target: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Paris"},
        "target": {"type": "workflow", "tasks": tasks, **target},
        "payload": {"day": "today"},
    }


DIAMOND = [
    {"id": "extract", "target": HOOK, "payload": {"source": "orders"}},
    {"id": "transform_a", "target": HOOK, "depends_on": ["extract"]},
    {
        "id": "transform_b",
        "target": {"type": "pool", "pool": "gpu", "heartbeat_timeout_seconds": 30},
        "depends_on": ["extract"],
        "retry": {"max_attempts": 2},
    },
    {"id": "load", "target": HOOK, "depends_on": ["transform_a", "transform_b"], "trigger_rule": "all_done"},
]


def test_a_diamond_is_created_and_read_back_with_every_default_shown(api: ApiGateway) -> None:
    # When a diamond is created
    created = api.request("POST", "/v1/jobs", token=ACME, body=workflow_job("diamond", DIAMOND))

    # Then it is accepted, and the job shows its tasks with their defaults filled in
    assert created.status == 201, created.body
    target = created.body["target"]
    assert (target["type"], target["max_parallel"], target["failure_mode"]) == ("workflow", None, "fail_fast")
    assert [task["id"] for task in target["tasks"]] == ["extract", "transform_a", "transform_b", "load"]
    extract, transform_a, transform_b, load = target["tasks"]
    assert extract == {
        "id": "extract",
        "target": {**HOOK, "method": "POST", "headers": {}, "timeout_seconds": 30},
        "payload": {"source": "orders"},
        "retry": None,
        "depends_on": [],
        "trigger_rule": "all_success",
    }
    assert transform_a["payload"] is None
    assert transform_b["target"] == {
        "type": "pool",
        "pool": "gpu",
        "heartbeat_timeout_seconds": 30,
        "timeout_seconds": 3600,
    }
    assert transform_b["retry"]["max_attempts"] == 2
    assert (load["depends_on"], load["trigger_rule"]) == (["transform_a", "transform_b"], "all_done")
    # And reading it and listing it show the same definition
    shown = api.request("GET", f"/v1/jobs/{created.body['job_id']}", token=ACME)
    assert (shown.status, shown.body["target"]) == (200, target)
    listed = api.request("GET", "/v1/jobs", token=ACME)
    assert [job["target"] for job in listed.body["items"]] == [target]


def test_a_50_wide_fan_out_and_fan_in_is_created_and_read_back(api: ApiGateway) -> None:
    # Given a split, 50 parts after it and a merge after all of them
    parts = [f"part-{index:02d}" for index in range(50)]
    tasks = [
        {"id": "split", "target": HOOK},
        *({"id": part, "target": HOOK, "depends_on": ["split"], "payload": {"part": part}} for part in parts),
        {"id": "merge", "target": HOOK, "depends_on": parts},
    ]

    # When it is created, at most 10 tasks at once, carrying on after a failure
    created = api.request(
        "POST",
        "/v1/jobs",
        token=ACME,
        body=workflow_job("fan", tasks, max_parallel=10, failure_mode="continue"),
    )

    # Then the 52 tasks read back in their order, the merge waiting for all 50 parts
    assert created.status == 201, created.body
    shown = api.request("GET", f"/v1/jobs/{created.body['job_id']}", token=ACME)
    target = shown.body["target"]
    assert (target["max_parallel"], target["failure_mode"]) == (10, "continue")
    assert [task["id"] for task in target["tasks"]] == ["split", *parts, "merge"]
    assert target["tasks"][-1]["depends_on"] == parts
    assert {task["payload"]["part"] for task in target["tasks"][1:-1]} == set(parts)


def test_a_job_is_patched_to_a_workflow_and_back_under_the_checks_of_a_create(
    api: ApiGateway, dynamodb: Any
) -> None:
    # Given a webhook job
    created = api.request(
        "POST", "/v1/jobs", token=ACME, body={**workflow_job("etl", DIAMOND), "target": HOOK}
    )
    assert created.status == 201, created.body
    path = f"/v1/jobs/{created.body['job_id']}"

    # When its target becomes a workflow with a cycle, it is refused, naming the cycle, and nothing changes
    before = item_counts(dynamodb)
    looped = [
        {"id": "a", "target": HOOK, "depends_on": ["b"]},
        {"id": "b", "target": HOOK, "depends_on": ["a"]},
    ]
    refused = api.request("PATCH", path, token=ACME, body={"target": {"type": "workflow", "tasks": looped}})
    assert refused.status == 400, refused.body
    assert refused.body["error"]["field"] == "target.tasks.0.depends_on"
    assert "tasks a -> b -> a form a cycle" in refused.body["error"]["message"]
    assert item_counts(dynamodb) == before
    assert api.request("GET", path, token=ACME).body["version"] == 1

    # When it becomes the diamond, it is one
    patched = api.request("PATCH", path, token=ACME, body={"target": {"type": "workflow", "tasks": DIAMOND}})
    assert patched.status == 200, patched.body
    assert [task["id"] for task in patched.body["target"]["tasks"]] == [task["id"] for task in DIAMOND]

    # And a patch of the workflow's own fields merges into it; its tasks are replaced whole
    tuned = api.request(
        "PATCH",
        path,
        token=ACME,
        body={"target": {"max_parallel": 2, "tasks": DIAMOND[:2]}},
    )
    assert tuned.status == 200, tuned.body
    assert tuned.body["target"]["max_parallel"] == 2
    assert [task["id"] for task in tuned.body["target"]["tasks"]] == ["extract", "transform_a"]

    # And a patch leaving a task's parent out is refused like a create
    orphaned = api.request("PATCH", path, token=ACME, body={"target": {"tasks": DIAMOND[1:2]}})
    assert orphaned.status == 400, orphaned.body
    assert orphaned.body["error"]["field"] == "target.tasks.0.depends_on"

    # And it becomes a webhook job again
    back = api.request("PATCH", path, token=ACME, body={"target": HOOK})
    assert back.status == 200, back.body
    assert back.body["target"]["type"] == "http"
    assert "tasks" not in back.body["target"]


def test_a_task_target_the_deployment_refuses_is_named_by_its_task(api: ApiGateway, dynamodb: Any) -> None:
    before = item_counts(dynamodb)
    tasks = [*DIAMOND[:1], {"id": "peek", "target": {"type": "http", "url": "http://169.254.169.254/"}}]

    refused = api.request("POST", "/v1/jobs", token=ACME, body=workflow_job("peek", tasks))

    assert refused.status == 400, refused.body
    assert refused.body["error"]["code"] == "target_not_allowed"
    assert refused.body["error"]["field"] == "target.tasks.1.target.url"
    assert refused.body["error"]["message"].startswith("task 'peek': ")
    assert item_counts(dynamodb) == before
