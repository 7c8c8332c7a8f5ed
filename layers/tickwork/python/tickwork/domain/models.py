"""The job and run model: pydantic v2, pure, with the fields and defaults of the design contract."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, Union, cast, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from tickwork.domain.priority import DEFAULT_PRIORITY, Priority
from tickwork.domain.timeutil import to_epoch_ms, to_rfc3339, to_utc

# Validation context of a job read back from the store: rules tightened since it was accepted do not apply.
STORED = "stored"
MAX_PAYLOAD_BYTES = 256 * 1024
# AWS targets (SQS, Lambda's async invoke, EventBridge, Step Functions) take at most 256 KiB each, and the
# payload travels inside the envelope: keep room for it.
ENVELOPE_RESERVE_BYTES = 1024
MAX_AWS_PAYLOAD_BYTES = MAX_PAYLOAD_BYTES - ENVELOPE_RESERVE_BYTES
# All of a webhook's own headers together, as ``name: value\r\n`` lines. HTTP servers refuse much more
# (commonly 8-16 KiB in all), and the job item must stay well under DynamoDB's 400 KB with the largest
# payload beside them.
MAX_HEADER_BYTES = 16 * 1024
# JSON parsers bound nesting (pydantic's own at about 200 levels, others lower): a deeper payload could be
# stored and then not read back, or not parsed by the target.
MAX_PAYLOAD_DEPTH = 64
NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
RESERVED_HEADER_PREFIX = "x-tickwork-"
RESERVED_HEADERS = frozenset({"authorization", "idempotency-key", "host", "content-length"})
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
# Visible ASCII, spaces and tabs: HTTP clients refuse or mangle control characters and non-ASCII text.
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
# Instants a schedule may name. Past year 9999 Python has no datetime, so a day of margin keeps every
# conversion to a zone (offsets up to a day) and every fire computed from it representable.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)


def _instant_in_range(value: datetime) -> datetime:
    try:
        utc = to_utc(value)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_INSTANT <= utc < LATEST_INSTANT:
        raise PydanticCustomError(
            "datetime_out_of_range",
            "timestamp must lie between {earliest} and {latest}",
            {"earliest": to_rfc3339(EARLIEST_INSTANT), "latest": to_rfc3339(LATEST_INSTANT)},
        )
    return utc


Instant = Annotated[
    AwareDatetime,
    AfterValidator(_instant_in_range),
    PlainSerializer(to_rfc3339, return_type=str, when_used="json"),
]
"""An RFC 3339 timestamp with an offset, held as UTC, between 1970 and the end of year 9999."""


def _given_as_text(value: Any) -> Any:
    """A timestamp a client gives is an RFC 3339 string: pydantic would read a number as Unix time."""
    if isinstance(value, int | float):
        raise PydanticCustomError("datetime_type", "timestamp must be an RFC 3339 string")
    return value


GivenAsText = BeforeValidator(_given_as_text)
"""For the timestamps of requests: a number is refused, not read as Unix time."""


def _ceil_to_millisecond(value: datetime) -> datetime:
    below = value.microsecond % 1000
    return value + timedelta(microseconds=1000 - below) if below else value


def _to_rfc3339_exact(value: datetime) -> str:
    """Like ``to_rfc3339``, with microseconds when the value has them below the millisecond."""
    if value.microsecond % 1000:
        return to_utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return to_rfc3339(value)


# Instants are stored and shown with millisecond precision. A finer fire time or start is rounded up, so the
# stored job never fires before the time asked for.
FireInstant = Annotated[
    Instant, GivenAsText, AfterValidator(_ceil_to_millisecond), AfterValidator(_instant_in_range)
]
# An end keeps its microseconds (rounding it either way would admit a fire after it, or refuse an end just
# after the start), so it reads back exactly as given.
EndInstant = Annotated[
    AwareDatetime,
    GivenAsText,
    AfterValidator(_instant_in_range),
    PlainSerializer(_to_rfc3339_exact, return_type=str, when_used="json"),
]

JobName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class StrictModel(BaseModel):
    """Unknown fields are refused everywhere, so a typo never silently becomes a default."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- schedules --------------------------------------------------------------------------------------------
class DstPolicy(StrictModel):
    gap: Literal["shift", "skip"] = "shift"
    """A fixed local time inside a spring-forward gap: fire at the end of the gap, or not that day."""
    overlap: Literal["once", "all"] = "once"
    """A fixed local time repeated at fall-back: fire at its first occurrence only, or at both."""


class OnceSchedule(StrictModel):
    type: Literal["once"]
    at: FireInstant


