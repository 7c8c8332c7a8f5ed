"""A small, repeatable schemathesis fuzz of the local stack's HTTP API (``python -m bench.fuzz_api``), every
check on, and the rules by which it excuses a schema-valid request's refusal.

The fuzz runs as its own process: the local stack points boto3 at its moto server through the environment,
which must not leak into the tests that run after it. Fixed seed, the fuzzing and stateful phases (the
coverage phase's 1,200 requests run in ``make soak``), loopback only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.fuzz_api import EXCLUDED, domain_rule

ROOT = Path(__file__).resolve().parents[2]
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
# Every route of docs/openapi.json
OPERATIONS = sum(
    1
    for path in json.loads((ROOT / "docs" / "openapi.json").read_text())["paths"].values()
    for method in path
    if method in HTTP_METHODS
)
SCHEMATHESIS_CHECKS = {
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
    "ensure_resource_availability",
    "object_level_authorization",
}
TICKWORK_CHECKS = {
    "tickwork_error_shape",
    "tickwork_tokens_accepted",
    "positive_data_acceptance_beyond_domain_rules",
}


def test_a_seeded_fuzz_run_with_every_check_finds_nothing(tmp_path: Path) -> None:
    figures = tmp_path / "fuzz.json"
    command = [sys.executable, "-m", "bench.fuzz_api", "--phases", "fuzzing,stateful"]
    command += ["--max-examples", "8", "--min-requests", "100", "--seed", "7", "--json", str(figures)]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    report = json.loads(figures.read_text())
    assert report["requests"] >= 100
    assert report["operations"] == OPERATIONS
    assert report["server_errors"] == 0
    assert report["failures"] == []
    # schemathesis' checks and tickwork's looked at the answers; only the excluded one did not
    assert set(report["checks"]) >= SCHEMATHESIS_CHECKS | TICKWORK_CHECKS
    assert not set(EXCLUDED) & set(report["checks"])
    assert "positive_data_acceptance" not in report["checks"]  # replaced by the one with excuses
    statuses = {int(status) for by in report["statuses"].values() for status in by}
    assert {200, 400, 404} <= statuses
    assert "| all |" in finished.stdout


def error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


@pytest.mark.parametrize(
    ("method", "body", "rule"),
    [
        # rules JSON Schema cannot state: excused, by code
        ("GET", error("invalid_cursor", "cursor is not valid", "cursor"), "invalid_cursor"),
        (
            "POST",
            error("invalid_schedule", "schedule.expression: cron needs 5 fields", "schedule.expression"),
            "invalid_schedule",
        ),
        ("POST", error("idempotency_key_reused", "reused", "Idempotency-Key"), "idempotency_key_reused"),
        (
            "POST",
            error("invalid_field", "max_concurrent_runs applies to overlap_policy allow"),
            "invalid_field (between fields)",
        ),
        (
            "POST",
            error("invalid_field", "after: timestamp must lie between 1970 and 9999", "after"),
            "invalid_field (timestamp range)",
        ),
        (
            "PATCH",
            error("unknown_field", "unknown field 'target.x'", "target.x"),
            "unknown_field (merged target)",
        ),
        # what the document should have said: a failure
        (
            "POST",
            error("invalid_schedule", "schedule.at: Input should be a valid datetime", "schedule.at"),
            None,
        ),
        ("POST", error("invalid_field", "misfire_grace_seconds: too large", "misfire_grace_seconds"), None),
        ("POST", error("unknown_field", "unknown field 'target.x'", "target.x"), None),
        ("PATCH", error("missing_field", "name: Field required", "name"), None),
        ("POST", error("unsupported_content_type", "send JSON", "Content-Type"), None),
        ("POST", {"message": "not the error shape"}, None),
    ],
)
def test_a_refused_schema_valid_request_is_excused_only_by_a_rule_the_schema_cannot_state(
    method: str, body: Any, rule: str | None
) -> None:
    assert domain_rule(method, body) == rule
