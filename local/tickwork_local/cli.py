"""`tickwork`: a command-line client of the tickwork HTTP API (v1), plus three laptop tools:
`local` (the whole scheduler against moto), `tenants create` (an admin write straight to the tenants table)
and `receive` (a webhook receiver that prints deliveries and checks their signatures).

Only the standard library talks HTTP, so the client works wherever Python does. Exit codes: 0 success,
1 the API (or DynamoDB) refused, 2 a usage error, 3 the API could not be reached.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, TextIO

DEFAULT_API_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_SECONDS = 30.0
ENV_API_URL = "TICKWORK_API_URL"
ENV_TOKEN = "TICKWORK_TOKEN"  # noqa: S105 - the variable's name, not a token

ENV_PORT = "TICKWORK_PORT"
DEFAULT_LOCAL_PORT = 8000
DEFAULT_DATA_DIR = ".tickwork"
EXIT_OK = 0
EXIT_FAILED = 1  # the API (or DynamoDB) answered with an error
EXIT_USAGE = 2  # argparse's own code for bad arguments
EXIT_UNREACHABLE = 3
# The bound of Tenant.api_requests_per_second, kept here so that --help needs no import of tickwork.
MAX_API_REQUESTS_PER_SECOND = 10_000

JOB_STATUSES = ("ACTIVE", "PAUSED", "COMPLETED", "CANCELLED")
MISFIRE_POLICIES = ("skip", "fire_once", "backfill")
OVERLAP_POLICIES = ("allow", "skip", "queue")
HTTP_METHODS = ("POST", "PUT", "PATCH")
MAX_RECEIVED_BYTES = 16 * 1024 * 1024  # far above any tickwork envelope; stops a runaway sender
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


# --- errors -------------------------------------------------------------------------------------------------
class CliError(Exception):
    exit_code = EXIT_FAILED


class UsageError(CliError):
    exit_code = EXIT_USAGE


class Unreachable(CliError):
    exit_code = EXIT_UNREACHABLE


class ApiError(CliError):
    """An error answer, in the API's shape: ``{"error": {"code", "message", "field", "details"}}``."""

    exit_code = EXIT_FAILED

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        details: Sequence[Mapping[str, Any]] = (),
        status: int | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.details = list(details)
        self.status = status

    def lines(self) -> list[str]:
        lines = [f"error: {_describe(self.code, self.message, self.field)}"]
        for detail in self.details:
            code, message = str(detail.get("code", "")), str(detail.get("message", ""))
            detail_field = detail.get("field")
            if (code, message, detail_field) != (self.code, self.message, self.field):
                lines.append(f"  - {_describe(code, message, detail_field)}")
        return lines


def _describe(code: str, message: str, field: Any) -> str:
    text = f"{_clean(code)}: {_clean(message)}"
    return f"{text} (field: {_clean(str(field))})" if field else text


def _clean(text: str) -> str:
    """Escape control characters so data from the API cannot drive the terminal."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


# --- HTTP client --------------------------------------------------------------------------------------------
class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follow redirects: urllib would resend the Authorization header to wherever they point."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"tickwork-cli/{version('tickwork')}"
    except PackageNotFoundError:
        return "tickwork-cli"


@dataclass
class ApiClient:
    base_url: str
    token: str | None = field(repr=False)  # kept out of reprs and tracebacks
    timeout: float = DEFAULT_TIMEOUT_SECONDS

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str | int | None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        if not self.token:
            raise UsageError(f"no API token: pass --token or set {ENV_TOKEN}")
        url = self.base_url.rstrip("/") + path
        params = {name: str(value) for name, value in (query or {}).items() if value is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - scheme checked
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", _user_agent())
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        opener = urllib.request.build_opener(_NoRedirects())
        try:
            with opener.open(request, timeout=self.timeout) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as error:
            raise _api_error(error.code, error.read(), error.headers.get("Location")) from None
        except urllib.error.URLError as error:
            raise Unreachable(f"cannot reach the tickwork API at {url}: {error.reason}") from None
        except TimeoutError:
            raise Unreachable(f"no answer from the tickwork API at {url} within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise Unreachable(f"cannot reach the tickwork API at {url}: {error}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(
                "bad_response", f"the API at {url} answered with something that is not JSON"
            ) from None


def _api_error(status: int, raw: bytes, location: str | None) -> ApiError:
    try:
        document = json.loads(raw) if raw else None
    except ValueError:
        document = None
    info = document.get("error") if isinstance(document, dict) else None
    if isinstance(info, dict) and "code" in info:
        details = [detail for detail in info.get("details") or [] if isinstance(detail, dict)]
        return ApiError(str(info["code"]), str(info.get("message", "")), info.get("field"), details, status)
    # Not the API's own shape: API Gateway ({"message": ...}), a proxy, or a redirect.
    try:
        code = HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        code = f"http_{status}"
    if 300 <= status < 400:
        return ApiError(code, f"redirected to {location or '?'}: check --api-url", status=status)
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        return ApiError(code, document["message"], status=status)
    text = raw.decode("utf-8", errors="replace").strip()[:200]
    return ApiError(code, text or f"HTTP {status}", status=status)


def _path(*segments: str) -> str:
    # Ids travel in the path; quoting keeps a stray "/" or "?" from changing the route (":" is legal).
    return "/v1/" + "/".join(urllib.parse.quote(segment, safe=":") for segment in segments)


# --- argument types -----------------------------------------------------------------------------------------
def parse_duration(text: str) -> int:
    """Seconds from ``90``, ``90s``, ``5m``, ``1h30m`` or ``1d``."""
    value = text.strip().lower()
    if value.isdigit():
        seconds = int(value)
    else:
        match = _DURATION.fullmatch(value)
        if not value or match is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30, 30s, 5m, 1h30m or 1d")
        days, hours, minutes, secs = (int(part or 0) for part in match.groups())
        seconds = days * 86400 + hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than zero seconds")
    return seconds


def parse_when(text: str) -> str:
    """An RFC 3339 time, passed on as written, or ``+DURATION`` counted from now."""
    if text.startswith("+"):
        moment = datetime.now(UTC) + timedelta(seconds=parse_duration(text[1:]))
        return rfc3339(moment)
    return text


def batch_size(text: str) -> int:
    value = positive_int(text)
    if value > 10:
        raise argparse.ArgumentTypeError(f"{text!r} is more than 10, the most SQS hands out per receive")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def requests_per_second(text: str) -> int:
    value = positive_int(text)
    if value > MAX_API_REQUESTS_PER_SECOND:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_API_REQUESTS_PER_SECOND}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def http_status(text: str) -> int:
    value = positive_int(text)
    if not 200 <= value <= 599:
        raise argparse.ArgumentTypeError(f"{text!r} is not an HTTP status from 200 to 599")
    return value


def parse_json_value(text: str, flag: str) -> Any:
    """JSON given inline, or ``@path`` to read it from a file."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"{flag}: cannot read {text[1:]}: {error.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{flag} is not valid JSON: {error}") from None


def load_spec_file(path: str) -> dict[str, Any]:
    """A job spec from a JSON or YAML file (``-`` reads standard input)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--file: cannot read {path}: {error.strerror}") from None
    suffix = Path(path).suffix.lower()
    document: Any
    if suffix == ".json":
        try:
            document = json.loads(text)
        except ValueError as error:
            raise UsageError(f"--file: {path} is not valid JSON: {error}") from None
    else:
        try:
            document = json.loads(text)
        except ValueError:
            document = _load_yaml(text, path)
    if not isinstance(document, dict):
        raise UsageError(f"--file: {path} must hold one mapping (a job spec), not {type(document).__name__}")
    plain: dict[str, Any] = _plain(document)
    return plain


def _load_yaml(text: str, path: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise UsageError(
            f"--file: reading YAML needs PyYAML (pip install pyyaml), or give {path} as JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UsageError(f"--file: {path} is neither JSON nor valid YAML: {error}") from None


def _plain(value: Any) -> Any:
    """YAML reads unquoted timestamps as datetimes: turn them back into RFC 3339 strings."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        return rfc3339(value) if value.tzinfo else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- human output -------------------------------------------------------------------------------------------
def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, int | float):
        return str(value)
    return _clean(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(header), *(len(row[index]) for row in rows)]) for index, header in enumerate(headers)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {value}".rstrip() for name, value in pairs)


