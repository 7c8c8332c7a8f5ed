"""The README works as printed: its local commands, read from the README at test time, run in order through
bash against a fresh `tickwork local`.

Every fenced ```sh block is split into commands. The ones a reader runs on a laptop (the quick start and the
tour's `curl` examples) run one by one, in a shell that keeps what the previous ones exported, each of which
must exit 0, and each `curl` in which must get a 2xx answer. Placeholders such as ``<the token>`` and
``<job id>`` are filled from what the stack and the earlier commands printed, as a reader fills them. What is
not run is named below with the reason, and a skip that no longer matches the README fails the test, so the
lists stay true as the README changes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tickwork_local.stack import free_port

from tests.e2e.conftest import Local, start_local, stop_local, wait_for

pytestmark = pytest.mark.e2e

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
BASH = shutil.which("bash") or "/bin/bash"
SHELL_LANGUAGES = {"sh", "bash", "shell"}

# Sections whose commands need more than a laptop; nothing in them runs.
SKIPPED_SECTIONS = {
    "Deploy": "needs an AWS account: make build, npm ci, npx cdk bootstrap and deploy, the deployed tenants "
    "table and the deployed API",
}

# Commands that do not run, by a pattern searched in the command, with why.
SKIPPED_COMMANDS = {
    r"^make test\b": "the test environment already installed everything and runs the suite (this test in it)",
    r"^make run\b": "starts `tickwork local` for good: replaced by the stack this test starts on a free port "
    "and a temporary data directory (as tests/e2e/conftest.py starts it)",
}

# Commands that start a server the reader leaves running in another terminal: started in the background,
# and stopped with Ctrl-C (SIGINT) at the end.
BACKGROUND_COMMANDS = {
    r"\btickwork receive\b": "the webhook receiver of the quick start's second terminal",
}

# Where the reader's machine and the test's differ: the README's addresses are the defaults, and this test
# listens on free ports so that it can run beside anything else.
DEFAULT_API_URL = "http://127.0.0.1:8000"
RECEIVER_ADDRESSES = ("127.0.0.1:9000", "--port 9000")

# The sections (by the start of their ``## `` heading) whose commands a reader runs on a laptop. A section
# with commands in neither this list nor SKIPPED_SECTIONS fails the test before anything runs: say which.
LOCAL_SECTIONS = ("Two commands", "Quick start", "A short tour")
# Of those, the ones that must have run something, so that a renamed heading cannot quietly skip them.
MUST_RUN = ("Quick start", "A short tour")

COMMAND_SECONDS = 60
DELIVERY_SECONDS = 25

# Every `curl` reports its HTTP status on stderr, after whatever the README asked it to print.
CURL_STATUS = "readme-test-http-status"
PREAMBLE = f"""set -o pipefail
curl() {{ command curl --write-out '%{{stderr}}\\n{CURL_STATUS} %{{http_code}}\\n' "$@"; }}
"""

PLACEHOLDER = re.compile(r"<([A-Za-z][^<>\n]*[A-Za-z])>")
LEARNED = {
    "job id": (re.compile(r"^job_id\s+(\S+)$", re.MULTILINE), re.compile(r'"job_id":\s*"([^"]+)"')),
    "run id": (re.compile(r"^(\S+:\d+)\s", re.MULTILINE), re.compile(r"^run_id\s+(\S+)$", re.MULTILINE)),
}
BANNER_TENANT = re.compile(r"^tenant (\S+): token (\S+) signing secret (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Command:
    section: str
    text: str


def sh_blocks(markdown: str) -> Iterator[tuple[str, str]]:
    """(section, block) for each fenced ```sh (or bash, or shell) block, under the ``## `` heading it
    follows; a block indented in a list item loses that indentation."""
    section = ""
    language: str | None = None  # inside a fence: its language ("" for none)
    indent = ""
    block: list[str] = []
    for line in markdown.splitlines():
        stripped = line.strip()
        if language is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif stripped.startswith("```"):
                language, indent, block = stripped[3:].strip(), line[: len(line) - len(line.lstrip())], []
        elif stripped == "```":
            if language in SHELL_LANGUAGES:
                yield section, "\n".join(block)
            language = None
        else:
            block.append(line.removeprefix(indent))


