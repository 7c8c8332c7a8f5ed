"""Job specs as the CLI reads and writes them: the body of ``POST /v1/jobs`` from flags and files, the patch
of ``PATCH /v1/jobs/{id}`` from flags, the documents ``apply`` reads, and the document ``export`` writes
(only the fields a user sets, so that ``apply`` takes it back)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tickwork_local.cli.errors import CliError, Problem, UsageError
from tickwork_local.cli.options import rfc3339

if TYPE_CHECKING:
    from pydantic import BaseModel
    from tickwork.api.schemas import JobOut

# What the API shows of a job but never takes: it sets them itself.
READ_ONLY_FIELDS = (
    "job_id",
    "tenant_id",
    "status",
    "version",
    "created_at",
    "updated_at",
    "next_fire_at",
    "last_fire_at",
    "pause",
    "cancelled_at",
    "last_run",
    "schedule_description",
)
# Replaced whole by a patch, never merged key by key (tickwork.domain.patch.OPAQUE_FIELDS).
OPAQUE_FIELDS = frozenset({"payload"})


# --- reading ------------------------------------------------------------------------------------------------
def read_text(path: str, flag: str) -> str:
    """A file's text, or standard input's for ``-``."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{flag}: cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {path} is not UTF-8 text") from None


def parse_json_value(text: str, flag: str) -> Any:
    """JSON given inline, or ``@path`` to read it from a file."""
    if text.startswith("@"):
        text = read_text(text[1:], flag)
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{flag} is not valid JSON: {error}") from None


def parse_documents(text: str, path: str, flag: str) -> list[Any]:
    """Every document in JSON or YAML text (YAML may hold several, separated by ``---``)."""
    if Path(path).suffix.lower() == ".json":
        try:
            return [_plain(json.loads(text))]
        except ValueError as error:
            raise UsageError(f"{flag}: {path} is not valid JSON: {error}") from None
    try:
        return [_plain(json.loads(text))]
    except ValueError:
        pass
    import yaml

    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise UsageError(f"{flag}: {path} is neither JSON nor valid YAML: {error}") from None
    return [_plain(document) for document in documents if document is not None]


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


def job_documents(documents: Sequence[Any], source: str) -> list[dict[str, Any]]:
    """The job specs in the documents: each a mapping, a list of them, or a page (``{"items": [...]}``)."""
    specs: list[dict[str, Any]] = []
    for document in documents:
        if isinstance(document, dict) and isinstance(document.get("items"), list) and "name" not in document:
            document = document["items"]
        items = document if isinstance(document, list) else [document]
        for item in items:
            if not isinstance(item, dict):
                raise UsageError(f"{source}: a job spec must be a mapping, not {type(item).__name__}")
            specs.append(item)
    return specs


