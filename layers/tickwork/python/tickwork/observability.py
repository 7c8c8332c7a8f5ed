"""Logger, tracer and metrics, shared by the Lambda adapters. The domain never imports this module."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "tickwork"
NAMESPACE = "Tickwork"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
