"""huey as ``bench.lag``'s peer: a ``SqliteHuey`` on the file named by ``$BENCH_HUEY_DB`` and its task.

The consumer is huey's own, in a process of its own, 20 worker threads:

    BENCH_HUEY_DB=FILE python -m huey.bin.huey_consumer bench._peer_huey.huey -w 20 -k thread

The producer, in another process, takes a burst from the bench (``bench._peers``) and schedules its tasks:

    BENCH_HUEY_DB=FILE python -m bench._peer_huey

``{"mode": "burst", "url": ..., "jobs": N, "at": ISO}``: N calls of ``fire.schedule(..., eta=at)``. huey
keeps a scheduled task in its schedule once a worker has read it from the queue; the consumer's scheduler
moves due ones back to the queue once a second (its default and finest ``--scheduler-interval``), where
the workers take them. Each run posts to the url (``bench._peers.post``).
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime

from huey import SqliteHuey  # type: ignore[import-untyped]

from bench._peers import post, read_workload, say

DB_VARIABLE = "BENCH_HUEY_DB"
huey = SqliteHuey(
    "bench-lag", filename=os.environ.get(DB_VARIABLE) or os.path.join(tempfile.gettempdir(), "bench-huey.db")
)


@huey.task()  # type: ignore[untyped-decorator]
def fire(url: str, key: str, scheduled_for: str) -> None:
    post(url, key, scheduled_for)


def produce() -> int:
    say({"ready": True})
    workload = read_workload()
    if workload is None:
        return 0
    at = datetime.fromisoformat(workload["at"])
    started = time.perf_counter()
    for index in range(workload["jobs"]):
        fire.schedule(args=(workload["url"], f"huey-{index}", at.isoformat()), eta=at)
    say({"setup_seconds": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    # Through the module's own name: huey names a task by its module, and the consumer imports this one as
    # ``bench._peer_huey``.
    from bench._peer_huey import produce as peer_produce

    raise SystemExit(peer_produce())