def format_seconds(total: int) -> str:
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def schedule_summary(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return text(schedule)
    kind = schedule.get("type")
    if kind == "once":
        return f"once at {text(schedule.get('at'))}"
    if kind == "cron":
        return f'cron "{text(schedule.get("expression"))}" {text(schedule.get("timezone") or "UTC")}'
    if kind == "rate":
        every = schedule.get("every_seconds")
        return f"every {format_seconds(every)}" if isinstance(every, int) else "rate"
    return text(kind)


def target_summary(target: Any) -> str:
    if not isinstance(target, dict):
        return text(target)
    kind = target.get("type")
    if kind == "http":
        return f"http {text(target.get('method') or 'POST')} {text(target.get('url'))}"
    if kind == "eventbridge":
        return f"eventbridge {text(target.get('event_bus_name'))} ({text(target.get('detail_type'))})"
    for key in ("queue_url", "function_arn", "state_machine_arn"):
        if key in target:
            return f"{text(kind)} {text(target[key])}"
    return text(kind)


def job_rows(jobs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            text(job.get("job_id")),
            text(job.get("name")),
            text(job.get("status")),
            schedule_summary(job.get("schedule")),
            text(job.get("next_fire_at")),
        ]
        for job in jobs
    ]
    return table(["ID", "NAME", "STATUS", "SCHEDULE", "NEXT_FIRE_AT"], rows) if rows else "no jobs"


def run_rows(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            text(run.get("run_id")),
            text(run.get("scheduled_for")),
            text(run.get("status")),
            text(run.get("attempt")),
            text(run.get("lag_ms")),
        ]
        for run in runs
    ]
    return table(["RUN_ID", "SCHEDULED_FOR", "STATUS", "ATTEMPT", "LAG_MS"], rows) if rows else "no runs"


def job_detail(job: Mapping[str, Any]) -> str:
    status = text(job.get("status"))
    pause = job.get("pause")
    if isinstance(pause, dict):
        status += f" (paused at {text(pause.get('paused_at'))} by {text(pause.get('paused_by'))}"
        status += f": {text(pause.get('reason'))})" if pause.get("reason") else ")"
    last_run = job.get("last_run")
    last = "-"
    if isinstance(last_run, dict):
        last = (
            f"{text(last_run.get('run_id'))} {text(last_run.get('status'))}"
            f" (attempt {text(last_run.get('attempt'))}, scheduled for {text(last_run.get('scheduled_for'))})"
        )
    retry = job.get("retry") if isinstance(job.get("retry"), dict) else {}
    assert isinstance(retry, dict)
    tags = job.get("tags") or {}
    pairs = [
        ("job_id", text(job.get("job_id"))),
        ("name", text(job.get("name"))),
        ("status", status),
        ("schedule", schedule_summary(job.get("schedule"))),
        ("in words", text(job.get("schedule_description"))),
        ("target", target_summary(job.get("target"))),
        ("next_fire_at", text(job.get("next_fire_at"))),
        ("last_run", last),
        ("misfire", f"{text(job.get('misfire_policy'))} (grace {text(job.get('misfire_grace_seconds'))} s)"),
        ("overlap", text(job.get("overlap_policy"))),
        ("delivery", text(job.get("delivery"))),
        ("retry", f"up to {text(retry.get('max_attempts'))} attempts" if retry else "-"),
        ("description", text(job.get("description"))),
        ("payload", text(job.get("payload"))),
        (
            "tags",
            ", ".join(f"{text(k)}={text(v)}" for k, v in tags.items()) if isinstance(tags, dict) else "-",
        ),
        ("created_at", text(job.get("created_at"))),
        ("updated_at", text(job.get("updated_at"))),
    ]
    if job.get("cancelled_at"):
        pairs.append(("cancelled_at", text(job.get("cancelled_at"))))
    return fields([(name, value or "-") for name, value in pairs])


def run_detail(run: Mapping[str, Any]) -> str:
    keys = (
        "run_id",
        "job_id",
        "status",
        "trigger",
        "scheduled_for",
        "attempt",
        "lag_ms",
        "enqueued_at",
        "started_at",
        "finished_at",
        "retry_at",
        "reason",
    )
    summary = fields([(key, text(run.get(key))) for key in keys])
    attempts = [attempt for attempt in run.get("attempts") or [] if isinstance(attempt, dict)]
    if not attempts:
        return summary + "\nattempts       none yet"
    rows = []
    for attempt in attempts:
        error = ""
        if attempt.get("error_code"):
            error = text(attempt.get("error_code"))
            if attempt.get("error_message"):
                error += ": " + text(attempt.get("error_message"))[:100]
        rows.append(
            [
                text(attempt.get("attempt")),
                text(attempt.get("started_at")),
                text(attempt.get("finished_at")),
                text(attempt.get("duration_ms")),
                text(attempt.get("outcome")),
                text(attempt.get("worker_id")),
                error or "-",
            ]
        )
    headers = ["ATTEMPT", "STARTED_AT", "FINISHED_AT", "DURATION_MS", "OUTCOME", "WORKER", "ERROR"]
    return summary + "\n\nattempts:\n" + table(headers, rows)


