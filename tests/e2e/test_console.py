"""The web console in a real browser: Debian's Chromium, headless, driven by Playwright, against
`tickwork local`.

A local stack of its own runs for the module (``start_local`` of the e2e fixtures, two tenants), with a
loopback webhook receiver. Through the console only, as a person would: sign in, create a job and watch its
runs arrive, pause it; resume, trigger and cancel another; retry a dead run from the dead-letter view and
read its attempts; read the health page; see the API's refusals under the fields they name. The API is
called directly only to set the scene (a job whose target fails) and to check what the console did.

Every page must load nothing from another origin and log no error (a Content-Security-Policy violation is
one). Screenshots of each page go to a temporary directory, or to ``TICKWORK_CONSOLE_SCREENSHOTS``
(`make screenshots` writes docs/console/). The tests skip only when Chromium is not installed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    Response,
    ViewportSize,
    expect,
    sync_playwright,
)
from tickwork_local.console import CONSOLE_DIST, Console

from tests.e2e.conftest import TOKENS, Local, start_local, stop_local, wait_for
from tests.support.engine import Receiver

CHROMIUM = Path(os.environ.get("TICKWORK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = "TICKWORK_CONSOLE_SCREENSHOTS"
VIEWPORT: ViewportSize = {"width": 1280, "height": 860}
PHONE: ViewportSize = {"width": 375, "height": 740}
# Runs arrive on the wall clock: the first fire of a 2-second rate, a retry, a poll of the page.
ARRIVAL_MS = 20_000

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CHROMIUM.is_file(),
        reason=f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; .ci/run does)",
    ),
]


@dataclass
class Stack:
    local: Local
    receiver: Receiver
    shots: Path

    @property
    def url(self) -> str:
        return self.local.url

    def api(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        status, answer = self.local.call(method, path, body=body, **options)
        assert 200 <= status < 300, (status, answer)
        return answer

    def job(self, name: str, path: str, **spec: Any) -> dict[str, Any]:
        body = {
            "name": name,
            "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Paris"},
            "target": {"type": "http", "url": self.receiver.url(path)},
            **spec,
        }
        job: dict[str, Any] = self.api("POST", "/v1/jobs", body)
        return job


# Chromium logs every 4xx answer; the API's are expected (a wrong token, a name taken), and checked by the
# tests. A console file that fails to load is caught by `Watched.response` instead.
API_REFUSAL = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d")


@dataclass
class Watched:
    """What a page did that it must not: log an error (a refused Content-Security-Policy is one), fail to
    load a console file, or ask another origin for anything."""

    origin: str
    errors: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and not API_REFUSAL.match(message.text):
            self.errors.append(message.text)

    def response(self, response: Response) -> None:
        if response.status >= 400 and not response.url.startswith(self.origin + "/v1/"):
            self.errors.append(f"{response.status} for {response.url}")

    def request(self, request: Request) -> None:
        if not request.url.startswith(self.origin + "/") and not request.url.startswith("data:"):
            self.elsewhere.append(request.url)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not Console.from_environment().built:
        pytest.fail(f"the web console is not built in {CONSOLE_DIST}: run `make console` (Node.js and npm)")
    shots = Path(os.environ.get(SCREENSHOTS) or tmp_path_factory.mktemp("console-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    tenants = ",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items())
    local = start_local(tmp_path_factory.mktemp("console-local"), tenants=tenants)
    try:
        with Receiver() as receiver:
            yield Stack(local, receiver, shots)
    finally:
        stop_local(local)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Browser, stack: Stack) -> Iterator[Page]:
    yield from watched_page(browser, stack, VIEWPORT)


@pytest.fixture
def phone(browser: Browser, stack: Stack) -> Iterator[Page]:
    """A page as wide as a small phone's (375 CSS pixels)."""
    yield from watched_page(browser, stack, PHONE)


