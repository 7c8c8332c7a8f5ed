"""Fuzz the local stack's HTTP API from ``docs/openapi.json`` with schemathesis, every check of it on.

    python -m bench.fuzz_api                                  # every phase, seed 1: 1,800 requests, 2 min
    python -m bench.fuzz_api --max-examples 5 --seed 7 --json out.json

A fresh local stack (``tickwork_local.stack.LocalStack``: moto, the real gateway, authorizer, API handler,
planner and workers) starts in this process on a free loopback port, with two tenants. schemathesis' engine
then runs what ``schemathesis run --checks all`` runs: its phases (coverage: boundary values, every
undeclared method, missing headers, wrong media types; fuzzing: generated valid and invalid requests;
stateful: chains that create a job and follow its links) and its checks on every response:

- schemathesis' own: ``not_a_server_error``, ``status_code_conformance`` (no status the document does not
  list), ``content_type_conformance``, ``response_headers_conformance``, ``response_schema_conformance``,
  ``negative_data_rejection``, ``positive_data_acceptance`` (see below), ``missing_required_header``,
  ``unsupported_method`` (405 with ``Allow``), ``allow_header_conformance``, ``ignored_auth``,
  ``ensure_resource_availability``, ``object_level_authorization`` (one tenant's job read with the other's
  token) and ``max_response_time`` (10 s; a claim, a long poll, gets its wait on top);
- tickwork's: every 4xx and 5xx is ``{"error": {"code", "message", "field"}}``, and no tenant's own token is
  answered 401.

Two checks are narrowed, each for a reason the document cannot carry (``EXCLUDED``, ``DOMAIN_RULES``):
``use_after_free`` is off, and ``positive_data_acceptance`` excuses refusals by rules JSON Schema cannot
state, counting them by code.

It prints a markdown summary (requests per operation and status, checks, excused refusals, failures with a
curl command) and exits 1 on any failure, or when fewer than ``--min-requests`` requests were sent. Nothing
leaves loopback.
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
# Two tenants: the fuzz runs as the first; object_level_authorization replays its reads as the second.
TENANTS = {"fuzz": "tw_fuzz_token", "fuzz-peer": "tw_fuzz_peer_token"}  # a local stack's made-up tokens
# The fuzz tenants' API rate limit, raised so 429s do not starve the run (one is still waited out).
REQUESTS_PER_SECOND = 1000
ERROR_KEYS = frozenset({"code", "message", "field"})
REQUEST_TIMEOUT_SECONDS = 30
DEFAULT_MAX_EXAMPLES = 40
DEFAULT_MIN_REQUESTS = 1000

# Checks of schemathesis left off, and why.
# max_response_time: 10 s, as schemathesis' own, except a claim, a long poll, gets its wait on top.
RESPONSE_LIMIT_SECONDS = 10
CLAIM_OPERATION = "POST /v1/pools/{pool}/claim"
CLAIM_DEFAULT_WAIT = 20
EXCLUDED = {
    "use_after_free": (
        "DELETE /v1/jobs/{job_id} cancels a job, and the design keeps a cancelled job readable (its status, "
        "its run history), so reading it after the DELETE answers 200, not the 404 the check expects"
    ),
}
# positive_data_acceptance: a schema-valid request may still break a rule JSON Schema cannot state. Such a
# refusal is excused, and counted, when its error code is one of these rules'. Anything else (a field
# refused that the document allows, a 400 without a rule's code) is a failure.
DOMAIN_RULES = {
    "invalid_cursor": "a cursor is a token the API issued, not any string",
    "invalid_schedule": "cron syntax, time zones, a one-time fire in the past, end after start, 1970-9999",
    "invalid_target": "a target's own rules (hosts, ARNs the deployment allows)",
    "invalid_retry_policy": "max_delay_seconds at least initial_delay_seconds",
    "idempotency_key_reused": "the same Idempotency-Key sent earlier with another request",
}
# Error codes of a rule between fields (max_concurrent_runs needs overlap_policy allow): field null.
CROSS_FIELD_CODES = frozenset({"invalid_field"})
# tickwork's own words for a bound on timestamps (1970 to 9999, UTC), which a date-time format cannot carry.
TIMESTAMP_RANGE = "timestamp must lie between"
# A PATCH merges schedule, target and retry key by key into the job's: what the merge makes is checked whole.
MERGED_SECTIONS = ("schedule", "target", "retry")
# Messages of pydantic's own type and shape errors: a refusal worded so comes from a constraint the
# document should have stated, never from a domain rule.
SCHEMA_LEVEL_MESSAGES = (
    "Input should",
    "Field required",
    "String should",
    "Value should",
    "List should",
    "Dictionary should",
    "Extra inputs",
)


@dataclass
class Failure:
    check: str
    operation: str
    status: int | None
    problem: str
    curl: str


@dataclass
class FuzzReport:
    seed: int
    max_examples: int
    requests: Counter[str] = field(default_factory=Counter)
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    phases: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    undeclared_methods: Counter[str] = field(default_factory=Counter)
    unauthenticated: int = 0
    excused: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def server_errors(self) -> int:
        return sum(count for by in self.statuses.values() for status, count in by.items() if status >= 500)

    def totals(self) -> Counter[int]:
        totals: Counter[int] = Counter()
        for by in self.statuses.values():
            totals.update(by)
        return totals

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "max_examples": self.max_examples,
            "requests": self.total,
            "operations": len(self.requests),
            "requests_by_operation": dict(self.requests),
            "statuses": {op: {str(s): n for s, n in sorted(by.items())} for op, by in self.statuses.items()},
            "phases": dict(self.phases),
            "checks": dict(sorted(self.checks.items())),
            "excluded_checks": EXCLUDED,
            "undeclared_methods": dict(self.undeclared_methods),
            "unauthenticated": self.unauthenticated,
            "excused_positive_refusals": dict(self.excused),
            "server_errors": self.server_errors,
            "failures": [failure.__dict__ for failure in self.failures],
            "seconds": round(self.seconds, 1),
        }

    def markdown(self) -> str:
        totals = self.totals()
        lines = [
            "## API fuzz (schemathesis, every check, against the local stack)",
            "",
            f"`python -m bench.fuzz_api --max-examples {self.max_examples} --seed {self.seed}`: {self.total} "
            f"requests over {len(self.requests)} operations in {self.seconds:.0f} s "
            f"({', '.join(f'{phase} {count}' for phase, count in sorted(self.phases.items()))}; "
            f"{self.unauthenticated} without a token; "
            f"{sum(self.undeclared_methods.values())} with a method the document does not list); "
            f"server errors: {self.server_errors}; failures: {len(self.failures)}.",
            "",
            "Checks (responses checked): "
            + ", ".join(f"`{name}` {count}" for name, count in sorted(self.checks.items()))
            + ". Off: "
            + ", ".join(f"`{name}`" for name in EXCLUDED)
            + ".",
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
        if self.excused:
            lines += [
                "",
                "Schema-valid requests refused by a rule the document cannot state "
                "(positive_data_acceptance, excused): "
                + ", ".join(f"`{code}` {count}" for code, count in sorted(self.excused.items()))
                + ".",
            ]
        if self.failures:
            lines += ["", "### Failures", ""]
            for failure in self.failures[:50]:
                lines += [
                    f"- `{failure.check}` on `{failure.operation}` ({failure.status}): {failure.problem}",
                    "",
                    f"  ```sh\n  {failure.curl}\n  ```",
                ]
        return "\n".join(lines) + "\n"


# --- checks ------------------------------------------------------------------------------------------------
_excused: Counter[str] = Counter()  # positive refusals excused by the check below, during one run


def body_of(response: Any) -> Any:
    try:
        return json.loads(response.content or b"null")
    except ValueError:
        return response.content[:200]


def error_shape_problem(body: Any) -> str | None:
    """Why an error body is not ``{"error": {"code", "message", "field"}}``, or None when it is."""
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


def domain_rule(method: str, body: Any) -> str | None:
    """The code of the rule beyond JSON Schema that refused a schema-valid request, or None."""
    if error_shape_problem(body) is not None:
        return None
    error = body["error"]
    code, field_name, message = error["code"], error["field"], error["message"]
    if any(message.startswith(words) or f": {words}" in message for words in SCHEMA_LEVEL_MESSAGES):
        return None
    if code in DOMAIN_RULES:
        return str(code)
    if TIMESTAMP_RANGE in message:
        return f"{code} (timestamp range)"
    if code in CROSS_FIELD_CODES and field_name is None:
        return f"{code} (between fields)"
    if method == "PATCH" and (field_name or "").split(".")[0] in MERGED_SECTIONS:
        return f"{code} (merged {field_name.split('.')[0]})"
    return None


def register_checks() -> list[str]:
    """tickwork's checks, and positive_data_acceptance with its excuses, as schemathesis checks."""
    import schemathesis
    from schemathesis.openapi.checks import RejectedPositiveData
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    tokens = {f"Bearer {token}" for token in TENANTS.values()}

    @schemathesis.check
    def tickwork_error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
        """Every 4xx and 5xx answer is tickwork's error shape."""
        if response.status_code >= 400 and response.request.method != "HEAD":
            problem = error_shape_problem(body_of(response))
            if problem:
                raise AssertionError(problem)
        return None

    @schemathesis.check
    def tickwork_tokens_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
        """A tenant's own token is never answered 401."""
        if response.status_code == 401 and response.request.headers.get("Authorization") in tokens:
            raise AssertionError("refused a tenant's valid token")
        return None

    @schemathesis.check
    def max_response_time_beyond_long_polls(ctx: Any, response: Any, case: Any) -> bool | None:
        """schemathesis' max_response_time (10 s), plus, for a claim, the wait it asked for: a claim of an
        empty pool is a long poll that answers when its wait (20 s by default) is over."""
        limit = RESPONSE_LIMIT_SECONDS
        if case.operation.label == CLAIM_OPERATION:
            wait = case.body.get("wait_seconds", CLAIM_DEFAULT_WAIT) if isinstance(case.body, dict) else 0
            limit += wait if isinstance(wait, int) and 0 <= wait <= CLAIM_DEFAULT_WAIT else 0
        if response.elapsed > limit:
            raise AssertionError(f"answered in {response.elapsed:.2f} s; the limit is {limit} s")
        return None

    @schemathesis.check
    def positive_data_acceptance_beyond_domain_rules(ctx: Any, response: Any, case: Any) -> bool | None:
        """schemathesis' positive_data_acceptance, except refusals by a rule the document cannot state."""
        try:
            return positive_data_acceptance(ctx, response, case)
        except RejectedPositiveData:
            rule = domain_rule(str(response.request.method), body_of(response))
            if rule is None:
                raise
            _excused[rule] += 1
            return None

    return [
        max_response_time_beyond_long_polls.__name__,
        tickwork_error_shape.__name__,
        tickwork_tokens_accepted.__name__,
        positive_data_acceptance_beyond_domain_rules.__name__,
    ]


