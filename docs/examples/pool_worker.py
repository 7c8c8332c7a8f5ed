"""A tickwork pool worker: a long job done in steps, with a checkpoint after each, that resumes where it got
to when its worker dies, even by ``kill -9``.

With tickwork installed (``pip install -e .`` in its repository) and the API running (``tickwork local``):

    export TICKWORK_API_URL=http://127.0.0.1:8000 TICKWORK_TOKEN=<the tenant's token>
    python docs/examples/pool_worker.py

then, in another terminal, a job for it: 20 steps of 3 s, in the pool ``example``, with a heartbeat timeout
of 10 s so that a dead worker's run is taken over soon:

    tickwork jobs create --name pool-example --at +5s \\
        --target-json '{"type": "pool", "pool": "example", "heartbeat_timeout_seconds": 10}' \\
        --payload '{"steps": 20, "step_seconds": 3}'

The worker prints each step. ``kill -9`` it midway and start it again: once the 10 s heartbeat timeout has
passed, tickwork fails the attempt (``heartbeat_timeout``) and the new worker claims the next attempt, which
starts after the last step saved. A step's checkpoint reaches tickwork with the next heartbeat (every third of
the heartbeat timeout), so the steps of the last few seconds before the kill are done again: make steps safe
to repeat. Ctrl-C (or SIGTERM) stops the worker cleanly instead: the step under way is abandoned, and the
run is handed back at once to be resumed by the next worker.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from tickwork_client import Client, PoolWorker, RunContext

POOL = os.environ.get("TICKWORK_POOL", "example")  # the pool it works for


def work(ctx: RunContext) -> dict[str, Any]:
    payload = ctx.payload or {}
    steps = int(payload.get("steps", 20))
    step_seconds = float(payload.get("step_seconds", 3))
    saved = ctx.checkpoint or {"done": 0, "total": 0}  # None on a first attempt
    done, total = saved["done"], saved["total"]
    if done:
        print(f"{ctx.run_id} attempt {ctx.attempt}: resuming after step {done} of {steps}", flush=True)
    resumed_from = done
    while done < steps:
        ctx.check()  # raises Interrupted if the run was cancelled or lost, or the worker is stopping
        # The step's work: here a sleep that ends early when the run should stop (the step is then undone).
        if ctx.wait(step_seconds):
            ctx.check()
        total += done + 1
        done += 1
        ctx.save_checkpoint({"done": done, "total": total})  # sent with the next heartbeat
        ctx.progress(done / steps, stage=f"step {done} of {steps}")
        print(f"{ctx.run_id} attempt {ctx.attempt}: step {done} of {steps} done", flush=True)
    return {"steps": done, "total": total, "attempt": ctx.attempt, "resumed_from": resumed_from}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    client = Client(os.environ.get("TICKWORK_API_URL", "http://127.0.0.1:8000"), os.environ["TICKWORK_TOKEN"])
    worker = PoolWorker(client, worker_id=f"{socket.gethostname()}-{os.getpid()}")
    worker.register(POOL, work)
    worker.run()  # until Ctrl-C or SIGTERM


if __name__ == "__main__":
    main()
