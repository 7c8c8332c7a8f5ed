"""Conformance of the cron engine with vectors from other implementations' published test suites.

``cron_vectors.json`` holds groups of vectors, each naming the suite it was taken from (project, file and
repository) with a note on what was translated and what was left out. A ``next`` vector is an expression, an
IANA time zone, a start and the fires the source expects strictly after it; an ``invalid`` vector is an
expression the source refuses, which tickwork must refuse when a job is created (a 4xx).

A vector the engine does not satisfy yet carries ``known_failure``, saying what tickwork does instead, and
runs as a strict xfail: once the engine is fixed the case fails until its mark is removed.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tickwork.domain.models import CronSchedule
from tickwork.domain.schedule import next_fire_times

VECTORS_FILE = Path(__file__).with_name("cron_vectors.json")
# The acceptance bar: outside vectors that pass today, whatever is still marked as a known failure.
MIN_PASSING = 250


def _load_groups() -> list[dict[str, Any]]:
    with VECTORS_FILE.open(encoding="utf-8") as file:
        groups: list[dict[str, Any]] = json.load(file)["groups"]
    return groups


GROUPS = _load_groups()
VECTORS = [vector for group in GROUPS for vector in group["vectors"]]


def _project(source: str) -> str:
    """The project a group's source names: 'croniter src/croniter/tests/... at https://...' -> 'croniter'."""
    return source.split(" ", 1)[0]


def _cases() -> list[Any]:
    cases = []
    for vector in VECTORS:
        marks = []
        if "known_failure" in vector:
            marks.append(pytest.mark.xfail(strict=True, reason=vector["known_failure"]))
        cases.append(pytest.param(vector, id=vector["id"], marks=marks))
    return cases


def instant(text: str) -> datetime:
    """An ISO 8601 instant that carries its own offset, as UTC."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() is not None, f"{text} has no offset"
    return value.astimezone(UTC)


@pytest.mark.parametrize("vector", _cases())
def test_vector(vector: dict[str, Any]) -> None:
    if vector["kind"] == "next":
        # Given the source's expression and zone, When asking for the fires after its start
        schedule = CronSchedule(type="cron", expression=vector["expression"], timezone=vector["timezone"])
        expected = [instant(text) for text in vector["expected"]]
        fires = next_fire_times(schedule, instant(vector["start"]), len(expected))
        # Then they are the instants the source asserts
        assert [fire.astimezone(UTC) for fire in fires] == expected
    else:
        assert vector["kind"] == "invalid"
        # Given an expression the source refuses, Then a job cannot be created with it
        with pytest.raises(ValidationError):
            CronSchedule.model_validate(
                {"type": "cron", "expression": vector["expression"], "timezone": vector["timezone"]}
            )


def test_vectors_name_their_sources_and_enough_of_them_pass() -> None:
    ids = [vector["id"] for vector in VECTORS]
    assert len(ids) == len(set(ids)), "vector ids must be unique"
    for group in GROUPS:
        assert " at https://github.com/" in group["source"], group["source"]
        assert group["note"] and group["vectors"], group["source"]
    for vector in VECTORS:
        assert vector["kind"] in ("next", "invalid"), vector["id"]
        assert vector["why"], vector["id"]
        assert vector["kind"] == "invalid" or vector["expected"], vector["id"]

    per_project = Counter(_project(group["source"]) for group in GROUPS for _ in group["vectors"])
    passing = Counter(
        _project(group["source"])
        for group in GROUPS
        for vector in group["vectors"]
        if "known_failure" not in vector
    )
    assert set(per_project) == {"Cronos", "croniter", "cron-parser", "robfig/cron", "croner", "APScheduler"}
    assert sum(passing.values()) >= MIN_PASSING, f"passing per project: {dict(passing)}"