def stats_detail(stats: Mapping[str, Any]) -> str:
    def counts(value: Any, *, all_of_them: bool) -> str:
        if not isinstance(value, dict):
            return text(value)
        shown = [f"{text(name)} {text(count)}" for name, count in value.items() if all_of_them or count]
        return ", ".join(shown) or "none"

    lag = stats.get("trigger_lag_ms") if isinstance(stats.get("trigger_lag_ms"), dict) else {}
    assert isinstance(lag, dict)
    window = stats.get("window_seconds")
    span = format_seconds(window) if isinstance(window, int) else text(window)
    lags = ", ".join(f"{name} {text(lag.get(name))}" for name in ("p50", "p95", "p99"))
    return fields(
        [
            ("jobs", counts(stats.get("jobs"), all_of_them=True)),
            (f"runs (last {span})", counts(stats.get("runs"), all_of_them=False)),
            ("trigger lag (ms)", f"{lags} (sampled runs: {text(stats.get('sampled_runs'))})"),
            ("queue depth", text(stats.get("queue_depth"))),
        ]
    )


def preview_lines(fires: Sequence[dict[str, Any]], timezone: str | None) -> str:
    """One row per fire: its time, its local time in ``timezone`` (for a zone other than UTC), and what
    changes it (an exclusion, DST, jitter)."""
    if not fires:
        return "no fire times"
    zone = None
    if timezone and timezone.upper() != "UTC":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            zone = None
    rows = []
    for fire in fires:
        row = [text(fire.get("at"))]
        if zone is not None:
            row.append(_local_time(fire.get("at"), zone))
        row.append(_fire_note(fire, zone))
        rows.append(row)
    headers = ["FIRE_TIME", *([f"LOCAL ({timezone})"] if zone is not None else []), "NOTE"]
    return table(headers, rows)


def _local_time(moment: Any, zone: Any) -> str:
    try:
        return datetime.fromisoformat(str(moment)).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
    except ValueError:
        return "-"


_DST_NOTES = {
    "shifted": "DST: its time is skipped that day; fires at the end of the gap",
    "repeated": "DST: its time occurs twice; fires at both",
}


def _fire_note(fire: dict[str, Any], zone: Any) -> str:
    notes = []
    if fire.get("excluded"):
        notes.append(f"not fired: {str(fire['excluded']).removeprefix('excluded: ')}")
    if fire.get("dst") in _DST_NOTES:
        notes.append(_DST_NOTES[fire["dst"]])
    if fire.get("starts_by"):
        by = _local_time(fire["starts_by"], zone) if zone is not None else text(fire["starts_by"])
        notes.append(f"starts by {by}")
    return "; ".join(notes) or "-"


# --- the session: where output goes and how the API is reached ----------------------------------------------
@dataclass
class Session:
    api_url: str
    token: str | None = field(repr=False)
    timeout: float
    as_json: bool

    def client(self) -> ApiClient:
        scheme = urllib.parse.urlsplit(self.api_url).scheme
        if scheme not in ("http", "https"):
            raise UsageError(f"--api-url must start with http:// or https://, not {self.api_url!r}")
        return ApiClient(self.api_url, self.token, self.timeout)

    def emit(self, document: Any, human: Callable[[], str]) -> None:
        # --json prints the API's document unchanged, so scripts can pipe it to jq.
        if self.as_json:
            print(json.dumps(document, indent=2, ensure_ascii=False))
        else:
            print(human())


Handler = Callable[[argparse.Namespace, Session], int]