def without_read_only(spec: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The spec without the fields the API sets itself (as ``jobs get -o json`` shows them), and their
    names."""
    dropped = [name for name in READ_ONLY_FIELDS if name in spec]
    return {key: value for key, value in spec.items() if key not in READ_ONLY_FIELDS}, dropped


def load_spec_file(path: str) -> tuple[dict[str, Any], list[str]]:
    """One job spec from a JSON or YAML file (``-`` reads standard input), without read-only fields."""
    documents = parse_documents(read_text(path, "--file"), path, "--file")
    if len(documents) != 1 or not isinstance(documents[0], dict):
        found = f"{len(documents)} documents" if len(documents) != 1 else type(documents[0]).__name__
        raise UsageError(f"--file: {path} must hold one mapping (a job spec), not {found}")
    return without_read_only(documents[0])


# --- flags --------------------------------------------------------------------------------------------------
@dataclass
class ScheduleFlags:
    at: str | None = None
    cron: str | None = None
    rate: int | None = None
    timezone: str | None = None
    exclude_holidays: list[str] | None = None
    exclude_date: list[str] | None = None
    exclude_window: list[str] | None = None

    def schedule(self) -> dict[str, Any] | None:
        """The schedule --at, --cron or --rate gives, with --timezone; None if none of them is given."""
        given = [
            flag for flag, value in (("--at", self.at), ("--cron", self.cron), ("--rate", self.rate)) if value
        ]
        if len(given) > 1:
            raise UsageError(f"give one of --at, --cron or --rate, not {' and '.join(given)}")
        if self.at is not None:
            if self.timezone:
                raise UsageError("--timezone applies to --cron; give --at a time with its UTC offset")
            return {"type": "once", "at": self.at}
        if self.cron is not None:
            schedule: dict[str, Any] = {"type": "cron", "expression": self.cron}
            if self.timezone:
                schedule["timezone"] = self.timezone
            return schedule
        if self.rate is not None:
            if self.timezone:
                raise UsageError("--timezone applies to --cron, not --rate")
            return {"type": "rate", "every_seconds": self.rate}
        return None

    def exclusions(self) -> dict[str, Any] | None:
        """``schedule.exclude`` from --exclude-holidays, --exclude-date and --exclude-window."""
        exclude: dict[str, Any] = {}
        if self.exclude_holidays:
            exclude["holidays"] = list(self.exclude_holidays)
        for given in self.exclude_date or []:
            start, dots, end = given.partition("..")
            if dots:
                exclude.setdefault("date_ranges", []).append({"start": start.strip(), "end": end.strip()})
            else:
                exclude.setdefault("dates", []).append(given.strip())
        if self.exclude_window:
            exclude["windows"] = list(self.exclude_window)
        return exclude or None

    def add_exclusions(self, schedule: dict[str, Any]) -> None:
        exclude = self.exclusions()
        if exclude is None:
            return
        if schedule.get("type") == "once":
            raise UsageError("--exclude-* apply to --cron and --rate schedules, not --at")
        existing = schedule.get("exclude")
        schedule["exclude"] = {**(existing if isinstance(existing, dict) else {}), **exclude}


@dataclass
class JobFlags:
    """The flags of ``jobs create``."""

    name: str | None = None
    schedule: ScheduleFlags | None = None
    jitter: int | None = None
    url: str | None = None
    method: str | None = None
    target_json: str | None = None
    payload: str | None = None
    description: str | None = None
    misfire_policy: str | None = None
    overlap_policy: str | None = None
    priority: str | None = None
    max_attempts: int | None = None


def build_job_spec(base: dict[str, Any] | None, flags: JobFlags) -> dict[str, Any]:
    """The body of POST /v1/jobs: the file's fields (``base``), then each flag given on top of them."""
    spec = dict(base or {})
    schedule_flags = flags.schedule or ScheduleFlags()
    if flags.name is not None:
        spec["name"] = flags.name
    schedule = schedule_flags.schedule()
    if schedule is not None:
        spec["schedule"] = schedule
    elif schedule_flags.timezone:
        existing = spec.get("schedule")
        if not (isinstance(existing, dict) and existing.get("type") == "cron"):
            raise UsageError("--timezone needs --cron or a cron schedule in --file")
        spec["schedule"] = {**existing, "timezone": schedule_flags.timezone}
    if schedule_flags.exclusions() is not None:
        existing = spec.get("schedule")
        if not isinstance(existing, dict):
            raise UsageError("--exclude-* need a schedule (--cron, --rate or one in --file)")
        existing = dict(existing)
        schedule_flags.add_exclusions(existing)
        spec["schedule"] = existing
    if flags.jitter is not None:
        spec["jitter_seconds"] = flags.jitter
    if flags.url is not None and flags.target_json is not None:
        raise UsageError("give one of --url or --target-json, not both")
    if flags.target_json is not None:
        target = parse_json_value(flags.target_json, "--target-json")
        if not isinstance(target, dict):
            raise UsageError('--target-json must be a JSON object like {"type": "sqs", "queue_url": "..."}')
        spec["target"] = target
    existing_target = spec.get("target")
    is_http = isinstance(existing_target, dict) and existing_target.get("type") == "http"
    if flags.url is not None:
        # Keep an http target's other fields (headers, timeout) from the file; only the URL changes.
        target = dict(existing_target) if is_http and isinstance(existing_target, dict) else {"type": "http"}
        target["url"] = flags.url
        if flags.method:
            target["method"] = flags.method
        spec["target"] = target
    elif flags.method:
        if not (is_http and isinstance(existing_target, dict)):
            raise UsageError("--method needs --url or an http target in --file")
        spec["target"] = {**existing_target, "method": flags.method}
    if flags.payload is not None:
        spec["payload"] = parse_json_value(flags.payload, "--payload")
    if flags.description is not None:
        spec["description"] = flags.description
    if flags.misfire_policy is not None:
        spec["misfire_policy"] = flags.misfire_policy
    if flags.overlap_policy is not None:
        spec["overlap_policy"] = flags.overlap_policy
    if flags.priority is not None:
        spec["priority"] = flags.priority
    if flags.max_attempts is not None:
        retry = spec.get("retry")
        spec["retry"] = {**(retry if isinstance(retry, dict) else {}), "max_attempts": flags.max_attempts}
    if base is None:
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


# --- export and apply ---------------------------------------------------------------------------------------
def user_fields(
    model: BaseModel, dumped: Mapping[str, Any], only: Sequence[str] | None = None
) -> dict[str, Any]:
    """The fields of ``model`` (as ``dumped``, its JSON form) that differ from their defaults: what a user
    set. Nested models are cut down the same way, so ``retry: {max_attempts: 3}`` stays just that."""
    fields = type(model).model_fields
    kept: dict[str, Any] = {}
    for name in only or list(fields):
        field = fields[name]
        if name not in dumped:
            continue
        value = getattr(model, name)
        if not field.is_required() and value == field.get_default(call_default_factory=True):
            continue
        nested = dumped[name]
        from pydantic import BaseModel

        if isinstance(value, BaseModel) and isinstance(nested, dict):
            kept[name] = user_fields(value, nested)
        else:
            kept[name] = nested
    return kept


def exported(job: JobOut) -> dict[str, Any]:
    """The job as a spec ``apply`` takes: no id, status, version, timestamps or other read-only field, and
    no field left at its default."""
    from tickwork.domain.models import JobSpec

    return user_fields(job, job.model_dump(mode="json"), only=list(JobSpec.model_fields))


def normalised(spec: Mapping[str, Any]) -> BaseModel:
    """The spec read as the API reads it (every default filled in); its problems in the API's words."""
    from pydantic import ValidationError
    from tickwork.api.errors import describe_validation_errors
    from tickwork.domain.models import JobSpec

    try:
        return JobSpec.model_validate(dict(spec))
    except ValidationError as error:
        _, body = describe_validation_errors(error.errors())
        info = body["error"]
        details = [Problem(d["message"], d["code"], d["field"]) for d in info.get("details", [])]
        raise CliError(info["message"], code=info["code"], field=info["field"], details=details) from None


def spec_of(job: JobOut) -> dict[str, Any]:
    """The job's whole spec (defaults included), as JSON."""
    from tickwork.domain.models import JobSpec

    return job.model_dump(mode="json", include=set(JobSpec.model_fields))


def merge_diff(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7396, with tickwork's rules) that turns ``current`` into ``desired``: a key
    to drop is ``null``, objects are patched key by key, except the payload and an object whose ``type``
    changes, which are sent whole."""
    patch: dict[str, Any] = {}
    for key in [*desired, *(key for key in current if key not in desired)]:
        if key not in desired:
            if current[key] is not None:
                patch[key] = None
            continue
        new = desired[key]
        if key in current and current[key] == new:
            continue
        old = current.get(key)
        retyped = isinstance(new, dict) and isinstance(old, dict) and new.get("type") != old.get("type")
        if isinstance(new, dict) and isinstance(old, dict) and key not in OPAQUE_FIELDS and not retyped:
            patch[key] = merge_diff(old, new)
        else:
            patch[key] = new
    return patch
