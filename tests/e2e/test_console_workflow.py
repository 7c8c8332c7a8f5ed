"""A workflow run in the console, in Debian's Chromium driven by Playwright, against `tickwork local`, at a
desktop's width and a phone's: its page draws the workflow's tasks as a graph, each task a box with its
status (WAITING while it has no run), attempts and times, an arrow from each task to each task that depends
on it; a table lists the same tasks; a task's box opens the task's run, which leads back to the workflow run.

The scene is a diamond whose tasks stand in four statuses at once: `extract` SUCCEEDED (a webhook answering
200), `transform_b` DEAD after two attempts (a webhook answering 500), `transform_a` RUNNING (a pool task
claimed through the API and held), and `load` WAITING on both (no run yet: it runs once both have ended,
however they end)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import wait_for
from tests.e2e.test_console import (  # noqa: F401 - fixtures
    ARRIVAL_MS,
    Stack,
    assert_fits,
    browser,
    page,
    phone,
    playwright,
    shoot,
    sign_in,
    stack,
    title,
)

# Seconds for the scene's tasks to reach their statuses on the local stack.
SCENE_SECONDS = 60
WORKER = "etl-host-1"
EDGES = {
    ("extract", "transform_a"),
    ("extract", "transform_b"),
    ("transform_a", "load"),
    ("transform_b", "load"),
}
STATUSES = {"extract": "SUCCEEDED", "transform_a": "RUNNING", "transform_b": "DEAD", "load": "WAITING"}


def run_path(run_id: str) -> str:
    return quote(run_id, safe="")


def diamond(on: Stack, name: str, pool: str) -> dict[str, Any]:
    hook = {"type": "http", "timeout_seconds": 10}
    job: dict[str, Any] = on.api(
        "POST",
        "/v1/jobs",
        {
            "name": name,
            "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Paris"},
            "target": {
                "type": "workflow",
                "failure_mode": "continue",
                "tasks": [
                    {"id": "extract", "target": {**hook, "url": on.receiver.url(f"/{name}/extract")}},
                    {
                        "id": "transform_a",
                        "target": {"type": "pool", "pool": pool},
                        "depends_on": ["extract"],
                    },
                    {
                        "id": "transform_b",
                        "target": {**hook, "url": on.receiver.url(f"/{name}/transform_b")},
                        "retry": {"max_attempts": 2, "initial_delay_seconds": 0},
                        "depends_on": ["extract"],
                    },
                    {
                        "id": "load",
                        "target": {**hook, "url": on.receiver.url(f"/{name}/load")},
                        "depends_on": ["transform_a", "transform_b"],
                        "trigger_rule": "all_done",
                    },
                ],
            },
        },
    )
    return job


def tasks_of(on: Stack, run_id: str) -> dict[str, dict[str, Any]]:
    tasks = on.api("GET", f"/v1/runs/{run_path(run_id)}")["tasks"] or []
    return {task["task_id"]: task for task in tasks}


@pytest.fixture(scope="module")
def scene(stack: Stack) -> dict[str, Any]:  # noqa: F811 - the fixture
    """The diamond's workflow run, its tasks in four statuses; `transform_a` is held by WORKER throughout."""
    name, pool = "diamond", "etl-diamond"
    stack.receiver.script[f"/{name}/transform_b"] = [500, 500]
    job = diamond(stack, name, pool)
    run = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "diamond"})

    def claimed() -> dict[str, Any] | None:
        answer = stack.api("POST", f"/v1/pools/{pool}/claim", {"worker_id": WORKER, "wait_seconds": 2})
        return answer["runs"][0] if answer["runs"] else None

    held: dict[str, Any] | None = wait_for(claimed, timeout=SCENE_SECONDS)
    assert held is not None, tasks_of(stack, run["run_id"])
    assert held["run_id"] == f"{run['run_id']}/transform_a"

    def settled() -> dict[str, dict[str, Any]] | None:
        tasks = tasks_of(stack, run["run_id"])
        found = {task_id: task["status"] for task_id, task in tasks.items()}
        return tasks if found == {k: v for k, v in STATUSES.items() if v != "WAITING"} else None

    tasks: dict[str, dict[str, Any]] | None = wait_for(settled, timeout=SCENE_SECONDS)
    assert tasks is not None, {k: v["status"] for k, v in tasks_of(stack, run["run_id"]).items()}
    assert tasks["transform_b"]["attempt"] == 2
    return {"job": job, "run": run, "tasks": tasks, "held": held}


def node(view: Page, task_id: str) -> Any:
    return view.get_by_role("group", name="task graph").locator(f".dag-node[data-task-id={task_id}]")


