"""Figures of the run path before v2 (commit 545a425), kept so ``bench.cost`` can show both.

They were measured with the same meter (``bench._cost_meter``) by a script run against that commit: for the
10-second and the 1-minute period, one rate job of a tenant with no in-flight limit, two days of history
seeded straight into the runs table (one SUCCEEDED run per past fire, with its attempt), then the real planner
ticks (every 60 s, over all due shards, a 300 s horizon) and the real worker's record handler on a fake clock,
from two minutes in. Totals over the measured runs: requests, WRU, index WRU and RRU by operation, the worker
invocations (non-empty receives: each held one message), and the planner ticks' own tallies (``tick_*``, also
inside the totals). The script polled the queue once a fake second and deleted messages one by one:
``bench.cost`` leaves those empty polls out and counts one receive and one delete per invocation, as the event
source mapping makes them.

The 1-second job was not measured: the old worker's overlap query read the job's whole history on every run
(the 10-second job with two days of history took 46 minutes under moto for its 12 runs), and the 1-second
measurement did not complete. ``QUOTED`` holds the figures published for it before, which were measured
without seeded history.
"""

from typing import Any

BEFORE_WAIT_S = 0.5
"""The worker's wait before the fire per invocation on that run path: its planner sent each fire at the tick
with ``DelaySeconds = floor(fire - now)``, so with ticks half a second into their second a message arrived
half a second early and the worker waited it out. Measured by ``bench.cost`` on the lone jobs at commit
6b8ae22 (the planner still sent that way; 500 ms per invocation in every shape); the present planner times
its sends, so the lone job of today no longer lends this figure."""
BEFORE_TRACED = True
"""That run path was deployed with active X-Ray tracing of every function."""

BEFORE_COMMIT = "545a425"
BEFORE_HOW = (
    "the same meter; one rate job with two days of seeded history; the real planner ticks and worker handler "
    "on a fake clock"
)
QUOTED = {
    "1": "not re-measured; quoted: $12 (bench), $21-22 (from outside), both without history",
}

BEFORE: dict[str, Any] = {
    "10": {
        "history": "2 days (17,280 runs)",
        "history_runs": 17280,
        "idle_requests": {
            "dynamodb.GetItem": 25,
            "dynamodb.Query": 20,
            "dynamodb.UpdateItem": 25,
            "sqs.SendMessageBatch": 25,
        },
        "idle_rru": {"dynamodb.GetItem": 25.0, "dynamodb.Query": 10.0},
        "index_wru": {"dynamodb.PutItem": 36.0, "dynamodb.UpdateItem": 163.0},
        "invocations": 12,
        "messages": 12,
        "period": 10,
        "requests": {
            "dynamodb.BatchGetItem": 2,
            "dynamodb.GetItem": 61,
            "dynamodb.PutItem": 24,
            "dynamodb.Query": 204,
            "dynamodb.UpdateItem": 63,
            "sqs.DeleteMessage": 12,
            "sqs.ReceiveMessage": 132,
            "sqs.SendMessageBatch": 27,
        },
        "rru": {"dynamodb.BatchGetItem": 2.0, "dynamodb.GetItem": 61.0, "dynamodb.Query": 16404.5},
        "runs": 12,
        "tick_index_wru": {"dynamodb.PutItem": 36.0, "dynamodb.UpdateItem": 4.0},
        "tick_requests": {
            "dynamodb.BatchGetItem": 2,
            "dynamodb.PutItem": 12,
            "dynamodb.Query": 40,
            "dynamodb.UpdateItem": 2,
            "sqs.SendMessageBatch": 2,
        },
        "tick_rru": {"dynamodb.BatchGetItem": 2.0, "dynamodb.Query": 20.0},
        "tick_wru": {"dynamodb.PutItem": 12.0, "dynamodb.UpdateItem": 2.0},
        "ticks": 2,
        "wall_s": 2760.9,
        "wru": {"dynamodb.PutItem": 24.0, "dynamodb.UpdateItem": 63.0},
    },
    "60": {
        "history": "2 days (2,880 runs)",
        "history_runs": 2880,
        "idle_requests": {
            "dynamodb.GetItem": 5,
            "dynamodb.Query": 20,
            "dynamodb.UpdateItem": 5,
            "sqs.SendMessageBatch": 5,
        },
        "idle_rru": {"dynamodb.GetItem": 5.0, "dynamodb.Query": 10.0},
        "index_wru": {"dynamodb.PutItem": 30.0, "dynamodb.UpdateItem": 105.0},
        "invocations": 10,
        "messages": 10,
        "period": 60,
        "requests": {
            "dynamodb.BatchGetItem": 10,
            "dynamodb.GetItem": 35,
            "dynamodb.PutItem": 20,
            "dynamodb.Query": 240,
            "dynamodb.UpdateItem": 45,
            "sqs.DeleteMessage": 10,
            "sqs.ReceiveMessage": 610,
            "sqs.SendMessageBatch": 15,
        },
        "rru": {"dynamodb.BatchGetItem": 10.0, "dynamodb.GetItem": 35.0, "dynamodb.Query": 2385.0},
        "runs": 10,
        "tick_index_wru": {"dynamodb.PutItem": 30.0, "dynamodb.UpdateItem": 20.0},
        "tick_requests": {
            "dynamodb.BatchGetItem": 10,
            "dynamodb.PutItem": 10,
            "dynamodb.Query": 200,
            "dynamodb.UpdateItem": 10,
            "sqs.SendMessageBatch": 10,
        },
        "tick_rru": {"dynamodb.BatchGetItem": 10.0, "dynamodb.Query": 100.0},
        "tick_wru": {"dynamodb.PutItem": 10.0, "dynamodb.UpdateItem": 10.0},
        "ticks": 10,
        "wall_s": 243.4,
        "wru": {"dynamodb.PutItem": 20.0, "dynamodb.UpdateItem": 45.0},
    },
}
