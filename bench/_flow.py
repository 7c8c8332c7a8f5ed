"""What the flow-control benchmarks (``bench.fairness``, ``bench.throttle``) share: the local stack in process
with several tenants, job creates through its HTTP API from several clients, a loopback receiver that records
each call's arrival, a trace of the run queue's sends and receives, and the counting of arrivals."""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench._common import percentile

CLIENTS = 8
WORKERS = 4
WIDTH = 105
# Lead before T: the creates (about 200 a second from 8 clients) and a margin.
LEAD_SECONDS = 12.0
CREATES_PER_SECOND = 120.0
# How long to wait for the last run after T: the local stack drains a burst at moto's pace.
WAIT_SECONDS = 60.0
WAIT_PER_RUN = 0.05


def logger(name: str) -> Callable[[str], None]:
    """A benchmark's progress lines, on stderr: ``[name] message``."""

    def log(message: str) -> None:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)

    return log


def save_figures(name: str, figures: Any) -> None:
    """The measured figures, pickled in the temporary directory, to redraw the section without measuring."""
    with open(os.path.join(tempfile.gettempdir(), f"tickwork-bench-{name}.pickle"), "wb") as out:
        pickle.dump(figures, out)


def paragraph(text: str) -> str:
    """A paragraph of a section, wrapped."""
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False)


# --- arrivals and what they add up to ---------------------------------------------------------------------
@dataclass(frozen=True)
class Arrival:
    """One call at the receiver: whose, which run, when it was due and when it came (epoch seconds)."""

    tenant: str
    run_id: str
    scheduled_for: float
    received: float


@dataclass(frozen=True)
class Tally:
    """One tenant's arrivals against the runs it expected."""

    expected: int
    received: int
    """Distinct expected runs that arrived."""
    duplicates: int
    """Arrivals of a run that had already arrived."""
    lost: int
    """Expected runs that never arrived."""
    unexpected: int
    """Distinct runs that arrived but were not expected."""
    early: int
    """Arrivals before their scheduled time."""
    lags_ms: tuple[float, ...]
    """Each expected run's first arrival minus its scheduled time."""
    first: float | None
    last: float | None

    def lag(self, q: float) -> float:
        return percentile(self.lags_ms, q)


def tally(arrivals: Sequence[Arrival], expected: set[str]) -> Tally:
    """Count one tenant's arrivals: ``expected`` is the run ids it should get, each exactly once."""
    first_at: dict[str, Arrival] = {}
    duplicates = 0
    for arrival in sorted(arrivals, key=lambda item: item.received):
        if arrival.run_id in first_at:
            duplicates += 1
        else:
            first_at[arrival.run_id] = arrival
    arrived = [item for run_id, item in first_at.items() if run_id in expected]
    times = [item.received for item in arrivals]
    return Tally(
        expected=len(expected),
        received=len(arrived),
        duplicates=duplicates,
        lost=len(expected - first_at.keys()),
        unexpected=len(first_at.keys() - expected),
        early=sum(1 for item in arrivals if item.received < item.scheduled_for),
        lags_ms=tuple((item.received - item.scheduled_for) * 1000 for item in arrived),
        first=min(times) if times else None,
        last=max(times) if times else None,
    )


class Recorder:
    """A loopback webhook target: each call's tenant (its path, ``/<tenant>``), run id
    (``X-Tickwork-Run-Id``), ``X-Tickwork-Scheduled-For`` and arrival time."""

    def __init__(self) -> None:
        from tickwork_local.harness import Receiver

        self.lock = threading.Lock()
        self.arrivals: list[Arrival] = []
        self.receiver = Receiver(answer=self._record)

    def url(self, tenant: str) -> str:
        return self.receiver.url(f"/{tenant}")

    def _record(self, request: Any) -> None:
        headers = {name.lower(): value for name, value in request.headers.items()}
        scheduled = datetime.fromisoformat(headers["x-tickwork-scheduled-for"].replace("Z", "+00:00"))
        arrival = Arrival(
            request.path.strip("/"), headers["x-tickwork-run-id"], scheduled.timestamp(), request.at
        )
        with self.lock:
            self.arrivals.append(arrival)

    def of(self, tenant: str) -> list[Arrival]:
        with self.lock:
            return [arrival for arrival in self.arrivals if arrival.tenant == tenant]

    def close(self) -> None:
        self.receiver.close()


