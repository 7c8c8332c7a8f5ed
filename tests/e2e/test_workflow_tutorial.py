"""The workflow tutorial works as printed: docs/workflow-tutorial.md, read at test time, followed in order
against a fresh `tickwork local`, as tests/e2e/test_readme.py follows the README.

The page's files (a fenced block after "Save this as `name`") are saved in a temporary directory, its
```sh commands run there one by one through bash (each must exit 0; what one exports, the next sees), the
steps' server it starts in a second terminal runs in the background, and each ```text block it shows as
output is checked against what was printed: after a command, its lines (but ``...``) appear in that
command's output; after "The second terminal printed", they are the lines the steps' server printed, in
order but for the two transforms; after "In the second terminal, the retry", they appear in that order
among the lines printed since `runs retry`. Ids, instants and durations are compared as shapes. A
`runs get` the page says to run again while the run has not ended is run again (as a reader would) while
its status is not an end. Then what the page says of each run is checked: the first SUCCEEDED with its
four tasks (through the API); the second FAILED with transform_b FAILED (http_404) and load CANCELLED and
never called (as its trigger printed it), then, retried, SUCCEEDED (through the API) with transform_b and
load called once more, extract not again, and transform_a only had it been cancelled.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tickwork_local.stack import free_port

from tests.e2e.conftest import Local, start_local, stop_local, wait_for
from tests.e2e.test_readme import (
    BANNER_TENANT,
    BASH,
    PLACEHOLDER,
    PREAMBLE,
    REPOSITORY,
    Background,
    Command,
    check,
    split_commands,
)

pytestmark = pytest.mark.e2e

TUTORIAL = REPOSITORY / "docs" / "workflow-tutorial.md"
SAVE_AS = re.compile(r"Save this as `([^`]+)`:\s*$")
STEPS_OUTPUT = "The second terminal printed"
STEPS_RETRIED = "In the second terminal, the retry"
RETRY_COMMAND = re.compile(r"\bruns retry\b")
# The page says to look again while the retried run has not ended: `runs retry` has no --wait.
RUN_AGAIN_UNTIL_ENDED = re.compile(r"\bruns get\b")
NOT_ENDED = re.compile(r"^status\s+(PLANNED|ENQUEUED|RUNNING|RETRY_WAIT)$", re.MULTILINE)
# The page says transform_a finishes in the failing run, or is cancelled had it not started yet (rare: it
# starts with transform_b, which fails in milliseconds): its tree line may then read CANCELLED.
MAY_BE_CANCELLED = re.compile(r"^(\W*transform_a)  SUCCEEDED  ")
SKIPPED_COMMANDS = {
    r"^make run\b": "starts `tickwork local` for good: replaced by the stack this test starts on a free port",
}
BACKGROUND_COMMANDS = {r"\betl_steps\.py\b": "the steps' server of the tutorial's second terminal"}
DEFAULT_API_URL = "http://127.0.0.1:8000"
STEPS_PORT = "9000"
TICKWORK = ".venv/bin/tickwork"
COMMAND_SECONDS = 60
TASKS = ("extract", "transform_a", "transform_b", "load")

# What varies between the page's run and this one: ids, hashes and instants are compared as shapes.
SHAPES = (
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<ulid>"),
    (re.compile(r":m:[0-9a-f]{32}"), ":m:<hash>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<instant>"),
    (re.compile(r"\btook (\d+ ms|\d+\.\ds|\w+)"), "took <duration>"),
)


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    text: str
    lead: str
    """The paragraph of prose before the block, on one line."""


def blocks(markdown: str) -> Iterator[Block]:
    section = ""
    paragraph: list[str] = []  # the last paragraph of prose
    ended = True  # a blank line ended it: the next line of prose starts another
    language: str | None = None
    lines: list[str] = []
    for line in markdown.splitlines():
        if language is not None:
            if line.startswith("```"):
                yield Block(section, language, "\n".join(lines), " ".join(paragraph))
                language, paragraph = None, []
            else:
                lines.append(line)
        elif line.startswith("## "):
            section, paragraph = line[3:].strip(), []
        elif line.startswith("```"):
            language, lines = line[3:].strip(), []
        elif not line.strip():
            ended = True
        else:
            paragraph = [line.strip()] if ended else [*paragraph, line.strip()]
            ended = False


def shape(text: str) -> str:
    for pattern, replacement in SHAPES:
        text = pattern.sub(replacement, text)
    return text.rstrip()


@dataclass
class Reader:
    """The reader's three terminals: their shell's environment, what they read off the screens."""

    local: Local
    directory: Path
    steps_port: int
    environment: dict[str, str]
    known: dict[str, str]
    run_ids: list[str] = field(default_factory=list)
    background: list[Background] = field(default_factory=list)
    last_command: str = ""
    last_output: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    """The first output that printed each run id, by run id."""
    steps_at_retry: int | None = None
    """How many lines the steps' server had printed when `runs retry` ran."""

    def fill(self, text: str) -> str:
        text = text.replace(DEFAULT_API_URL, self.local.url)
        text = text.replace(f"127.0.0.1:{STEPS_PORT}", f"127.0.0.1:{self.steps_port}")
        text = text.replace(f"etl_steps.py {STEPS_PORT}", f"etl_steps.py {self.steps_port}")
        text = text.replace(TICKWORK, str(REPOSITORY / TICKWORK))

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            assert name in self.known, f"the tutorial uses <{name}> before anything printed it"
            return self.known[name]

        return PLACEHOLDER.sub(value, text)

    def run(self, text: str) -> subprocess.CompletedProcess[str]:
        if RETRY_COMMAND.search(text):
            self.steps_at_retry = len(self.steps_lines())
        saved = self.directory / ".environment"
        script = f"{PREAMBLE}{text}\n__status=$?\nenv -0 > {shlex.quote(str(saved))}\nexit $__status\n"
        done = subprocess.run(
            [BASH, "-c", script],
            cwd=self.directory,
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        exported = saved.read_text().split("\0") if saved.exists() else []
        self.environment = {
            name: value
            for name, _, value in (item.partition("=") for item in exported if "=" in item)
            if name not in {"_", "SHLVL", "PWD", "OLDPWD"}
        } or self.environment
        found = re.search(r"^run_id\s+(\S+)$", done.stdout, re.MULTILINE)
        if found:
            self.known["run id"] = found.group(1)
            if found.group(1) not in self.run_ids:
                self.run_ids.append(found.group(1))
                self.outputs[found.group(1)] = done.stdout
        self.last_command, self.last_output = text, done.stdout
        return done

    def start(self, text: str) -> Background:
        process = subprocess.Popen(
            [BASH, "-c", f"exec {text}"],
            cwd=self.directory,
            env={**self.environment, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started = Background(text, process)
        threading.Thread(target=started.read, daemon=True).start()
        self.background.append(started)
        assert wait_for(lambda: started.output or process.poll() is not None, timeout=COMMAND_SECONDS)
        assert process.poll() is None, f"`{text}` exited:\n{''.join(started.output)}"
        return started

    def steps_lines(self) -> list[str]:
        [steps] = self.background
        return [line.rstrip("\n") for line in steps.output if line.startswith("/")]


def check_shown_output(reader: Reader, block: Block) -> None:
    expected = [shape(reader.fill(line)) for line in block.text.splitlines() if line.strip() != "..."]
    if block.lead.startswith(STEPS_OUTPUT):
        printed = [shape(line) for line in reader.steps_lines()]
        assert len(printed) == len(expected), (
            f"the steps printed:\n{printed}\nthe tutorial shows:\n{expected}"
        )
        assert printed[0] == expected[0] and printed[-1] == expected[-1], printed
        assert sorted(printed[1:-1]) == sorted(expected[1:-1]), printed
        return
    if block.lead.startswith(STEPS_RETRIED):
        assert reader.steps_at_retry is not None, "the tutorial shows the retry's steps before it retries"
        since = [shape(line) for line in reader.steps_lines()[reader.steps_at_retry :]]
        found = iter(since)
        assert all(line in found for line in expected), (
            f"the steps printed since the retry:\n{since}\nthe tutorial shows, in this order:\n{expected}"
        )
        return
    if RUN_AGAIN_UNTIL_ENDED.search(reader.last_command) and NOT_ENDED.search(reader.last_output):
        command = reader.last_command
        wait_for(lambda: not NOT_ENDED.search(reader.run(command).stdout), timeout=COMMAND_SECONDS)
    output = [shape(line) for line in reader.last_output.splitlines()]
    missing = [line for line in expected if not printed_as_shown(line, output)]
    assert not missing, (
        f"shown in the tutorial ({block.section}) but not printed: {missing}\n{reader.last_output}"
    )


def printed_as_shown(line: str, output: list[str]) -> bool:
    if line in output:
        return True
    cancelled = MAY_BE_CANCELLED.match(line)
    if cancelled is None:
        return False
    return any(printed.startswith(f"{cancelled.group(1)}  CANCELLED  0 attempts") for printed in output)


def follow(reader: Reader, page: str, used: set[str]) -> None:
    for block in blocks(page):
        saved_as = SAVE_AS.search(block.lead)
        if saved_as:
            (reader.directory / saved_as.group(1)).write_text(reader.fill(block.text) + "\n")
        elif block.language == "text":
            check_shown_output(reader, block)
        elif block.language == "sh":
            for text in split_commands(block.text):
                skipped = [pattern for pattern in SKIPPED_COMMANDS if re.search(pattern, text)]
                if skipped:
                    used.update(skipped)
                    continue
                filled = reader.fill(text)
                if any(re.search(pattern, filled) for pattern in BACKGROUND_COMMANDS):
                    reader.start(filled)
                    continue
                check(Command(block.section, text), filled, reader.run(filled))


def task_statuses(reader: Reader, run_id: str) -> tuple[str, dict[str, dict[str, Any]]]:
    status, run = reader.local.call("GET", f"/v1/runs/{run_id}", token=reader.known["the token"])
    assert status == 200, run
    return run["status"], {task["task_id"]: task for task in run["tasks"]}


def test_the_workflow_tutorial_works_as_printed(tmp_path: Path) -> None:
    page = TUTORIAL.read_text()
    local = start_local(tmp_path / "data", tenants=None)
    try:
        banner = BANNER_TENANT.search("".join(local.output))
        assert banner, "the banner shows no tenant token:\n" + "".join(local.output)
        environment = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("TICKWORK_", "AWS_")) and name not in {"API", "TOKEN"}
        }
        environment["TICKWORK_API_URL"] = local.url  # the CLI's default address is the page's
        directory = tmp_path / "reader"
        directory.mkdir()
        reader = Reader(local, directory, free_port(), environment, {"the token": banner.group(2)})
        used: set[str] = set()
        try:
            follow(reader, page, used)
            steps = reader.steps_lines()
        finally:
            for started in reader.background:
                started.stop()

        assert used == set(SKIPPED_COMMANDS), "a skip that matches nothing in the tutorial any more"
        assert sorted(path for path in os.listdir(directory) if not path.startswith(".")) == sorted(
            ["etl_steps.py", "etl.yaml"]
        )
        first, second = reader.run_ids  # "Run it", then "When a step fails"
        # 4. Run it: the run SUCCEEDED, every task too
        status, tasks = task_statuses(reader, first)
        assert status == "SUCCEEDED"
        assert {task_id: task["status"] for task_id, task in tasks.items()} == dict.fromkeys(
            TASKS, "SUCCEEDED"
        )
        # 5. each step once: four lines for the first run (checked against the page above)
        in_first = [line for line in steps if f"{first}/" in line]
        assert len(in_first) == 4
        load = json.loads(next(line for line in in_first if line.startswith("/load ")).split(" ", 1)[1])
        assert load["parents"] == {"transform_a": {"total": 14}, "transform_b": {"largest": 5}}
        # 7. When a step fails: --wait exits with 4, transform_b FAILED (404), load CANCELLED, never called
        # (what the trigger printed; the API shows the run as retried since)
        failed = reader.outputs[second]
        assert "exit code 4" in failed
        assert re.search(r"^status\s+FAILED$", failed, re.MULTILINE), failed
        assert re.search(r"^\W*transform_b  FAILED  1 attempt  .*  http_404$", failed, re.MULTILINE), failed
        assert re.search(r"^\W*load  CANCELLED  0 attempts  ", failed, re.MULTILINE), failed
        # transform_a starts with transform_b: it finishes (cancelled only had it not started yet)
        a_cancelled = re.search(r"^\W*transform_a  CANCELLED  0 attempts  ", failed, re.MULTILINE)
        assert a_cancelled or re.search(r"^\W*transform_a  SUCCEEDED  ", failed, re.MULTILINE), failed
        assert reader.steps_at_retry is not None
        first_go = steps[: reader.steps_at_retry]
        in_second = sorted(line.split(" ", 1)[0] for line in first_go if f"{second}/" in line)
        called_a = [] if a_cancelled else ["/transform_a"]
        assert in_second == sorted(["/extract", "/transform_c", *called_a])
        # 8. Retry the failed run: it SUCCEEDED, transform_b (as its second attempt, at /transform_b again)
        # and load called once each, extract not again, transform_a only had it been cancelled
        status, tasks = task_statuses(reader, second)
        assert status == "SUCCEEDED"
        assert {task_id: task["status"] for task_id, task in tasks.items()} == dict.fromkeys(
            TASKS, "SUCCEEDED"
        )
        assert tasks["transform_b"]["attempt"] == 2
        retried = [line for line in steps[reader.steps_at_retry :] if f"{second}/" in line]
        called_again = ["/transform_a"] if a_cancelled else []
        assert sorted(line.split(" ", 1)[0] for line in retried) == sorted(
            ["/transform_b", "/load", *called_again]
        )
        load = json.loads(next(line for line in retried if line.startswith("/load ")).split(" ", 1)[1])
        assert load["parents"] == {"transform_a": {"total": 14}, "transform_b": {"largest": 5}}
    finally:
        took = stop_local(local)
    assert local.process.returncode == 0 and took < 5