# --- the run -----------------------------------------------------------------------------------------------
def load_schema(
    base_url: str, *, seed: int, max_examples: int, workers: int, auth_file: Path, phases: list[str] | None
) -> Any:
    import schemathesis
    from schemathesis.config import CacheConfig, SchemathesisConfig

    register_checks()
    config = SchemathesisConfig()
    config.update(seed=seed, max_failures=None)
    # No cache of earlier runs (in .schemathesis/): a seed gives the same run, and nothing is left behind.
    config.cache = CacheConfig(enabled=False)
    project = config.projects.override
    project.update(
        base_url=base_url,
        workers=workers,
        continue_on_failure=True,
        request_timeout=REQUEST_TIMEOUT_SECONDS,
        rate_limit="auto",  # a 429 is waited out for its Retry-After
        wfc_auth=str(auth_file),
    )
    assert project.auth.wfc is not None
    project.auth.wfc.user = next(iter(TENANTS))
    project.auth.wfc.peers = list(TENANTS)
    project.checks.update(
        included_check_names=["all"],
        excluded_check_names=[*EXCLUDED, "positive_data_acceptance", "max_response_time"],
    )
    project.generation.update(max_examples=max_examples)
    if phases:
        project.phases.update(phases=phases)
    return schemathesis.openapi.from_path(str(SCHEMA), config=config)