def _date_given_as_text(value: Any) -> Any:
    """A date is ``YYYY-MM-DD``: pydantic would read a number as Unix time and a timestamp as its date."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise PydanticCustomError("date_format", "a date must be written YYYY-MM-DD, as in 2026-12-25")
    return value


CalendarDate = Annotated[date, BeforeValidator(_date_given_as_text)]


def _check_window(value: str) -> str:
    from tickwork.domain.cron_syntax import check_cron_syntax

    if len(value.split()) == 6:
        raise PydanticCustomError(
            "window_fields", "a window is 5 cron fields (minute hour day-of-month month day-of-week)"
        )
    check_cron_syntax(value)
    return value


def _check_holiday_calendar(value: str) -> str:
    from tickwork.domain.exclusions import check_holiday_calendar

    return check_holiday_calendar(value)


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


# What a client may send: one calendar, or a list of them (the job shows the list).
_CALENDAR_SCHEMA = {"type": "string", "minLength": 2, "maxLength": 32}
_CALENDARS_SCHEMA: dict[str, Any] = {
    "anyOf": [_CALENDAR_SCHEMA, {"type": "array", "items": _CALENDAR_SCHEMA, "maxItems": 10}]
}

WindowExpression = Annotated[
    str, StringConstraints(min_length=1, max_length=256), AfterValidator(_check_window)
]
HolidayCalendar = Annotated[
    str, StringConstraints(min_length=2, max_length=32), AfterValidator(_check_holiday_calendar)
]


class DateRange(StrictModel):
    """Local dates from ``start`` to ``end``, both included."""

    start: CalendarDate
    end: CalendarDate

    @model_validator(mode="after")
    def _end_not_before_start(self) -> DateRange:
        if self.end < self.start:
            raise PydanticCustomError("end_before_start", "a date range's end must not be before its start")
        return self


class Exclusions(StrictModel):
    """Fires that do not happen: on these local dates, in these cron windows, on these public holidays. Each
    excluded fire is recorded SKIPPED with the rule that excluded it."""

    dates: tuple[CalendarDate, ...] = Field((), max_length=400)
    date_ranges: tuple[DateRange, ...] = Field((), max_length=100)
    windows: tuple[WindowExpression, ...] = Field((), max_length=20)
    """5-field cron expressions: a fire whose local minute one of them matches is excluded."""
    holidays: Annotated[
        tuple[HolidayCalendar, ...],
        BeforeValidator(_one_or_many),
        WithJsonSchema(_CALENDARS_SCHEMA, mode="validation"),
    ] = Field((), max_length=10)
    """Public holidays of a country (``US``), a subdivision (``US-NY``) or a market (``NYSE``), from the
    ``holidays`` package."""
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    """The zone whose calendar the dates, windows and holidays follow; default the schedule's (UTC for a
    rate schedule)."""

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        from tickwork.domain.schedule import check_timezone

        return None if value is None else check_timezone(value)


class _BoundedSchedule(StrictModel):
    start_at: FireInstant | None = None
    end_at: EndInstant | None = None
    exclude: Exclusions | None = None

    @model_validator(mode="after")
    def _end_after_start(self) -> _BoundedSchedule:
        if self.start_at is not None and self.end_at is not None and self.end_at <= self.start_at:
            raise PydanticCustomError("end_before_start", "end_at must be later than start_at")
        return self


class CronSchedule(_BoundedSchedule):
    type: Literal["cron"]
    expression: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "UTC"
    dst: DstPolicy = DstPolicy()

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from tickwork.domain.schedule import check_timezone

        return check_timezone(value)

    @field_validator("expression")
    @classmethod
    def _valid_expression(cls, value: str, info: ValidationInfo) -> str:
        from tickwork.domain.schedule import check_cron_expression, parse_cron

        if info.context and info.context.get(STORED):
            # A job stored before a syntax rule was tightened keeps firing as it was accepted.
            parse_cron(value)
            return value
        return check_cron_expression(value)


class RateSchedule(_BoundedSchedule):
    type: Literal["rate"]
    every_seconds: int = Field(ge=1, le=366 * 86_400)


Schedule = Annotated[OnceSchedule | CronSchedule | RateSchedule, Field(discriminator="type")]


# --- targets ----------------------------------------------------------------------------------------------
# The form _check_http_url asks for first, as the schema states it: an http(s) scheme, then an authority
# without credentials or spaces (urlsplit would drop leading spaces and tabs, and read "http:x" as a path).
HTTP_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+([/?#][\s\S]*)?$"


def _check_http_url(value: str) -> str:
    if not re.fullmatch(HTTP_URL_PATTERN, value):
        raise PydanticCustomError("invalid_url", "url must be http:// or https:// and a host")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise PydanticCustomError("invalid_url", "url must use http or https")
    if not parts.hostname:
        raise PydanticCustomError("invalid_url", "url must name a host")
    if parts.username or parts.password:
        raise PydanticCustomError("invalid_url", "url must not carry credentials; use headers instead")
    try:
        _ = parts.port
    except ValueError as error:
        raise PydanticCustomError("invalid_url", "url has an invalid port") from error
    return value


HttpUrl = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2048),
    AfterValidator(_check_http_url),
    Field(json_schema_extra={"pattern": HTTP_URL_PATTERN}),
]


class HttpTarget(StrictModel):
    type: Literal["http"]
    url: HttpUrl
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=dict, max_length=50
    )
    timeout_seconds: int = Field(30, ge=1, le=900)

    @field_validator("headers")
    @classmethod
    def _allowed_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        size = header_bytes(headers)
        if size > MAX_HEADER_BYTES:
            raise PydanticCustomError(
                "payload_too_large",
                "headers take {size} bytes as sent; the limit is {limit} in all",
                {"size": size, "limit": MAX_HEADER_BYTES},
            )
        for name, value in headers.items():
            lowered = name.lower()
            if not HEADER_NAME.match(name):
                raise PydanticCustomError(
                    "invalid_header", "header name '{name}' is not valid", {"name": name}
                )
            if lowered.startswith(RESERVED_HEADER_PREFIX) or lowered in RESERVED_HEADERS:
                raise PydanticCustomError(
                    "reserved_header",
                    "header '{name}' is set by tickwork and cannot be overridden",
                    {"name": name},
                )
            if "\r" in value or "\n" in value:
                raise PydanticCustomError(
                    "invalid_header", "header '{name}' has a line break", {"name": name}
                )
            if not HEADER_VALUE.fullmatch(value):
                raise PydanticCustomError(
                    "invalid_header",
                    "header '{name}' may hold only printable ASCII characters, spaces and tabs",
                    {"name": name},
                )
        return headers


def header_bytes(headers: dict[str, str]) -> int:
    """Bytes the headers take on the wire, as ``name: value\r\n`` lines."""
    return sum(len(name.encode()) + len(value.encode()) + 4 for name, value in headers.items())


SQS_QUEUE_URL = r"^https?://[A-Za-z0-9.:-]+/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$"
LAMBDA_ARN = (
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?$"
)
STATE_MACHINE_ARN = r"^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}$"
EVENT_BUS = (
    r"^([A-Za-z0-9._/-]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._/-]{1,256})$"
)


class SqsTarget(StrictModel):
    type: Literal["sqs"]
    queue_url: Annotated[str, StringConstraints(pattern=SQS_QUEUE_URL)]


class LambdaTarget(StrictModel):
    type: Literal["lambda"]
    function_arn: Annotated[str, StringConstraints(pattern=LAMBDA_ARN)]


class EventBridgeTarget(StrictModel):
    type: Literal["eventbridge"]
    event_bus_name: Annotated[str, StringConstraints(pattern=EVENT_BUS)]
    detail_type: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    source: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,256}$")] = "tickwork"


class StepFunctionsTarget(StrictModel):
    type: Literal["stepfunctions"]
    state_machine_arn: Annotated[str, StringConstraints(pattern=STATE_MACHINE_ARN)]


POOL_NAME = r"^[a-z0-9][a-z0-9-]{0,63}$"
MAX_POOL_ATTEMPT_SECONDS = 7 * 86_400


class PoolTarget(StrictModel):
    """A run of this job waits for a worker of ``pool`` to claim it (``tickwork.domain.pools``)."""

    type: Literal["pool"]
    pool: Annotated[str, StringConstraints(pattern=POOL_NAME)]
    heartbeat_timeout_seconds: int = Field(60, ge=10, le=600)
    timeout_seconds: int = Field(3600, ge=1, le=MAX_POOL_ATTEMPT_SECONDS)


# --- policies ---------------------------------------------------------------------------------------------
class RetryPolicy(StrictModel):
    max_attempts: int = Field(5, ge=1, le=100)
    initial_delay_seconds: float = Field(2, ge=0, le=86_400)
    max_delay_seconds: float = Field(3600, ge=0, le=7 * 86_400)
    multiplier: float = Field(2.0, ge=1.0, le=10.0)
    jitter: Literal["full", "equal", "none"] = "full"
    max_age_seconds: int = Field(86_400, ge=1, le=7 * 86_400)

    @model_validator(mode="after")
    def _cap_not_below_initial(self) -> RetryPolicy:
        if self.max_delay_seconds < self.initial_delay_seconds:
            raise PydanticCustomError(
                "max_delay_below_initial", "max_delay_seconds must be at least initial_delay_seconds"
            )
        return self


MisfirePolicy = Literal["skip", "fire_once", "backfill"]
OverlapPolicy = Literal["allow", "skip", "queue"]
Delivery = Literal["at_least_once", "at_most_once"]
Tags = dict[
    Annotated[str, StringConstraints(min_length=1, max_length=128)],
    Annotated[str, StringConstraints(max_length=256)],
]


def payload_size(payload: Any) -> int:
    """Bytes of the payload as tickwork stores and sends it: compact UTF-8 JSON. NaN and Infinity are not
    JSON and raise ValueError."""
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())


def payload_depth(payload: Any) -> int:
    """How deeply arrays and objects nest in the payload (a scalar is 0), without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(payload, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth) for child in children)
    return deepest


