"""APScheduler 3 as ``bench.lag``'s peer, in a process of its own:

    python -m bench._peer_apscheduler --data-dir DIR

A ``BackgroundScheduler`` with a ``SQLAlchemyJobStore`` on SQLite and a 20-thread pool, with
``misfire_grace_time=None`` and ``coalesce=False`` so it runs every fire however late, as tickwork does. Once
it runs, it takes a workload from the bench (``bench._peers``) and adds its jobs with ``add_job``:

- ``{"mode": "burst", "url": ..., "jobs": N, "at": ISO}``: N jobs on a ``DateTrigger`` at the same time;
- ``{"mode": "cron", "url": ..., "start": ISO, "end": ISO, "mix": [[second, count], ...]}``: ``count`` jobs on
  a ``CronTrigger(second=...)`` for each entry, between ``start`` and ``end``.

Every fire posts to the url (``bench._peers.post``).
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import UTC, datetime
from typing import Any

from bench._peers import post, read_workload, say, wait_for_close

THREADS = 20
_stamps = threading.local()


def fire(url: str, key: str, scheduled_for: str | None = None) -> None:
    """The job: one post. A cron fire's time comes from the executor (see ``_stamping_pool``)."""
    if scheduled_for is None:
        run_time: datetime = _stamps.pending.pop(0)
        scheduled_for = run_time.astimezone(UTC).isoformat()
        key = f"{key}@{scheduled_for}"
    post(url, key, scheduled_for)


def _stamping_pool(threads: int) -> Any:
    """APScheduler's thread pool, telling each cron call which run time it is for."""
    from apscheduler.executors.base import run_job  # type: ignore[import-untyped]
    from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]

    def run_with_times(job: Any, alias: str, run_times: list[datetime], logger_name: str) -> Any:
        _stamps.pending = list(run_times)
        return run_job(job, alias, run_times, logger_name)

    class StampingPool(ThreadPoolExecutor):  # type: ignore[misc]
        def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
            def callback(future: Any) -> None:
                error = future.exception()
                if error:
                    self._run_job_error(job.id, error, error.__traceback__)
                else:
                    self._run_job_success(job.id, future.result())

            future = self._pool.submit(run_with_times, job, job._jobstore_alias, run_times, self._logger.name)
            future.add_done_callback(callback)

    return StampingPool(threads)


def add_jobs(scheduler: Any, workload: dict[str, Any]) -> None:
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]
    from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]

    url = workload["url"]
    if workload["mode"] == "burst":
        at = datetime.fromisoformat(workload["at"])
        for index in range(workload["jobs"]):
            key = f"aps-{index}"
            scheduler.add_job(fire, DateTrigger(run_date=at), args=(url, key, at.isoformat()), id=key)
        return
    start, end = datetime.fromisoformat(workload["start"]), datetime.fromisoformat(workload["end"])
    for index, (second, count) in enumerate(workload["mix"]):
        for number in range(count):
            key = f"aps-cron-{index}-{number}"
            trigger = CronTrigger(second=second, start_date=start, end_date=end, timezone="UTC")
            scheduler.add_job(fire, trigger, args=(url, key), id=key)


def main() -> int:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore  # type: ignore[import-untyped]
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args()
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{args.data_dir}/jobs.sqlite")},
        executors={"default": _stamping_pool(THREADS)},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1000},
        timezone="UTC",
    )
    scheduler.start()
    try:
        say({"ready": True})
        workload = read_workload()
        if workload is None:
            return 0
        started = time.perf_counter()
        add_jobs(scheduler, workload)
        say({"setup_seconds": time.perf_counter() - started})
        wait_for_close()
    finally:
        scheduler.shutdown(wait=True)
    return 0


if __name__ == "__main__":
    # Through the module's own name, so the job store refers to ``bench._peer_apscheduler:fire``.
    from bench._peer_apscheduler import main as peer_main

    raise SystemExit(peer_main())
