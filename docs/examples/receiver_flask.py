"""A tickwork webhook receiver on Flask: check the signature on the raw body, then answer 2xx.

With tickwork installed (``pip install -e .`` in its repository), then:

    pip install flask
    export TICKWORK_SIGNING_SECRET=<the tenant's signing secret>
    flask --app receiver_flask run --port 9000

and give the job the target ``{"type": "http", "url": "http://<this host>:9000/hook"}``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, request
from tickwork_client import verify_signature


def handle(event: dict[str, Any]) -> None:
    print(f"run {event['run_id']} attempt {event['attempt']}: {event['payload']}")


def create_app(secret: str | None = None, on_event: Callable[[dict[str, Any]], None] = handle) -> Flask:
    signing_secret = secret or os.environ["TICKWORK_SIGNING_SECRET"]
    app = Flask(__name__)
    done: set[str] = set()  # use a table with a unique key in production

    @app.post("/hook")
    def hook() -> tuple[str, int]:
        body = request.get_data()  # the raw bytes: JSON parsed and serialised again would not match
        signature = request.headers.get("X-Tickwork-Signature")
        if not verify_signature(signing_secret, signature, body, now_epoch=int(time.time())):
            # A 4xx is permanent: tickwork does not retry a request it signed with another secret.
            return "bad signature", 401
        key = request.headers["Idempotency-Key"]  # the run id: the same on every attempt of the run
        if key not in done:
            on_event(json.loads(body))
            done.add(key)
        return "", 204  # a duplicate too: its work is already done

    return app