def _check_payload_size(payload: JsonValue) -> JsonValue:
    depth = payload_depth(payload)
    if depth > MAX_PAYLOAD_DEPTH:
        raise PydanticCustomError(
            "invalid_payload",
            "payload nests {depth} levels deep; the limit is {limit}",
            {"depth": depth, "limit": MAX_PAYLOAD_DEPTH},
        )
    try:
        size = payload_size(payload)
    except UnicodeEncodeError as error:
        raise PydanticCustomError(
            "invalid_payload", "payload holds a lone surrogate (such as \\ud800), which UTF-8 cannot encode"
        ) from error
    except ValueError as error:
        raise PydanticCustomError(
            "invalid_payload", "payload holds NaN or Infinity, which JSON does not have"
        ) from error
    if size > MAX_PAYLOAD_BYTES:
        raise PydanticCustomError(
            "payload_too_large",
            "payload is {size} bytes once serialized; the limit is {limit}",
            {"size": size, "limit": MAX_PAYLOAD_BYTES},
        )
    return payload


Payload = Annotated[JsonValue, AfterValidator(_check_payload_size)]


# --- workflows: a target made of targets ------------------------------------------------------------------
# A workflow runs its tasks as child runs of its own run. The definition lives in the job item beside the
# job's 256 KiB payload, and copies of it go where its runs need them; each must fit a DynamoDB item
# (400 KB): all the tasks together take at most 64 KiB as stored, which leaves room for the rest.
WORKFLOW_TASK_ID = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MAX_WORKFLOW_TASKS = 100
MAX_WORKFLOW_TASKS_BYTES = 64 * 1024

