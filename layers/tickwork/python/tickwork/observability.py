"""Logger, tracer and metrics, shared by the Lambda adapters. The domain never imports this module."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

SERVICE = "tickwork"
NAMESPACE = "Tickwork"

# Keys Powertools puts on every line (the Lambda context's, the API's request id as ``correlation_id``) and
# on an unexpected error's line (its traceback).
POWERTOOLS_LOG_KEYS = frozenset(
    {
        "level",
        "location",
        "message",
        "timestamp",
        "service",
        "sampling_rate",
        "xray_trace_id",
        "cold_start",
        "function_name",
        "function_memory_size",
        "function_arn",
        "function_request_id",
        "correlation_id",
        "exception",
        "exception_name",
        "stack_trace",
    }
)
# The only keys tickwork adds (docs/operations.md, "Logs"): what an operator searches by and reads. Never
# internal names (table keys, index attributes, fencing tokens, lane items), stored items or secrets.
LOG_KEYS = frozenset(
    {
        "tenant_id",
        "job_id",
        "run_id",
        "attempt",
        "status",
        "reason",
        "error_code",
        "lag_ms",
        "duration_ms",
        "actor",
        "version",
        "status_code",
        "message_id",
        "due_jobs",
        "planned_runs",
        "missed_runs",
        "swept_runs",
        "pool",
        "waited_ms",
        "runs",
        "handler",
        "instances",
        "port",
    }
)


class PerThreadKeysFormatter(LambdaPowertoolsFormatter):
    """Keys given at construction (the service) are shared; keys appended later (the Lambda context, the
    correlation id, a request's tenant, the run being handled) belong to the thread that appended them.

    A Lambda environment handles one event at a time, so on AWS this changes nothing. Where handlers run on
    threads (the local stack, tests, benchmarks), one shared dict would put one request's keys on another's
    log lines, and iterating it while another thread writes it fails.
    """

    def append_keys(self, **additional_keys: Any) -> None:
        self.thread_safe_append_keys(**additional_keys)

    def remove_keys(self, keys: Iterable[str]) -> None:
        self.thread_safe_remove_keys(keys)

    def get_current_keys(self) -> dict[str, Any]:
        return {**self.log_format, **self.thread_safe_get_current_keys()}

    def clear_state(self) -> None:
        super().clear_state()
        self.thread_safe_clear_keys()


class _UntracedSegment(BaseSegment):
    def close(self, end_time: int | None = None) -> None: ...
    def add_subsegment(self, subsegment: Any) -> None: ...
    def remove_subsegment(self, subsegment: Any) -> None: ...
    def put_annotation(self, key: str, value: Any) -> None: ...
    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None: ...
    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None: ...


class _Untraced(BaseProvider):
    """The tracer's provider when tracing is off (outside Lambda, or POWERTOOLS_TRACE_DISABLED): Powertools
    would import the X-Ray SDK anyway, 0.15 s of every start of the local stack, the CLI and the tests."""

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Iterator[BaseSegment]:
        yield _UntracedSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> AsyncIterator[BaseSegment]:
        yield _UntracedSegment()

    def put_annotation(self, key: str, value: Any) -> None: ...
    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None: ...
    def patch(self, modules: Sequence[str]) -> None: ...
    def patch_all(self) -> None: ...


def _tracer() -> Tracer:
    if Tracer._is_tracer_disabled():
        return Tracer(service=SERVICE, disabled=True, provider=_Untraced())
    return Tracer(service=SERVICE)


logger = Logger(service=SERVICE, logger_formatter=PerThreadKeysFormatter(service=SERVICE))
tracer = _tracer()
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class PowertoolsMetricSink:
    """EMF metrics through Powertools; flushed by ``@metrics.log_metrics`` on each invocation. A worker
    handles a batch's jobs on several threads, and Powertools' metric set is not guarded: this sink is."""

    _lock = threading.Lock()

    def count(self, name: str, value: float = 1) -> None:
        with self._lock:
            # Counts are read by their Sum, so an invocation keeps one value per count (a batch's ten runs
            # make one 10.0, not ten 1.0s): the worker's one line per invocation stays short.
            counted = metrics.metric_set.get(name)
            if counted is not None and counted.get("Unit") == MetricUnit.Count.value and counted["Value"]:
                counted["Value"][:] = [sum(counted["Value"]) + float(value)]
                return
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def milliseconds(self, name: str, value: float) -> None:
        with self._lock:
            metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)


class PowertoolsTenantGauges:
    """Per-tenant gauges, one EMF line each time, outside the invocation's metric set: its dimensions are the
    whole line's, and the other metrics are not per tenant."""

    def record(self, tenant_id: str, values: Mapping[str, float]) -> None:
        gauges = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
        gauges.add_dimension(name="tenant_id", value=tenant_id)
        for name, value in values.items():
            gauges.add_metric(name=name, unit=MetricUnit.Count, value=value)
        gauges.flush_metrics()