# --- the run queue's trace --------------------------------------------------------------------------------
@dataclass
class Trace:
    """When each run's message was sent (the ``sent_at`` its body carries) and received from the run queue,
    from botocore hooks on the stack's session: where a run waited before its call."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent_ms: dict[str, int] = field(default_factory=dict)
    received: dict[str, list[float]] = field(default_factory=dict)
    receives_by_tenant: Counter[str] = field(default_factory=Counter)

    def on_receive(self, parsed: Any = None, **_: Any) -> None:
        now = time.time()
        if not isinstance(parsed, dict):
            return
        with self.lock:
            for message in parsed.get("Messages", []):
                try:
                    body = json.loads(message["Body"])
                except (KeyError, ValueError):
                    continue
                run_id = body.get("run_id")
                if not isinstance(run_id, str):
                    continue
                self.receives_by_tenant[str(body.get("tenant_id"))] += 1
                self.received.setdefault(run_id, []).append(now)
                if isinstance(body.get("sent_at"), int):
                    self.sent_ms.setdefault(run_id, body["sent_at"])


@dataclass(frozen=True)
class Wait:
    """Where one run's lag went (ms): its message sent after its time (the planner), its message in the
    queue after its time (the queue and the pollers), and from its receive to its call (the worker)."""

    planner: float
    queue: float
    worker: float


def waits(arrival: Arrival, sent_ms: int | None, received: Sequence[float]) -> Wait | None:
    """Split an arrival's lag by the trace; None when its message was not traced. The last receive before
    the call counts (a throttled run's message comes back for its reserved start)."""
    before = [moment for moment in received if moment <= arrival.received]
    if sent_ms is None or not before:
        return None
    due, sent, taken = arrival.scheduled_for, sent_ms / 1000, before[-1]
    return Wait(
        planner=max(0.0, sent - due) * 1000,
        queue=max(0.0, taken - max(due, sent)) * 1000,
        worker=(arrival.received - max(taken, due)) * 1000,
    )


# --- the stack and its API --------------------------------------------------------------------------------
def _traced_stack_class(trace: Trace) -> type:
    from tickwork_local.stack import LocalStack

    class TracedStack(LocalStack):
        def configure_clients(self) -> None:
            import boto3

            super().configure_clients()
            assert boto3.DEFAULT_SESSION is not None
            boto3.DEFAULT_SESSION.events.register("after-call.sqs.ReceiveMessage", trace.on_receive)

    return TracedStack


@contextmanager
def local_stack(tenants: str, trace: Trace) -> Iterator[Any]:
    """The local stack in a thread of this process on moto's state reset to nothing; ``tenants`` is a
    ``TICKWORK_LOCAL_TENANTS`` value, settings included."""
    from moto.moto_api._internal.models import moto_api_backend
    from tickwork_local.stack import running_in_thread

    moto_api_backend.reset()
    directory = tempfile.mkdtemp(prefix="tickwork-bench-")
    with running_in_thread(
        environment={"TICKWORK_LOCAL_TENANTS": tenants, "POWERTOOLS_LOG_LEVEL": "ERROR"},
        stack_class=_traced_stack_class(trace),
        log_file=os.path.join(directory, "tickwork.log"),
        tick_seconds=1.0,
        workers=WORKERS,
    ) as stack:
        yield stack


def base_url(stack: Any) -> str:
    return f"http://127.0.0.1:{stack.port}"


def post_job(url: str, token: str, spec: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - the local stack's loopback http URL
        url + "/v1/jobs",
        data=json.dumps(spec).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - loopback
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@dataclass(frozen=True)
class Created:
    job_ids: list[str]
    seconds: float
    last_accepted: float
    """When the last create was answered 201 (epoch seconds)."""
    failures: dict[int, int]


def create_jobs(url: str, token: str, specs: Sequence[dict[str, Any]], clients: int = CLIENTS) -> Created:
    """POST each spec from ``clients`` threads; the job ids in the specs' order."""
    ids = [""] * len(specs)
    failures: Counter[int] = Counter()
    last = [0.0]
    lock = threading.Lock()

    def client(number: int) -> None:
        for index in range(number, len(specs), clients):
            status, body = post_job(url, token, specs[index])
            with lock:
                if status == 201:
                    ids[index] = body["job_id"]
                    last[0] = max(last[0], time.time())
                else:
                    failures[status] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Created(ids, time.perf_counter() - started, last[0], dict(failures))


def one_time(name: str, at: datetime, url: str) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"type": "once", "at": at.astimezone(UTC).isoformat(timespec="milliseconds")},
        "target": {"type": "http", "url": url, "timeout_seconds": 10},
    }


def scheduled_ids(job_ids: Sequence[str], fires: Sequence[datetime]) -> set[str]:
    """The run ids of the jobs' one fire each."""
    from tickwork.domain.models import scheduled_run_id

    return {scheduled_run_id(job_id, fire) for job_id, fire in zip(job_ids, fires, strict=True)}


def wait_for(recorder: Recorder, expected: dict[str, set[str]], until: float, settle: float = 2.0) -> None:
    """Until every tenant's expected runs arrived or ``until`` passed; then ``settle`` s more, for late
    duplicates."""
    while time.time() < until:
        if all(
            expected_ids <= {arrival.run_id for arrival in recorder.of(tenant)}
            for tenant, expected_ids in expected.items()
        ):
            break
        time.sleep(0.2)
    time.sleep(settle)