TaskId = Annotated[str, StringConstraints(pattern=WORKFLOW_TASK_ID)]
TriggerRule = Literal["all_success", "all_done", "one_success", "one_failed"]
FailureMode = Literal["fail_fast", "continue"]

TaskTarget = Annotated[
    HttpTarget | SqsTarget | LambdaTarget | EventBridgeTarget | StepFunctionsTarget | PoolTarget,
    Field(discriminator="type"),
]
"""What a workflow's task may target: any kind but ``workflow``. A kind registered later joins it too."""


def _refused_at(at: str, error_type: str, message: str, **context: Any) -> PydanticCustomError:
    """An error of a model-level rule that concerns one field inside the model: ``at`` is that field's path
    from the model, which the API appends to the model's own location."""
    return PydanticCustomError(error_type, message, {"at": at, **context})


class WorkflowTask(StrictModel):
    """One step of a workflow: a target called (or a pool run claimed) once the task's parents allow it."""

    id: TaskId
    target: TaskTarget
    payload: Payload = None
    retry: RetryPolicy | None = None
    """The task's own retry policy; None: the job's."""
    depends_on: tuple[TaskId, ...] = Field((), max_length=MAX_WORKFLOW_TASKS)
    """The tasks whose ends this task waits for, its parents; none makes it a root, started first."""
    trigger_rule: TriggerRule = "all_success"
    """What its parents' outcomes must be for the task to run (:func:`tickwork.domain.workflow.decide`)."""

    @model_validator(mode="before")
    @classmethod
    def _no_workflow_inside(cls, data: Any) -> Any:
        target = data.get("target") if isinstance(data, dict) else None
        if isinstance(target, dict) and target.get("type") == "workflow":
            raise _refused_at(
                "target.type",
                "nested_workflow",
                "task '{task}' targets a workflow: a workflow's tasks may target anything but another"
                " workflow",
                task=str(data.get("id")),
            )
        return data

    @model_validator(mode="after")
    def _parents_named_once(self) -> WorkflowTask:
        if self.id in self.depends_on:
            raise _refused_at(
                "depends_on", "self_dependency", "task '{task}' depends on itself", task=self.id
            )
        seen: set[str] = set()
        for parent in self.depends_on:
            if parent in seen:
                raise _refused_at(
                    "depends_on",
                    "duplicate_dependency",
                    "task '{task}' lists '{parent}' more than once in depends_on",
                    task=self.id,
                    parent=parent,
                )
            seen.add(parent)
        return self


def _task_count_in_bounds(value: Any) -> Any:
    if isinstance(value, list | tuple):
        if not value:
            raise PydanticCustomError("no_tasks", "a workflow needs at least one task")
        if len(value) > MAX_WORKFLOW_TASKS:
            raise PydanticCustomError(
                "too_many_tasks",
                "a workflow has at most {limit} tasks; this one has {count}",
                {"limit": MAX_WORKFLOW_TASKS, "count": len(value)},
            )
    return value


