"""A Python client of the tickwork HTTP API (v1), and the signature check for webhook receivers.

    from tickwork_client import Client

    client = Client("http://127.0.0.1:8000", token)
    job = client.create_job({"name": "hello", "schedule": {...}, "target": {...}})
    for run in client.iter_runs(job.job_id):
        print(run.run_id, run.status)

A pool's worker (``PoolWorker``) claims the runs of jobs whose target is ``{"type": "pool", ...}``.

See ``docs/client.md``.
"""

from __future__ import annotations

# Re-exported, not copied: one implementation, so receivers can never disagree with how tickwork signs.
from tickwork.targets.envelope import verify_signature

from tickwork_client.client import Client
from tickwork_client.errors import (
    ApiError,
    ClientError,
    Conflict,
    InvalidRequest,
    LeaseLost,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
    UnexpectedResponse,
    Unreachable,
)
from tickwork_client.retry import NO_RETRIES, RetryPolicy
from tickwork_client.worker import Interrupted, PermanentFailure, PoolWorker, RunContext

__all__ = [
    "NO_RETRIES",
    "ApiError",
    "Client",
    "ClientError",
    "Conflict",
    "Interrupted",
    "InvalidRequest",
    "LeaseLost",
    "NotFound",
    "PermanentFailure",
    "PoolWorker",
    "RateLimited",
    "RetryPolicy",
    "RunContext",
    "ServerError",
    "Unauthorized",
    "UnexpectedResponse",
    "Unreachable",
    "verify_signature",
]
