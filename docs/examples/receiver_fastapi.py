"""A tickwork webhook receiver on FastAPI: check the signature on the raw body, then answer 2xx.

With tickwork installed (``pip install -e .`` in its repository), then:

    pip install fastapi uvicorn
    export TICKWORK_SIGNING_SECRET=<the tenant's signing secret>
    uvicorn --factory receiver_fastapi:create_app --port 9000

and give the job the target ``{"type": "http", "url": "http://<this host>:9000/hook"}``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from tickwork_client import verify_signature


def handle(event: dict[str, Any]) -> None:
    print(f"run {event['run_id']} attempt {event['attempt']}: {event['payload']}")


def create_app(secret: str | None = None, on_event: Callable[[dict[str, Any]], None] = handle) -> FastAPI:
    signing_secret = secret or os.environ["TICKWORK_SIGNING_SECRET"]
    app = FastAPI()
    done: set[str] = set()  # use a table with a unique key in production

    @app.post("/hook", status_code=204)
    async def hook(request: Request) -> Response:
        # The raw bytes, not a parsed model: JSON parsed and serialised again would not match the signature.
        body = await request.body()
        signature = request.headers.get("X-Tickwork-Signature")
        if not verify_signature(signing_secret, signature, body, now_epoch=int(time.time())):
            # A 4xx is permanent: tickwork does not retry a request it signed with another secret.
            raise HTTPException(status_code=401, detail="bad signature")
        key = request.headers["Idempotency-Key"]  # the run id: the same on every attempt of the run
        if key not in done:
            on_event(json.loads(body))
            done.add(key)
        return Response(status_code=204)  # a duplicate too: its work is already done

    return app