class WorkflowTarget(StrictModel):
    """A run of this job is a workflow run: its tasks run as child runs, each once its parents allow it
    (``tickwork.domain.workflow``). A workflow itself is never called."""

    type: Literal["workflow"]
    tasks: Annotated[
        tuple[WorkflowTask, ...],
        Field(min_length=1, max_length=MAX_WORKFLOW_TASKS),
        BeforeValidator(_task_count_in_bounds),
    ]
    max_parallel: int | None = Field(None, ge=1, le=MAX_WORKFLOW_TASKS)
    """At most this many of the run's tasks running at once; None: no limit of the workflow's own."""
    failure_mode: FailureMode = "fail_fast"
    """``fail_fast``: once a task failed, the tasks not started are cancelled (those running finish).
    ``continue``: whatever can still run runs."""

    @model_validator(mode="after")
    def _a_dag_that_fits(self) -> WorkflowTarget:
        from tickwork.domain.workflow import find_cycle, task_graph

        index: dict[str, int] = {}
        for position, task in enumerate(self.tasks):
            if task.id in index:
                raise _refused_at(
                    f"tasks.{position}.id",
                    "duplicate_task_id",
                    "task id '{task}' is used twice, by tasks {first} and {second}; each task needs its own",
                    task=task.id,
                    first=index[task.id],
                    second=position,
                )
            index[task.id] = position
        for position, task in enumerate(self.tasks):
            unknown = [parent for parent in task.depends_on if parent not in index]
            if unknown:
                raise _refused_at(
                    f"tasks.{position}.depends_on",
                    "unknown_dependency",
                    "task '{task}' depends on '{parent}', which is not a task of this workflow",
                    task=task.id,
                    parent=unknown[0],
                )
        cycle = find_cycle(task_graph(self.tasks))
        if cycle is not None:
            raise _refused_at(
                f"tasks.{index[cycle[0]]}.depends_on",
                "dependency_cycle",
                "tasks {cycle} form a cycle: a workflow's dependencies must not loop back",
                cycle=" -> ".join(cycle),
            )
        size = payload_size([task.model_dump(mode="json") for task in self.tasks])
        if size > MAX_WORKFLOW_TASKS_BYTES:
            raise _refused_at(
                "tasks",
                "payload_too_large",
                "the workflow's tasks take {size} bytes once serialized; the limit is {limit} in all, so"
                " that the job and each run's copy of the definition fit their stores beside the job's"
                " payload",
                size=size,
                limit=MAX_WORKFLOW_TASKS_BYTES,
            )
        return self


Target = Annotated[
    HttpTarget
    | SqsTarget
    | LambdaTarget
    | EventBridgeTarget
    | StepFunctionsTarget
    | PoolTarget
    | WorkflowTarget,
    Field(discriminator="type"),
]
"""The target kinds built in. Each is registered in :mod:`tickwork.targets.registry`, and a kind registered
there later joins the union of :func:`target_models`."""


# The bounds of a job's fields, shared by the create body and the patch body.
MisfireGraceSeconds = Annotated[int, Field(ge=0, le=7 * 86_400)]
BackfillLimit = Annotated[int, Field(ge=1, le=1000)]
MaxConcurrentRuns = Annotated[int, Field(ge=1, le=50)]
JitterSeconds = Annotated[int, Field(ge=0, le=86_400)]
ConcurrencyKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
MaxConcurrency = Annotated[int, Field(ge=1, le=1000)]
Description = Annotated[str, StringConstraints(max_length=1024)]
JobTags = Annotated[Tags, Field(max_length=50)]


class JobSpec(StrictModel):
    """What a tenant asks for: the body of ``POST /v1/jobs``."""

    # The rule of _concurrency_with_allow, stated in the schema for clients (and fuzzers) that read it.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {
                "properties": {"max_concurrent_runs": {"type": "integer"}},
                "required": ["max_concurrent_runs"],
            },
            "then": {"properties": {"overlap_policy": {"const": "allow"}}, "required": ["overlap_policy"]},
            "dependentRequired": {
                "concurrency_key": ["max_concurrency"],
                "max_concurrency": ["concurrency_key"],
            },
        }
    )

    name: JobName
    schedule: Schedule
    target: Target
    payload: Payload = None
    retry: RetryPolicy = RetryPolicy()
    misfire_policy: MisfirePolicy = "fire_once"
    misfire_grace_seconds: MisfireGraceSeconds = 60
    backfill_limit: BackfillLimit = 100
    overlap_policy: OverlapPolicy = "skip"
    max_concurrent_runs: MaxConcurrentRuns | None = None
    """With ``overlap_policy: allow``, at most this many runs at once; a fire beyond it is SKIPPED."""
    jitter_seconds: JitterSeconds = 0
    """Each scheduled fire starts up to this much after its time, by an offset fixed by its run id, and
    always before the next fire."""
    concurrency_key: ConcurrencyKey | None = None
    """With ``max_concurrency``: at most that many runs of the tenant's jobs sharing this key run at once;
    the others wait, and start within a second of a place freeing."""
    max_concurrency: MaxConcurrency | None = None
    priority: Priority = DEFAULT_PRIORITY
    """Under a backlog, higher priorities start first; none waits more than 300 s longer than it would
    without priorities (:mod:`tickwork.domain.priority`)."""
    delivery: Delivery = "at_least_once"
    description: Description | None = None
    tags: JobTags = Field(default_factory=dict)

    @model_validator(mode="after")
    def _concurrency_with_allow(self) -> JobSpec:
        if self.max_concurrent_runs is not None and self.overlap_policy != "allow":
            raise PydanticCustomError(
                "max_concurrent_runs_needs_allow",
                "max_concurrent_runs applies to overlap_policy allow; skip and queue run one at a time",
            )
        if (self.concurrency_key is None) != (self.max_concurrency is None):
            raise PydanticCustomError(
                "concurrency_key_with_max_concurrency",
                "concurrency_key and max_concurrency go together: give both (at most max_concurrency runs"
                " of the jobs sharing the key at once) or neither",
            )
        return self