# The ends of each arrow, and each node's box, in the page's coordinates.
GEOMETRY = """() => {
  const graph = document.querySelector('[aria-label="task graph"]');
  const boxes = {};
  for (const element of graph.querySelectorAll(".dag-node")) {
    const box = element.getBoundingClientRect();
    boxes[element.dataset.taskId] = { left: box.left, top: box.top, right: box.right, bottom: box.bottom };
  }
  const edges = [];
  for (const path of graph.querySelectorAll("path.dag-edge")) {
    const matrix = path.getScreenCTM();
    const at = (length) => {
      const point = path.getPointAtLength(length);
      return { x: matrix.a * point.x + matrix.e, y: matrix.d * point.y + matrix.f };
    };
    const end = at(path.getTotalLength());
    edges.push({ from: path.dataset.from, to: path.dataset.to, start: at(0), end });
  }
  return { boxes, edges };
}"""


def distance(point: dict[str, float], box: dict[str, float]) -> float:
    """How far a point is from a box (0 on or inside it)."""
    dx = max(box["left"] - point["x"], 0.0, point["x"] - box["right"])
    dy = max(box["top"] - point["y"], 0.0, point["y"] - box["bottom"])
    return float((dx * dx + dy * dy) ** 0.5)


def assert_edges_join_their_nodes(view: Page) -> None:
    """Each arrow starts at its parent's box and ends at its child's, and at no other box."""
    found = view.evaluate(GEOMETRY)
    boxes, edges = found["boxes"], found["edges"]
    assert {(edge["from"], edge["to"]) for edge in edges} == EDGES
    assert len(edges) == len(EDGES)
    for edge in edges:
        near_start = [task for task, box in boxes.items() if distance(edge["start"], box) <= 3]
        near_end = [task for task, box in boxes.items() if distance(edge["end"], box) <= 3]
        assert near_start == [edge["from"]], (edge, boxes)
        assert near_end == [edge["to"]], (edge, boxes)


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_workflow_runs_page_draws_its_tasks_with_their_statuses_and_dependencies(
    request: pytest.FixtureRequest,
    stack: Stack,  # noqa: F811 - the fixture
    scene: dict[str, Any],
    width: str,
) -> None:
    view: Page = request.getfixturevalue("page" if width == "desktop" else "phone")
    run_id = scene["run"]["run_id"]
    # When the workflow run's page is opened
    sign_in(view)
    view.goto(f"/runs/{run_path(run_id)}")

    # Then the graph shows every task with its status, as a word and not only as a colour
    expect(title(view)).to_contain_text("RUNNING")
    graph = view.get_by_role("group", name="task graph")
    expect(graph.locator(".dag-node")).to_have_count(4, timeout=ARRIVAL_MS)
    for task_id, status in STATUSES.items():
        expect(node(view, task_id)).to_have_attribute("data-status", status)
        expect(node(view, task_id).locator(".status")).to_have_text(status)
        expect(node(view, task_id).locator(".dag-id")).to_have_text(task_id)
    # with its attempts and times; the waiting task has no run, so no link and no times
    expect(node(view, "transform_b")).to_contain_text("attempt 2")
    expect(node(view, "extract")).to_contain_text("attempt 1")
    expect(node(view, "extract").locator("time")).to_have_count(2)
    expect(node(view, "transform_a").locator("time")).to_have_count(1)  # started, not finished
    expect(node(view, "load")).to_contain_text("not started")
    expect(node(view, "load")).not_to_have_attribute("href", re.compile("."))
    expect(view.locator("[data-field=task-counts]")).to_have_text(
        re.compile(r"^4 tasks: (?=.*1 SUCCEEDED)(?=.*1 RUNNING)(?=.*1 DEAD)(?=.*1 WAITING)")
    )
    # And an arrow runs from each task to each task that depends on it, from box to box
    expect(graph.locator("path.dag-edge")).to_have_count(len(EDGES))
    assert_edges_join_their_nodes(view)
    # layers left to right on a desktop; on a phone, top to bottom, within the screen's width
    expect(graph).to_have_attribute("data-direction", "LR" if width == "desktop" else "TB")
    boxes = view.evaluate(GEOMETRY)["boxes"]
    axis, other = ("left", "top") if width == "desktop" else ("top", "left")
    layers = [boxes[task][axis] for task in ("extract", "transform_a", "transform_b", "load")]
    assert layers[0] < layers[1] == layers[2] < layers[3], layers
    assert boxes["transform_a"][other] != boxes["transform_b"][other]
    # And the table lists the same tasks with their statuses and what each depends on
    rows = view.get_by_role("table", name="tasks").locator("tbody tr")
    expect(rows).to_have_count(4)
    for task_id, status in STATUSES.items():
        expect(view.locator(f"table[aria-label=tasks] tr[data-task-id={task_id}]")).to_contain_text(status)
    expect(view.locator("table[aria-label=tasks] tr[data-task-id=load]")).to_contain_text("transform_a")
    expect(view.locator("table[aria-label=tasks] tr[data-task-id=transform_b]")).to_contain_text("http_500")
    if width == "phone":
        assert_fits(view, "workflow run")
    shoot(stack, view, f"workflow-run-{width}")

    # When a task's box is pressed, its run opens (its id's "/" encoded in the path)
    node(view, "transform_b").click()
    task_run = f"{run_id}/transform_b"
    expect(view).to_have_url(re.compile(re.escape(f"/runs/{run_path(task_run)}") + "$"))
    expect(title(view)).to_contain_text("DEAD")
    expect(title(view)).to_contain_text(task_run.split(":", 1)[1])
    expect(view.get_by_role("table", name="attempts").locator("tbody tr")).to_have_count(2)
    if width == "phone":
        assert_fits(view, "task run")
    # And it leads back to its workflow run
    view.locator(".crumbs").get_by_role("link", name=re.compile("^workflow run")).click()
    expect(view).to_have_url(re.compile(re.escape(f"/runs/{run_path(run_id)}") + "$"))
    expect(node(view, "load")).to_have_attribute("data-status", "WAITING")


