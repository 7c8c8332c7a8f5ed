"""Fairness across tenants on the local stack (issue 30): one tenant's flood against another's steady runs.

    python -m bench.fairness --runs 3 --flood 5000

The local stack runs in this process (moto in process, the planner ticking every second with its 10 s
horizon, 4 worker pollers), its API on loopback HTTP, with two tenants. Tenant ``flood`` (its API rate raised
to 10,000 requests/s) creates ``--flood`` one-time jobs all due in the same second T, through
``POST /v1/jobs`` from 8 clients, all accepted before T; tenant ``quiet`` has 50 one-time jobs due every
0.2 s over T..T+10 s, created first. A loopback receiver records each call's arrival and its
``X-Tickwork-Scheduled-For``; lag = arrival - scheduled time. The same 50 jobs of ``quiet`` then run alone
on a fresh stack, for the baseline. Each trial of a pair starts on a fresh stack.

Goal: quiet's p99 lag under the flood at most twice its p99 alone, or 1 s, whichever is larger; no early,
duplicate or lost fire of quiet; every run of the flood delivered.

``--fifo-order`` serves the run queue in the order messages were sent (moto's own order) rather than as a
fair queue does, to show what the fair order does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import machine, median, percentile, table
from bench._flow import (
    CLIENTS,
    CREATES_PER_SECOND,
    LEAD_SECONDS,
    WAIT_PER_RUN,
    WAIT_SECONDS,
    WORKERS,
    Recorder,
    Tally,
    Trace,
    Wait,
    base_url,
    create_jobs,
    local_stack,
    logger,
    one_time,
    paragraph,
    save_figures,
    scheduled_ids,
    tally,
    wait_for,
    waits,
)

FLOOD = "flood"
QUIET = "quiet"
FLOOD_TOKEN = "tw_bench-flood"  # noqa: S105 - a throwaway token of a local tenant
QUIET_TOKEN = "tw_bench-quiet"  # noqa: S105 - a throwaway token of a local tenant
QUIET_JOBS = 50
QUIET_SPAN_SECONDS = 10.0
FLOOR_MS = 1000.0
log = logger("fairness")


@contextmanager
def queue_order(fair: bool) -> Iterator[None]:
    """The run queue served as a fair queue (the local stack's default) or in send order (moto's own)."""
    from tickwork_local import moto_sqs

    original = moto_sqs._fair
    if not fair:
        moto_sqs._fair = lambda queue, visible: visible
    try:
        yield
    finally:
        moto_sqs._fair = original


def quiet_fires(due: datetime, count: int = QUIET_JOBS, span: float = QUIET_SPAN_SECONDS) -> list[datetime]:
    """``count`` fires spread evenly over ``due`` .. ``due + span`` (the last one a step before its end)."""
    return [due + timedelta(seconds=span * index / count) for index in range(count)]


@dataclass(frozen=True)
class Trial:
    flood_runs: int
    fair: bool
    quiet: Tally
    flood: Tally | None
    create_seconds: float
    accepted_before_due: bool
    due: float
    quiet_waits: tuple[Wait, ...]

    @property
    def drain_seconds(self) -> float:
        """From T to the flood's last arrival."""
        if self.flood is None or self.flood.last is None:
            return float("nan")
        return self.flood.last - self.due

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "flood_runs": self.flood_runs,
            "fair": self.fair,
            "create_s": round(self.create_seconds, 1),
            "accepted_before_due": self.accepted_before_due,
            "quiet": _tally_summary(self.quiet),
            "quiet_waits_p99_ms": {
                part: round(percentile([getattr(wait, part) for wait in self.quiet_waits], 99))
                for part in ("planner", "queue", "worker")
            }
            if self.quiet_waits
            else None,
        }
        if self.flood is not None:
            out["flood"] = _tally_summary(self.flood)
            out["drain_s"] = round(self.drain_seconds, 1)
        return out


def _tally_summary(result: Tally) -> dict[str, Any]:
    return {
        "expected": result.expected,
        "received": result.received,
        "duplicates": result.duplicates,
        "lost": result.lost,
        "unexpected": result.unexpected,
        "early": result.early,
        "p50_ms": round(result.lag(50)),
        "p99_ms": round(result.lag(99)),
        "max_ms": round(max(result.lags_ms)) if result.lags_ms else None,
    }