def _no_default_shown(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _given_or_kept() -> Any:
    """A patch field that may be left out (the job keeps its value) but not set to ``null``: the field has no
    default to reset to. Its schema shows no default, which would be a ``null`` the field refuses."""
    return Field(None, json_schema_extra=_no_default_shown)


class JobPatch(StrictModel):
    """The body of ``PATCH /v1/jobs/{job_id}``, a JSON merge patch: a field left out is kept, ``null`` resets
    a field to its default (``name``, ``schedule`` and ``target`` have none, so they take no ``null``).
    ``schedule``, ``target`` and ``retry`` merge key by key into the job's, and the merged job is checked
    whole; every other field has the bounds it has at create. ``version`` for optimistic locking."""

    name: JobName = _given_or_kept()
    schedule: dict[str, Any] = _given_or_kept()
    target: dict[str, Any] = _given_or_kept()
    payload: Payload = None
    retry: dict[str, Any] | None = None
    misfire_policy: MisfirePolicy | None = None
    misfire_grace_seconds: MisfireGraceSeconds | None = None
    backfill_limit: BackfillLimit | None = None
    overlap_policy: OverlapPolicy | None = None
    max_concurrent_runs: MaxConcurrentRuns | None = None
    jitter_seconds: JitterSeconds | None = None
    concurrency_key: ConcurrencyKey | None = None
    max_concurrency: MaxConcurrency | None = None
    priority: Priority | None = None
    delivery: Delivery | None = None
    description: Description | None = None
    tags: JobTags | None = None
    version: int | None = Field(None, ge=1)

    def changes(self) -> dict[str, Any]:
        """The fields the client sent, as a JSON merge patch (``version`` excluded)."""
        return self.model_dump(mode="json", exclude_unset=True, exclude={"version"})


# --- jobs -------------------------------------------------------------------------------------------------
class JobStatus(StrEnum):
    ACTIVE = "ACTIVE"  # planned by the planner
    PAUSED = "PAUSED"  # kept, not planned; fires missed meanwhile follow the misfire policy on resume
    COMPLETED = "COMPLETED"  # the schedule has no fire left
    CANCELLED = "CANCELLED"  # deleted by the tenant; kept for history, its name is free again


class PauseInfo(StrictModel):
    reason: str | None = None
    paused_at: Instant
    paused_by: str


class Job(JobSpec):
    """A stored job: the spec plus identity, state and the planning cursor."""

    # A workflow task's view of its job (``tickwork.domain.workflow.task_job``): the workflow it is a task of.
    _workflow: WorkflowTarget | None = PrivateAttr(default=None)

    job_id: str
    tenant_id: str
    status: JobStatus = JobStatus.ACTIVE
    version: int = 1
    created_at: Instant
    updated_at: Instant
    next_fire_at: Instant | None = None
    """The first fire not yet planned: the planner's cursor."""
    pause: PauseInfo | None = None
    cancelled_at: Instant | None = None
    last_fire_at: Instant | None = None
    """Once the cursor has run out: the schedule's last fire, whose end completes the job."""

    @property
    def workflow(self) -> WorkflowTarget | None:
        """The workflow this job runs: its own target, or, seen as one of its tasks, the workflow the task
        belongs to."""
        return self.target if isinstance(self.target, WorkflowTarget) else self._workflow

    def as_task_of(self, workflow: WorkflowTarget) -> Job:
        """This job (a task's view of a workflow job) remembering the workflow it is a task of."""
        self._workflow = workflow
        return self

    def spec(self) -> JobSpec:
        # The job was validated when it was accepted: rules tightened since do not refuse its own spec.
        return JobSpec.model_validate(
            self.model_dump(include=set(JobSpec.model_fields)), context={STORED: True}
        )


# --- runs -------------------------------------------------------------------------------------------------
class RunStatus(StrEnum):
    PLANNED = "PLANNED"  # stored, not yet handed to the queue
    ENQUEUED = "ENQUEUED"  # sent to the run queue, waiting for its time
    RUNNING = "RUNNING"  # a worker holds the lease
    RETRY_WAIT = "RETRY_WAIT"  # an attempt failed; the next one is scheduled
    SUCCEEDED = "SUCCEEDED"  # the target accepted it
    FAILED = "FAILED"  # a permanent error: retrying would not help
    DEAD = "DEAD"  # retries exhausted (attempts or age)
    ABANDONED = "ABANDONED"  # an at-most-once attempt may have started and was lost
    MISSED = "MISSED"  # noticed too late; the misfire policy chose not to run it
    SKIPPED = "SKIPPED"  # the overlap policy chose not to run it
    CANCELLED = "CANCELLED"  # its job was cancelled before it started


TERMINAL_RUN_STATUSES = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.DEAD,
        RunStatus.ABANDONED,
        RunStatus.MISSED,
        RunStatus.SKIPPED,
        RunStatus.CANCELLED,
    }
)
NOT_STARTED_RUN_STATUSES = frozenset({RunStatus.PLANNED, RunStatus.ENQUEUED, RunStatus.RETRY_WAIT})
RETRYABLE_BY_HAND = frozenset({RunStatus.FAILED, RunStatus.DEAD, RunStatus.ABANDONED})

