"""The pure part of pools: the target, the routes' bodies at every limit, the lease token and the lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from tickwork.domain.pools import (
    MAX_CHECKPOINT_BYTES,
    MAX_OUTPUT_BYTES,
    ClaimRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
    Lease,
    PoolTarget,
    fencing_token_of,
    new_lease_token,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def refused(model: Any, body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The locations of the fields a body is refused for."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return [error["loc"] for error in caught.value.errors()]


def json_of_size(size: int) -> dict[str, str]:
    """A JSON object of exactly ``size`` bytes as stored: {"s":"xxx..."}."""
    return {"s": "x" * (size - len('{"s":""}'))}


# --- the target ---------------------------------------------------------------------------------------------
def test_a_pool_target_has_the_contracts_defaults() -> None:
    target = PoolTarget.model_validate({"type": "pool", "pool": "gpu-training"})
    assert (target.heartbeat_timeout_seconds, target.timeout_seconds) == (60, 3600)


@pytest.mark.parametrize("name", ["a", "0", "gpu-1", "a" * 64, "x-" + "9" * 62])
def test_pool_names_within_the_pattern_are_taken(name: str) -> None:
    assert PoolTarget.model_validate({"type": "pool", "pool": name}).pool == name


@pytest.mark.parametrize("name", ["", "-gpu", "GPU", "gpu_1", "gpu.1", "a" * 65, "gpu 1", "é"])
def test_pool_names_outside_the_pattern_are_refused(name: str) -> None:
    assert refused(PoolTarget, {"type": "pool", "pool": name}) == [("pool",)]


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("heartbeat_timeout_seconds", 9, False),
        ("heartbeat_timeout_seconds", 10, True),
        ("heartbeat_timeout_seconds", 600, True),
        ("heartbeat_timeout_seconds", 601, False),
        ("timeout_seconds", 0, False),
        ("timeout_seconds", 1, True),
        ("timeout_seconds", 7 * 86_400, True),
        ("timeout_seconds", 7 * 86_400 + 1, False),
    ],
)
def test_pool_timeouts_at_their_limits(field: str, value: int, ok: bool) -> None:
    body = {"type": "pool", "pool": "p", field: value}
    if ok:
        assert getattr(PoolTarget.model_validate(body), field) == value
    else:
        assert refused(PoolTarget, body) == [(field,)]


# --- the routes' bodies -------------------------------------------------------------------------------------
def test_a_claim_has_the_contracts_defaults() -> None:
    claim = ClaimRequest.model_validate({"worker_id": "host-1/pid-42"})
    assert (claim.max_runs, claim.wait_seconds) == (1, 20)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_runs": 0}, "max_runs"),
        ({"max_runs": 11}, "max_runs"),
        ({"wait_seconds": -1}, "wait_seconds"),
        ({"wait_seconds": 21}, "wait_seconds"),
        ({"worker_id": ""}, "worker_id"),
        ({"worker_id": "w" * 129}, "worker_id"),
        ({"worker_id": "two words"}, "worker_id"),
    ],
)
def test_claims_out_of_range_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    assert refused(ClaimRequest, {"worker_id": "w1", **body}) == [(field,)]


def test_claims_at_their_limits_are_taken() -> None:
    claim = ClaimRequest.model_validate({"worker_id": "w" * 128, "max_runs": 10, "wait_seconds": 0})
    assert (claim.max_runs, claim.wait_seconds) == (10, 0)


def test_a_claim_without_a_worker_id_is_refused() -> None:
    assert refused(ClaimRequest, {}) == [("worker_id",)]


@pytest.mark.parametrize("model", [HeartbeatRequest, CompleteRequest])
def test_a_call_without_its_lease_token_is_refused(model: Any) -> None:
    assert refused(model, {}) == [("lease_token",)]


def test_a_fail_without_its_lease_token_or_error_is_refused() -> None:
    assert sorted(refused(FailRequest, {})) == [("error",), ("lease_token",)]


@pytest.mark.parametrize(
    ("progress", "ok"), [(-0.01, False), (0, True), (0.5, True), (1, True), (1.01, False)]
)
def test_progress_is_from_0_to_1(progress: float, ok: bool) -> None:
    body = {"lease_token": "1.x", "progress": progress}
    if ok:
        assert HeartbeatRequest.model_validate(body).progress == progress
    else:
        assert refused(HeartbeatRequest, body) == [("progress",)]


def test_progress_is_a_number_not_nan() -> None:
    assert refused(HeartbeatRequest, {"lease_token": "1.x", "progress": float("nan")}) == [("progress",)]


def test_a_stage_is_at_most_200_characters() -> None:
    assert HeartbeatRequest.model_validate({"lease_token": "t", "stage": "é" * 200}).stage == "é" * 200
    assert refused(HeartbeatRequest, {"lease_token": "t", "stage": "s" * 201}) == [("stage",)]


def test_a_checkpoint_is_at_most_64_kb_as_stored() -> None:
    at_limit = json_of_size(MAX_CHECKPOINT_BYTES)
    assert (
        HeartbeatRequest.model_validate({"lease_token": "t", "checkpoint": at_limit}).checkpoint == at_limit
    )
    errors = refused(
        HeartbeatRequest, {"lease_token": "t", "checkpoint": json_of_size(MAX_CHECKPOINT_BYTES + 1)}
    )
    assert errors == [("checkpoint",)]


def test_an_output_is_at_most_16_kb_as_stored() -> None:
    at_limit = json_of_size(MAX_OUTPUT_BYTES)
    assert CompleteRequest.model_validate({"lease_token": "t", "output": at_limit}).output == at_limit
    assert refused(CompleteRequest, {"lease_token": "t", "output": json_of_size(MAX_OUTPUT_BYTES + 1)}) == [
        ("output",)
    ]


def test_a_checkpoint_nested_past_64_levels_is_refused() -> None:
    deep: Any = 1
    for _ in range(65):
        deep = [deep]
    assert refused(HeartbeatRequest, {"lease_token": "t", "checkpoint": deep}) == [("checkpoint",)]


def test_a_size_error_says_what_and_how_big_in_tickworks_words() -> None:
    with pytest.raises(ValidationError) as caught:
        HeartbeatRequest.model_validate(
            {"lease_token": "t", "checkpoint": json_of_size(MAX_CHECKPOINT_BYTES + 1)}
        )
    [error] = caught.value.errors()
    assert error["type"] == "payload_too_large"
    assert (
        error["msg"] == f"checkpoint is {MAX_CHECKPOINT_BYTES + 1} bytes once serialized; the limit is 65536"
    )


def test_a_failure_is_retryable_unless_it_says_otherwise() -> None:
    failed = FailRequest.model_validate({"lease_token": "t", "error": {"code": "oom"}})
    assert failed.retryable is True and failed.error.message == ""
    assert (
        FailRequest.model_validate(
            {"lease_token": "t", "error": {"code": "bad_input", "message": "no"}, "retryable": False}
        ).retryable
        is False
    )


def test_unknown_fields_are_refused_rather_than_ignored() -> None:
    assert refused(HeartbeatRequest, {"lease_token": "t", "progres": 0.5}) == [("progres",)]


# --- the lease token ----------------------------------------------------------------------------------------
def test_a_lease_token_carries_its_fencing_token_and_cannot_be_guessed_from_it() -> None:
    first, second = new_lease_token(3), new_lease_token(3)
    assert fencing_token_of(first) == fencing_token_of(second) == 3
    assert first != second


@pytest.mark.parametrize(
    "token", ["", "3", "3.", "0.abcdefghijklmnopqrstuv", "x.abcdefghijklmnopqrstuv", "3.short"]
)
def test_anything_else_is_no_lease_token(token: str) -> None:
    assert fencing_token_of(token) is None


def test_a_lease_token_starts_at_fencing_token_1() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        new_lease_token(0)


# --- the lease ----------------------------------------------------------------------------------------------
def target(heartbeat: int = 60, timeout: int = 3600) -> PoolTarget:
    return PoolTarget(type="pool", pool="p", heartbeat_timeout_seconds=heartbeat, timeout_seconds=timeout)


def test_a_claimed_lease_lasts_one_heartbeat_timeout() -> None:
    lease = Lease.claimed(target(), NOW)
    assert lease == Lease(NOW + timedelta(seconds=60), NOW + timedelta(hours=1))
    assert lease.lapsed(NOW + timedelta(seconds=59.999)) is None
    assert lease.lapsed(NOW + timedelta(seconds=60)) == "heartbeat_timeout"


def test_each_heartbeat_renews_the_lease_from_its_own_time() -> None:
    lease = Lease.claimed(target(), NOW).renewed(target(), NOW + timedelta(seconds=50))
    assert lease.expires_at == NOW + timedelta(seconds=110)
    assert lease.lapsed(NOW + timedelta(seconds=100)) is None


def test_heartbeats_never_carry_an_attempt_past_its_hard_cap() -> None:
    lease = Lease.claimed(target(timeout=100), NOW)
    for second in range(0, 200, 20):
        lease = lease.renewed(target(timeout=100), NOW + timedelta(seconds=second))
    assert lease.expires_at == NOW + timedelta(seconds=100)
    assert lease.lapsed(NOW + timedelta(seconds=100)) == "timeout"


def test_an_attempt_shorter_than_a_heartbeat_timeout_ends_at_its_cap() -> None:
    lease = Lease.claimed(target(heartbeat=60, timeout=30), NOW)
    assert lease.expires_at == lease.deadline == NOW + timedelta(seconds=30)
    assert lease.lapsed(NOW + timedelta(seconds=30)) == "timeout"