# --- commands -----------------------------------------------------------------------------------------------
def schedule_from_flags(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.at is not None:
        if args.timezone:
            raise UsageError("--timezone applies to --cron; give --at a time with its UTC offset")
        return {"type": "once", "at": args.at}
    if args.cron is not None:
        schedule: dict[str, Any] = {"type": "cron", "expression": args.cron}
        if args.timezone:
            schedule["timezone"] = args.timezone
        return schedule
    if args.rate is not None:
        if args.timezone:
            raise UsageError("--timezone applies to --cron, not --rate")
        return {"type": "rate", "every_seconds": args.rate}
    return None


def exclusions_from_flags(args: argparse.Namespace) -> dict[str, Any] | None:
    """``schedule.exclude`` from --exclude-holidays, --exclude-date and --exclude-window."""
    exclude: dict[str, Any] = {}
    if args.exclude_holidays:
        exclude["holidays"] = list(args.exclude_holidays)
    for text in args.exclude_date or []:
        start, dots, end = text.partition("..")
        if dots:
            exclude.setdefault("date_ranges", []).append({"start": start.strip(), "end": end.strip()})
        else:
            exclude.setdefault("dates", []).append(text.strip())
    if args.exclude_window:
        exclude["windows"] = list(args.exclude_window)
    return exclude or None


def add_exclusions(schedule: dict[str, Any], args: argparse.Namespace) -> None:
    exclude = exclusions_from_flags(args)
    if exclude is None:
        return
    if schedule.get("type") == "once":
        raise UsageError("--exclude-* apply to --cron and --rate schedules, not --at")
    existing = schedule.get("exclude")
    schedule["exclude"] = {**(existing if isinstance(existing, dict) else {}), **exclude}


def build_job_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The body of POST /v1/jobs: the --file's fields, then each flag given on top of them."""
    spec = load_spec_file(args.file) if args.file else {}
    if args.name is not None:
        spec["name"] = args.name
    schedule = schedule_from_flags(args)
    if schedule is not None:
        spec["schedule"] = schedule
    elif args.timezone:
        existing = spec.get("schedule")
        if not (isinstance(existing, dict) and existing.get("type") == "cron"):
            raise UsageError("--timezone needs --cron or a cron schedule in --file")
        existing["timezone"] = args.timezone
    if exclusions_from_flags(args) is not None:
        existing = spec.get("schedule")
        if not isinstance(existing, dict):
            raise UsageError("--exclude-* need a schedule (--cron, --rate or one in --file)")
        add_exclusions(existing, args)
    if args.jitter is not None:
        spec["jitter_seconds"] = args.jitter
    if args.target_json is not None:
        target = parse_json_value(args.target_json, "--target-json")
        if not isinstance(target, dict):
            raise UsageError('--target-json must be a JSON object like {"type": "sqs", "queue_url": "..."}')
        spec["target"] = target
    existing_target = spec.get("target")
    is_http = isinstance(existing_target, dict) and existing_target.get("type") == "http"
    if args.url is not None:
        # Keep an http target's other fields (headers, timeout) from the file; only the URL changes.
        target = dict(existing_target) if is_http and isinstance(existing_target, dict) else {"type": "http"}
        target["url"] = args.url
        if args.method:
            target["method"] = args.method
        spec["target"] = target
    elif args.method:
        if not (is_http and isinstance(existing_target, dict)):
            raise UsageError("--method needs --url or an http target in --file")
        existing_target["method"] = args.method
    if args.payload is not None:
        spec["payload"] = parse_json_value(args.payload, "--payload")
    if args.description is not None:
        spec["description"] = args.description
    if args.misfire_policy is not None:
        spec["misfire_policy"] = args.misfire_policy
    if args.overlap_policy is not None:
        spec["overlap_policy"] = args.overlap_policy
    if args.max_attempts is not None:
        retry = spec.get("retry")
        spec["retry"] = {**(retry if isinstance(retry, dict) else {}), "max_attempts": args.max_attempts}
    if not args.file:
        missing = [
            flag
            for flag, key in (
                ("--name", "name"),
                ("a schedule (--at, --cron or --rate)", "schedule"),
                ("a target (--url or --target-json)", "target"),
            )
            if key not in spec
        ]
        if missing:
            raise UsageError(f"jobs create needs {', '.join(missing)} (or --file with a job spec)")
    return spec


def cmd_jobs_create(args: argparse.Namespace, session: Session) -> int:
    spec = build_job_spec(args)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    job = session.client().request("POST", _path("jobs"), body=spec, headers=headers)
    session.emit(job, lambda: job_detail(job))
    return EXIT_OK


def _pages(
    session: Session, path: str, query: dict[str, str | int | None], follow: bool
) -> tuple[dict[str, Any], str | None]:
    """One page, or with ``follow`` every page merged into one document; plus the cursor left over."""
    client = session.client()
    page = client.request("GET", path, query=query)
    items = list(page.get("items") or [])
    seen: set[str] = set()
    while follow and page.get("next_cursor") and page["next_cursor"] not in seen:
        seen.add(page["next_cursor"])  # a cursor that comes back would loop forever
        page = client.request("GET", path, query={**query, "cursor": page["next_cursor"]})
        items += page.get("items") or []
    cursor = None if follow else page.get("next_cursor")
    return {"items": items, "next_cursor": cursor}, cursor


def _more_hint(cursor: str | None, what: str, session: Session) -> None:
    if cursor and not session.as_json:
        print(f"more {what}: add --cursor {cursor} for the next page, or --all", file=sys.stderr)


def cmd_jobs_list(args: argparse.Namespace, session: Session) -> int:
    limit = args.limit if args.limit is not None else (100 if args.all else None)
    query: dict[str, str | int | None] = {"status": args.status, "limit": limit, "cursor": args.cursor}
    document, cursor = _pages(session, _path("jobs"), query, args.all)
    session.emit(document, lambda: job_rows(document["items"]))
    _more_hint(cursor, "jobs", session)
    return EXIT_OK


def cmd_jobs_get(args: argparse.Namespace, session: Session) -> int:
    job = session.client().request("GET", _path("jobs", args.job_id))
    session.emit(job, lambda: job_detail(job))
    return EXIT_OK


def cmd_jobs_pause(args: argparse.Namespace, session: Session) -> int:
    body = {"reason": args.reason} if args.reason is not None else {}
    job = session.client().request("POST", _path("jobs", args.job_id, "pause"), body=body)
    reason = f": {text(args.reason)}" if args.reason else ""
    session.emit(job, lambda: f"paused job {text(job.get('job_id'))} ({text(job.get('name'))}){reason}")
    return EXIT_OK


def cmd_jobs_resume(args: argparse.Namespace, session: Session) -> int:
    job = session.client().request("POST", _path("jobs", args.job_id, "resume"))
    session.emit(
        job,
        lambda: (
            f"resumed job {text(job.get('job_id'))} ({text(job.get('name'))});"
            f" next fire at {text(job.get('next_fire_at'))}"
        ),
    )
    return EXIT_OK


def cmd_jobs_cancel(args: argparse.Namespace, session: Session) -> int:
    job = session.client().request("DELETE", _path("jobs", args.job_id))
    session.emit(job, lambda: f"cancelled job {text(job.get('job_id'))} ({text(job.get('name'))})")
    return EXIT_OK


def cmd_jobs_trigger(args: argparse.Namespace, session: Session) -> int:
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    run = session.client().request("POST", _path("jobs", args.job_id, "trigger"), headers=headers)
    session.emit(
        run,
        lambda: (
            f"triggered job {text(run.get('job_id'))}: run {text(run.get('run_id'))}"
            f" is {text(run.get('status'))}, scheduled for {text(run.get('scheduled_for'))}"
        ),
    )
    return EXIT_OK


def cmd_jobs_runs(args: argparse.Namespace, session: Session) -> int:
    limit = args.limit if args.limit is not None else (100 if args.all else None)
    query: dict[str, str | int | None] = {"limit": limit, "cursor": args.cursor}
    document, cursor = _pages(session, _path("jobs", args.job_id, "runs"), query, args.all)
    session.emit(document, lambda: run_rows(document["items"]))
    _more_hint(cursor, "runs", session)
    return EXIT_OK


def cmd_runs_get(args: argparse.Namespace, session: Session) -> int:
    run = session.client().request("GET", _path("runs", args.run_id))
    session.emit(run, lambda: run_detail(run))
    return EXIT_OK


def cmd_runs_retry(args: argparse.Namespace, session: Session) -> int:
    run = session.client().request("POST", _path("runs", args.run_id, "retry"))
    session.emit(
        run,
        lambda: (
            f"retrying run {text(run.get('run_id'))}: {text(run.get('status'))} after attempt "
            f"{text(run.get('attempt'))}"
        ),
    )
    return EXIT_OK


def cmd_preview(args: argparse.Namespace, session: Session) -> int:
    schedule = schedule_from_flags(args)
    assert schedule is not None  # argparse requires one of --at, --cron, --rate
    add_exclusions(schedule, args)
    body: dict[str, Any] = {"schedule": schedule}
    if args.after is not None:
        body["after"] = args.after
    if args.count is not None:
        body["count"] = args.count
    if args.jitter is not None:
        body["jitter_seconds"] = args.jitter
    preview = session.client().request("POST", _path("schedule-preview"), body=body)
    fires = preview.get("fires") or [{"at": at} for at in preview.get("fire_times") or []]
    session.emit(
        preview,
        lambda: "\n".join([text(preview.get("description")), preview_lines(fires, args.timezone)]),
    )
    return EXIT_OK


def cmd_stats(args: argparse.Namespace, session: Session) -> int:
    stats = session.client().request("GET", _path("stats"))
    session.emit(stats, lambda: stats_detail(stats))
    return EXIT_OK


def cmd_tenants_create(args: argparse.Namespace, session: Session) -> int:
    # Imported here: only this command needs boto3 and the domain models, and they are slow to load.
    import boto3
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )
    from pydantic import ValidationError
    from tickwork.adapters.tenants import DynamoTenantStore
    from tickwork.config import Settings
    from tickwork.domain.tenants import (
        DEFAULT_API_REQUESTS_PER_SECOND,
        TENANT_ID_PATTERN,
        Tenant,
        new_signing_secret,
        new_token,
    )
    from tickwork.errors import NotFound

    if not re.fullmatch(TENANT_ID_PATTERN, args.name):
        raise UsageError(
            f"tenant id {args.name!r} is not valid: use 1 to 63 lowercase letters, digits, '-' or '_',"
            f" starting with a letter or digit (pattern {TENANT_ID_PATTERN})"
        )
    try:
        settings = Settings.from_env(os.environ)
    except ValidationError as error:
        raise UsageError(f"bad TICKWORK_* setting in the environment: {error}") from None
    try:
        store = DynamoTenantStore(boto3.client("dynamodb"), table=settings.tenants_table)
        try:
            store.get(args.name)
        except NotFound:
            pass
        else:
            # Writing again would replace the signing secret that the tenant's receivers check.
            raise ApiError("conflict", f"tenant {args.name!r} already exists", "tenant_id")
        tenant = Tenant(
            tenant_id=args.name,
            name=args.display_name or args.name,
            max_jobs=args.max_jobs or settings.default_max_jobs,
            max_in_flight=args.max_in_flight,
            api_requests_per_second=args.api_requests_per_second or DEFAULT_API_REQUESTS_PER_SECOND,
            signing_secret=new_signing_secret(),
            created_at=datetime.now(UTC),
        )
        token = new_token()
        store.put(tenant, token=token)
    except (NoRegionError, NoCredentialsError) as error:
        raise UsageError(
            f"{error} (set AWS_DEFAULT_REGION and credentials, or AWS_ENDPOINT_URL for local)"
        ) from None
    except EndpointConnectionError as error:
        raise Unreachable(f"cannot reach DynamoDB: {error}") from None
    except ClientError as error:
        info = error.response.get("Error", {})
        code, message = info.get("Code", "client_error"), info.get("Message", str(error))
        raise ApiError(code, f"{message} (table {settings.tenants_table})") from None
    except BotoCoreError as error:
        raise ApiError("aws_error", str(error)) from None
    document = {"tenant_id": tenant.tenant_id, "token": token, "signing_secret": tenant.signing_secret}
    # The token is shown this once: only its SHA-256 hash is stored.
    session.emit(
        document,
        lambda: (
            f"created tenant {tenant.tenant_id}\n"
            + fields(
                [
                    ("tenant_id", tenant.tenant_id),
                    ("token", f"{token}   (shown once: store it now)"),
                    ("signing_secret", tenant.signing_secret),
                ]
            )
        ),
    )
    return EXIT_OK