RunTrigger = Literal["schedule", "manual"]
AttemptOutcome = Literal["succeeded", "retryable_error", "permanent_error", "abandoned"]


class Attempt(StrictModel):
    attempt: int = Field(ge=1)
    started_at: Instant
    finished_at: Instant | None = None
    duration_ms: int | None = None
    outcome: AttemptOutcome | None = None
    error_code: str | None = None
    error_message: str | None = None
    worker_id: str | None = None


class Run(StrictModel):
    run_id: str
    job_id: str
    tenant_id: str
    scheduled_for: Instant
    status: RunStatus
    trigger: RunTrigger = "schedule"
    attempt: int = 0
    created_at: Instant
    enqueued_at: Instant | None = None
    started_at: Instant | None = None
    finished_at: Instant | None = None
    lag_ms: int | None = None
    """From when the fire was due (``scheduled_for`` plus its jitter) to its first attempt's start."""
    jitter_ms: int | None = None
    """The job's ``jitter_seconds`` put this fire's start this long after ``scheduled_for``."""
    reason: str | None = None
    """Why a run ended without running: the misfire, overlap or cancel decision."""
    attempts: list[Attempt] = Field(default_factory=list)
    fencing_token: int = 0
    """Bumped by every lease; every write after a lease is conditional on it."""
    lease_owner: str | None = None
    lease_expires_at: Instant | None = None
    retry_at: Instant | None = None
    manual_retries: int = 0
    retry_sent_at: Instant | None = Field(None, exclude=True)
    """When the next attempt's message went out (None: not yet, a retry too far ahead for SQS's delay)."""
    dead_letter_owed: bool = Field(False, exclude=True)
    """DEAD, and its dead letter not yet known to be in its queue: whoever reads it next sends it."""
    workflow: bool = False
    """A workflow run: RUNNING while its tasks run (each a run of its own), ended by the end of the last."""
    workflow_retry: int = Field(0, exclude=True)
    """A task's run: the go of its workflow run it belongs to (the workflow run's ``manual_retries`` then; 0:
    its first). A retry's start resets the runs of earlier goes it runs again, never those of its own."""
    # A pool run's (a ``pool`` target's): claimed by the tenant's own workers, kept alive by heartbeats.
    pool: str | None = None
    """The pool the run waits in (ENQUEUED) or runs in (RUNNING), claimed by the tenant's workers."""
    progress: float | None = None
    stage: str | None = None
    heartbeat_at: Instant | None = None
    lease_deadline: Instant | None = None
    """A pool attempt's hard cap (its target's ``timeout_seconds`` from its claim), whatever heartbeats."""
    cancel_requested: bool = False
    """Asked to stop (``POST /v1/runs/{run_id}/cancel``) while running: it ends CANCELLED, never retried."""
    output: JsonValue | None = None
    lease_token: str | None = Field(None, exclude=True)
    """The lease token of an attempt held outside tickwork (a pool worker's claim, or a webhook that answered
    202), given to its holder alone; never shown."""
    pool_waiting_since: Instant | None = Field(None, exclude=True)
    """When the run began waiting in its pool for a claim: handed over, or due if that is later."""
    pool_wait_alarm_at: Instant | None = Field(None, exclude=True)
    """When the sweeper looks at the run if it is still waiting in its pool: the pool wait threshold after
    ``pool_waiting_since``, then one threshold after each look."""

    @property
    def waiting_in_pool(self) -> bool:
        """Handed to its pool and not claimed yet."""
        return self.pool is not None and self.status is RunStatus.ENQUEUED

    @property
    def in_pool(self) -> bool:
        """In its pool's hands: waiting for a claim, or claimed and running."""
        return self.pool is not None and self.status in (RunStatus.ENQUEUED, RunStatus.RUNNING)

    @property
    def held_outside(self) -> bool:
        """Its attempt is in outside hands: in its pool (waiting for a claim, or claimed), or RUNNING under a
        lease token (a webhook that answered 202). It ends through the heartbeat, complete and fail routes,
        or the sweeper's lapse of its lease; it holds its job's lane meanwhile."""
        if self.status is RunStatus.RUNNING and self.workflow:
            return True  # its tasks run it
        return self.in_pool or (self.status is RunStatus.RUNNING and self.lease_token is not None)

    @property
    def due_at(self) -> datetime:
        """When the next attempt may start: the retry time after a failure, else the scheduled time with its
        jitter."""
        if self.status is RunStatus.RETRY_WAIT and self.retry_at:
            return self.retry_at
        return self.scheduled_for + timedelta(milliseconds=self.jitter_ms or 0)