def trial(flood_runs: int, *, fair: bool = True) -> Trial:
    """One trial on a fresh stack: ``flood_runs`` one-time jobs of ``flood`` due at T (none: quiet alone)
    and quiet's 50 over T..T+10 s."""
    trace = Trace()
    recorder = Recorder()
    tenants = (
        f"{FLOOD}:{FLOOD_TOKEN}:api_requests_per_second=10000,"
        f"{QUIET}:{QUIET_TOKEN}:api_requests_per_second=10000"
    )
    try:
        with local_stack(tenants, trace) as stack, queue_order(fair):
            url = base_url(stack)
            lead = LEAD_SECONDS + flood_runs / CREATES_PER_SECOND
            due = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
            fires = quiet_fires(due)
            started = time.perf_counter()
            quiet_specs = [
                one_time(f"quiet-{index}", fire, recorder.url(QUIET)) for index, fire in enumerate(fires)
            ]
            quiet_created = create_jobs(url, QUIET_TOKEN, quiet_specs)
            flood_specs = [
                one_time(f"flood-{index}", due, recorder.url(FLOOD)) for index in range(flood_runs)
            ]
            flood_created = create_jobs(url, FLOOD_TOKEN, flood_specs)
            create_seconds = time.perf_counter() - started
            failures = {**quiet_created.failures, **flood_created.failures}
            if failures:
                raise RuntimeError(f"job creates failed: {failures}")
            last_accepted = max(quiet_created.last_accepted, flood_created.last_accepted)
            ahead = due.timestamp() - last_accepted
            log(f"{QUIET_JOBS + flood_runs} jobs created in {create_seconds:.1f} s, {ahead:.1f} s before T")
            expected = {QUIET: scheduled_ids(quiet_created.job_ids, fires)}
            if flood_runs:
                expected[FLOOD] = scheduled_ids(flood_created.job_ids, [due] * flood_runs)
            until = due.timestamp() + QUIET_SPAN_SECONDS + WAIT_SECONDS + flood_runs * WAIT_PER_RUN
            wait_for(recorder, expected, until)
    finally:
        recorder.close()
    quiet = tally(recorder.of(QUIET), expected[QUIET])
    flood = tally(recorder.of(FLOOD), expected[FLOOD]) if flood_runs else None
    traced = []
    for arrival in sorted(recorder.of(QUIET), key=lambda item: item.received):
        wait = waits(arrival, trace.sent_ms.get(arrival.run_id), trace.received.get(arrival.run_id, []))
        if wait is not None and arrival.run_id in expected[QUIET]:
            traced.append(wait)
    return Trial(
        flood_runs=flood_runs,
        fair=fair,
        quiet=quiet,
        flood=flood,
        create_seconds=create_seconds,
        accepted_before_due=last_accepted < due.timestamp(),
        due=due.timestamp(),
        quiet_waits=tuple(traced),
    )


@dataclass(frozen=True)
class Figures:
    flood: list[Trial]
    alone: list[Trial]
    send_order: Trial | None
    listing_ms: tuple[float, float] | None = None
    """One listing of the run queue's visible messages with the flood's all visible: (fair order, send
    order), ms."""


class _Message:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.visible_at = 0.0
        self.delayed_until = 0.0


class _Queue:
    def __init__(self, messages: list[_Message], in_flight: int) -> None:
        self._messages = messages
        self.fifo_queue = False
        self.pending_messages = set(messages[:in_flight])


def listing_cost(visible: int, repeats: int = 50) -> tuple[float, float]:
    """ms the local stack's SQS takes to list a standard queue's visible messages (what each receive and
    each wake of a waiting receive does), fair order and send order: ``visible`` messages of one tenant,
    3 of another, 40 in flight."""
    from tickwork_local import moto_sqs

    messages = [_Message(FLOOD) for _ in range(visible)] + [_Message(QUIET) for _ in range(3)]
    queue = _Queue(messages, 40)
    costs = []
    for fair in (True, False):
        with queue_order(fair):
            started = time.perf_counter()
            for _ in range(repeats):
                moto_sqs._messages(queue)
            costs.append((time.perf_counter() - started) * 1000 / repeats)
    return costs[0], costs[1]


def run(runs: int, flood_runs: int, *, send_order: bool = True) -> Figures:
    """``runs`` pairs (the flood, then quiet alone), each trial on a fresh stack; then one flood with the
    run queue in send order."""
    flood, alone = [], []
    for number in range(runs):
        flood.append(trial(flood_runs))
        log(f"trial {number + 1}, flood: {json.dumps(flood[-1].summary())}")
        alone.append(trial(0))
        log(f"trial {number + 1}, alone: {json.dumps(alone[-1].summary())}")
    ordered = trial(flood_runs, fair=False) if send_order else None
    if ordered is not None:
        log(f"send order: {json.dumps(ordered.summary())}")
    return Figures(flood, alone, ordered, listing_cost(flood_runs))


def allowed_p99(alone_p99_ms: float) -> float:
    """The goal: quiet's p99 under the flood at most twice its p99 alone, or 1 s, whichever is larger."""
    return max(2 * alone_p99_ms, FLOOR_MS)


