"""No handler or tickwork module reads the environment or builds a boto3 client at import time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import importlib, json, os, pkgutil, sys
    from collections.abc import MutableMapping

    reads = []

    import sysconfig
    STDLIB = sysconfig.get_paths()["stdlib"]

    def note(key):
        # The first caller outside the standard library made the read; only tickwork's own code counts.
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith("<frozen") or path.startswith(STDLIB) and "site-packages" not in path:
                frame = frame.f_back
                continue
            if "/layers/tickwork/" in path or "/functions/" in path:
                reads.append(f"{key} by {path}:{frame.f_lineno}")
            return

    class WatchedEnviron(MutableMapping):
        def __init__(self, inner):
            self.inner = inner
        def __getitem__(self, key):
            note(key)
            return self.inner[key]
        def __setitem__(self, key, value):
            self.inner[key] = value
        def __delitem__(self, key):
            del self.inner[key]
        def __iter__(self):
            note("<iterated>")
            return iter(self.inner)
        def __len__(self):
            return len(self.inner)

    os.environ = WatchedEnviron(os.environ)
    os.environ["TICKWORK_JOBS_TABLE"] = "watched"

    import boto3, boto3.session
    clients = []
    def refuse(*args, **kwargs):
        clients.append(args[:1])
        raise RuntimeError("boto3 client built at import time")
    boto3.client = boto3.resource = refuse
    boto3.session.Session.client = boto3.session.Session.resource = refuse

    import tickwork
    modules = [m.name for m in pkgutil.walk_packages(tickwork.__path__, "tickwork.")]
    modules += ["functions.api.handler", "functions.authorizer.handler"]
    for name in modules:
        importlib.import_module(name)
    print(json.dumps({"modules": modules, "reads": sorted(set(reads)), "clients": len(clients)}))
    """
)


def test_importing_every_module_reads_no_settings_and_builds_no_client() -> None:
    # Given a fresh interpreter that records environment reads and refuses boto3 clients
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "", "POWERTOOLS_TRACE_DISABLED": "1", "PYTHONPATH": str(ROOT)},
    )
    # When every tickwork module and every handler is imported
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # Then none of them read the environment or built a client
    assert "tickwork.api.app" in report["modules"]
    assert "functions.api.handler" in report["modules"]
    assert report["reads"] == []
    assert report["clients"] == 0
