"""A job's item: its spec stored as it is, or compressed once long (a workflow's definition), and read back
the same either way."""

from __future__ import annotations

from datetime import UTC, datetime

from tickwork.adapters.jobs import SPEC_COMPRESSED_FROM, job_from_item, job_to_item
from tickwork.domain.models import Job, JobSpec


def job(target: dict[str, object]) -> Job:
    at = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    spec = JobSpec.model_validate(
        {"name": "etl", "schedule": {"type": "cron", "expression": "0 3 * * *"}, "target": target}
    )
    return Job(
        **spec.model_dump(),
        job_id="01JOBITEMS0000000000000000",
        tenant_id="acme",
        created_at=at,
        updated_at=at,
    )


def test_a_plain_jobs_spec_is_stored_as_it_is() -> None:
    plain = job({"type": "http", "url": "https://hooks.example.com/run"})

    item = job_to_item(plain, due_shards=4)

    assert "spec" in item and "spec_z" not in item
    assert job_from_item(item) == plain


def test_a_long_workflow_definition_is_stored_compressed_and_read_back_the_same() -> None:
    parts = [f"part_{index}" for index in range(50)]
    hook = {"type": "http", "url": "https://etl.example.com/steps/transform"}
    tasks = [
        {"id": "split", "target": hook},
        *({"id": part, "target": hook, "depends_on": ["split"]} for part in parts),
        {"id": "merge", "target": hook, "depends_on": parts},
    ]
    fan_in = job({"type": "workflow", "tasks": tasks})
    assert len(fan_in.spec().model_dump_json()) > SPEC_COMPRESSED_FROM

    item = job_to_item(fan_in, due_shards=4)

    assert "spec_z" in item and "spec" not in item
    # a read unit is 4 KB: the compressed item is one, the plain text would be four
    assert len(item["spec_z"]["B"]) < 4096 < len(fan_in.spec().model_dump_json())
    assert job_from_item(item) == fan_in