def test_a_task_runs_page_opens_from_its_address_and_the_graph_follows_the_run(
    stack: Stack,  # noqa: F811 - the fixture
    page: Page,  # noqa: F811 - the fixture
) -> None:
    """A task run's address reloads (the gateway answers it with the console), and the workflow run's graph
    follows the run as its tasks end: the waiting task gets a run, and a link."""
    name, pool = "diamond-live", "etl-live"
    stack.receiver.script[f"/{name}/transform_b"] = [500, 500]
    job = diamond(stack, name, pool)
    run = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "live"})
    run_id = run["run_id"]

    def claimed() -> dict[str, Any] | None:
        answer = stack.api("POST", f"/v1/pools/{pool}/claim", {"worker_id": WORKER, "wait_seconds": 2})
        return answer["runs"][0] if answer["runs"] else None

    held: dict[str, Any] | None = wait_for(claimed, timeout=SCENE_SECONDS)
    assert held is not None, tasks_of(stack, run_id)
    sign_in(page)
    # A task's run, by its address
    page.goto(f"/runs/{run_path(held['run_id'])}")
    expect(title(page)).to_contain_text("RUNNING")
    expect(title(page)).to_contain_text("/transform_a")
    # The workflow run: load waits until transform_b has ended too
    page.goto(f"/runs/{run_path(run_id)}")
    expect(node(page, "transform_b")).to_have_attribute("data-status", "DEAD", timeout=ARRIVAL_MS)
    expect(node(page, "load")).to_have_attribute("data-status", "WAITING")
    # When the held task completes, load's parents have all ended, so load runs
    stack.api(
        "POST",
        f"/v1/runs/{run_path(held['run_id'])}/complete",
        {"lease_token": held["lease_token"], "output": {"rows": 3}},
    )
    # Then the page follows: transform_a SUCCEEDED, load SUCCEEDED with a link to its run, and the run
    # FAILED (a task of it did)
    expect(node(page, "transform_a")).to_have_attribute("data-status", "SUCCEEDED", timeout=ARRIVAL_MS)
    expect(node(page, "load")).to_have_attribute("data-status", "SUCCEEDED", timeout=ARRIVAL_MS)
    expect(node(page, "load")).to_have_attribute("href", f"/runs/{run_path(run_id + '/load')}")
    expect(title(page)).to_contain_text("FAILED", timeout=ARRIVAL_MS)
    assert stack.api("GET", f"/v1/runs/{run_path(run_id)}")["status"] == "FAILED"