def write_auth_file(directory: Path) -> Path:
    """The tenants' tokens as a Web Fuzzing Commons auth file, the form schemathesis takes identities in."""
    path = directory / "auth.json"
    entries = [
        {"name": name, "fixedHeaders": [{"name": "Authorization", "value": f"Bearer {token}"}]}
        for name, token in TENANTS.items()
    ]
    path.write_text(json.dumps({"auth": entries}))
    return path


def run(schema: Any, report: FuzzReport) -> None:
    from schemathesis.engine import events, from_schema

    declared = {
        (operation.method.upper(), operation.path)
        for result in schema.get_all_operations()
        for operation in [result.ok()]
    }
    _excused.clear()
    started = time.monotonic()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            record(event, report, declared)
        elif isinstance(event, events.NonFatalError | events.FatalError):
            problem = getattr(event, "value", None) or getattr(event, "exception", None)
            report.failures.append(
                Failure(
                    "engine", getattr(event, "label", "-"), None, f"{type(problem).__name__}: {problem}", ""
                )
            )
    report.seconds = time.monotonic() - started
    report.excused.update(_excused)


def record(event: Any, report: FuzzReport, declared: set[tuple[str, str]]) -> None:
    recorder = event.recorder
    report.phases[event.phase.value] += len(recorder.interactions)
    for case_id, interaction in recorder.interactions.items():
        node = recorder.cases.get(case_id)
        case = node.value if node is not None else None
        operation = case.operation if case is not None else None
        label = operation.label if operation is not None else recorder.label
        report.requests[label] += 1
        status = interaction.response.status_code if interaction.response is not None else 0
        report.statuses[label][status] += 1
        if operation is not None and (interaction.request.method.upper(), operation.path) not in declared:
            report.undeclared_methods[interaction.request.method.upper()] += 1
        if not any(name.lower() == "authorization" for name in interaction.request.headers):
            report.unauthenticated += 1
    for case_id, checks in recorder.checks.items():
        for check in checks:
            report.checks[check.name] += 1
            if check.failure_info is None:
                continue
            failure = check.failure_info.failure
            interaction = recorder.interactions.get(case_id)
            status = interaction.response.status_code if interaction and interaction.response else None
            problem = f"{failure.title}: {failure.message}".replace("\n", " ")[:500]
            report.failures.append(
                Failure(
                    check.name,
                    failure.operation or recorder.label,
                    status,
                    problem,
                    check.failure_info.code_sample,
                )
            )


