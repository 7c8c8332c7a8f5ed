"""TickworkStack: storage, functions, API, planner, worker and monitoring, with the grants between them."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from tickwork import tables
from tickwork.config import Settings

from infra.api import Api
from infra.config import StageConfig
from infra.functions import ARCHITECTURE, ASSET_EXCLUDES, REPO_ROOT, RUNTIME, TickworkFunction, numbered
from infra.indexer import Indexer
from infra.monitoring import Monitoring
from infra.planner import Planner, planner_concurrency
from infra.storage import Storage
from infra.worker import Worker

TICKWORK_LAYER_DIR = REPO_ROOT / "layers" / "tickwork"


class TickworkStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        dependencies_layer_dir: Path,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.config = config
        self.key = kms.Key(
            self,
            "DataKey",
            description=f"tickwork {config.stage}: function logs and the alarm topic",
            enable_key_rotation=True,
        )
        self._let_services_use_key()
        self.storage = Storage(self, "Storage", config=config)

        layers: list[lambda_.ILayerVersion] = [
            lambda_.LayerVersion(
                self,
                "DependenciesLayer",
                description="tickwork's third-party runtime dependencies (make build)",
                code=lambda_.Code.from_asset(str(dependencies_layer_dir)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
            ),
            lambda_.LayerVersion(
                self,
                "TickworkLayer",
                description="the tickwork package",
                code=lambda_.Code.from_asset(str(TICKWORK_LAYER_DIR), exclude=ASSET_EXCLUDES),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
            ),
        ]
        environment = self._settings().to_env()

        def function(
            name: str,
            description: str,
            *,
            memory_mb: int,
            timeout_seconds: int,
            reserved: int | None = None,
            number: int = 1,
            run_path: bool = False,
        ) -> TickworkFunction:
            return TickworkFunction(
                self,
                f"{numbered(name.capitalize(), number)}Function",
                name=name,
                description=description,
                config=config,
                layers=layers,
                environment=environment,
                memory_mb=memory_mb,
                timeout_seconds=timeout_seconds,
                log_key=self.key,
                reserved_concurrency=reserved,
                tracing=lambda_.Tracing.ACTIVE
                if config.trace_run_path or not run_path
                else lambda_.Tracing.PASS_THROUGH,
                system_log_level=lambda_.SystemLogLevel.INFO
                if config.run_path_platform_logs or not run_path
                else lambda_.SystemLogLevel.WARN,
            )

        self.api_function = function(
            "api",
            "tickwork HTTP API",
            memory_mb=config.api_memory_mb,
            timeout_seconds=config.api_timeout_seconds,
        )
        self.authorizer_function = function(
            "authorizer", "tickwork token authorizer", memory_mb=256, timeout_seconds=10
        )
        self.planner_function = function(
            "planner",
            "tickwork planner: plans due jobs, sweeps open runs",
            memory_mb=config.planner_memory_mb,
            timeout_seconds=config.planner_timeout_seconds,
            reserved=planner_concurrency(config),
            run_path=True,
        )
        # Identical workers, each with its own mapping on the run queue: a mapping runs at most 1,000.
        self.worker_functions = [
            function(
                "worker",
                "tickwork worker: leases runs, calls targets",
                memory_mb=config.worker_memory_mb,
                timeout_seconds=config.worker_timeout_seconds,
                number=number,
                run_path=True,
            )
            for number in range(1, config.worker_functions + 1)
        ]
        self.worker_function = self.worker_functions[0]  # the first keeps the ids of a lone worker
        self.indexer_function = function(
            "indexer",
            "tickwork indexer: the runs' changes into the tenant-wide run index",
            memory_mb=256,
            timeout_seconds=60,
            run_path=True,
        )

        self.api = Api(
            self,
            "Http",
            config=config,
            handler=self.api_function.function,
            authorizer_function=self.authorizer_function.function,
            log_key=self.key,
        )
        self.planner = Planner(self, "Planner", config=config, function=self.planner_function.function)
        self.worker = Worker(
            self,
            "Worker",
            config=config,
            functions=[worker.function for worker in self.worker_functions],
            run_queues=self.storage.run_queues,
        )
        self.indexer = Indexer(
            self, "Indexer", function=self.indexer_function.function, runs=self.storage.runs
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            key=self.key,
            planner=self.planner_function.function,
            workers=[worker.function for worker in self.worker_functions],
            api=self.api_function.function,
            indexer=self.indexer_function.function,
            run_queues=self.storage.run_queues,
            run_dlq=self.storage.run_dlq,
            dead_run_queue=self.storage.dead_run_queue,
        )
        self._grant()

        CfnOutput(self, "ApiUrl", value=self.api.url, description="Base URL of the tickwork API")
        CfnOutput(
            self,
            "TenantsTableName",
            value=self.storage.tenants.table_name,
            description="For `tickwork tenants create` (TICKWORK_TENANTS_TABLE)",
        )
        CfnOutput(self, "DeadRunQueueUrl", value=self.storage.dead_run_queue.queue_url)
        CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn)

    def _settings(self) -> Settings:
        """The functions' settings; validated here, read back by ``Settings.from_env`` at cold start."""
        storage, config = self.storage, self.config
        return Settings(
            jobs_table=storage.jobs.table_name,
            runs_table=storage.runs.table_name,
            tenants_table=storage.tenants.table_name,
            idempotency_table=storage.idempotency.table_name,
            run_index_table=storage.run_index.table_name,
            run_queue_url=storage.run_queue.queue_url,
            run_queue_high_url=storage.run_queues["high"].queue_url,
            run_queue_low_url=storage.run_queues["low"].queue_url,
            dead_run_queue_url=storage.dead_run_queue.queue_url,
            due_shards=config.due_shards,
            planner_horizon_seconds=config.planner_horizon_seconds,
            planner_lookahead_seconds=config.planner_lookahead_seconds,
            planner_max_jobs_per_tick=config.planner_max_jobs_per_tick,
            run_retention_days=config.run_retention_days,
            lease_margin_seconds=config.lease_margin_seconds,
            pool_wait_alarm_seconds=config.pool_wait_alarm_seconds,
            allow_private_targets=config.allow_private_targets,
            # Jobs may name only the AWS targets the worker's role can call; none unless configured.
            allowed_target_arns=config.allowed_target_arns,
            max_target_timeout_seconds=config.max_target_timeout_seconds,
            aws_partition=Aws.PARTITION,
            aws_region=Aws.REGION,
            aws_account_id=Aws.ACCOUNT_ID,
        )

    def _grant(self) -> None:
        """Each function gets its own tables, queues and actions, and nothing more."""
        storage = self.storage
        api = self.api_function.function
        authorizer = self.authorizer_function.function
        planner = self.planner_function.function

        grant = storage.grant_table

        grant(authorizer, tables.TENANTS, write=False)

        for definition in tables.ALL_TABLES:
            grant(api, definition, write=True)
        # The API plans first fires inside the horizon at once, like the planner; a pool run's attempt ending
        # through the API (complete, fail) sends its retry or its dead letter, as a worker's would.
        for run_queue in storage.run_queues.values():
            run_queue.grant_send_messages(api)
        storage.dead_run_queue.grant_send_messages(api)

        # The planner completes a job whose last fire it recorded MISSED (the tenant's job count), and keeps
        # the highest due-shard count in the tenants table.
        for definition in (tables.JOBS, tables.RUNS, tables.TENANTS):
            grant(planner, definition, write=True)
        for run_queue in storage.run_queues.values():
            run_queue.grant_send_messages(planner)
        # Its sweeper ends pool runs whose lease lapsed: their retry, or their dead letter.
        storage.dead_run_queue.grant_send_messages(planner)

        # The indexer writes the run index only; the mapping's own grant reads the runs table's stream.
        grant(self.indexer_function.function, tables.RUN_INDEX, write=True)

        for worker in (built.function for built in self.worker_functions):
            # Jobs (their lanes), runs, tenants (signing secrets, in-flight slots, throttles, job counts); no
            # idempotency: the run item is the worker's idempotency record.
            for definition in (tables.JOBS, tables.RUNS, tables.TENANTS):
                grant(worker, definition, write=True)
            # Retries, held runs and backfill steps are sent again with a delay, never left to wait in flight.
            for run_queue in storage.run_queues.values():
                run_queue.grant_send_messages(worker)
            storage.dead_run_queue.grant_send_messages(worker)

            for action, patterns in self.config.target_grants.items():
                worker.add_to_role_policy(iam.PolicyStatement(actions=[action], resources=patterns))

    @property
    def _log_groups_arn(self) -> str:
        return f"arn:{self.partition}:logs:{self.region}:{self.account}:*"

    def _let_services_use_key(self) -> None:
        """CloudWatch Logs and alarms (publishing to the encrypted topic) need the key as well."""
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": self._log_groups_arn}},
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )
