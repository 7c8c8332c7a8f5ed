"""Logger, tracer and metrics, shared by the Lambda adapters. The domain never imports this module."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "tickwork"
NAMESPACE = "Tickwork"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class PowertoolsMetricSink:
    """EMF metrics through Powertools; flushed by ``@metrics.log_metrics`` on each invocation."""

    def count(self, name: str, value: float = 1) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def milliseconds(self, name: str, value: float) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
