"""The built-in target kinds, one module each; importing one registers it. Their models are the job model's
built-in target union (``tickwork.domain.models.Target``), whose order the registry keeps."""

from __future__ import annotations

from tickwork.targets.kinds import eventbridge, http, lambda_function, pool, sqs, stepfunctions, workflow

__all__ = ["eventbridge", "http", "lambda_function", "pool", "sqs", "stepfunctions", "workflow"]