def watched_page(browser: Browser, stack: Stack, viewport: ViewportSize) -> Iterator[Page]:
    context = browser.new_context(base_url=stack.url, viewport=viewport)
    context.set_default_timeout(10_000)
    opened = context.new_page()
    watched = Watched(stack.url)
    context.on("console", watched.console)
    context.on("request", watched.request)
    context.on("response", watched.response)
    opened.on("pageerror", lambda error: watched.errors.append(str(error)))
    yield opened
    context.close()
    assert watched.errors == [], watched.errors
    assert watched.elsewhere == [], watched.elsewhere


def sign_in(page: Page, tenant: str = "acme") -> None:
    page.goto("/sign-in")
    page.get_by_label("Tenant token").fill(TOKENS[tenant])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/jobs$"))


def shoot(stack: Stack, page: Page, name: str, *, full_page: bool = True) -> None:
    path = stack.shots / f"{name}.png"
    page.mouse.move(0, (page.viewport_size or VIEWPORT)["height"] - 1)  # no hover effect in the picture
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size > 10_000, path


def field_error(page: Page, field_name: str) -> Any:
    return page.locator(f"[data-field={field_name}] .field-error")


def title(page: Page) -> Any:
    return page.get_by_role("heading", level=1)


def runs_table(page: Page) -> Any:
    return page.get_by_role("table", name="runs")


# Every element wider than the viewport or reaching past its right edge, described; and the document's width.
TOO_WIDE = """() => {
  const width = window.innerWidth;
  const wide = [];
  for (const element of document.querySelectorAll("*")) {
    const right = element.getBoundingClientRect().right;
    if (right > width + 0.5) {
      const label = element.getAttribute("aria-label") || element.getAttribute("class") || "";
      wide.push(`${element.tagName.toLowerCase()}[${label}] to ${Math.round(right)}`);
    }
  }
  const text = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(node);
    const right = range.getBoundingClientRect().right;
    if (right > width + 0.5) text.push(`${node.textContent.slice(0, 40)} to ${Math.round(right)}`);
  }
  return { width, scrollWidth: document.documentElement.scrollWidth, wide, text };
}"""


def assert_fits(page: Page, where: str) -> None:
    """Nothing on the page reaches past the viewport's right edge: the page never scrolls sideways."""
    found = page.evaluate(TOO_WIDE)
    assert found["scrollWidth"] <= found["width"], (
        where,
        found["scrollWidth"],
        found["wide"][:12],
        found["text"][:12],
    )
    assert found["wide"] == [], (where, found["wide"][:12])


# --- tests -------------------------------------------------------------------------------------------------
def test_the_built_page_runs_no_inline_script() -> None:
    """The Content-Security-Policy allows scripts from the origin only; the page's own must be files."""
    if not Console.from_environment().built:
        pytest.fail(f"the web console is not built in {CONSOLE_DIST}: run `make console`")

    class Scripts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[dict[str, str | None]] = []
            self.inline = False
            self.styles = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "script":
                self.found.append(dict(attrs))
            self.styles += tag == "style" or any(name == "style" for name, _ in attrs)
            self.inline |= any(name.startswith("on") for name, _ in attrs)

    parser = Scripts()
    parser.feed((CONSOLE_DIST / "index.html").read_text())
    assert parser.found and all((script.get("src") or "").startswith("/assets/") for script in parser.found)
    assert not parser.inline and parser.styles == 0


