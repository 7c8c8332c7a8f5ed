"""A tenant's throttle on run starts on the local stack (issue 30): 200 runs due at once, 10 runs/s, burst 20.

    python -m bench.throttle --runs 3 --jobs 200

The local stack runs in this process (as in ``bench.fairness``), with one tenant whose settings are
``max_runs_per_second=10`` and ``burst=20`` (``TICKWORK_LOCAL_TENANTS``), its API rate raised for the creates.
It creates ``--jobs`` one-time jobs all due in the same second T through ``POST /v1/jobs`` from 8 clients,
all accepted before T. A loopback receiver records each call's arrival: a start is a call. The runs over the
throttle reserve their start (GCRA) and their messages come back for it; none is dropped.

Goal: at most 20 starts in the first second, about 10 a second after it, none dropped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import machine, median, table
from bench._flow import (
    CREATES_PER_SECOND,
    LEAD_SECONDS,
    WAIT_SECONDS,
    Recorder,
    Tally,
    Trace,
    base_url,
    create_jobs,
    local_stack,
    logger,
    one_time,
    paragraph,
    scheduled_ids,
    tally,
    wait_for,
)

TENANT = "paced"
TOKEN = "tw_bench-paced"  # noqa: S105 - a throwaway token of a local tenant
RATE = 10
BURST = 20
log = logger("throttle")


# --- counting ---------------------------------------------------------------------------------------------
def starts_per_second(times: Sequence[float], due: float) -> list[int]:
    """Starts in each second from ``due``: [due, due+1), [due+1, due+2), ... up to the last start's second.
    A start before ``due`` (an early fire) counts in the first."""
    if not times:
        return []
    seconds = [max(0, math.floor(moment - due)) for moment in times]
    counts = [0] * (max(seconds) + 1)
    for second in seconds:
        counts[second] += 1
    return counts


def most_in_one_second(times: Sequence[float]) -> int:
    """The most starts in any one-second window [t, t+1)."""
    ordered = sorted(times)
    most = 0
    low = 0
    for high, moment in enumerate(ordered):
        while ordered[low] <= moment - 1.0:
            low += 1
        most = max(most, high - low + 1)
    return most


def steady_rate(counts: Sequence[int]) -> float:
    """The median starts per second after the first second, the last (partial) second left out."""
    middle = list(counts[1:-1])
    return median(middle) if middle else float("nan")


# --- a trial ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    result: Tally
    counts: tuple[int, ...]
    most_in_a_second: int
    create_seconds: float
    accepted_before_due: bool
    due: float
    receives: int
    """Messages of the tenant's runs the pollers received: a run over the throttle is received twice."""

    @property
    def first_second(self) -> int:
        return self.counts[0] if self.counts else 0

    @property
    def steady(self) -> float:
        return steady_rate(self.counts)

    @property
    def last_start_seconds(self) -> float:
        return (self.result.last or self.due) - self.due

    def summary(self) -> dict[str, Any]:
        return {
            "expected": self.result.expected,
            "received": self.result.received,
            "duplicates": self.result.duplicates,
            "lost": self.result.lost,
            "early": self.result.early,
            "first_second": self.first_second,
            "most_in_a_second": self.most_in_a_second,
            "steady_per_s": self.steady,
            "counts": list(self.counts),
            "last_start_s": round(self.last_start_seconds, 1),
            "receives": self.receives,
            "create_s": round(self.create_seconds, 1),
            "accepted_before_due": self.accepted_before_due,
        }


def trial(jobs: int) -> Trial:
    trace = Trace()
    recorder = Recorder()
    tenants = f"{TENANT}:{TOKEN}:api_requests_per_second=10000:max_runs_per_second={RATE}:burst={BURST}"
    try:
        with local_stack(tenants, trace) as stack:
            due = (datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS + jobs / CREATES_PER_SECOND)).replace(
                microsecond=0
            )
            started = time.perf_counter()
            specs = [one_time(f"paced-{index}", due, recorder.url(TENANT)) for index in range(jobs)]
            created = create_jobs(base_url(stack), TOKEN, specs)
            create_seconds = time.perf_counter() - started
            if created.failures:
                raise RuntimeError(f"job creates failed: {created.failures}")
            ahead = due.timestamp() - created.last_accepted
            log(f"{jobs} jobs created in {create_seconds:.1f} s, {ahead:.1f} s before T")
            expected = scheduled_ids(created.job_ids, [due] * jobs)
            wait_for(recorder, {TENANT: expected}, due.timestamp() + jobs / RATE + WAIT_SECONDS)
    finally:
        recorder.close()
    arrivals = recorder.of(TENANT)
    times = [arrival.received for arrival in arrivals]
    return Trial(
        result=tally(arrivals, expected),
        counts=tuple(starts_per_second(times, due.timestamp())),
        most_in_a_second=most_in_one_second(times),
        create_seconds=create_seconds,
        accepted_before_due=created.last_accepted < due.timestamp(),
        due=due.timestamp(),
        receives=trace.receives_by_tenant[TENANT],
    )


def run(runs: int, jobs: int) -> list[Trial]:
    trials = []
    for number in range(runs):
        trials.append(trial(jobs))
        log(f"trial {number + 1}: {json.dumps(trials[-1].summary())}")
    return trials


