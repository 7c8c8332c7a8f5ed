"""The one factory for tickwork's Lambda functions, so every function is built the same way."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import LOG_RETENTION_DAYS, StageConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "**/*.egg-info"]
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64


def numbered(name: str, number: int) -> str:
    """``Worker``, ``Worker2``, ``Worker3``: the first of several identical parts keeps a lone one's id."""
    return name if number == 1 else f"{name}{number}"


class TickworkFunction(Construct):
    """A handler from ``functions/<name>``: arm64, Python 3.13, JSON logs to its own log group with a
    retention period, X-Ray tracing, and a role that can write only to that log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        description: str,
        config: StageConfig,
        layers: list[lambda_.ILayerVersion],
        environment: dict[str, str],
        memory_mb: int,
        timeout_seconds: int,
        log_key: kms.IKey,
        reserved_concurrency: int | None = None,
        tracing: lambda_.Tracing = lambda_.Tracing.ACTIVE,
        system_log_level: lambda_.SystemLogLevel = lambda_.SystemLogLevel.INFO,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays[LOG_RETENTION_DAYS[config.log_retention_days]],
            encryption_key=log_key,
            removal_policy=RemovalPolicy.DESTROY,
        )
        # An own role instead of AWSLambdaBasicExecutionRole: logs go to this function's group only.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"tickwork {name} function",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / name), exclude=ASSET_EXCLUDES),
            handler="handler.lambda_handler",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            memory_size=memory_mb,
            timeout=Duration.seconds(timeout_seconds),
            layers=layers,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=system_log_level,
            tracing=tracing,
            reserved_concurrent_executions=reserved_concurrency,
            environment={
                "POWERTOOLS_SERVICE_NAME": "tickwork",
                "POWERTOOLS_METRICS_NAMESPACE": "Tickwork",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                "TICKWORK_STAGE": config.stage,
                **environment,
            },
        )