def faults(result: Tally) -> int:
    return result.early + result.duplicates + result.lost + result.unexpected


def _part(trial_: Trial, part: str, q: float = 99) -> float:
    return percentile([getattr(wait, part) for wait in trial_.quiet_waits], q)


def markdown(figures: Figures, command: str) -> str:
    flood_runs = figures.flood[0].flood_runs
    rows: list[tuple[object, ...]] = []
    for number, (loaded, calm) in enumerate(zip(figures.flood, figures.alone, strict=True), start=1):
        assert loaded.flood is not None
        rows.append(
            (
                number,
                f"{loaded.quiet.lag(50):,.0f}",
                f"{loaded.quiet.lag(99):,.0f}",
                f"{calm.quiet.lag(50):,.0f}",
                f"{calm.quiet.lag(99):,.0f}",
                f"{loaded.quiet.lag(99) / calm.quiet.lag(99):.1f}x",
                f"{loaded.quiet.early} / {loaded.quiet.duplicates} / {loaded.quiet.lost}",
                f"{loaded.flood.received:,} of {loaded.flood.expected:,}",
                loaded.flood.duplicates,
                f"{loaded.flood.lag(50) / 1000:.1f}",
                f"{loaded.drain_seconds:.1f}",
                f"{loaded.create_seconds:.1f}",
            )
        )
    med_loaded_p50 = median(t.quiet.lag(50) for t in figures.flood)
    med_loaded_p99 = median(t.quiet.lag(99) for t in figures.flood)
    med_alone_p50 = median(t.quiet.lag(50) for t in figures.alone)
    med_alone_p99 = median(t.quiet.lag(99) for t in figures.alone)
    med_drain = median(t.drain_seconds for t in figures.flood)
    rows.append(
        (
            "median",
            f"{med_loaded_p50:,.0f}",
            f"{med_loaded_p99:,.0f}",
            f"{med_alone_p50:,.0f}",
            f"{med_alone_p99:,.0f}",
            f"{med_loaded_p99 / med_alone_p99:.1f}x",
            "",
            "",
            "",
            f"{median(t.flood.lag(50) / 1000 for t in figures.flood if t.flood):.1f}",
            f"{med_drain:.1f}",
            f"{median(t.create_seconds for t in figures.flood):.1f}",
        )
    )
    header = ("trial", "quiet p50 ms, flood", "quiet p99 ms, flood", "quiet p50 ms, alone",
              "quiet p99 ms, alone", "p99 flood / alone", "quiet early / duplicate / lost, flood",
              "flood delivered", "flood duplicates", "flood p50 s", "flood drain s", "creates s")  # fmt: skip
    allowed = allowed_p99(med_alone_p99)
    clean = all(faults(t.quiet) == 0 for t in figures.flood + figures.alone)
    delivered = all(t.flood is not None and t.flood.lost == 0 for t in figures.flood)
    accepted = all(t.accepted_before_due for t in figures.flood + figures.alone)
    met = med_loaded_p99 <= allowed and clean and delivered and accepted
    worst = max(t.quiet.lag(99) for t in figures.flood)
    parts = [
        (
            label,
            *(f"{median(_part(t, part) for t in trials):,.0f}" for part in ("planner", "queue", "worker")),
            f"{median(t.quiet.lag(99) for t in trials):,.0f}",
        )
        for label, trials in (
            (f"{flood_runs:,} of flood, fair order (median of {len(figures.flood)})", figures.flood),
            (f"quiet alone (median of {len(figures.alone)})", figures.alone),
            *(
                ((f"{flood_runs:,} of flood, send order (one trial)", [figures.send_order]),)
                if figures.send_order is not None
                else ()
            ),
        )
    ]
    median_planner = median(_part(t, "planner") for t in figures.flood)
    median_alone_worker = median(_part(t, "worker") for t in figures.alone)
    faults_quiet = sum(faults(t.quiet) for t in figures.flood + figures.alone)
    flood_lost = sum(t.flood.lost for t in figures.flood if t.flood)
    flood_duplicates = sum(t.flood.duplicates for t in figures.flood if t.flood)
    lines = [
        "## Flow control (issue 30): one tenant's flood against another's runs",
        "",
        f"Command: `{command}`",
        "",
        paragraph(
            "The local stack in process (moto in process, the planner ticking every second with its 10 s"
            f" horizon, {WORKERS} worker pollers of batches of 10), its API on loopback HTTP, two tenants."
            f" `flood` (API rate raised to 10,000 requests/s) creates {flood_runs:,} one-time jobs all due"
            f" in the same second T through `POST /v1/jobs` from {CLIENTS} clients; `quiet` has"
            f" {QUIET_JOBS} one-time jobs due every {QUIET_SPAN_SECONDS / QUIET_JOBS:.1f} s over"
            f" T..T+{QUIET_SPAN_SECONDS:.0f} s, created first. Every create was accepted (201) before T in"
            + (" every trial" if accepted else " every trial but one (see the trials' create times)")
            + ". A loopback receiver records each call's arrival time and `X-Tickwork-Scheduled-For`;"
            " lag = arrival - scheduled time. Then `quiet`'s 50 jobs run alone on a fresh stack (the"
            " baseline). Each trial starts on a fresh stack. The run queue's messages carry their tenant as"
            " `MessageGroupId`, and the local stack serves them as an SQS fair queue does (round robin over"
            " the tenants, the ones with fewer messages in flight first)."
        ),
        "",
        table(header, rows),
        "",
        paragraph(
            "Goal: `quiet`'s p99 under the flood at most twice its p99 alone, or 1 s, whichever is larger"
            f" ({allowed:,.0f} ms), with no early, duplicate or lost fire of `quiet` and every run of"
            f" `flood` delivered: {'met' if met else 'not met'} ({med_loaded_p99:,.0f} ms, median of"
            f" {len(figures.flood)}; the worst trial {worst:,.0f} ms; `quiet`'s early, duplicate, lost and"
            f" unexpected fires in all trials: {faults_quiet}; `flood`'s lost: {flood_lost}, duplicates:"
            f" {flood_duplicates}). Alone, `quiet` runs on an idle stack ({med_alone_p99:,.0f} ms at p99),"
            f" so the ratio is large ({med_loaded_p99 / med_alone_p99:.1f}x) and the 1 s floor is the"
            " bound that applies."
        ),
        "",
        paragraph(
            "Where `quiet`'s lag went, p99 of each part in ms, from the run queue's sends and receives"
            " (botocore hooks on the stack's session): planner = the fire's message sent after its time;"
            " queue = its message still in the queue after its time (waiting for a poller); worker = from"
            " the receive (or the fire time, when the message came early and the worker slept out the rest)"
            " to the call."
        ),
        "",
        table(("workload", "planner", "queue", "worker", "lag p99"), parts),
        "",
    ]
    ordered = figures.send_order
    if ordered is not None and ordered.flood is not None:
        lines += [
            paragraph(
                "With the run queue served in send order (moto's own order: `--fifo-order`, one trial),"
                f" `quiet`'s runs wait behind the flood: p99 {ordered.quiet.lag(99):,.0f} ms, the flood"
                f" drained in {ordered.drain_seconds:.1f} s, and no fire of either tenant was lost"
                f" ({ordered.quiet.lost + ordered.flood.lost} lost,"
                f" {ordered.quiet.duplicates + ordered.flood.duplicates} duplicates); in the fair order the"
                f" flood drained in {med_drain:.1f} s (median of {len(figures.flood)})."
                + (
                    " The fair order's listing of the queue (each receive groups the visible messages by"
                    f" tenant) takes {figures.listing_ms[0]:.2f} ms with the flood's {flood_runs:,}"
                    f" messages visible, against {figures.listing_ms[1]:.2f} ms in send order (timed apart"
                    " from the stack)."
                    if figures.listing_ms is not None
                    else ""
                )
            ),
            "",
        ]
    lines += [
        paragraph(
            f"The flood's {flood_runs:,} runs drain at the local stack's pace (moto in one process, see the"
            f" trigger lag section): {flood_runs / med_drain:.0f} runs/s here. A run of `quiet` that comes"
            " due meanwhile is served at the next receive, ahead of the flood's backlog; what it still waits"
            " for is a poller to come back from a batch of the flood's runs (the queue part) and that"
            f" batch's share of the process (the worker part, against {median_alone_worker:,.0f} ms alone)."
            + (
                f" None of it waits in the planner: the flood's {flood_runs:,} jobs were planned and their"
                " fires sent before T, and each of `quiet`'s fires was sent before its time."
                if median_planner == 0
                else f" The planner sent some of `quiet`'s fires late ({median_planner:,.0f} ms at p99)."
            )
        ),
    ]
    return "\n".join(lines)


def section(runs: int = 3, flood_runs: int = 5000) -> str:
    return markdown(run(runs, flood_runs), "python -m bench --only fairness")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="trials of each workload (default 3)")
    parser.add_argument("--flood", type=int, default=5000, help="the flood's one-time jobs (default 5000)")
    parser.add_argument(
        "--fifo-order", action="store_true", help="also one flood with the run queue in send order"
    )
    args = parser.parse_args()
    figures = run(args.runs, args.flood, send_order=args.fifo_order)
    save_figures("fairness", figures)
    print(f"machine: {machine()}\n")
    print(markdown(figures, " ".join(["python -m bench.fairness", *sys.argv[1:]])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