def local_port(given: int | None, environ: Mapping[str, str] = os.environ) -> int:
    """--port, else $TICKWORK_PORT, else 8000; a port number either way."""
    if given is None and environ.get(ENV_PORT):
        text = environ[ENV_PORT]
        if not text.isdigit():
            raise UsageError(f"{ENV_PORT} must be a port number, not {text!r}")
        given = int(text)
    port = DEFAULT_LOCAL_PORT if given is None else given
    if not 0 < port < 65536:
        raise UsageError(f"the port must be between 1 and 65535, not {port}")
    return port


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (the stack would fail to bind it)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # As the HTTP server binds: a port whose last connections linger in TIME_WAIT after a stop is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def reset_data_dir(directory: Path, *, confirmed: bool, answer: TextIO, out: TextIO) -> None:
    """Delete the local stack's files in ``directory`` (its tables, journal, token and log), once the user
    said yes; a directory that holds anything else keeps it."""
    from tickwork_local.stack import DATA_FILES

    found = [directory / name for name in DATA_FILES if (directory / name).exists()]
    if not found:
        out.write(f"nothing to reset in {directory}\n")
        return
    if not confirmed:
        if not answer.isatty():
            raise UsageError(f"--reset deletes every job and run in {directory}: add --yes to confirm")
        out.write(f"delete every job, run and token kept in {directory}? [y/N] ")
        out.flush()
        if answer.readline().strip().lower() not in ("y", "yes"):
            raise CliError("reset cancelled: nothing was deleted")
    for path in found:
        path.unlink()
    if not any(directory.iterdir()):
        directory.rmdir()
    out.write(f"reset {directory}: {len(found)} files deleted\n")


def cmd_local(args: argparse.Namespace, session: Session) -> int:
    # Imported here: the local stack pulls in moto, which the API client never needs.
    from tickwork_local.stack import run_local

    port = local_port(args.port)
    if port_in_use(args.host, port):
        raise CliError(f"port {port} is in use on {args.host}: choose another with --port or {ENV_PORT}")
    data_dir = None if args.ephemeral else (args.data_dir or DEFAULT_DATA_DIR)
    if args.reset:
        if data_dir is None:
            raise UsageError("--reset wipes the data directory: it cannot go with --ephemeral")
        reset_data_dir(Path(data_dir), confirmed=args.yes, answer=sys.stdin, out=sys.stdout)
    return run_local(
        host=args.host,
        port=port,
        quiet=args.quiet,
        data_dir=data_dir,
        log_file=args.log_file,
        tick_seconds=args.tick_seconds,
        workers=args.workers,
        batch_size=args.batch_size,
    )