@contextmanager
def local_stack() -> Iterator[str]:
    """A fresh local stack in a thread of this process, on a free loopback port; yields its URL."""
    from tickwork_local.stack import running_in_thread

    directory = tempfile.mkdtemp(prefix="tickwork-fuzz-")
    tenants = ",".join(f"{name}:{token}" for name, token in TENANTS.items())
    try:
        with running_in_thread(
            environment={"TICKWORK_LOCAL_TENANTS": tenants, "POWERTOOLS_LOG_LEVEL": "ERROR"},
            log_file=os.path.join(directory, "tickwork.log"),
            tick_seconds=1.0,
            workers=2,
        ) as stack:
            raise_rate_limits()
            yield f"http://127.0.0.1:{stack.port}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def raise_rate_limits() -> None:
    from tickwork.runtime import runtime

    current = runtime()
    for name, token in TENANTS.items():
        tenant = current.tenants.get(name)
        current.tenants.put(
            tenant.model_copy(update={"api_requests_per_second": REQUESTS_PER_SECOND}), token=token
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--max-examples",
        type=int,
        default=DEFAULT_MAX_EXAMPLES,
        help=f"examples per operation in the fuzzing and stateful phases (default {DEFAULT_MAX_EXAMPLES})",
    )
    parser.add_argument(
        "--min-requests",
        type=int,
        default=DEFAULT_MIN_REQUESTS,
        help=f"fail a run that sent fewer requests (default {DEFAULT_MIN_REQUESTS})",
    )
    parser.add_argument("--seed", type=int, default=1, help="hypothesis seed, for a repeatable run")
    parser.add_argument("--workers", type=int, default=1, help="schemathesis workers (default 1)")
    parser.add_argument(
        "--phases", help="comma-separated phases (examples, coverage, fuzzing, stateful); default all"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))

    report = FuzzReport(seed=args.seed, max_examples=args.max_examples)
    with tempfile.TemporaryDirectory(prefix="tickwork-fuzz-auth-") as directory, local_stack() as base_url:
        schema = load_schema(
            base_url,
            seed=args.seed,
            max_examples=args.max_examples,
            workers=args.workers,
            auth_file=write_auth_file(Path(directory)),
            phases=args.phases.split(",") if args.phases else None,
        )
        run(schema, report)
        operations = {result.ok().label for result in schema.get_all_operations()}
    for label in sorted(operations - set(report.requests)):
        report.failures.append(Failure("coverage", label, None, "never exercised", ""))
    if report.total < args.min_requests:
        problem = f"{report.total} requests, fewer than {args.min_requests}"
        report.failures.append(Failure("volume", "all", None, problem, ""))
    print(report.markdown())
    if args.json:
        Path(args.json).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