def test_a_failed_workflow_run_is_retried_from_its_page_and_its_graph_follows_the_tasks_run_again(
    stack: Stack,  # noqa: F811 - the fixture
    page: Page,  # noqa: F811 - the fixture
) -> None:
    """Retry on a FAILED workflow run's page reopens it: its failed and cancelled tasks run again, and the
    graph follows them to SUCCEEDED while the tasks that succeeded keep their first run. A task's own run
    offers no Retry (the API refuses it alone), on its page (it leads to its workflow run) or in the
    dead-letter view."""
    # Given the diamond under fail_fast, transform_b failing once (a permanent 404, then 200)
    name = "diamond-retry"
    stack.receiver.script[f"/{name}/transform_b"] = [404, 200]
    hook = {"type": "http", "timeout_seconds": 10}

    def task(task_id: str, *parents: str) -> dict[str, Any]:
        url = stack.receiver.url(f"/{name}/{task_id}")
        return {"id": task_id, "target": {**hook, "url": url}, "depends_on": list(parents)}

    tasks = [
        task("extract"),
        task("transform_a", "extract"),
        task("transform_b", "extract"),
        task("load", "transform_a", "transform_b"),
    ]
    job = stack.api(
        "POST",
        "/v1/jobs",
        {
            "name": name,
            "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Paris"},
            "target": {"type": "workflow", "tasks": tasks},
        },
    )
    run_id = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "retry"})[
        "run_id"
    ]

    def failed() -> dict[str, Any] | None:
        run: dict[str, Any] = stack.api("GET", f"/v1/runs/{run_path(run_id)}")
        return run if run["status"] == "FAILED" else None

    before = wait_for(failed, timeout=SCENE_SECONDS)
    assert before is not None, tasks_of(stack, run_id)
    first = {task["task_id"]: task for task in before["tasks"]}
    assert (first["transform_b"]["status"], first["transform_b"]["error_code"]) == ("FAILED", "http_404")
    assert first["load"]["status"] == "CANCELLED"
    assert first["extract"]["status"] == "SUCCEEDED"
    # transform_a starts with transform_b: it finishes, or is cancelled had it not started yet
    assert first["transform_a"]["status"] in ("SUCCEEDED", "CANCELLED")
    kept = [task_id for task_id in ("extract", "transform_a") if first[task_id]["status"] == "SUCCEEDED"]

    # The dead-letter view offers Retry on the workflow run, not on its task's run (refused alone)
    sign_in(page)
    page.get_by_role("navigation", name="sections").get_by_role("link", name="Dead letters").click()
    workflow_row = page.locator(f"tr[data-run-id='{run_id}']")
    task_row = page.locator(f"tr[data-run-id='{run_id}/transform_b']")
    expect(workflow_row).to_contain_text("FAILED", timeout=ARRIVAL_MS)
    expect(task_row).to_contain_text("FAILED", timeout=ARRIVAL_MS)
    expect(task_row.get_by_role("button", name="Retry")).to_have_count(0)
    workflow_row.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("dialog")).to_contain_text("runs again its failed and cancelled tasks")
    page.get_by_role("dialog").get_by_role("button", name="Keep it").click()
    assert stack.api("GET", f"/v1/runs/{run_path(run_id)}")["status"] == "FAILED"

    # A task's failed run offers no Retry of its own: it leads to its workflow run
    page.goto(f"/runs/{run_path(run_id + '/transform_b')}")
    expect(title(page)).to_contain_text("FAILED")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    page.get_by_role("link", name="Retried with its workflow run").click()
    expect(page).to_have_url(re.compile(re.escape(f"/runs/{run_path(run_id)}") + "$"))

    # The workflow run's page shows the failure
    expect(title(page)).to_contain_text("FAILED")
    expect(node(page, "transform_b")).to_have_attribute("data-status", "FAILED", timeout=ARRIVAL_MS)
    expect(node(page, "load")).to_have_attribute("data-status", "CANCELLED")
    end_of = {task_id: first[task_id]["finished_at"] for task_id in kept}
    for task_id in kept:
        expect(node(page, task_id).locator("time").nth(1)).to_have_attribute("datetime", end_of[task_id])

    # When it is retried, after reading what a retry of a workflow run does
    page.get_by_role("button", name="Retry").click()
    dialog = page.get_by_role("dialog", name="Retry this run?")
    expect(dialog).to_contain_text("failed and cancelled tasks run again")
    dialog.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_contain_text("Retry queued")

    # Then the graph follows the tasks run again to SUCCEEDED, and the run ends SUCCEEDED
    expect(title(page)).to_contain_text("SUCCEEDED", timeout=ARRIVAL_MS)
    for task_id in ("extract", "transform_a", "transform_b", "load"):
        expect(node(page, task_id)).to_have_attribute("data-status", "SUCCEEDED", timeout=ARRIVAL_MS)
    expect(page.locator("[data-field=task-counts]")).to_have_text("4 tasks: 4 SUCCEEDED")
    # transform_b ran again, as its second attempt; load ran for the first time, and links to its run
    expect(node(page, "transform_b").locator("[data-field=attempts]")).to_have_text("attempt 2")
    expect(node(page, "load").locator("[data-field=attempts]")).to_have_text("attempt 1")
    expect(node(page, "load")).to_have_attribute("href", f"/runs/{run_path(run_id + '/load')}")
    # while the tasks that had succeeded kept their first run: one attempt, the same end
    for task_id in kept:
        expect(node(page, task_id).locator("[data-field=attempts]")).to_have_text("attempt 1")
        expect(node(page, task_id).locator("time").nth(1)).to_have_attribute("datetime", end_of[task_id])
    expect(page.get_by_role("region", name="summary")).to_contain_text("Manual retries")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    called = {task_id: len(stack.receiver.for_path(f"/{name}/{task_id}")) for task_id in first}
    assert called == {"extract": 1, "transform_a": 1, "transform_b": 2, "load": 1}