# --- receive ------------------------------------------------------------------------------------------------
def describe_delivery(
    body: bytes, headers: Mapping[str, str], received: datetime, secret: str | None, method: str, path: str
) -> dict[str, Any]:
    """What one webhook request says: the envelope's fields, the lag, and whether its signature holds."""
    from tickwork.targets.envelope import verify_signature

    headers = {name.lower(): value for name, value in headers.items()}  # HTTP header names ignore case
    try:
        envelope = json.loads(body)
    except ValueError:
        envelope = None
    envelope = envelope if isinstance(envelope, dict) else {}
    scheduled_for = envelope.get("scheduled_for") or headers.get("x-tickwork-scheduled-for")
    lag_ms = None
    if isinstance(scheduled_for, str):
        try:
            lag = received - datetime.fromisoformat(scheduled_for)
            lag_ms = round(lag.total_seconds() * 1000)
        except (ValueError, TypeError):
            lag_ms = None
    record: dict[str, Any] = {
        "received_at": rfc3339(received),
        "method": method,
        "path": path,
        "job_id": envelope.get("job_id"),
        "run_id": envelope.get("run_id") or headers.get("x-tickwork-run-id"),
        "attempt": envelope.get("attempt") or headers.get("x-tickwork-attempt"),
        "scheduled_for": scheduled_for,
        "lag_ms": lag_ms,
        "fencing_token": headers.get("x-tickwork-fencing-token"),
    }
    if secret is not None:
        header = headers.get("x-tickwork-signature")
        if not header:
            record["signature"] = "missing"
        else:
            valid = verify_signature(secret, header, body, now_epoch=int(received.timestamp()))
            record["signature"] = "verified" if valid else "invalid"
    if "payload" in envelope:
        record["payload"] = envelope["payload"]
    else:
        record["body"] = body[:500].decode("utf-8", errors="replace")
    return record


def delivery_line(record: Mapping[str, Any]) -> str:
    parts = [
        text(record["received_at"]),
        f"{text(record['method'])} {text(record['path'])}",
        f"run={text(record['run_id'])}",
        f"attempt={text(record['attempt'])}",
        f"scheduled_for={text(record['scheduled_for'])}",
        f"lag_ms={text(record['lag_ms'])}",
    ]
    signature = record.get("signature")
    if signature == "verified":
        parts.append("signature verified")
    elif signature == "invalid":
        parts.append("signature INVALID")
    elif signature == "missing":
        parts.append("signature MISSING")
    if "payload" in record:
        parts.append(f"payload={text(record['payload'])}")
    else:
        parts.append(f"body={text(record.get('body'))}")
    return "  ".join(parts)


def make_receiver(
    host: str,
    port: int,
    secret: str | None,
    status: int,
    out: TextIO = sys.stdout,
    *,
    as_json: bool = False,
) -> ThreadingHTTPServer:
    """A webhook receiver that prints one line per request (JSON lines with ``as_json``) and answers
    ``status``. The caller runs ``serve_forever`` and closes it."""
    lock = threading.Lock()  # deliveries arrive on many threads; keep their lines whole

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _deliver(self) -> None:
            received = datetime.now(UTC)
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_RECEIVED_BYTES:
                self._answer(413)
                return
            body = self.rfile.read(length)
            record = describe_delivery(
                body,
                dict(self.headers.items()),
                received,
                secret,
                self.command,
                self.path,
            )
            line = json.dumps(record, ensure_ascii=False) if as_json else delivery_line(record)
            with lock:
                out.write(line + "\n")
                out.flush()
            self._answer(status)

        def do_GET(self) -> None:
            self._answer(200, b"tickwork receiver: send deliveries with POST\n")

        do_POST = do_PUT = do_PATCH = _deliver  # noqa: N815 - http.server's naming

        def _answer(self, code: int, payload: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(payload)))
            if payload:
                self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per delivery is printed by _deliver

    server = ThreadingHTTPServer((host, port), Receiver)
    server.daemon_threads = True
    return server


