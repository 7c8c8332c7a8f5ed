"""The web console's static files, which the local gateway serves at ``/`` as CloudFront serves them from S3
on AWS (``infra/web.py``).

Every path under ``/v1/`` (and ``/v1`` itself) is the API's, whatever the method, and reaches the gateway as
before; only GET and HEAD of every other path come here. A file of the built console
(``infra/console/dist``, built by ``make console``) is answered with its content type; a path whose last
segment has no dot (a console route such as ``/jobs/01J...``) gets ``index.html``, so that a console link can
be reloaded or shared; anything else is a 404. Every answer carries the security headers of
``infra/console/security-headers.json``, which the CloudFront distribution sends too: a
Content-Security-Policy that allows no inline script or style and no origin but this one.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

REPOSITORY = Path(__file__).resolve().parents[2]
CONSOLE_SOURCE = REPOSITORY / "infra" / "console"
CONSOLE_DIST = CONSOLE_SOURCE / "dist"
SECURITY_HEADERS_FILE = CONSOLE_SOURCE / "security-headers.json"
# Another built console to serve (a directory holding index.html), for instance while working on one.
ENV_CONSOLE_DIR = "TICKWORK_CONSOLE_DIR"
API_PREFIX = "/v1"
INDEX = "index.html"
# esbuild names what it emits under assets/ by content hash: such a file never changes.
IMMUTABLE_PREFIX = "assets/"
IMMUTABLE = "public, max-age=31536000, immutable"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
}
NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tickwork</title></head>
<body><h1>The tickwork console is not built</h1>
<p>Run <code>make console</code> (it needs Node.js and npm), then reload this page.</p>
<p>The API answers under <a href="/v1/health">/v1/</a> all the same.</p></body></html>
"""


def is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def load_security_headers(path: Path = SECURITY_HEADERS_FILE) -> dict[str, str]:
    headers: dict[str, str] = json.loads(path.read_text())
    return headers


@dataclass(frozen=True)
class StaticAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


class Console:
    """What the gateway answers to the paths that are not the API's."""

    def __init__(self, root: Path | None, security_headers: Mapping[str, str]):
        self.root = root.resolve() if root is not None else None
        self.security_headers = dict(security_headers)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Console:
        if not SECURITY_HEADERS_FILE.is_file():  # installed away from the repository: no console to serve
            return cls(None, {"X-Content-Type-Options": "nosniff"})
        chosen = environ.get(ENV_CONSOLE_DIR)
        return cls(Path(chosen) if chosen else CONSOLE_DIST, load_security_headers())

    @property
    def built(self) -> bool:
        return self.root is not None and (self.root / INDEX).is_file()

    def serves(self, method: str, path: str) -> bool:
        return method in ("GET", "HEAD") and not is_api_path(path)

    def answer(self, path: str) -> StaticAnswer:
        if not self.built or self.root is None:
            return self._answer(503, "text/html; charset=utf-8", NOT_BUILT.encode(), "no-store")
        relative = unquote(path).lstrip("/")
        file = self._file(relative)
        if file is not None:
            cache = IMMUTABLE if relative.startswith(IMMUTABLE_PREFIX) else "no-cache"
            return self._answer(200, self._content_type(file), file.read_bytes(), cache)
        if "." not in relative.rsplit("/", 1)[-1]:
            return self._answer(200, CONTENT_TYPES[".html"], (self.root / INDEX).read_bytes(), "no-cache")
        return self._answer(404, "text/plain; charset=utf-8", b"not found\n", "no-cache")

    def _file(self, relative: str) -> Path | None:
        """The file under the root that ``relative`` names, never one outside it."""
        assert self.root is not None
        if not relative or "\x00" in relative or "\\" in relative:
            return None
        candidate = (self.root / relative).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.is_file():
            return None
        return candidate

    @staticmethod
    def _content_type(file: Path) -> str:
        known = CONTENT_TYPES.get(file.suffix.lower())
        return known or mimetypes.guess_type(file.name)[0] or "application/octet-stream"

    def _answer(self, status: int, content_type: str, body: bytes, cache: str) -> StaticAnswer:
        headers = {"Content-Type": content_type, "Cache-Control": cache, **self.security_headers}
        return StaticAnswer(status, headers, body)
