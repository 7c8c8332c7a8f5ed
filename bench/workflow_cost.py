"""What a workflow task run costs, against a plain job run, measured in the same run of the benchmark.

    python -m bench.workflow_cost               # measure; save the figures, rewrite docs/cost.md's tables
    python -m bench.workflow_cost --figures bench/workflow_cost_figures.json   # the tables again

Workflow jobs run every minute at steady state through the real planner, worker and indexer Lambda
handlers under moto on a fake clock, with a loopback webhook receiver as every task's target, metered as
``bench.cost`` meters its rate jobs (``bench._cost_workload``, whose window, batching, model and prices it
shares), each workflow as a fleet (``FLEET_JOBS``, firing in the same second, so that their task messages
share the event source mapping's batches of ten as the plain fleet's runs do) and as a lone job:

- a 10-task diamond-ish DAG: ``extract`` -> four ``clean_*`` -> two ``join_*`` -> ``report`` -> ``publish``
  and ``archive``;
- a 50-wide fan-out and fan-in, as the end-to-end test has it: ``split`` -> 50 ``part_*`` -> ``merge``
  (52 tasks).

A workflow run's cost is everything its fire makes happen: the planner's marginal work for its fire, the
worker's invocation that starts it (its lane, its root tasks stored and sent), every task's message and
invocation (its run claimed and ended, its end recorded in the fan-in, the children it settles stored and
sent), its own end, the event source mapping's receives and deletes, and the indexer's invocations for the
stream records of all those writes. It is divided by the workflow's task runs. Beside it, measured in the same
run with the same meter and model: the plain 1-minute rate job of ``bench.cost``, as a fleet of 20 (ten runs
per invocation) and as a lone job (one run per worker invocation). A fleet of workflows is set against the
plain fleet (the budget reads per fleet), a lone workflow against the lone plain job.

Each task message handled in the metered window has its requests attributed to the code that made them
(``site_of``: the tickwork functions on the calling thread's stack), for the profile per task run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from bench._common import ROOT, read_blocks, write_blocks
from bench._cost_workload import (
    CYCLE_TICKS,
    WORKER_START,
    Shape,
    Workload,
    tally_dict,
)
from bench.cost import (
    DOC,
    PARTS,
    Model,
    _money,
    _num,
    _table,
    indexer_function,
    model_of,
    planned_runs,
    planner_marginal,
    requests_of,
    shape_dollars,
    total,
)

COMMAND = "python -m bench.workflow_cost"
FIGURES = Path(ROOT) / "bench" / "workflow_cost_figures.json"
PREFIX = "workflow-cost"
BLOCKS = ("summary", "profile", "dollars")
GOAL = 1.5
"""Issue 31: a task run costs at most 1.5 times a plain job run."""
PERIOD = 60
LEVEL_STEP = timedelta(milliseconds=20)
"""Fake time between a moment's messages and those its runs sent (SQS's send-to-receive, not billed)."""
PLAIN = ("60s lone", "60s fleet")
"""``bench.cost``'s shapes measured beside the workflows, as ``bench.cost`` measures them."""

# --- the workflows ------------------------------------------------------------------------------------------
DAGS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "diamond": (
        ("extract", ()),
        ("clean_a", ("extract",)),
        ("clean_b", ("extract",)),
        ("clean_c", ("extract",)),
        ("clean_d", ("extract",)),
        ("join_ab", ("clean_a", "clean_b")),
        ("join_cd", ("clean_c", "clean_d")),
        ("report", ("join_ab", "join_cd")),
        ("publish", ("report",)),
        ("archive", ("report",)),
    ),
    "fan-in": (
        ("split", ()),
        *((f"part_{index}", ("split",)) for index in range(50)),
        ("merge", tuple(f"part_{index}" for index in range(50))),
    ),
}


