"""How the CLI finds the names of the jobs of the runs it shows (``Session.job_names``): each job once per
command, in as few calls as it can, against an in-memory client."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from tickwork_client import NotFound
from tickwork_local.cli.session import Session


@dataclass
class Job:
    job_id: str
    name: str


@dataclass
class Page:
    items: list[Job]
    next_cursor: str | None


@dataclass
class FakeClient:
    """Jobs newest first, 100 to a page; the cancelled ones only with status CANCELLED."""

    live: list[Job]
    cancelled: list[Job] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def list_jobs(self, *, status: str | None = None, limit: int = 100, cursor: str | None = None) -> Page:
        self.calls.append(("list_jobs", status))
        jobs = self.cancelled if status == "CANCELLED" else self.live
        start = int(cursor or 0)
        end = start + limit
        return Page(jobs[start:end], str(end) if end < len(jobs) else None)

    def get_job(self, job_id: str) -> Job:
        self.calls.append(("get_job", job_id))
        for job in [*self.live, *self.cancelled]:
            if job.job_id == job_id:
                return job
        raise NotFound(404, "not_found", f"job {job_id!r} not found", "job_id")


def jobs(prefix: str, count: int) -> list[Job]:
    return [Job(f"{prefix}{index:03d}", f"{prefix}-name-{index}") for index in range(count)]


def session_with(client: FakeClient) -> Session:
    session = Session(SimpleNamespace(meta={}))  # type: ignore[arg-type]
    session.__dict__["client"] = client  # the cached client
    return session


def test_one_unknown_job_is_read_by_its_id() -> None:
    client = FakeClient(jobs("J", 250))
    assert session_with(client).job_names(["J200", "J200"]) == {"J200": "J-name-200"}
    assert client.calls == [("get_job", "J200")]


def test_several_unknown_jobs_come_from_the_first_page_of_the_list() -> None:
    client = FakeClient(jobs("J", 250))
    session = session_with(client)
    assert session.job_names(["J001", "J050", "J099"]) == {
        "J001": "J-name-1",
        "J050": "J-name-50",
        "J099": "J-name-99",
    }
    assert client.calls == [("list_jobs", None)]
    # and each job is read once per command: the page's other jobs are known too
    assert session.job_names(["J002", "J050"]) == {"J002": "J-name-2", "J050": "J-name-50"}
    assert client.calls == [("list_jobs", None)]


def test_cancelled_jobs_are_looked_for_after_the_others() -> None:
    client = FakeClient(jobs("J", 3), cancelled=jobs("C", 3))
    assert session_with(client).job_names(["J000", "C001", "C002"]) == {
        "J000": "J-name-0",
        "C001": "C-name-1",
        "C002": "C-name-2",
    }
    assert client.calls == [("list_jobs", None), ("list_jobs", "CANCELLED")]


@pytest.mark.parametrize("missing", [2, 3])
def test_the_list_is_read_only_while_it_costs_less_than_reading_each_job(missing: int) -> None:
    # Given jobs far down a long list
    client = FakeClient(jobs("J", 1000))
    wanted = [f"J{990 + index}" for index in range(missing)]

    # When their names are asked for
    names = session_with(client).job_names(wanted)

    # Then a few pages are read, then each job left: never more calls than twice the jobs
    assert names == {job_id: f"J-name-{job_id[1:].lstrip('0')}" for job_id in wanted}
    assert len(client.calls) <= 2 * missing
    assert [call for call in client.calls if call[0] == "get_job"] == [
        ("get_job", job_id) for job_id in wanted
    ]


def test_a_job_not_found_has_no_name() -> None:
    client = FakeClient(jobs("J", 2))
    assert session_with(client).job_names(["J000", "GONE"]) == {"J000": "J-name-0", "GONE": None}