def complete(text: str) -> bool:
    """Whether bash reads ``text`` as whole commands: no trailing ``\\``, open quote or unfinished loop."""
    if text.rstrip().endswith("\\"):
        return False
    filled = PLACEHOLDER.sub("placeholder", text)  # "<job id>" reads as redirections
    return subprocess.run([BASH, "-n", "-c", filled], capture_output=True, check=False).returncode == 0


def split_commands(block: str) -> list[str]:
    """A block's commands, as bash reads them: a command runs on over lines ending in ``\\``, inside an
    open quote or up to the end of a compound command; comment and blank lines between commands are
    dropped."""
    commands: list[str] = []
    lines: list[str] = []
    for line in block.splitlines():
        lines.append(line)
        text = "\n".join(lines)
        if not complete(text):
            continue
        if shlex.split(text, comments=True):
            commands.append(text.strip())
        lines = []
    assert not lines, "a command in the README never ends (an open quote?):\n" + "\n".join(lines)
    return commands


def readme_commands(markdown: str) -> list[Command]:
    return [
        Command(section, text) for section, block in sh_blocks(markdown) for text in split_commands(block)
    ]


def skip_reason(command: Command, used: set[str]) -> str | None:
    for section, reason in SKIPPED_SECTIONS.items():
        if command.section.startswith(section):
            used.add(section)
            return reason
    for pattern, reason in SKIPPED_COMMANDS.items():
        if re.search(pattern, command.text):
            used.add(pattern)
            return reason
    return None


@dataclass
class Background:
    text: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def line_with(self, text: str) -> str | None:
        return next((line for line in self.output if text in line), None)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass
class Reader:
    """The reader's shell: what they exported, and what they have read off their screens."""

    local: Local
    receiver_port: int
    environment: dict[str, str]
    known: dict[str, str]
    env_file: Path
    background: list[Background] = field(default_factory=list)

    def fill(self, text: str) -> str:
        text = text.replace(DEFAULT_API_URL, self.local.url)
        for address in RECEIVER_ADDRESSES:
            text = text.replace(address, address.replace("9000", str(self.receiver_port)))

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            assert name in self.known, (
                f"the README uses <{name}> before anything printed it, or the test does not know where to "
                f"read it (known: {sorted(self.known)})"
            )
            return self.known[name]

        return PLACEHOLDER.sub(value, text)

    def run(self, text: str) -> subprocess.CompletedProcess[str]:
        script = (
            f"{PREAMBLE}{text}\n__readme_status=$?\n"
            f"env -0 > {shlex.quote(str(self.env_file))}\nexit $__readme_status\n"
        )
        done = subprocess.run(
            [BASH, "-c", script],
            cwd=REPOSITORY,
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        exported = self.env_file.read_text().split("\0") if self.env_file.exists() else []
        self.environment = {
            name: value
            for name, _, value in (item.partition("=") for item in exported if "=" in item)
            if name not in {"_", "SHLVL", "PWD", "OLDPWD"}
        } or self.environment
        for name, patterns in LEARNED.items():
            for pattern in patterns:
                found = pattern.search(done.stdout)
                if found:
                    self.known[name] = found.group(1)
                    break
        return done

    def start(self, text: str) -> Background:
        process = subprocess.Popen(
            [BASH, "-c", f"exec {text}"],
            cwd=REPOSITORY,
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


def check(command: Command, text: str, done: subprocess.CompletedProcess[str]) -> None:
    shown = f"README command ({command.section}):\n{text}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, f"exit {done.returncode}: " + shown
    statuses = re.findall(rf"{CURL_STATUS} (\d{{3}})", done.stderr)
    if re.search(r"(^|[\s;|&(])curl\s", text):
        assert statuses, "curl reported no HTTP status (does the command set its own --write-out?): " + shown
    for status in statuses:
        assert status.startswith("2"), f"HTTP {status}: " + shown


def creates_a_job_for(text: str, port: int) -> bool:
    return f"127.0.0.1:{port}" in text and ("jobs create" in text or "/v1/jobs" in text)


def delivered(receiver: Background) -> None:
    """The README: "The receiver prints a line per fire, with its lag and `signature verified`"."""
    line = wait_for(lambda: receiver.line_with("signature verified"), timeout=DELIVERY_SECONDS)
    assert line and "lag_ms=" in line, "no verified delivery at the receiver:\n" + "".join(receiver.output)


def run_in_order(reader: Reader, commands: list[Command], used: set[str]) -> list[Command]:
    ran: list[Command] = []
    for command in commands:
        reason = skip_reason(command, used)
        if reason is not None:
            print(f"skipped: {command.text.splitlines()[0]}\n  because {reason}")
            continue
        text = reader.fill(command.text)
        ran.append(command)
        if any(re.search(pattern, text) for pattern in BACKGROUND_COMMANDS):
            reader.start(text)
            continue
        check(command, text, reader.run(text))
        receivers = [started for started in reader.background if "receive" in started.text]
        if receivers and creates_a_job_for(text, reader.receiver_port):
            delivered(receivers[0])
    for started in reader.background:
        assert started.process.poll() is None, f"`{started.text}` stopped:\n" + "".join(started.output)
    return ran


def test_the_readme_local_commands_work_as_printed(tmp_path: Path) -> None:
    commands = readme_commands(README.read_text())
    unclassified = {
        command.section
        for command in commands
        if not command.section.startswith((*LOCAL_SECTIONS, *SKIPPED_SECTIONS))
    }
    assert not unclassified, f"README sections with commands the test neither runs nor skips: {unclassified}"
    assert (REPOSITORY / ".venv" / "bin" / "tickwork").exists(), "the README's .venv/bin/tickwork is missing"
    local = start_local(tmp_path / "data", tenants=None)
    try:
        banner = BANNER_TENANT.search("".join(local.output))
        assert banner, "the banner shows no tenant token and signing secret:\n" + "".join(local.output)
        environment = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("TICKWORK_", "AWS_")) and name not in {"API", "TOKEN"}
        }
        # The CLI's default address is the README's; the test's stack is elsewhere.
        environment["TICKWORK_API_URL"] = local.url
        known = {"the token": banner.group(2), "the signing secret": banner.group(3)}
        reader = Reader(local, free_port(), environment, known, tmp_path / "environment")
        used: set[str] = set()
        try:
            ran = run_in_order(reader, commands, used)
        finally:
            for started in reader.background:
                started.stop()
    finally:
        took = stop_local(local)
    skips = set(SKIPPED_SECTIONS) | set(SKIPPED_COMMANDS)
    assert used == skips, f"skips that match nothing in the README any more: {sorted(skips - used)}"
    for section in MUST_RUN:
        assert any(command.section.startswith(section) for command in ran), f"nothing ran from {section!r}"
    for pattern in BACKGROUND_COMMANDS:
        assert any(re.search(pattern, command.text) for command in ran), f"nothing matched {pattern!r}"
    # The README: "Ctrl-C stops it within a few seconds."
    assert local.process.returncode == 0, "tickwork local did not stop cleanly"
    assert took < 5, f"stopping took {took:.1f} s"


def test_commands_are_split_as_bash_reads_them() -> None:
    markdown = """intro
## Quick start

1. Start it:

   ```sh
   make run   # a comment
   # output, shown as a comment
   ```

```python
print("not shell")
```

## Tour

```sh
curl -X POST "$API/v1/jobs" -d '{
  "name": "x # not a comment"
}'
.venv/bin/tickwork jobs create --name a \\
  --rate 10s
for name in a b; do
  echo "$name"
done
```
"""
    assert readme_commands(markdown) == [
        Command("Quick start", "make run   # a comment"),
        Command("Tour", 'curl -X POST "$API/v1/jobs" -d \'{\n  "name": "x # not a comment"\n}\''),
        Command("Tour", ".venv/bin/tickwork jobs create --name a \\\n  --rate 10s"),
        Command("Tour", 'for name in a b; do\n  echo "$name"\ndone'),
    ]