def dag(name: str, width: int | None = None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A named DAG; ``width`` narrows the fan-in (the tests' tiny size)."""
    if name == "fan-in" and width is not None:
        parts = tuple(f"part_{index}" for index in range(width))
        return (("split", ()), *((part, ("split",)) for part in parts), ("merge", parts))
    return DAGS[name]


@dataclass(frozen=True)
class WorkflowShape(Shape):
    dag: str = "diamond"
    width: int | None = None
    """The fan-in's width when not 50."""

    @property
    def tasks(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return dag(self.dag, self.width)


FLEET_JOBS = {"diamond": 20, "fan-in": 5}
"""A fleet of each workflow: jobs every minute, all firing in the same second (as ``bench.cost``'s fleet of
20 plain jobs does), so their tasks' messages meet in the event source mapping's batches of ten."""


def shapes() -> dict[str, WorkflowShape]:
    """Each workflow as a lone job every minute and as a fleet (``FLEET_JOBS``) every minute. The lone
    diamond over the whole cycle (14 workflow runs, 140 task runs), the lone fan-in over its first three
    minutes (3 workflow runs, 156 task runs); each fleet over the cycle's first minute (20 diamonds, 200 task
    runs; 5 fan-ins, 260 task runs), as ``bench.cost`` meters a fleet whose cycle holds too many runs to
    run under moto in a few minutes."""
    return {
        "diamond": WorkflowShape(PERIOD, 1, 0, worker_seconds=CYCLE_TICKS * 60, dag="diamond"),
        "fan-in": WorkflowShape(PERIOD, 1, 0, worker_seconds=180, dag="fan-in"),
        "diamond fleet": WorkflowShape(PERIOD, FLEET_JOBS["diamond"], 0, worker_seconds=60, dag="diamond"),
        "fan-in fleet": WorkflowShape(PERIOD, FLEET_JOBS["fan-in"], 0, worker_seconds=60, dag="fan-in"),
    }


def is_fleet(workflow: dict[str, Any]) -> bool:
    return int(workflow["jobs"]) > 1


# --- where requests come from -------------------------------------------------------------------------------
_METERING = threading.Event()
"""Set while a metered worker invocation runs: only its requests are attributed to sites."""

_SITES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("DynamoTaskEnds.record",), "fan-in: the task's end recorded"),
    (("AfterEnd.workflow_started", "DynamoTaskEnds.read"), "start: the ends read once RUNNING"),
    (("DynamoTaskEnds.read",), "fan-in: the ends read again (fail_fast)"),
    (("WorkflowStarts.start", "RunLifecycle.start_workflow"), "start: the workflow run written RUNNING"),
    (("WorkflowStarts.start", "AfterEnd.settle_tasks"), "start: the roots' messages sent"),
    (("AfterEnd.end_workflow", "RunLifecycle.end_workflow"), "end: the workflow run's end written"),
    (("AfterEnd.end_workflow",), "end: the workflow run read"),
    (("AfterEnd.continue_workflow", "DynamoJobStore.get"), "end: the job read"),
    (("AfterEnd.continue_workflow", "AfterEnd.settle_tasks"), "the children's messages sent"),
    (("Claims.claim_lane",), "the workflow run's lane lease"),
    (("Claims.claim_run",), "the task's run claimed (its first write: RUNNING)"),
    (("RunLifecycle.end_attempt",), "the task's run ended (its attempt written)"),
    (("Runtime.parents_of",), "the parents' runs read (their outputs, for the task's envelope)"),
    (("AfterEnd.continue_workflow", "DynamoRunStore.find_many"), "a repeat's children read"),
    (("Worker._records",), "the run's item read (a task's: with its workflow run's)"),
    (("Worker._handle", "DynamoRunStore.find_many"), "a task's workflow run read (eventually consistent)"),
    (("DynamoJobStore.get_with_lane",), "the job and its lane read"),
    (("DynamoTenantStore.get",), "the tenant read"),
)


def _tickwork_frames() -> list[str]:
    """Qualified names of the tickwork functions on the calling thread's stack, innermost first."""
    names = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if "/tickwork/" in filename and "tickwork_local" not in filename:
            names.append(frame.f_code.co_qualname)
        frame = frame.f_back
    return names


def site_of() -> str | None:
    """The code that makes a request of a metered worker invocation, named (see ``_SITES``); None outside
    them."""
    if not _METERING.is_set():
        return None
    frames = _tickwork_frames()
    found = set(frames)
    for needles, name in _SITES:
        if all(needle in found for needle in needles):
            return name
    return frames[0] if frames else "outside tickwork"


# --- the workload -------------------------------------------------------------------------------------------
@dataclass
class WorkflowWorkload(Workload):
    """``bench._cost_workload``'s workload with a workflow job: at each moment the worker drains the queue
    until it is empty (a task's children are sent as it ends, visible at once), each round 20 ms of fake
    time after the last one's work."""

    workflow_runs: int = 0
    task_runs: int = 0
    _reached: datetime | None = None
    _invoked: int = 0
    _sites_before: dict[str, Any] = field(default_factory=dict)

    @property
    def worker_end(self) -> datetime:
        return WORKER_START + timedelta(seconds=self.shape.worker_seconds)

    def target(self, index: int) -> dict[str, Any]:
        assert isinstance(self.shape, WorkflowShape)
        return {
            "type": "workflow",
            "tasks": [
                {
                    "id": task_id,
                    "target": {
                        "type": "http",
                        "url": self.receiver.url(f"/wf-{index}/{task_id}"),
                        "timeout_seconds": 10,
                    },
                    "depends_on": list(parents),
                }
                for task_id, parents in self.shape.tasks
            ],
        }

    def _settle(self, now: datetime, worker: Any, indexer: Any) -> datetime:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            metered = WORKER_START <= self.clock() < self.worker_end
            if metered:
                _METERING.set()
            try:
                return worker(event, context)
            finally:
                _METERING.clear()
                self._invoked += 1
                self._reached = max(self._reached or now, self.clock())

        while True:
            invoked, self._reached = self._invoked, now
            self._drain(now, invoke, measured=now >= WORKER_START)
            self._feed_index(now, indexer)
            if self._invoked == invoked:
                return now
            now = max(now, self._reached or now) + LEVEL_STEP
            self.clock.now = now

    def check(self) -> None:
        """The window planned the cycle's workflow runs once; every metered workflow run SUCCEEDED with all
        its tasks, each SUCCEEDED at its first attempt; the metered worker handled exactly their messages."""

        assert isinstance(self.shape, WorkflowShape)
        planning = [count for count in self.planned if count]
        if len(self.planned) != CYCLE_TICKS or len(planning) != 1 or self.planned[0] != self.shape.planned:
            raise RuntimeError(f"{self.shape.dag}: the window's ticks planned {self.planned}")
        runs = self.window_runs(self.worker_end)
        statuses: Counter[str] = Counter()
        tasks = 0
        for run in runs:
            statuses[f"workflow {run.status.value}{'' if run.workflow else ' (not a workflow run)'}"] += 1
            for task in self.runtime.runs.tasks_of(self._tenant, run):
                statuses[f"task {task.status.value}/{task.attempt}"] += 1
                tasks += 1
        expected = {
            "workflow SUCCEEDED": self.shape.expected_runs,
            "task SUCCEEDED/1": self.shape.expected_runs * len(self.shape.tasks),
        }
        if dict(statuses) != expected:
            raise RuntimeError(f"{self.shape.dag}: runs in the window ended {dict(statuses)}, not {expected}")
        if self.runs != len(runs) + tasks:
            raise RuntimeError(
                f"{self.shape.dag}: {self.runs} messages metered for {len(runs)} + {tasks} runs"
            )
        self.workflow_runs, self.task_runs = len(runs), tasks

    def result(self, wall_s: float) -> dict[str, Any]:
        assert isinstance(self.shape, WorkflowShape)
        return {
            **super().result(wall_s),
            "dag": self.shape.dag,
            "tasks": len(self.shape.tasks),
            "workflow_runs": self.workflow_runs,
            "task_runs": self.task_runs,
            "sites": {site: tally_dict(tally) for site, tally in sorted(self.meter.by_site.items())},
        }


def _measure_one(item: tuple[str, Any]) -> tuple[str, dict[str, Any]]:
    from bench._cost_workload import measure as measure_shape

    name, shape = item
    started = time.perf_counter()
    if isinstance(shape, WorkflowShape):
        result = measure_shape(shape, workload_type=WorkflowWorkload, site_of=site_of)
    else:
        result = measure_shape(shape)
    print(f"{name}: measured in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return name, result


def measure(workflows: dict[str, WorkflowShape] | None = None, processes: int = 2) -> dict[str, Any]:
    """The workflows and ``bench.cost``'s plain 1-minute shapes, ``processes`` at a time (each in a process
    of its own: moto's state is per process); then the create call and botocore's CPU per request."""
    from bench import cost
    from bench._cost_workload import measure_create
    from bench.worker_cpu import client_cpu_per_request

    plain = dict(cost.shapes())
    chosen = workflows or shapes()
    # The fleets first: they take longest.
    ordered = sorted(chosen.items(), key=lambda item: -item[1].jobs * len(item[1].tasks))
    work: list[tuple[str, Any]] = [*ordered, *((name, plain[name]) for name in PLAIN)]
    with ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        measured = dict(pool.map(_measure_one, work))
    return {
        "workflows": {name: measured[name] for name in chosen},
        "plain": {name: measured[name] for name in PLAIN},
        "create": measure_create(PERIOD),
        "botocore_ms": round(client_cpu_per_request(), 4),
    }


# --- pricing ------------------------------------------------------------------------------------------------
def per_task_shape(workflow: dict[str, Any]) -> dict[str, Any]:
    """A workflow's figures as ``bench.cost`` prices a shape, per task run: the worker's (every invocation,
    the workflow run's own included) over the task runs; the planner's marginal work over the task runs its
    planned fires lead to; the job's period over its tasks (a task run every ``period / tasks`` seconds: the
    create call's share and the indexer's hour items spread over the task runs)."""
    tasks = workflow["tasks"]
    return {
        **workflow,
        "runs": workflow["task_runs"],
        "planned_runs": workflow["planned_runs"] * tasks,
        "period": workflow["period"] / tasks,
    }


def task_dollars(figures: dict[str, Any], name: str, model: Model | None = None) -> dict[str, float]:
    """Dollars per task run of a workflow, by part."""
    return shape_dollars(
        per_task_shape(figures["workflows"][name]), figures["create"], model or model_of(figures)
    )


def plain_dollars(figures: dict[str, Any], name: str, model: Model | None = None) -> dict[str, float]:
    """Dollars per run of a plain job's shape, by part, as ``bench.cost`` prices it."""
    return shape_dollars(figures["plain"][name], figures["create"], model or model_of(figures))


def ratio(figures: dict[str, Any], workflow: str, plain: str) -> float:
    return sum(task_dollars(figures, workflow).values()) / sum(plain_dollars(figures, plain).values())


def _requests_per_run(shape: dict[str, Any]) -> float:
    """Every AWS request per run: the worker's, the mapping's, the indexer's and the planner's marginal."""
    indexer = indexer_function(shape)
    worker = total(shape["worker"], "requests") + total(shape, "esm")
    worker += total(indexer, "requests") if indexer is not None else 0
    return float(worker / shape["runs"] + total(planner_marginal(shape), "requests") / planned_runs(shape))


def _title(name: str, workflow: dict[str, Any]) -> str:
    if workflow["dag"] == "diamond":
        return f"diamond-ish DAG, {workflow['tasks']} tasks"
    return f"fan-out/fan-in, {workflow['tasks'] - 2} wide ({workflow['tasks']} tasks)"


def _kind(workflow: dict[str, Any]) -> str:
    return f"fleet of {workflow['jobs']}" if is_fleet(workflow) else "lone job"


def plain_of(workflow: dict[str, Any]) -> str:
    """The plain shape a workflow is set against: a fleet against the plain fleet (the budget's figure), a
    lone workflow against the lone plain job."""
    return PLAIN[1] if is_fleet(workflow) else PLAIN[0]


def ratio_of(figures: dict[str, Any], name: str) -> float:
    """A workflow's task run against a plain run of its own kind."""
    return ratio(figures, name, plain_of(figures["workflows"][name]))


def _ordered(figures: dict[str, Any]) -> list[str]:
    """The workflows, fleets first (the budget's figures), each workflow's lone job beside its fleet."""
    workflows = figures["workflows"]
    return sorted(workflows, key=lambda name: (workflows[name]["dag"], not is_fleet(workflows[name])))


def summary_block(figures: dict[str, Any]) -> str:
    rows = []
    for name in _ordered(figures):
        workflow = figures["workflows"][name]
        per_task = sum(task_dollars(figures, name).values())
        plain = sum(plain_dollars(figures, plain_of(workflow)).values())
        money, against = _money(per_task), f"{per_task / plain:.2f}x ({_verdict(per_task, plain)})"
        if is_fleet(workflow):
            money, against = f"**{money}**", f"**{per_task / plain:.2f}x** ({_verdict(per_task, plain)})"
        shape = per_task_shape(workflow)
        rows.append(
            [
                _title(name, workflow),
                _kind(workflow),
                str(workflow["workflow_runs"]),
                str(workflow["task_runs"]),
                _num(workflow["worker"]["count"] / workflow["task_runs"]),
                _num(_requests_per_run(shape)),
                money,
                f"{_kind(figures['plain'][plain_of(workflow)])}: {_money(plain)}",
                against,
            ]
        )
    for name in reversed(PLAIN):
        plain = figures["plain"][name]
        rows.append(
            [
                "plain 1-minute rate job",
                _kind(plain),
                "",
                f"{plain['runs']} runs",
                _num(plain["worker"]["count"] / plain["runs"]),
                _num(_requests_per_run(plain)),
                _money(sum(plain_dollars(figures, name).values())),
                "",
                "",
            ]
        )
    header = [
        "workflow (a run every minute)",
        "jobs",
        "workflow runs metered",
        "task runs metered",
        "worker invocations per task run",
        "requests per task run",
        "$ per million task runs",
        "plain 1-minute job's run, same kind",
        f"ratio (goal {GOAL}x)",
    ]
    return _table(header, rows)


def _verdict(per_task: float, plain: float) -> str:
    return "met" if per_task <= GOAL * plain else "**not met**"


def dollars_block(figures: dict[str, Any]) -> str:
    columns = [(f"{name}: per task run", task_dollars(figures, name)) for name in _ordered(figures)]
    columns += [(f"plain {name}: per run", plain_dollars(figures, name)) for name in PLAIN]
    rows = [[part, *(_money(dollars[part]) for _, dollars in columns)] for part in PARTS]
    rows.append(["**total**", *(f"**{_money(sum(d.values()))}**" for _, d in columns)])
    return _table(["part", *(title for title, _ in columns)], rows)


def profile_rows(
    workflow: dict[str, Any], model: Model
) -> list[tuple[str, float, float, float, float, float]]:
    """(what, requests, WRU, index WRU, RRU, $) per task run: the worker's requests by the code that made
    them, then the mapping's, the worker's invocations, the planner's and the indexer's shares."""
    from bench.cost import RRU_PRICE, SQS_PRICE, WRU_PRICE

    runs = workflow["task_runs"]
    rows = []
    for site, part in workflow["sites"].items():
        requests, wru, index_wru, rru = (
            total(part, what) for what in ("requests", "wru", "index_wru", "rru")
        )
        dollars = (wru + index_wru) * WRU_PRICE + rru * RRU_PRICE + requests_of(part, "sqs") * SQS_PRICE
        kinds = ", ".join(sorted({key.split(".", 1)[1] for key in part["requests"]}))
        rows.append(
            (f"{site} (`{kinds}`)", requests / runs, wru / runs, index_wru / runs, rru / runs, dollars / runs)
        )
    rows.sort(key=lambda row: -row[5])
    esm = sum(workflow["esm"].values())
    rows.append(
        ("event source mapping: receive and delete (batches)", esm / runs, 0, 0, 0, esm * SQS_PRICE / runs)
    )
    priced = shape_dollars(per_task_shape(workflow), {"invocations": 0, "own_cpu_s": 0}, model)
    worker = workflow["worker"]
    invocation = priced["Lambda requests"] + priced["Lambda duration"] + priced["CloudWatch Logs"]
    rows.append(
        (
            "worker invocations (requests: invocations): request, duration, logs",
            worker["count"] / runs,
            0,
            0,
            0,
            invocation,
        )
    )
    rows.append(
        (
            "planner share (the workflow run's fire)",
            *_shares(per_task_shape(workflow), "planner"),
            priced["planner share"],
        )
    )
    rows.append(
        (
            "indexer share (the stream records of every write)",
            *_shares(per_task_shape(workflow), "indexer"),
            priced["indexer share"],
        )
    )
    return rows


def _shares(shape: dict[str, Any], who: str) -> tuple[float, float, float, float]:
    if who == "planner":
        part, over = planner_marginal(shape), planned_runs(shape)
    else:
        found = indexer_function(shape)
        part, over = (found or {}), shape["runs"]
    return tuple(total(part, what) / over for what in ("requests", "wru", "index_wru", "rru"))  # type: ignore[return-value]


def profile_block(figures: dict[str, Any]) -> str:
    """Per task run of each fleet (of each workflow, for figures without fleets), with the lone job of the
    same workflow beside it."""
    model = model_of(figures)
    workflows = figures["workflows"]
    names = [name for name in _ordered(figures) if is_fleet(workflows[name])] or _ordered(figures)
    tables = []
    for name in names:
        workflow = workflows[name]
        lone = next(
            (
                other
                for other in workflows.values()
                if is_fleet(workflow) and not is_fleet(other) and other["dag"] == workflow["dag"]
            ),
            None,
        )
        beside = {row[0]: row for row in profile_rows(lone, model)} if lone else {}
        rows = []
        for what, requests, wru, index_wru, rru, dollars in profile_rows(workflow, model):
            row = [what, _num(requests), _num(wru), _num(index_wru), _num(rru), _money(dollars)]
            if lone:
                other = beside.get(what)
                row += [_num(other[1]), _money(other[5])] if other else ["0", "$0.00"]
            rows.append(row)
        everything = sum(task_dollars(figures, name, model).values())
        total_row = ["**total** (with the create call's share)", "", "", "", "", f"**{_money(everything)}**"]
        header = ["what (code, requests)", "requests", "WRU", "index WRU", "RRU", "$ per million task runs"]
        if lone:
            lone_name = next(key for key, value in workflows.items() if value is lone)
            total_row += ["", _money(sum(task_dollars(figures, lone_name, model).values()))]
            header += ["lone job: requests", "lone job: $"]
        rows.append(total_row)
        tables.append(
            f"{_title(name, workflow)}, {_kind(workflow)}, per task run:\n\n" + _table(header, rows)
        )
    return "\n\n".join(tables)


def blocks(figures: dict[str, Any]) -> dict[str, str]:
    return {
        "summary": summary_block(figures),
        "profile": profile_block(figures),
        "dollars": dollars_block(figures),
    }


def doc_blocks(text: str) -> dict[str, str]:
    return read_blocks(text, PREFIX, BLOCKS)


def save(figures: dict[str, Any]) -> None:
    FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    write_blocks(DOC, PREFIX, blocks(json.loads(FIGURES.read_text())))


def section(figures: dict[str, Any] | None = None) -> str:
    """The section of ``docs/benchmarks.md``: measures (unless given figures), saves the figures and rewrites
    the tables of ``docs/cost.md``'s "Workflow task runs"."""
    if figures is None:
        figures = measure()
        save(figures)
        figures = json.loads(FIGURES.read_text())
    generated = blocks(figures)
    verdicts = []
    for name in _ordered(figures):
        workflow = figures["workflows"][name]
        per_task = sum(task_dollars(figures, name).values())
        verdicts.append(
            f"{_title(name, workflow)}, {_kind(workflow)}: {_money(per_task)} per million task runs, "
            f"{ratio_of(figures, name):.2f}x a plain run ({_kind(figures['plain'][plain_of(workflow)])})"
        )
    fleets = [name for name in figures["workflows"] if is_fleet(figures["workflows"][name])]
    met = [name for name in fleets if ratio_of(figures, name) <= GOAL]
    outcome = (
        "The budget reads per fleet: "
        + ("every fleet meets" if len(met) == len(fleets) else f"{len(met)} of {len(fleets)} fleets meet")
        + f" the {GOAL}x goal. cost.md says what differs between a fleet and a lone job, where a fleet's task"
        + " run's money goes and what could be cut."
    )
    return "\n".join(
        [
            "## Workflow task runs: cost against a plain job run",
            "",
            f"Command: `{COMMAND}` (workflow jobs every minute, as a fleet and as a lone job, through",
            "the real planner, worker and indexer handlers under moto on a fake clock, a loopback receiver",
            "as every task's target, metered and priced as `bench.cost`; the plain 1-minute job, as a fleet",
            "of 20 and as a lone job, measured in the same run as `bench.cost` measures it; about three",
            "minutes).",
            "It also rewrites the tables of [cost.md](cost.md#workflow-task-runs), which profiles where a",
            "fleet's task run's requests go. Everything a workflow run costs (its fire's planning, its start",
            "and end, every task) over its task runs, against a plain run of the same kind (a fleet's task",
            "messages share the event source mapping's batches of ten as a plain fleet's runs do; a lone",
            f"job's pay their invocations alone); the goal (issue 31) is at most {GOAL}x. "
            + "; ".join(verdicts)
            + ". "
            + outcome,
            "",
            generated["summary"],
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--figures", type=Path, help="figures saved before, instead of measuring")
    args = parser.parse_args(argv)
    if args.figures:
        figures = json.loads(args.figures.read_text())
        write_blocks(DOC, PREFIX, blocks(figures))
    else:
        figures = measure()
        save(figures)
        print(f"saved {FIGURES} and rewrote {DOC}", file=sys.stderr)
    print(section(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
