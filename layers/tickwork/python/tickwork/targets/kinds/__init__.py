"""The built-in target kinds, one module each; importing one registers it. The order here is the order of
the target union in the job model."""

from __future__ import annotations

from tickwork.targets.kinds import eventbridge, http, lambda_function, sqs, stepfunctions

__all__ = ["eventbridge", "http", "lambda_function", "sqs", "stepfunctions"]
