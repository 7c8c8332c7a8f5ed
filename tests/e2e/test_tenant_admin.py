"""Tenant administration against a running `tickwork local`: `tickwork tenants` through the moto endpoint the
banner prints, the default tenant's API limit raised so that four clients creating jobs at once get no 429,
and tenants' settings given at start (``TICKWORK_LOCAL_TENANTS`` entries, ``--tenant-setting``), kept
across a restart."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tickwork_local.stack import LOCAL_REGION

from tests.e2e.conftest import Local, start_local, stop_local, tickwork_command

pytestmark = pytest.mark.e2e

BASH = shutil.which("bash") or "/bin/bash"
CLIENTS = 4
CREATES_PER_CLIENT = 25
JOB = {
    "schedule": {"type": "rate", "every_seconds": 3600},
    "target": {"type": "http", "url": "http://127.0.0.1:9/x"},
}


def banner_token(local: Local, tenant_id: str) -> str:
    found = re.search(
        rf"^tenant {tenant_id}: token (\S+) signing secret", "".join(local.output), re.MULTILINE
    )
    assert found is not None, "".join(local.output)
    return found.group(1)


def tenants(local: Local, *argv: str) -> subprocess.CompletedProcess[str]:
    """`tickwork tenants ...` in its own process, pointed at the stack's moto endpoint as the banner says."""
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": local.moto_endpoint,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }
    env.pop("TICKWORK_TENANTS_TABLE", None)
    env.pop("AWS_PROFILE", None)
    return subprocess.run(
        [*tickwork_command(), "tenants", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def tenant_document(local: Local, tenant_id: str) -> dict[str, Any]:
    shown = tenants(local, "get", tenant_id, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    document: dict[str, Any] = json.loads(shown.stdout)
    return document


def status_of(local: Local, token: str) -> int:
    """One GET /v1/jobs, a 429 answered as it is (not waited out)."""
    address = urlsplit(local.url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    try:
        connection.request("GET", "/v1/jobs", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def create_burst(local: Local, token: str) -> Counter[int]:
    """Four clients, each on its own connection, creating jobs as fast as the API answers them, without
    waiting out a 429: the statuses they got."""
    address = urlsplit(local.url)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(index: int) -> None:
        connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
        start.wait()
        try:
            for number in range(CREATES_PER_CLIENT):
                body = json.dumps({**JOB, "name": f"burst-{index}-{number}-{uuid.uuid4().hex[:8]}"})
                headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
                connection.request("POST", "/v1/jobs", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                with lock:
                    statuses[response.status] += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(index,)) for index in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def test_update_raises_the_default_tenants_api_limit_so_four_clients_get_no_429(tmp_path: Path) -> None:
    # Given a local stack with its one default tenant, and the banner saying how to reach its tables
    local = start_local(tmp_path, tenants=None)
    try:
        token = banner_token(local, "default")
        banner = "".join(local.output)
        assert f"AWS endpoint (moto): {local.moto_endpoint}" in banner
        printed = re.search(
            r"^  (AWS_ENDPOINT_URL=\S+ .*) \\\n\s+(.* tenants update default .*)$", banner, re.M
        )
        assert printed is not None, banner
        assert f"AWS_ENDPOINT_URL={local.moto_endpoint}" in printed.group(1)

        # When the operator holds it to 5 requests a second, four clients creating at once get 429s
        assert tenants(local, "update", "default", "--api-requests-per-second", "5").returncode == 0
        held = create_burst(local, token)
        assert held[429] > 0 and set(held) <= {201, 429}, held

        # And the banner's own command, run as printed, changes the limit of the running stack
        command = f"{printed.group(1)} {printed.group(2)}"
        ran = subprocess.run([BASH, "-c", command], capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0, ran.stderr
        assert tenant_document(local, "default")["api_requests_per_second"] == 500

        # Then, raised further, the same four clients get no 429 at all
        raised = tenants(local, "update", "default", "--api-requests-per-second", "10000", "-o", "json")
        assert raised.returncode == 0, raised.stderr
        assert json.loads(raised.stdout)["api_requests_per_second"] == 10000
        statuses = create_burst(local, token)
        assert statuses == Counter({201: CLIENTS * CREATES_PER_CLIENT}), statuses
        assert tenant_document(local, "default")["job_count"] == held[201] + CLIENTS * CREATES_PER_CLIENT
    finally:
        stop_local(local)


def test_settings_given_at_start_apply_and_a_restart_keeps_what_was_not_given(tmp_path: Path) -> None:
    # Given acme held to 2 API requests a second by its entry, and every local tenant to 7 jobs by the flag
    spec = "acme:tw_admin_acme:api_requests_per_second=2,globex:tw_admin_globex"
    local = start_local(tmp_path, tenants=spec, arguments=["--tenant-setting", "max_jobs=7"])
    try:
        banner = "".join(local.output)
        assert "tenant acme settings at start: max_jobs=7, api_requests_per_second=2" in banner
        listed = tenants(local, "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        settings = {
            item["tenant_id"]: (item["max_jobs"], item["api_requests_per_second"])
            for item in json.loads(listed.stdout)["items"]
        }
        assert settings == {"acme": (7, 2), "globex": (7, 50)}
        statuses = [status_of(local, "tw_admin_acme") for _ in range(4)]
        assert 429 in statuses
        # While it runs, the operator raises globex's limit
        assert tenants(local, "update", "globex", "--api-requests-per-second", "300").returncode == 0
    finally:
        assert stop_local(local) < 5
    # When it starts again on the same data directory without the flag
    again = start_local(tmp_path, tenants=spec)
    try:
        # Then acme's entry applies again, and what was not given at this start stays as it was
        acme, globex = tenant_document(again, "acme"), tenant_document(again, "globex")
        assert (acme["api_requests_per_second"], acme["max_jobs"]) == (2, 7)
        assert (globex["api_requests_per_second"], globex["max_jobs"]) == (300, 7)
    finally:
        stop_local(again)