def cmd_receive(args: argparse.Namespace, session: Session) -> int:
    try:
        server = make_receiver(args.host, args.port, args.secret, args.status, as_json=session.as_json)
    except OSError as error:
        raise ApiError(
            "cannot_listen", f"cannot listen on {args.host}:{args.port}: {error.strerror}"
        ) from None
    host, port = server.server_address[:2]
    checking = "checking signatures" if args.secret else "not checking signatures (no --secret)"
    print(
        f"tickwork receive: listening on http://{host!s}:{port}/ (any path), answering {args.status},"
        f" {checking}; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


# --- the parser ---------------------------------------------------------------------------------------------
DESCRIPTION = """\
tickwork: manage jobs of the tickwork scheduler through its HTTP API, run the whole scheduler locally
(tickwork local), create tenants (tickwork tenants create) and receive webhooks (tickwork receive)."""

EPILOG = f"""\
environment:
  {ENV_API_URL}   the API's base URL (default {DEFAULT_API_URL}); --api-url wins
  {ENV_TOKEN}     the tenant's API token; --token wins (prefer the variable: a flag shows in ps)

exit codes:
  0 success, 1 the API refused (4xx/5xx), 2 usage error, 3 the API could not be reached

examples:
  tickwork local
  TICKWORK_TOKEN=tw_... tickwork jobs create --name hello --rate 10s --url http://127.0.0.1:9000/hook
  tickwork jobs list --json | jq '.items[].job_id'
  tickwork preview --cron "30 2 * * *" --timezone America/New_York --count 3"""


def add_global_options(parser: argparse.ArgumentParser, *, nested: bool) -> None:
    """The same options at the top and on every subcommand. On subcommands they default to SUPPRESS, so a
    value given before the subcommand is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if nested else value

    group = parser.add_argument_group("global options")
    group.add_argument(
        "--api-url",
        default=default(None),
        metavar="URL",
        help=f"base URL of the tickwork API (env {ENV_API_URL}; default {DEFAULT_API_URL})",
    )
    group.add_argument(
        "--token",
        default=default(None),
        help=f"the tenant's API token, sent as a Bearer token (env {ENV_TOKEN})",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the API's JSON answer as one document instead of tables",
    )
    group.add_argument(
        "--timeout",
        type=positive_float,
        default=default(None),
        metavar="SECONDS",
        help=f"give up on an API request after this many seconds (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )


def add_schedule_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_argument_group("schedule (one of --at, --cron, --rate)")
    choice = group.add_mutually_exclusive_group(required=required)
    choice.add_argument(
        "--at",
        type=parse_when,
        metavar="TIME",
        help="fire once at this RFC 3339 time (e.g. 2026-01-01T09:00:00Z), or +DURATION from now (e.g. +30s)",
    )
    choice.add_argument(
        "--cron",
        metavar="EXPR",
        help='fire on a cron expression: 5 fields, or 6 with seconds first (e.g. "0 9 * * 1-5", "@daily")',
    )
    choice.add_argument(
        "--rate",
        type=parse_duration,
        metavar="EVERY",
        help="fire every so many seconds: 30, 30s, 5m, 1h30m or 1d",
    )
    group.add_argument(
        "--timezone",
        metavar="TZ",
        help="IANA time zone of a --cron schedule (default UTC), e.g. Europe/Paris",
    )
    group.add_argument(
        "--exclude-holidays",
        action="append",
        metavar="CALENDAR",
        help="no fire on this calendar's public holidays: a country (US), a subdivision (US-NY) or a market"
        " (NYSE); repeatable",
    )
    group.add_argument(
        "--exclude-date",
        action="append",
        metavar="DATE",
        help="no fire on this local date (2026-12-24) or range (2026-12-24..2027-01-01); repeatable",
    )
    group.add_argument(
        "--exclude-window",
        action="append",
        metavar="CRON",
        help='no fire in the minutes this 5-field cron expression matches ("* 12-13 * * *"); repeatable',
    )
    group.add_argument(
        "--jitter",
        type=parse_duration,
        metavar="SPREAD",
        help="start each fire up to this long after its time (30s, 5m), by a fixed offset per fire",
    )


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="tickwork", description=DESCRIPTION, epilog=EPILOG, formatter_class=formatter
    )
    add_global_options(parser, nested=False)
    parser.add_argument(
        "--version", action="version", version=_user_agent(), help="print the version and exit"
    )
    common = argparse.ArgumentParser(add_help=False)
    add_global_options(common, nested=True)

    def command(
        group: Any, name: str, summary: str, description: str, handler: Handler | None = None
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(
            name, help=summary, description=description, parents=[common]
        )
        if handler is not None:
            sub.set_defaults(handler=handler, command_parser=sub)
        return sub

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", required=True)

    local = command(
        commands,
        "local",
        "run the whole scheduler on this machine against moto",
        "Run tickwork locally: moto stands in for DynamoDB and SQS, the API is served over HTTP, the planner"
        " ticks and workers deliver runs. Tenants come from TICKWORK_LOCAL_TENANTS=acme:token-a,...;"
        " without it one tenant, 'default', gets a token printed at start-up.",
        cmd_local,
    )
    local.add_argument("--host", default="127.0.0.1", help="address the API listens on (default 127.0.0.1)")
    local.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port the API listens on (default ${ENV_PORT}, else {DEFAULT_LOCAL_PORT})",
    )
    local.add_argument("--quiet", action="store_true", help="print only the start-up banner, no status lines")
    kept = local.add_mutually_exclusive_group()
    kept.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"keep jobs, runs and tokens in DIR, every write on disk before it is answered"
        f" (default {DEFAULT_DATA_DIR})",
    )
    kept.add_argument("--ephemeral", action="store_true", help="keep nothing: start empty, forget on exit")
    local.add_argument(
        "--reset", action="store_true", help="delete what the data directory keeps, then start (asks first)"
    )
    local.add_argument("--yes", action="store_true", help="with --reset: do not ask")
    local.add_argument("--log-file", metavar="FILE", help="write the handlers' logs to FILE")
    local.add_argument(
        "--tick-seconds",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="how often the planner and sweeper run (default 1.0)",
    )
    local.add_argument(
        "--workers",
        type=positive_int,
        default=4,
        help="how many worker invocations run at once, each polling the run queue, as the event source"
        " mapping's concurrency (default 4)",
    )
    local.add_argument(
        "--batch-size",
        type=batch_size,
        default=10,
        help="messages per worker invocation, 1 to 10, as the event source mapping's batch size (default"
        " 10); a batch's runs go side by side, up to TICKWORK_WORKER_PARALLELISM (default 10)",
    )

    # jobs ------------------------------------------------------------------------------------------------
    jobs = command(commands, "jobs", "create, list and manage jobs", "Create, list, inspect and manage jobs.")
    job_commands = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", title="actions", required=True)

    create = command(
        job_commands,
        "create",
        "create a job from flags or a JSON/YAML file",
        "Create a job. Give its fields as flags, or a whole job spec (the body of POST /v1/jobs) with --file;"
        " flags given with --file override the file's fields.",
        cmd_jobs_create,
    )
    create.add_argument(
        "--file", "-f", metavar="FILE", help="job spec as JSON or YAML (.json, .yaml, .yml; - reads stdin)"
    )
    create.add_argument("--name", help="the job's name, unique in the tenant: letters, digits, '.', '_', '-'")
    add_schedule_options(create, required=False)
    target = create.add_argument_group("target (one of --url, --target-json)")
    target_choice = target.add_mutually_exclusive_group()
    target_choice.add_argument("--url", help="deliver to this webhook URL (an http target)")
    target_choice.add_argument(
        "--target-json",
        metavar="JSON",
        help='any target as JSON, or @FILE, e.g. \'{"type": "sqs", "queue_url": "https://..."}\'',
    )
    target.add_argument(
        "--method", choices=HTTP_METHODS, help="HTTP method of a webhook target (default POST)"
    )
    create.add_argument(
        "--payload", metavar="JSON", help="JSON (or @FILE) handed to the target on every fire"
    )
    create.add_argument("--description", help="free text shown with the job")
    create.add_argument(
        "--misfire-policy",
        choices=MISFIRE_POLICIES,
        help="what to do with fires missed during an outage or a pause (default fire_once)",
    )
    create.add_argument(
        "--overlap-policy",
        choices=OVERLAP_POLICIES,
        help="what to do when a fire is due while the previous run still runs (default skip)",
    )
    create.add_argument(
        "--max-attempts",
        type=positive_int,
        metavar="N",
        help="attempts per run before it is DEAD (default 5)",
    )
    create.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="send this Idempotency-Key: repeating the command with it creates the job only once",
    )

    listing = command(
        job_commands,
        "list",
        "list the tenant's jobs, newest first",
        "List the tenant's jobs, newest first, one page at a time (or every page with --all).",
        cmd_jobs_list,
    )
    listing.add_argument("--status", type=str.upper, choices=JOB_STATUSES, help="only jobs in this status")
    listing.add_argument("--limit", type=positive_int, metavar="N", help="jobs per page (at most 100)")
    listing.add_argument("--cursor", help="start at this page (the next_cursor of the previous page)")
    listing.add_argument("--all", action="store_true", help="follow next_cursor and list every job")

    get = command(
        job_commands,
        "get",
        "show one job",
        "Show one job, its next fire time and its last run.",
        cmd_jobs_get,
    )
    get.add_argument("job_id", metavar="JOB_ID", help="the job's id")

    pause = command(
        job_commands, "pause", "pause a job", "Pause a job: no fire runs until it is resumed.", cmd_jobs_pause
    )
    pause.add_argument("job_id", metavar="JOB_ID", help="the job's id")
    pause.add_argument("--reason", help="why it is paused; stored with the time and who paused it")

    resume = command(
        job_commands,
        "resume",
        "resume a paused job",
        "Resume a paused job. Fires missed while paused follow the job's misfire policy.",
        cmd_jobs_resume,
    )
    resume.add_argument("job_id", metavar="JOB_ID", help="the job's id")

    cancel = command(
        job_commands,
        "cancel",
        "cancel a job for good",
        "Cancel a job: its planned runs become CANCELLED; a running attempt finishes.",
        cmd_jobs_cancel,
    )
    cancel.add_argument("job_id", metavar="JOB_ID", help="the job's id")

    trigger = command(
        job_commands,
        "trigger",
        "run a job now, outside its schedule",
        "Run a job now, outside its schedule. The same --idempotency-key always gives the same run.",
        cmd_jobs_trigger,
    )
    trigger.add_argument("job_id", metavar="JOB_ID", help="the job's id")
    trigger.add_argument(
        "--idempotency-key", metavar="KEY", help="repeat-safe key: the same key gives the same run"
    )

    job_runs = command(
        job_commands,
        "runs",
        "list a job's runs, newest first",
        "List a job's run history, newest first, one page at a time (or every page with --all).",
        cmd_jobs_runs,
    )
    job_runs.add_argument("job_id", metavar="JOB_ID", help="the job's id")
    job_runs.add_argument("--limit", type=positive_int, metavar="N", help="runs per page (at most 100)")
    job_runs.add_argument("--cursor", help="start at this page (the next_cursor of the previous page)")
    job_runs.add_argument("--all", action="store_true", help="follow next_cursor and list every run")

    # runs ------------------------------------------------------------------------------------------------
    runs = command(commands, "runs", "inspect and retry runs", "Inspect one run, or retry a finished one.")
    run_commands = runs.add_subparsers(dest="runs_command", metavar="ACTION", title="actions", required=True)
    run_get = command(
        run_commands,
        "get",
        "show one run and its attempts",
        "Show one run with all its attempts.",
        cmd_runs_get,
    )
    run_get.add_argument(
        "run_id", metavar="RUN_ID", help="the run's id (<job_id>:<epoch ms> or <job_id>:m:...)"
    )
    run_retry = command(
        run_commands,
        "retry",
        "retry a FAILED, DEAD or ABANDONED run",
        "Retry a FAILED, DEAD or ABANDONED run by hand: a new attempt of the same run, same idempotency key.",
        cmd_runs_retry,
    )
    run_retry.add_argument("run_id", metavar="RUN_ID", help="the run's id")

    # preview, stats -----------------------------------------------------------------------------------------
    preview = command(
        commands,
        "preview",
        "show a schedule's next fire times without creating anything",
        "Show the next fire times of a schedule (POST /v1/schedule-preview); nothing is created.",
        cmd_preview,
    )
    add_schedule_options(preview, required=True)
    preview.add_argument(
        "--after",
        type=parse_when,
        metavar="TIME",
        help="list fires after this RFC 3339 time or +DURATION (default now)",
    )
    preview.add_argument("--count", type=positive_int, metavar="N", help="how many fire times (at most 100)")

    command(
        commands,
        "stats",
        "show the tenant's health",
        "Show the tenant's health: jobs by status, runs by status over the last hour, trigger lag"
        " percentiles and queue depth.",
        cmd_stats,
    )

    # tenants ---------------------------------------------------------------------------------------------
    tenants = command(
        commands, "tenants", "administer tenants (straight to DynamoDB)", "Administer tenants in DynamoDB."
    )
    tenant_commands = tenants.add_subparsers(
        dest="tenants_command", metavar="ACTION", title="actions", required=True
    )
    tenant_create = command(
        tenant_commands,
        "create",
        "create a tenant and print its API token once",
        "Create a tenant with a fresh API token and webhook signing secret, writing straight to the tenants"
        " table with boto3 (AWS credentials and region from the environment; AWS_ENDPOINT_URL points at a"
        " local stack's moto; TICKWORK_TENANTS_TABLE names the table). The token is printed once: only its"
        " hash is stored.",
        cmd_tenants_create,
    )
    tenant_create.add_argument(
        "name", metavar="NAME", help="the tenant id: 1-63 lowercase letters, digits, '-' or '_'"
    )
    tenant_create.add_argument("--display-name", help="a human name for the tenant (default NAME)")
    tenant_create.add_argument(
        "--max-jobs", type=positive_int, metavar="N", help="most jobs the tenant may have (default 10000)"
    )
    tenant_create.add_argument(
        "--max-in-flight",
        type=positive_int,
        metavar="N",
        help="most runs running at once (default: no limit)",
    )
    tenant_create.add_argument(
        "--api-requests-per-second",
        type=requests_per_second,
        metavar="N",
        help=f"API requests the tenant may make per second, beyond which it gets 429 (default 50, at most"
        f" {MAX_API_REQUESTS_PER_SECOND})",
    )

    # receive ---------------------------------------------------------------------------------------------
    receive = command(
        commands,
        "receive",
        "run a webhook receiver that prints each delivery",
        "Run a small webhook receiver: print each delivery (time received, run id, attempt, scheduled_for,"
        " lag, payload) and, with --secret, whether its X-Tickwork-Signature verifies. Every request is"
        " answered with --status. Ctrl-C stops it.",
        cmd_receive,
    )
    receive.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    receive.add_argument("--port", type=int, default=9000, help="port to listen on (default 9000)")
    receive.add_argument("--secret", help="the tenant's signing secret, to check X-Tickwork-Signature")
    receive.add_argument(
        "--status",
        type=http_status,
        default=200,
        help="HTTP status to answer with (default 200; 500 makes tickwork retry, 400 fails the run)",
    )
    return parser


def _exit_code(code: object) -> int:
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version and argparse's usage errors
        return _exit_code(exit_.code)
    session = Session(
        api_url=args.api_url or os.environ.get(ENV_API_URL) or DEFAULT_API_URL,
        token=args.token or os.environ.get(ENV_TOKEN) or None,
        timeout=args.timeout or DEFAULT_TIMEOUT_SECONDS,
        as_json=args.json,
    )
    handler: Handler = args.handler
    try:
        return handler(args, session)
    except UsageError as error:
        command_parser: argparse.ArgumentParser = args.command_parser
        command_parser.print_usage(sys.stderr)
        print(f"{command_parser.prog}: error: {error}", file=sys.stderr)
        return error.exit_code
    except ApiError as error:
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_code
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly instead of a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