def markdown(trials: list[Trial], command: str) -> str:
    jobs = trials[0].result.expected
    rows: list[tuple[object, ...]] = [
        (
            number,
            f"{t.result.received} of {t.result.expected}",
            t.result.duplicates,
            t.result.lost,
            t.result.early,
            t.first_second,
            t.most_in_a_second,
            f"{t.steady:.0f}",
            f"{t.last_start_seconds:.1f}",
            t.receives,
        )
        for number, t in enumerate(trials, start=1)
    ]
    first = median(t.first_second for t in trials)
    most = max(t.most_in_a_second for t in trials)
    steady = median(t.steady for t in trials)
    rows.append(
        (
            "median",
            "",
            "",
            "",
            "",
            f"{first:.0f}",
            f"{median(t.most_in_a_second for t in trials):.0f}",
            f"{steady:.0f}",
            f"{median(t.last_start_seconds for t in trials):.1f}",
            f"{median(t.receives for t in trials):.0f}",
        )
    )
    header = ("trial", "delivered", "duplicates", "lost", "early", "starts in the first second",
              "most starts in any 1 s", "starts per second after (median)", "last start after T, s",
              "messages received")  # fmt: skip
    dropped = sum(t.result.lost + t.result.duplicates + t.result.early for t in trials)
    met = all(t.first_second <= BURST for t in trials) and abs(steady - RATE) <= 1 and dropped == 0
    return "\n".join(
        [
            "## Flow control (issue 30): a tenant's throttle",
            "",
            f"Command: `{command}`",
            "",
            paragraph(
                "The local stack in process, as in the section above, with one tenant at"
                f" `max_runs_per_second={RATE}` and `burst={BURST}` (`TICKWORK_LOCAL_TENANTS`), its API"
                f" rate raised for the creates. It creates {jobs} one-time jobs all due in the same second T"
                " through `POST /v1/jobs` from 8 clients, all accepted before T"
                + ("" if all(t.accepted_before_due for t in trials) else " (but in one trial)")
                + ". A start is a call at the loopback receiver; starts are counted per second from T. A"
                " run over the throttle reserves its start (GCRA) and its message is sent again for the"
                " second after it; messages received counts every receive of the tenant's messages by the"
                " pollers."
            ),
            "",
            table(header, rows),
            "",
            f"Per second from T, trial 1: {', '.join(str(count) for count in trials[0].counts)}.",
            "",
            paragraph(
                f"Goal: at most {BURST} starts in the first second, about {RATE} a second after, none"
                f" dropped: {'met' if met else 'not met'} ({first:.0f} in the first second, median of"
                f" {len(trials)}; {steady:.0f} a second after; lost, duplicate and early starts in all"
                f" trials: {dropped})."
            ),
            *(_rounding(trials, first, most) if first < BURST else ()),
        ]
    )


def _rounding(trials: list[Trial], first: float, most: int) -> tuple[str, ...]:
    """Why the first second holds fewer starts than the burst: the throttled runs' whole-second delays."""
    capacity = BURST - RATE + 1
    ideal = (trials[0].result.expected - capacity) / RATE
    return (
        "",
        paragraph(
            f"The first second holds {first:.0f} starts, not up to {BURST}: the throttle lets"
            f" `burst - rate + 1 = {capacity}` start at once and reserves the next at one every"
            f" {1000 // RATE} ms (T+0.1 s, T+0.2 s, ...), but a reserved start is sent again with a"
            " whole-second `DelaySeconds` rounded up (`ceil(start - now)`, in the worker's `handle`), so"
            " the runs that reserved T+0.1 .. T+0.9 s start at T+1 s, and every later one in the second"
            " after its reservation. The pace is the rate, but the burst"
            f" above the first {capacity} is not used, and each run over it starts up to a second after"
            f" its reservation: the last at T+{median(t.last_start_seconds for t in trials):.1f} s"
            f" (median) against its reserved T+{ideal:.1f} s. The same rounding brings each second's"
            " runs back together, within a fraction of a second of its start, rather than one every"
            f" {1000 // RATE} ms: a window of one second that straddles two such bunches holds the most"
            f" starts, {most} here"
            + (
                ", one over the burst: the throttle spaces the starts it grants, and each call comes the"
                " worker's own time after its grant, so the first second's calls, made a little after T,"
                " and the next second's, made as soon as their messages came back, can fall within one"
                " second."
                if most > BURST
                else "."
            )
        ),
        "",
        paragraph(
            "Sending it again with the delay rounded down would start each run at its reservation (the"
            " worker already sleeps out what is left of a reserved start on arrival), at the price of"
            " that sleep, under a second a throttled run, in the worker; that is a change to the worker,"
            " not to the local stack, and is left as it is here."
        ),
    )


def section(runs: int = 3, jobs: int = 200) -> str:
    return markdown(run(runs, jobs), "python -m bench --only throttle")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="trials (default 3)")
    parser.add_argument("--jobs", type=int, default=200, help="one-time jobs due at once (default 200)")
    args = parser.parse_args()
    trials = run(args.runs, args.jobs)
    print(f"machine: {machine()}\n")
    print(markdown(trials, " ".join(["python -m bench.throttle", *sys.argv[1:]])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