class RunMessage(StrictModel):
    """The body of a run-queue message: just enough to find the run; everything else is in the tables."""

    tenant_id: str = Field(min_length=1, max_length=64)
    run_id: str = Field(min_length=1, max_length=256)
    sent_at: int | None = Field(None, ge=0)
    """When the planner (or the API) sent the fire, epoch ms: the run's ``enqueued_at``."""
    chain_until: int | None = Field(None, ge=0)
    """A backfill chain: after this fire, run the next one, up to this fire (epoch ms)."""
    attempt: int | None = Field(None, ge=1)
    """Set on a retry's message: the attempt it starts (the run item says where the run stands)."""
    start_at: int | None = Field(None, ge=0)
    """A run over its tenant's throttle: the start it reserved (epoch ms), which it waits for."""
    priority: Priority | None = None
    """The job's priority, which picks the queue the message goes to; absent for ``normal``."""
    held_since: int | None = Field(None, ge=0)
    """A run held by a full limit: when it was first held (epoch ms), which ages it past higher priorities
    (:func:`tickwork.domain.priority.yields_to`)."""
    go: int | None = Field(None, ge=0)
    """A workflow task's message: the go of its workflow run it was sent for (0: the run's first; each retry
    one more). A task's run is first written by its claim, and a message of another go is stale."""
    ahead: bool | None = None
    """A planned fire of a job whose runs share its lane (:func:`tickwork.domain.arrival.reads_ahead`): the
    worker may read what the run needs as soon as the message arrives, and take the lane at the fire."""


class RunSummary(StrictModel):
    run_id: str
    scheduled_for: Instant
    status: RunStatus
    attempt: int
    finished_at: Instant | None = None

    @classmethod
    def of(cls, run: Run) -> RunSummary:
        return cls(
            run_id=run.run_id,
            scheduled_for=run.scheduled_for,
            status=run.status,
            attempt=run.attempt,
            finished_at=run.finished_at,
        )


def scheduled_run_id(job_id: str, fire_at: datetime) -> str:
    """Deterministic, so planning the same fire twice is harmless."""
    return f"{job_id}:{to_epoch_ms(fire_at)}"


def manual_run_id(job_id: str, idempotency_key: str | None) -> str:
    suffix = (
        hashlib.sha256(idempotency_key.encode()).hexdigest()[:32] if idempotency_key else uuid.uuid4().hex
    )
    return f"{job_id}:m:{suffix}"


def job_id_of_run(run_id: str) -> str:
    return run_id.split(":", 1)[0]


_RUN_ID = re.compile(r"^(?P<job>[A-Za-z0-9._-]{1,64}):(?:(?P<fire>[0-9]{1,15})|m:(?P<manual>[0-9a-f]{32}))$")


@dataclass(frozen=True)
class RunKey:
    """What a run id names: its job, and the fire (a scheduled run) or the trigger's hash (a manual one)."""

    job_id: str
    fire_ms: int | None
    manual: str | None

    @property
    def is_manual(self) -> bool:
        return self.manual is not None


def parse_run_id(run_id: str) -> RunKey | None:
    """The parts of a run id, or None if it is not one tickwork makes."""
    match = _RUN_ID.match(run_id)
    if match is None:
        return None
    fire = match.group("fire")
    return RunKey(match.group("job"), int(fire) if fire is not None else None, match.group("manual"))


# --- the target union -------------------------------------------------------------------------------------
_target_members: tuple[type[StrictModel], ...] = get_args(get_args(Target)[0])


def target_models() -> tuple[type[StrictModel], ...]:
    """The models a job's ``target`` may take, in the order of the union (and of its ``type`` values)."""
    return _target_members


def set_target_models(members: tuple[type[StrictModel], ...]) -> None:
    """Make ``members`` the target union of :class:`JobSpec` and of every model that holds one.

    pydantic compiles a model's validator when the class is made, so a kind registered afterwards is taken in
    by rebuilding: the job models first, then any model whose compiled schema embeds one of them.
    """
    global _target_members
    if members == _target_members:
        return
    _target_members = members
    # A workflow's tasks take every kind but workflow; the workflow model embeds them, the job models it.
    _retarget([WorkflowTask], tuple(model for model in members if model is not WorkflowTarget))
    WorkflowTarget.model_rebuild(force=True)
    family = _with_subclasses(JobSpec)
    _retarget(family, members)
    rebuilt: list[type[BaseModel]] = [WorkflowTask, WorkflowTarget, *family]
    names = tuple(f"{model.__module__}.{model.__qualname__}" for model in rebuilt)
    holders = [
        model
        for model in _with_subclasses(BaseModel)
        if model not in rebuilt
        and model.__module__.startswith("tickwork")
        and model.__pydantic_complete__
        and any(name in repr(model.__pydantic_core_schema__) for name in names)
    ]
    for model in holders:
        model.model_rebuild(force=True)


def _retarget(models: list[type[BaseModel]], members: tuple[type[StrictModel], ...]) -> None:
    """Give each of ``models`` a ``target`` field of the tagged union of ``members``, and rebuild it."""
    union: Any = Annotated[cast(Any, Union)[members], Field(discriminator="type")]
    for model in models:
        model.__pydantic_fields__["target"] = FieldInfo.from_annotation(union)
        model.model_rebuild(force=True)


def _with_subclasses(model: type[BaseModel]) -> list[type[BaseModel]]:
    found = [model]
    for child in model.__subclasses__():
        found += [sub for sub in _with_subclasses(child) if sub not in found]
    return found