def test_sign_in_checks_the_token_and_keeps_it_in_this_tab_only(page: Page, stack: Stack) -> None:
    # Given a visitor who is not signed in
    page.goto("/jobs")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Fjobs$"))
    shoot(stack, page, "sign-in")
    # When a wrong token is pasted, the API's refusal shows under the field
    page.get_by_label("Tenant token").fill("tw_not_a_token")
    page.get_by_role("button", name="Sign in").click()
    expect(field_error(page, "token")).to_have_text("the API refused this token")
    # When the tenant's token is pasted, the console opens where the visitor was going
    page.get_by_label("Tenant token").fill(TOKENS["acme"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/jobs$"))
    expect(title(page)).to_have_text("Jobs")
    # Then the token is in this tab's sessionStorage, nowhere else
    assert page.evaluate("sessionStorage.getItem('tickwork.token')") == TOKENS["acme"]
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    other = page.context.new_page()
    other.goto("/jobs")
    expect(other).to_have_url(re.compile(r"/sign-in"))
    other.close()
    # And signing out forgets it
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/sign-in$"))
    assert page.evaluate("sessionStorage.getItem('tickwork.token')") is None


def test_a_job_created_in_the_console_runs_and_is_paused(page: Page, stack: Stack) -> None:
    sign_in(page)
    # Given the create form, whose preview reads the schedule as it is typed
    page.get_by_role("link", name="New job").click()
    expect(page).to_have_url(re.compile(r"/jobs/new$"))
    preview = page.get_by_role("region", name="schedule preview")
    page.get_by_label("Cron expression").fill("61 * * * *")
    expect(field_error(page, "expression")).to_contain_text("minute value 61 is out of range")
    page.get_by_label("Cron expression").fill("*/15 9-17 * * 1-5")
    page.get_by_label("Time zone").fill("Europe/Paris")
    expect(preview).to_contain_text("Every 15 minutes, between 09:00 and 17:59, Monday through Friday")
    expect(field_error(page, "expression")).to_have_count(0)
    # When a job firing every 2 seconds is filled in and saved
    page.get_by_label("Name").fill("console-heartbeat")
    page.get_by_label("Schedule", exact=True).select_option("rate")
    page.get_by_label("Every", exact=True).fill("2")
    expect(preview).to_contain_text("Every 2 seconds")
    expect(preview.locator("ol.fires li")).to_have_count(5)
    page.get_by_label("Webhook URL").fill(stack.receiver.url("/console-heartbeat"))
    page.get_by_label("Payload (JSON, optional)").fill('{"from": "the console"}')
    page.get_by_label("Priority").select_option("high")
    shoot(stack, page, "new-job")
    page.get_by_role("button", name="Create job").click()
    # Then its page opens, with the schedule in words and the next fires
    expect(page).to_have_url(re.compile(r"/jobs/[0-9A-Z]{26}$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(title(page)).to_contain_text("console-heartbeat")
    expect(title(page)).to_contain_text("ACTIVE")
    expect(page.get_by_text("priority high")).to_be_visible()
    expect(page.get_by_test_id("schedule-description")).to_have_text("Every 2 seconds")
    expect(page.get_by_role("list", name="next fires").locator("li")).to_have_count(5)
    # And its runs appear as they happen, delivered with the payload
    succeeded = runs_table(page).locator("tbody tr", has_text="SUCCEEDED")
    expect(succeeded.nth(2)).to_be_visible(timeout=ARRIVAL_MS)
    delivered = stack.receiver.for_path("/console-heartbeat")
    assert delivered and delivered[0].json()["payload"] == {"from": "the console"}
    assert delivered[0].json()["job_id"] == job_id
    expect(page.locator(".chart-canvas canvas").first).to_be_visible()
    shoot(stack, page, "job")

    # When it is paused with a reason, after a change of mind
    page.get_by_role("button", name="Pause").click()
    dialog = page.get_by_role("dialog", name="Pause console-heartbeat?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_have_count(0)
    assert stack.api("GET", f"/v1/jobs/{job_id}")["status"] == "ACTIVE"
    page.get_by_role("button", name="Pause").click()
    dialog.get_by_label("Reason (kept with the job)").fill("receiver maintenance")
    shoot(stack, page, "pause-dialog", full_page=False)  # the backdrop covers the viewport only
    dialog.get_by_role("button", name="Pause").click()
    # Then the job is paused, with the reason and who paused it
    expect(title(page)).to_contain_text("PAUSED")
    expect(page.get_by_test_id("pause")).to_contain_text("receiver maintenance")
    job = stack.api("GET", f"/v1/jobs/{job_id}")
    assert job["status"] == "PAUSED"
    assert job["pause"]["reason"] == "receiver maintenance"
    assert job["pause"]["paused_by"].startswith("acme:")


def test_resume_trigger_and_cancel_each_ask_first(page: Page, stack: Stack) -> None:
    job = stack.job("console-actions", "/console-actions")
    stack.api("POST", f"/v1/jobs/{job['job_id']}/pause", {"reason": "set up"})
    sign_in(page)
    page.goto(f"/jobs/{job['job_id']}")
    heading = title(page)
    expect(heading).to_contain_text("console-actions")
    expect(heading).to_contain_text("PAUSED")
    expect(page.get_by_test_id("schedule-description")).to_contain_text("At 02:00")
    # Resume
    page.get_by_role("button", name="Resume").click()
    page.get_by_role("dialog").get_by_role("button", name="Resume").click()
    expect(heading).to_contain_text("ACTIVE")
    expect(page.get_by_role("list", name="next fires").locator("li")).to_have_count(5)
    # Trigger: a manual run, delivered at once
    page.get_by_role("button", name="Trigger now").click()
    page.get_by_role("dialog").get_by_role("button", name="Trigger").click()
    expect(page.get_by_role("status")).to_contain_text("Triggered: run")
    manual = runs_table(page).locator("tbody tr", has_text="manual")
    expect(manual.first).to_contain_text("SUCCEEDED", timeout=ARRIVAL_MS)
    assert len(stack.receiver.for_path("/console-actions")) == 1
    # Cancel, after a change of mind
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_role("dialog").get_by_role("button", name="Keep it").click()
    assert stack.api("GET", f"/v1/jobs/{job['job_id']}")["status"] == "ACTIVE"
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel job").click()
    expect(heading).to_contain_text("CANCELLED")
    expect(page.get_by_role("toolbar", name="job actions").get_by_role("button")).to_have_count(0)
    assert stack.api("GET", f"/v1/jobs/{job['job_id']}")["status"] == "CANCELLED"


def test_a_dead_run_is_retried_from_the_dead_letter_view_and_its_attempts_read(
    page: Page, stack: Stack
) -> None:
    # Given a job whose target fails twice (a 500 each time: retryable) with two attempts allowed, then
    # recovers; a run of it is dead
    stack.receiver.script["/nightly-export"] = [500, 500, 200]
    job = stack.job(
        "nightly-export", "/nightly-export", retry={"max_attempts": 2, "initial_delay_seconds": 0}
    )
    run = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "dead-letter"})
    run_id = run["run_id"]
    sign_in(page)
    # When the dead-letter view is opened
    page.get_by_role("navigation", name="sections").get_by_role("link", name="Dead letters").click()
    row = page.locator(f"tr[data-run-id='{run_id}']")
    expect(row).to_contain_text("DEAD", timeout=ARRIVAL_MS)
    expect(row).to_contain_text("nightly-export")
    expect(row).to_contain_text("http_500")
    shoot(stack, page, "dead-letters")
    # And the run is retried, after a change of mind
    row.get_by_role("button", name="Retry").click()
    page.get_by_role("dialog").get_by_role("button", name="Keep it").click()
    assert stack.api("GET", f"/v1/runs/{quote(run_id, safe='')}")["status"] == "DEAD"
    row.get_by_role("button", name="Retry").click()
    page.get_by_role("dialog", name="Retry this run?").get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_contain_text("Retrying")
    # Then it leaves the dead letters, and its page shows every attempt with its error, on a timeline
    expect(row).to_have_count(0, timeout=ARRIVAL_MS)
    page.get_by_role("status").get_by_role("link").click()
    expect(page).to_have_url(re.compile("/runs/" + re.escape(quote(run_id, safe=""))))
    expect(title(page)).to_contain_text("SUCCEEDED", timeout=ARRIVAL_MS)
    attempts = page.get_by_role("table", name="attempts").locator("tbody tr")
    expect(attempts).to_have_count(3)
    for number in (1, 2):
        expect(attempts.nth(number - 1)).to_contain_text("retryable_error")
        expect(attempts.nth(number - 1)).to_contain_text("http_500")
    expect(attempts.nth(2)).to_contain_text("succeeded")
    expect(page.get_by_role("img", name="attempts on a timeline").locator("rect")).to_have_count(3)
    expect(page.get_by_role("region", name="summary")).to_contain_text("Manual retries")
    shoot(stack, page, "run")
    stored = stack.api("GET", f"/v1/runs/{quote(run_id, safe='')}")
    assert stored["status"] == "SUCCEEDED"
    assert stored["manual_retries"] == 1
    assert [attempt["outcome"] for attempt in stored["attempts"]] == [
        "retryable_error",
        "retryable_error",
        "succeeded",
    ]


def test_the_health_page_shows_the_stats_and_the_lag_over_time(page: Page, stack: Stack) -> None:
    # Given at least one run in the last hour, and a job that names a concurrency key
    job = stack.job("console-health", "/console-health")
    stack.job("console-keyed", "/console-keyed", concurrency_key="console-db", max_concurrency=3)
    run = stack.api("POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": "health"})
    assert wait_for(
        lambda: stack.api("GET", f"/v1/runs/{quote(run['run_id'], safe='')}")["status"] == "SUCCEEDED",
        timeout=ARRIVAL_MS / 1000,
    )
    sign_in(page)
    page.get_by_role("navigation", name="sections").get_by_role("link", name="Health").click()
    # Then the lag percentiles, the queue depth and the counts show, and the lag history is charted
    expect(page.locator(".tile[data-metric=p50] strong")).to_have_text(re.compile(r"^\d+(\.\d+)? (ms|s)$"))
    expect(page.locator(".tile[data-metric=queue_depth] strong")).to_have_text(re.compile(r"^\d+$"))
    expect(page.get_by_role("region", name="Jobs by status")).to_contain_text("ACTIVE")
    expect(page.get_by_role("region", name=re.compile("Runs by status"))).to_contain_text("SUCCEEDED")
    history = page.get_by_role("region", name="lag history")
    expect(history.locator("canvas").first).to_be_visible()
    expect(history).to_contain_text(re.compile(r"From \d+ runs"))
    # And flow control: the tenant's running, waiting and throttled runs, its limits, and each key's counts
    flow = page.get_by_role("region", name="flow control")
    for metric in ("running", "waiting", "throttled"):
        expect(flow.locator(f".tile[data-metric={metric}] strong")).to_have_text(re.compile(r"^\d+\+?$"))
    expect(flow.locator("[data-field=throttle]")).to_have_text(re.compile(r"^(none|\d+/s, burst \d+)$"))
    key = flow.get_by_role("table", name="concurrency keys").locator("tr[data-key=console-db]")
    expect(key.locator("[data-field=max]")).to_have_text("3")
    expect(key.locator("[data-field=running]")).to_have_text("0")
    expect(key.locator("[data-field=waiting]")).to_have_text("0")
    shoot(stack, page, "health")


def test_the_job_list_filters_by_status_and_name(page: Page, stack: Stack) -> None:
    paused = stack.job("console-filter-paused", "/filter")
    stack.job("console-filter-active", "/filter")
    stack.api("POST", f"/v1/jobs/{paused['job_id']}/pause", {"reason": "filtered"})
    sign_in(page)
    rows = page.get_by_role("table", name="jobs").locator("tbody tr")
    expect(rows.filter(has_text="console-filter-")).to_have_count(2)
    shoot(stack, page, "jobs")
    page.get_by_label("Status").select_option("PAUSED")
    expect(page).to_have_url(re.compile(r"status=PAUSED"))
    expect(rows.filter(has_text="console-filter-")).to_have_count(1)
    expect(rows.filter(has_text="console-filter-").first).to_contain_text("console-filter-paused")
    page.get_by_label("Status").select_option("")
    page.get_by_label("Name").fill("filter-act")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("console-filter-active")


def test_the_apis_refusals_show_under_the_fields_they_name(page: Page, stack: Stack) -> None:
    stack.job("console-taken", "/taken")
    sign_in(page)
    page.goto("/jobs/new")
    # A time zone the API does not know: refused by the preview, before saving
    page.get_by_label("Time zone").fill("Europe/Pariss")
    expect(field_error(page, "timezone")).to_contain_text("unknown IANA time zone 'Europe/Pariss'")
    page.get_by_label("Time zone").fill("Europe/Paris")
    expect(field_error(page, "timezone")).to_have_count(0)
    # A bad name and a URL that is not http(s): each refusal under its own field
    page.get_by_label("Name").fill("not a name!")
    page.get_by_label("Webhook URL").fill("ftp://example.com/hook")
    page.get_by_role("button", name="Create job").click()
    expect(field_error(page, "name")).to_contain_text("name")
    expect(field_error(page, "url")).to_contain_text("http:// or https://")
    shoot(stack, page, "new-job-errors")
    # A name already taken: the 409 under the name
    page.get_by_label("Name").fill("console-taken")
    page.get_by_label("Webhook URL").fill(stack.receiver.url("/taken"))
    expect(field_error(page, "url")).to_have_count(0)
    page.get_by_role("button", name="Create job").click()
    expect(field_error(page, "name")).to_have_text("a job named 'console-taken' already exists")
    expect(page).to_have_url(re.compile(r"/jobs/new$"))


def test_another_tenants_job_is_not_found(page: Page, stack: Stack) -> None:
    theirs = stack.api(
        "POST",
        "/v1/jobs",
        {
            "name": "globex-only",
            "schedule": {"type": "rate", "every_seconds": 3600},
            "target": {"type": "http", "url": stack.receiver.url("/globex")},
        },
        tenant="globex",
    )
    sign_in(page, "acme")
    page.goto(f"/jobs/{theirs['job_id']}")
    expect(page.get_by_role("alert").first).to_contain_text("not_found")
    # Their console page does not 404 for an unknown console route either: it says so itself
    page.goto("/no-such-page")
    expect(title(page)).to_have_text("Not found")


def test_every_page_fits_a_phone(phone: Page, stack: Stack) -> None:
    # Given a job that has run (a lag and duration chart, a table of runs) and a dead run with a long error
    stack.receiver.script["/phone-export"] = [500]
    beat = stack.job(
        "phone-heartbeat-of-the-nightly-ledger-export",
        "/phone-heartbeat",
        schedule={"type": "rate", "every_seconds": 2},
    )
    failing = stack.job("phone-export", "/phone-export", retry={"max_attempts": 1})
    dead = stack.api("POST", f"/v1/jobs/{failing['job_id']}/trigger", headers={"Idempotency-Key": "phone"})
    # Every page, at 375 px, reaches no further than the viewport
    phone.goto("/jobs")
    expect(phone.get_by_label("Tenant token")).to_be_visible()
    assert_fits(phone, "sign-in")
    sign_in(phone)
    expect(phone.get_by_role("table", name="jobs").locator("tbody tr").first).to_be_visible()
    assert_fits(phone, "jobs")
    phone.goto("/jobs/new")
    expect(phone.get_by_role("region", name="schedule preview").locator("ol.fires li")).to_have_count(5)
    assert_fits(phone, "new job, cron")
    phone.get_by_label("Schedule", exact=True).select_option("once")
    assert_fits(phone, "new job, once")
    phone.get_by_label("Schedule", exact=True).select_option("rate")
    phone.get_by_label("Name").fill("not a name!")
    phone.get_by_label("Webhook URL").fill("ftp://example.com/hook")
    phone.get_by_role("button", name="Create job").click()
    expect(field_error(phone, "url")).to_be_visible()
    assert_fits(phone, "new job, refused")
    phone.goto(f"/jobs/{beat['job_id']}")
    expect(runs_table(phone).locator("tbody tr", has_text="SUCCEEDED").nth(2)).to_be_visible(
        timeout=ARRIVAL_MS
    )
    expect(phone.locator(".chart-canvas canvas").first).to_be_visible()
    assert_fits(phone, "job")
    shoot(stack, phone, "phone-job")
    phone.get_by_role("button", name="Pause").click()
    expect(phone.get_by_role("dialog")).to_be_visible()
    assert_fits(phone, "pause dialog")
    phone.get_by_role("dialog").get_by_role("button", name="Pause").click()
    expect(title(phone)).to_contain_text("PAUSED")
    assert_fits(phone, "job, paused")
    phone.goto("/runs")
    row = phone.locator(f"tr[data-run-id='{dead['run_id']}']")
    expect(row).to_contain_text("http_500", timeout=ARRIVAL_MS)
    assert_fits(phone, "dead letters")
    shoot(stack, phone, "phone-dead-letters")
    phone.goto("/runs?status=&job=phone-export")
    expect(runs_table(phone).locator("tbody tr")).to_have_count(1)
    assert_fits(phone, "all runs of a job")
    phone.goto(f"/runs/{quote(dead['run_id'], safe='')}")
    expect(phone.get_by_role("table", name="attempts").locator("tbody tr")).to_have_count(1)
    assert_fits(phone, "run")
    phone.goto("/health")
    expect(phone.get_by_role("region", name="lag history").locator("canvas").first).to_be_visible()
    expect(
        phone.get_by_role("region", name="flow control").locator(".tile[data-metric=waiting]")
    ).to_be_visible()
    assert_fits(phone, "health")
    phone.goto("/no-such-page")
    expect(title(phone)).to_have_text("Not found")
    assert_fits(phone, "not found")


def finished(stack: Stack, run: dict[str, Any]) -> dict[str, Any]:
    """The run once it has SUCCEEDED."""
    path = f"/v1/runs/{quote(run['run_id'], safe='')}"
    assert wait_for(lambda: stack.api("GET", path)["status"] == "SUCCEEDED", timeout=ARRIVAL_MS / 1000)
    answer: dict[str, Any] = stack.api("GET", path)
    return answer


def wall_clock(instant: str, zone: str) -> str:
    """An API time as the console shows it in `zone`, without its date: "03:00:00 Europe/Paris"."""
    local = datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    return f"{local:%H:%M:%S} {zone}"


ZONED = r"^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2} "


def assert_times_in(page: Page, zone: str) -> None:
    """Every time on the page is a 24-hour wall-clock time followed by the zone it is in."""
    times = page.locator("time").all_inner_texts()
    assert times
    for text in times:
        assert re.match(ZONED + re.escape(zone) + "$", text), (text, zone)
    assert not re.search(r"\b[AP]M\b", page.locator("main").inner_text())


def test_times_are_shown_in_the_jobs_zone_and_named(page: Page, stack: Stack) -> None:
    # Given a job at 02:00 in Paris with a manual run, and a rate job (whose times are UTC's)
    paris = stack.job("console-zoned", "/console-zoned")
    run = finished(
        stack, stack.api("POST", f"/v1/jobs/{paris['job_id']}/trigger", headers={"Idempotency-Key": "zoned"})
    )
    rate = stack.job("console-zoned-rate", "/console-zoned", schedule={"type": "rate", "every_seconds": 3600})
    sign_in(page)
    # Then the job's page shows its fires at 02:00 Paris time, named so, and every other time in Paris too
    page.goto(f"/jobs/{paris['job_id']}")
    expect(page.get_by_test_id("schedule-description")).to_contain_text("At 02:00")
    fires = page.get_by_role("list", name="next fires").locator("li")
    expect(fires).to_have_count(5)
    for fire in fires.all():
        expect(fire).to_have_text(re.compile(r"^(\d{4}-\d{2}-\d{2} )?02:00:00 Europe/Paris \(in "))
    row = runs_table(page).locator(f"tr[data-run-id='{run['run_id']}']")
    expect(row).to_contain_text(wall_clock(run["scheduled_for"], "Europe/Paris"))
    expect(page.get_by_role("region", name="run history")).to_contain_text("(times in Europe/Paris)")
    assert_times_in(page, "Europe/Paris")
    # And the run's page, and the runs list, in the run's job's zone
    page.goto(f"/runs/{quote(run['run_id'], safe='')}")
    expect(page.get_by_role("region", name="summary")).to_contain_text(
        wall_clock(run["scheduled_for"], "Europe/Paris")
    )
    expect(page.get_by_role("table", name="attempts").locator("tbody tr")).to_have_count(1)
    assert_times_in(page, "Europe/Paris")
    page.goto("/runs?status=SUCCEEDED&job=console-zoned")
    expect(runs_table(page).locator(f"tr[data-run-id='{run['run_id']}']")).to_contain_text(
        wall_clock(run["scheduled_for"], "Europe/Paris")
    )
    assert_times_in(page, "Europe/Paris")
    # A rate job's times are UTC's, named UTC; so are the health page's
    page.goto(f"/jobs/{rate['job_id']}")
    expect(page.get_by_role("list", name="next fires").locator("li")).to_have_count(5)
    assert_times_in(page, "UTC")
    page.goto("/health")
    expect(page.get_by_role("region", name="lag history")).to_contain_text("(times in UTC)")


def test_runs_are_filtered_by_a_jobs_name_or_id(page: Page, stack: Stack) -> None:
    # Given two jobs with a run each; a name that a cancelled job gave up and a live job took; and a name
    # that only a cancelled job had
    first = stack.job("console-by-name", "/by-name")
    second = stack.job("console-by-name-too", "/by-name")
    old = stack.job("console-renamed", "/by-name")
    gone = stack.job("console-gone", "/by-name")
    for job in (old, gone):
        stack.api("DELETE", f"/v1/jobs/{job['job_id']}")
    new = stack.job("console-renamed", "/by-name")
    runs = {
        job["job_id"]: finished(
            stack,
            stack.api(
                "POST", f"/v1/jobs/{job['job_id']}/trigger", headers={"Idempotency-Key": job["job_id"]}
            ),
        )["run_id"]
        for job in (first, second, new)
    }
    sign_in(page)
    page.get_by_role("navigation", name="sections").get_by_role("link", name="Dead letters").click()
    page.get_by_role("link", name="All runs").click()
    rows = runs_table(page).locator("tbody tr")
    job_filter = page.get_by_role("searchbox", name="Job")
    found = page.get_by_test_id("job-filter")

    def filter_by(text: str) -> None:
        job_filter.fill(text)
        job_filter.press("Enter")

    # When the runs are filtered by a job's name, they are that job's
    filter_by("console-by-name")
    expect(page).to_have_url(re.compile(r"[?&]job=console-by-name(&|$)"))
    expect(found).to_have_text(f"Runs of job console-by-name ({first['job_id']}).")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", runs[first["job_id"]])
    # By its id, as before
    filter_by(second["job_id"])
    expect(found).to_have_text(f"Runs of job console-by-name-too ({second['job_id']}).")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", runs[second["job_id"]])
    # A name a cancelled job gave up is the live job's that has it now
    filter_by("console-renamed")
    expect(found).to_have_text(f"Runs of job console-renamed ({new['job_id']}).")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", runs[new["job_id"]])
    # A name only a cancelled job had is that job's, said to be cancelled
    filter_by("console-gone")
    expect(found).to_have_text(f"Runs of job console-gone ({gone['job_id']}, cancelled).")
    # A name no job has is said so, and no runs are listed in place of that job's
    filter_by("console-no-such-job")
    expect(found).to_have_text("No job is named “console-no-such-job”: no runs to show.")
    expect(found).to_have_attribute("role", "alert")
    expect(rows).to_have_count(0)
    expect(page.locator("p.empty")).to_have_count(0)
