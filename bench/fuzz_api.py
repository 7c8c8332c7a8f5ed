"""Fuzz the local stack's HTTP API from ``docs/openapi.json`` with schemathesis.

    python -m bench.fuzz_api                       # 1,000+ requests, seed 1
    python -m bench.fuzz_api --requests 200 --seed 7 --json out.json

A fresh local stack (``tickwork_local.stack.LocalStack``: moto's server, the real gateway, authorizer, API
handler, planner and workers) starts in this process on a free loopback port. Every operation of the
document is fuzzed with schemathesis' generated requests, valid ones and ones that break the schema, with
``Authorization: Bearer`` set (and about one request in ten without it); path ids are random or name a real
job and run of the tenant. Each response must not be a 5xx, and every 4xx must carry the error shape
``{"error": {"code", "message", "field"}}``. A 429 (the tenant's API rate limit) is an acceptable 4xx: the
run waits out its ``Retry-After`` and goes on.

It prints a markdown summary (requests per operation, status counts, failures with a curl command that
reproduces each) and exits 1 on any failure. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "docs" / "openapi.json"
TENANT = "fuzz"
TOKEN = "tw_fuzz_token"  # noqa: S105 - a local stack's made-up token
# The fuzz tenant's API rate limit, raised so 429s do not starve the run (they are still handled).
REQUESTS_PER_SECOND = 1000
UNAUTHENTICATED_EVERY = 10
ERROR_KEYS = frozenset({"code", "message", "field"})
REQUEST_TIMEOUT_SECONDS = 30
MAX_RATE_LIMIT_WAITS = 50


@dataclass
class Failure:
    operation: str
    status: int | None
    problem: str
    curl: str


@dataclass
class FuzzReport:
    seed: int
    requests: Counter[str] = field(default_factory=Counter)
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    unauthenticated: int = 0
    rate_limited_waits: int = 0
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def server_errors(self) -> int:
        return sum(count for by in self.statuses.values() for status, count in by.items() if status >= 500)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "requests": self.total,
            "operations": len(self.requests),
            "requests_by_operation": dict(self.requests),
            "statuses": {op: {str(s): n for s, n in sorted(by.items())} for op, by in self.statuses.items()},
            "unauthenticated": self.unauthenticated,
            "rate_limited_waits": self.rate_limited_waits,
            "server_errors": self.server_errors,
            "failures": [failure.__dict__ for failure in self.failures],
            "seconds": round(self.seconds, 1),
        }

    def markdown(self) -> str:
        totals: Counter[int] = Counter()
        for by in self.statuses.values():
            totals.update(by)
        lines = [
            "## API fuzz (schemathesis against the local stack)",
            "",
            f"`python -m bench.fuzz_api --requests {self.total} --seed {self.seed}`: {self.total} requests "
            f"over {len(self.requests)} operations in {self.seconds:.0f} s ({self.unauthenticated} without "
            "the tenant's token, "
            f"{self.rate_limited_waits} waits on a 429); server errors: {self.server_errors}; "
            f"failures: {len(self.failures)}.",
            "",
            "| operation | requests | statuses |",
            "|---|---:|---|",
        ]
        for operation in sorted(self.requests):
            statuses = ", ".join(
                f"{status}: {count}" for status, count in sorted(self.statuses[operation].items())
            )
            lines.append(f"| `{operation}` | {self.requests[operation]} | {statuses} |")
        lines.append(
            f"| all | {self.total} | "
            + ", ".join(f"{status}: {count}" for status, count in sorted(totals.items()))
            + " |"
        )
        if self.failures:
            lines += ["", "### Failures", ""]
            for failure in self.failures[:50]:
                lines += [
                    f"- `{failure.operation}` answered {failure.status}: {failure.problem}",
                    "",
                    f"  ```sh\n  {failure.curl}\n  ```",
                ]
        return "\n".join(lines) + "\n"


def error_shape_problem(body: Any) -> str | None:
    """Why a 4xx body is not ``{"error": {"code", "message", "field"}}``, or None when it is."""
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return f"the body is not an error object: {str(body)[:200]}"
    error = body["error"]
    missing = ERROR_KEYS - set(error)
    if missing:
        return f"the error lacks {sorted(missing)}: {str(body)[:200]}"
    if not isinstance(error["code"], str) or not error["code"]:
        return "the error code is not a non-empty string"
    if not isinstance(error["message"], str) or not error["message"]:
        return "the error message is not a non-empty string"
    if error["field"] is not None and not isinstance(error["field"], str):
        return "the error field is neither a string nor null"
    return None


class Fuzzer:
    def __init__(self, base_url: str, token: str, report: FuzzReport, *, real_ids: dict[str, str]):
        import schemathesis
        from schemathesis.core.result import Err

        self.base_url = base_url
        self.token = token
        self.report = report
        self.real_ids = real_ids
        self.schema = schemathesis.openapi.from_path(str(SCHEMA))
        self.schema.config.update(base_url=base_url)
        self.operations = []
        for result in self.schema.get_all_operations():
            if isinstance(result, Err):
                raise SystemExit(f"docs/openapi.json has an invalid operation: {result.err()}")
            self.operations.append(result.ok())
        self.sent = 0

    def run(self, total: int) -> None:
        from schemathesis import GenerationMode

        modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        variants = [
            (operation, mode, with_real_ids)
            for operation in self.operations
            for mode in modes
            for with_real_ids in ((False, True) if "{" in operation.path else (False,))
        ]
        started = time.monotonic()
        round_number = 0
        # Rounds of a few examples per variant, new seeds each round, until the budget is spent: small
        # operations (no parameters) repeat, large ones keep finding new inputs.
        while self.sent < total and round_number < 1000:
            per_variant = max(1, min(25, (total - self.sent) // len(variants)))
            for index, (operation, mode, with_real_ids) in enumerate(variants):
                seed = self.report.seed * 100_003 + round_number * 997 + index
                self.fuzz(operation, mode, with_real_ids, per_variant, seed)
            round_number += 1
        self.report.seconds = time.monotonic() - started

    def fuzz(self, operation: Any, mode: Any, with_real_ids: bool, examples: int, seed: int) -> None:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as seeded
        from hypothesis.errors import FailedHealthCheck, Unsatisfiable

        overrides: dict[str, Any] = {}
        if with_real_ids:
            overrides["path_parameters"] = {
                name: self.real_ids[name]
                for name in ("job_id", "run_id")
                if "{" + name + "}" in operation.path
            }
        try:
            strategy = operation.as_strategy(generation_mode=mode, **overrides)
        except Exception as error:  # an operation schemathesis cannot generate negative cases for
            print(f"skipped {operation.label} ({mode.value}): {type(error).__name__}", file=sys.stderr)
            return

        @seeded(seed)
        @settings(
            max_examples=examples,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def send(case: Any) -> None:
            self.send(operation.label, case)

        try:
            send()
        except (Unsatisfiable, FailedHealthCheck):
            # Nothing left to generate: a negative case of an operation with nothing to break, or a
            # variant whose every input was drawn before. Other variants carry the budget.
            return

    def send(self, label: str, case: Any) -> None:
        authenticated = self.sent % UNAUTHENTICATED_EVERY != UNAUTHENTICATED_EVERY - 1
        headers = {"Authorization": f"Bearer {self.token}"} if authenticated else {}
        if not authenticated and case.headers:
            case.headers.pop("Authorization", None)
        for _ in range(MAX_RATE_LIMIT_WAITS):
            self.sent += 1
            self.report.requests[label] += 1
            try:
                response = case.call(base_url=self.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)
            except Exception as error:
                self.fail(label, None, f"no response: {type(error).__name__}: {error}", case, headers)
                return
            # Negative cases may drop or replace the header themselves: count what was really sent.
            self.report.unauthenticated += not self.sent_token(response)
            status = response.status_code
            self.report.statuses[label][status] += 1
            if status == 429:
                self.report.rate_limited_waits += 1
                problem = error_shape_problem(self.body_of(response))
                if problem:
                    self.fail(label, status, problem, case, headers)
                    return
                time.sleep(min(2.0, float(response.headers.get("Retry-After", ["1"])[0] or 1)))
                continue
            self.check(label, status, response, case, headers)
            return

    def sent_token(self, response: Any) -> bool:
        return bool(response.request.headers.get("Authorization") == f"Bearer {self.token}")

    @staticmethod
    def body_of(response: Any) -> Any:
        try:
            return json.loads(response.content or b"null")
        except ValueError:
            return response.content[:200]

    def check(self, label: str, status: int, response: Any, case: Any, headers: dict[str, str]) -> None:
        if status >= 500:
            self.fail(label, status, f"server error: {str(self.body_of(response))[:300]}", case, headers)
        elif 400 <= status < 500:
            problem = error_shape_problem(self.body_of(response))
            if status == 401 and self.sent_token(response):
                problem = "refused the tenant's valid token"
            if problem:
                self.fail(label, status, problem, case, headers)

    def fail(self, label: str, status: int | None, problem: str, case: Any, headers: dict[str, str]) -> None:
        curl = case.as_curl_command(headers=headers, base_url=self.base_url)
        self.report.failures.append(Failure(label, status, problem, curl))


def seed_real_ids(base_url: str, token: str) -> dict[str, str]:
    """A real job (far ahead, so it never fires) and a manual run of it, for ids the fuzz can hit."""
    import urllib.request

    def call(method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{base_url}{path}", data=data, method=method)  # noqa: S310 - loopback
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:  # noqa: S310
            return json.loads(response.read())

    job = call(
        "POST",
        "/v1/jobs",
        {
            "name": "fuzz-target",
            "schedule": {"type": "cron", "expression": "0 0 1 1 *", "timezone": "Europe/Paris"},
            # Port 9 (discard) on loopback: a manual run fails fast and stays on this machine.
            "target": {"type": "http", "url": "http://127.0.0.1:9/fuzz", "timeout_seconds": 1},
            "retry": {"max_attempts": 1},
        },
    )
    run = call("POST", f"/v1/jobs/{job['job_id']}/trigger")
    return {"job_id": job["job_id"], "run_id": run["run_id"]}


@contextmanager
def local_stack() -> Iterator[str]:
    """A fresh local stack in a thread of this process, on a free loopback port; yields its URL."""
    from tickwork_local.stack import running_in_thread

    directory = tempfile.mkdtemp(prefix="tickwork-fuzz-")
    try:
        with running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": f"{TENANT}:{TOKEN}", "POWERTOOLS_LOG_LEVEL": "ERROR"},
            log_file=os.path.join(directory, "tickwork.log"),
            tick_seconds=1.0,
            workers=2,
        ) as stack:
            raise_rate_limit()
            yield f"http://127.0.0.1:{stack.port}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def raise_rate_limit() -> None:
    from tickwork.runtime import runtime

    current = runtime()
    tenant = current.tenants.get(TENANT)
    raised = tenant.model_copy(update={"api_requests_per_second": REQUESTS_PER_SECOND})
    current.tenants.put(raised, token=TOKEN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000, help="at least this many requests in total")
    parser.add_argument("--seed", type=int, default=1, help="hypothesis seed, for a repeatable run")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))

    report = FuzzReport(seed=args.seed)
    with local_stack() as base_url:
        real_ids = seed_real_ids(base_url, TOKEN)
        fuzzer = Fuzzer(base_url, TOKEN, report, real_ids=real_ids)
        fuzzer.run(args.requests)
    missing = {operation.label for operation in fuzzer.operations} - set(report.requests)
    for label in sorted(missing):
        report.failures.append(Failure(label, None, "never exercised", ""))
    print(report.markdown())
    if args.json:
        Path(args.json).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
