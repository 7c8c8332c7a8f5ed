"""A pool run in the console, in Debian's Chromium driven by Playwright, against `tickwork local`, at a
desktop's width and a phone's: a run claimed through the API, kept alive with progress, a stage and a
checkpoint, shows them on its page with its holder, its heartbeat's age and its lease, and its Cancel button
(confirmed first) asks its worker to stop; the health page shows each pool's waiting runs.

The API is called directly as a pool worker would: to claim, heartbeat and fail the run."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_console import (  # noqa: F401 - fixtures
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

WORKER = "gpu-host-1"
# A claim waits this long (within the test client's 10 s) for the local stack to hand the run to its pool.
CLAIM_WAIT_SECONDS = 8
CLAIM_TRIES = 3


def pool_job(on: Stack, name: str, pool: str) -> dict[str, Any]:
    job: dict[str, Any] = on.api(
        "POST",
        "/v1/jobs",
        {
            "name": name,
            "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Paris"},
            "target": {"type": "pool", "pool": pool, "heartbeat_timeout_seconds": 300},
        },
    )
    return job


def claimed(on: Stack, job: dict[str, Any], pool: str, key: str) -> dict[str, Any]:
    """The job triggered, its run handed to the pool by the local stack, and claimed by WORKER."""
    on.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": key})
    for _ in range(CLAIM_TRIES):
        answer = on.api(
            "POST", f"/v1/pools/{pool}/claim", {"worker_id": WORKER, "wait_seconds": CLAIM_WAIT_SECONDS}
        )
        if answer["runs"]:
            [run] = answer["runs"]
            assert isinstance(run, dict)
            return run
    raise AssertionError(f"no run of {pool} came to claim")


def run_path(run_id: str) -> str:
    return quote(run_id, safe="")


def facts(view: Page, name: str) -> Any:
    return view.locator(f"section[aria-label=progress] [data-field={name}]")


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_a_pool_runs_page_shows_its_worker_and_its_cancel_button_asks_it_to_stop(
    request: pytest.FixtureRequest,
    stack: Stack,  # noqa: F811 - the fixture
    width: str,
) -> None:
    view: Page = request.getfixturevalue("page" if width == "desktop" else "phone")
    pool = f"gpu-{width}"
    # Given a pool run claimed by gpu-host-1, which heartbeats with progress, a stage and a long checkpoint
    job = pool_job(stack, f"train-{width}", pool)
    run = claimed(stack, job, pool, f"console-{width}")
    checkpoint = {"epoch": 3, "shards_done": list(range(200))}
    beat = stack.api(
        "POST",
        f"/v1/runs/{run_path(run['run_id'])}/heartbeat",
        {
            "lease_token": run["lease_token"],
            "progress": 0.4,
            "stage": "epoch 3 of 12",
            "checkpoint": checkpoint,
        },
    )
    assert beat["cancel_requested"] is False

    # When its page is opened
    sign_in(view)
    view.goto(f"/runs/{run_path(run['run_id'])}")

    # Then it shows the progress, the stage, the holder, the heartbeat's age, the lease and no cancel yet
    expect(title(view)).to_contain_text("RUNNING")
    expect(facts(view, "progress")).to_have_text("40%")
    expect(view.locator("section[aria-label=progress] progress")).to_have_attribute("value", "0.4")
    expect(facts(view, "stage")).to_have_text("epoch 3 of 12")
    expect(facts(view, "holder")).to_have_text(WORKER)
    expect(facts(view, "heartbeat")).to_have_text(re.compile(r"^(now|\d+ s ago)$"))
    expect(facts(view, "lease-expires")).to_contain_text(re.compile(r"\(in \d+ (s|min)\)"))
    expect(facts(view, "cancel-requested")).to_have_text("no")
    # And the long checkpoint is collapsed until asked for
    shown = view.locator("section[aria-label=progress] details.checkpoint")
    expect(shown.locator("summary")).to_contain_text("characters: show all")
    expect(shown.locator("pre")).to_be_hidden()
    shown.locator("summary").click()
    expect(shown.locator("pre")).to_be_visible()
    expect(shown.locator("pre")).to_contain_text('"shards_done"')
    if width == "phone":
        assert_fits(view, "pool run")
    shoot(stack, view, f"pool-run-{width}")

    # When Cancel is pressed, the dialog asks first; keeping it changes nothing
    view.get_by_role("button", name="Cancel", exact=True).click()
    dialog = view.get_by_role("dialog", name="Cancel this run?")
    expect(dialog).to_contain_text("asked to stop")
    if width == "phone":
        assert_fits(view, "cancel dialog")
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    assert stack.api("GET", f"/v1/runs/{run_path(run['run_id'])}")["cancel_requested"] is False
    view.get_by_role("button", name="Cancel", exact=True).click()
    view.get_by_role("dialog", name="Cancel this run?").get_by_role("button", name="Cancel run").click()

    # Then the run is asked to stop, its page says so, and its worker hears it at its next heartbeat
    expect(view.get_by_text("The run was asked to stop")).to_be_visible()
    expect(facts(view, "cancel-requested")).to_contain_text("yes")
    expect(view.get_by_role("button", name="Cancel", exact=True)).to_have_count(0)
    heard = stack.api(
        "POST", f"/v1/runs/{run_path(run['run_id'])}/heartbeat", {"lease_token": run["lease_token"]}
    )
    assert heard["cancel_requested"] is True

    # When the worker stops, failing the attempt, the run ends CANCELLED and its page shows it
    stack.api(
        "POST",
        f"/v1/runs/{run_path(run['run_id'])}/fail",
        {"lease_token": run["lease_token"], "error": {"code": "cancelled", "message": "asked to stop"}},
    )
    expect(title(view)).to_contain_text("CANCELLED")
    expect(facts(view, "holder")).to_have_text("—")
    if width == "phone":
        assert_fits(view, "cancelled pool run")


def test_a_waiting_pool_run_is_cancelled_at_once_from_its_page(
    stack: Stack,  # noqa: F811 - the fixture
    page: Page,  # noqa: F811 - the fixture
) -> None:
    job = pool_job(stack, "export-waiting", "cpu-waiting")
    run = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "waiting"})
    sign_in(page)
    page.goto(f"/runs/{run_path(run['run_id'])}")
    expect(page.locator("section[aria-label=progress] h2")).to_contain_text("cpu-waiting", timeout=20_000)
    expect(facts(page, "holder")).to_have_text("—")
    page.get_by_role("button", name="Cancel", exact=True).click()
    dialog = page.get_by_role("dialog", name="Cancel this run?")
    expect(dialog).to_contain_text("CANCELLED now")
    dialog.get_by_role("button", name="Cancel run").click()
    expect(title(page)).to_contain_text("CANCELLED")
    assert stack.api("GET", f"/v1/runs/{run_path(run['run_id'])}")["status"] == "CANCELLED"


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_health_page_shows_each_pools_waiting_runs(
    request: pytest.FixtureRequest,
    stack: Stack,  # noqa: F811 - the fixture
    width: str,
) -> None:
    view: Page = request.getfixturevalue("page" if width == "desktop" else "phone")
    pool = f"render-{width}"
    job = pool_job(stack, f"render-{width}", pool)
    run = stack.api(
        "POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": f"render-{width}"}
    )
    sign_in(view)
    view.goto("/health")
    row = view.locator(f"table[aria-label=pools] tr[data-pool={pool}]")
    expect(row.locator("[data-field=waiting]")).to_have_text("1", timeout=20_000)
    expect(row.locator("[data-field=oldest-wait]")).not_to_have_text("—")
    assert stack.api("GET", f"/v1/runs/{run_path(run['run_id'])}")["status"] == "ENQUEUED"
    if width == "phone":
        assert_fits(view, "health with pools")
    shoot(stack, view, f"health-pools-{width}")
