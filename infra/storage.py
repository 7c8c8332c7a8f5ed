"""Tables and queues, built from the shared definitions in ``tickwork.tables``."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from tickwork import tables
from tickwork.domain.priority import Priority

from infra.config import StageConfig

# Jobs and tenants are the system of record; runs expire and idempotency records are short-lived.
KEPT_TABLES = frozenset({tables.JOBS.logical_name, tables.TENANTS.logical_name})
# SQS's longest retention: a run message waits out its delay and every redelivery within it.
QUEUE_RETENTION = Duration.days(14)
# The item-level actions tickwork's adapters use (transactions need the same per-item actions); no Scan.
READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem")
WRITE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
# SQS recommends a visibility timeout of at least six times the consumer's timeout.
VISIBILITY_PER_WORKER_TIMEOUT = 6


def _attribute(attribute: tables.KeyAttribute) -> dynamodb.Attribute:
    kind = dynamodb.AttributeType.STRING if attribute.type == "S" else dynamodb.AttributeType.NUMBER
    return dynamodb.Attribute(name=attribute.name, type=kind)


def _projection(index: tables.IndexDefinition) -> dynamodb.ProjectionType:
    return dynamodb.ProjectionType[index.projection]


class Storage(Construct):
    """The five tables and five queues, encrypted at rest with AWS-managed keys (no KMS calls by the
    functions, and no key policy to keep in step with their roles)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.definitions = {definition.logical_name: definition for definition in tables.ALL_TABLES}
        self.tables = {name: self._table(definition) for name, definition in self.definitions.items()}
        self.jobs = self.tables[tables.JOBS.logical_name]
        self.runs = self.tables[tables.RUNS.logical_name]
        self.tenants = self.tables[tables.TENANTS.logical_name]
        self.idempotency = self.tables[tables.IDEMPOTENCY.logical_name]
        self.run_index = self.tables[tables.RUN_INDEX.logical_name]

        self.run_dlq = self._queue("RunDlq")
        self.run_queue = self._run_queue("RunQueue", config)
        # High and low priority runs have queues of their own, with the run queue's settings and dead letters.
        self.run_queues: dict[Priority, sqs.Queue] = {
            "high": self._run_queue("RunQueueHigh", config),
            "normal": self.run_queue,
            "low": self._run_queue("RunQueueLow", config),
        }
        # Runs that exhausted their retries, for the operator and for tenants' tooling.
        self.dead_run_queue = self._queue("DeadRunQueue")

    def grant_table(
        self, grantee: iam.IGrantable, definition: tables.TableDefinition, *, write: bool
    ) -> None:
        """Item actions on one table and on its named indexes, not on ``index/*``."""
        table = self.tables[definition.logical_name]
        actions = READ_ACTIONS + (WRITE_ACTIONS if write else ())
        resources = [table.table_arn] + [
            f"{table.table_arn}/index/{index.name}" for index in definition.indexes
        ]
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=resources)
        )

    def _table(self, definition: tables.TableDefinition) -> dynamodb.Table:
        kept = definition.logical_name in KEPT_TABLES
        table = dynamodb.Table(
            self,
            "".join(part.capitalize() for part in definition.logical_name.split("-")),
            partition_key=_attribute(definition.partition_key),
            sort_key=_attribute(definition.sort_key) if definition.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            stream=dynamodb.StreamViewType[definition.stream_view] if definition.stream_view else None,
            deletion_protection=kept,
            removal_policy=RemovalPolicy.RETAIN if kept else RemovalPolicy.DESTROY,
        )
        for index in definition.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition_key),
                sort_key=_attribute(index.sort_key) if index.sort_key else None,
                projection_type=_projection(index),
                non_key_attributes=list(index.non_key_attributes) or None,
            )
        return table

    def _run_queue(self, construct_id: str, config: StageConfig) -> sqs.Queue:
        return self._queue(
            construct_id,
            visibility_timeout=Duration.seconds(
                config.worker_timeout_seconds * VISIBILITY_PER_WORKER_TIMEOUT
            ),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.run_dlq, max_receive_count=config.max_receive_count
            ),
        )

    def _queue(
        self,
        construct_id: str,
        *,
        visibility_timeout: Duration | None = None,
        dead_letter_queue: sqs.DeadLetterQueue | None = None,
    ) -> sqs.Queue:
        return sqs.Queue(
            self,
            construct_id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=QUEUE_RETENTION,
            visibility_timeout=visibility_timeout,
            dead_letter_queue=dead_letter_queue,
        )
