"""Alarms to one SNS topic, and a dashboard of what an operator looks at first."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from tickwork.domain.priority import Priority
from tickwork.observability import NAMESPACE, SERVICE

from infra.config import StageConfig
from infra.functions import numbered

AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
# Powertools adds the service dimension to every metric it publishes.
DIMENSIONS = {"service": SERVICE}
RUN_OUTCOMES = ("RunsSucceeded", "RunsRetried", "RunsFailed", "RunsDead", "RunsMissed", "RunsSkipped")


def tickwork_metric(
    name: str, *, statistic: str, period: Duration = MINUTE, label: str | None = None
) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map=DIMENSIONS,
        statistic=statistic,
        period=period,
        label=label,
    )


def tenant_gauges(name: str) -> cloudwatch.MathExpression:
    """One series per tenant (dimension ``tenant_id``) of a flow-control gauge, found by a search: tenants
    are not known when the stack is built, and a search costs no resource."""
    return cloudwatch.MathExpression(
        expression=f"SEARCH('{{{NAMESPACE},service,tenant_id}} MetricName=\"{name}\"', 'Maximum', 60)",
        label=name,
        period=MINUTE,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        key: kms.IKey,
        planner: lambda_.Function,
        workers: Sequence[lambda_.Function],
        api: lambda_.Function,
        indexer: lambda_.Function,
        run_queues: Mapping[Priority, sqs.Queue],
        run_dlq: sqs.Queue,
        dead_run_queue: sqs.Queue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Alarms", display_name=f"tickwork {config.stage} alarms", master_key=key, enforce_ssl=True
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))

        # Alarm metrics carry no label: a labelled metric would be rendered as a metric-math expression.
        lag_p99 = tickwork_metric("TriggerLagMs", statistic="p99")
        tick_count = tickwork_metric("PlannerTickMs", statistic="SampleCount")
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._alarm(
            "RunDlqNotEmpty",
            run_dlq.metric_approximate_number_of_messages_visible(period=MINUTE, statistic="Maximum"),
            threshold=1,
            description="Run messages the worker could not process after every delivery.",
        )
        self._alarm(
            "DeadRunsNotEmpty",
            dead_run_queue.metric_approximate_number_of_messages_visible(period=MINUTE, statistic="Maximum"),
            threshold=1,
            description="Runs exhausted their retries and are DEAD.",
        )
        # The oldest message of the three priorities' queues: one alarm, whichever queue holds it.
        oldest = cloudwatch.MathExpression(
            expression="MAX([" + ", ".join(run_queues) + "])",
            using_metrics={
                priority: queue.metric_approximate_age_of_oldest_message(period=MINUTE, statistic="Maximum")
                for priority, queue in run_queues.items()
            },
            period=MINUTE,
        )
        self._alarm(
            "RunQueueOldMessage",
            oldest,
            threshold=config.queue_age_alarm_seconds,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            description="Runs wait in the queue: workers are throttled, failing or too few.",
        )
        # Every worker function has its own pair: Worker, Worker2, ...
        functions = [
            *((numbered("Worker", number), worker) for number, worker in enumerate(workers, 1)),
            ("Planner", planner),
            ("Api", api),
            ("Indexer", indexer),
        ]
        for role, function in functions:
            self._alarm(
                f"{role}Errors",
                function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                threshold=1,
                description=f"The {role.lower()} function raised errors.",
            )
            self._alarm(
                f"{role}Throttles",
                function.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                threshold=1,
                description=f"The {role.lower()} function was throttled.",
            )
        self._alarm(
            "IndexerBehind",
            indexer.metric("IteratorAge", period=MINUTE, statistic="Maximum"),
            threshold=5 * 60 * 1000,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            description="The run index is minutes behind the runs: GET /v1/runs and stats miss recent runs.",
        )
        self._alarm(
            "TriggerLagHigh",
            lag_p99,
            threshold=config.trigger_lag_alarm_ms,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            description="p99 of the time from a run's scheduled instant to its start is high.",
        )
        # Pools. A lapse is a heartbeat timeout (or an attempt's cap): a tenant's worker died or stalled.
        self._alarm(
            "PoolLeasesLapsed",
            tickwork_metric("PoolLeasesLapsed", statistic="Sum", period=FIVE_MINUTES),
            threshold=config.pool_lapsed_leases_alarm,
            description="Pool runs' leases lapsed: their workers stopped heartbeating, or an attempt reached"
            " its timeout_seconds. Each is retried from its last checkpoint by its retry policy.",
        )
        # The sweeper (every tick, a minute) counts a run once it has waited the threshold, then once per
        # threshold while it still waits: any count within the threshold and two minutes keeps the alarm on.
        self._alarm(
            "PoolRunsWaitingLong",
            tickwork_metric("PoolRunsWaitingLong", statistic="Sum"),
            threshold=1,
            evaluation_periods=math.ceil(config.pool_wait_alarm_seconds / 60) + 2,
            datapoints_to_alarm=1,
            description=f"Pool runs waited more than {config.pool_wait_alarm_seconds} s for a claim: no"
            " worker of their pool claims them. The planner's log line 'a run waits long in its pool for a"
            " claim' names the tenant, the pool and the run.",
        )
        self._alarm(
            "PlannerTicksMissing",
            tick_count,
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description="No planner tick completed for 3 minutes: nothing new is being planned.",
        )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"tickwork-{config.stage}")
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Trigger lag (ms)",
                left=[
                    tickwork_metric("TriggerLagMs", statistic="p50", label="lag p50"),
                    tickwork_metric("TriggerLagMs", statistic="p99", label="lag p99"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Runs by outcome",
                left=[tickwork_metric(name, statistic="Sum", label=name) for name in RUN_OUTCOMES],
                stacked=True,
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Run queues",
                left=[
                    queue.metric_approximate_number_of_messages_visible(
                        period=MINUTE, label=f"{priority}: visible"
                    )
                    for priority, queue in run_queues.items()
                ],
                right=[
                    queue.metric_approximate_age_of_oldest_message(
                        period=MINUTE, label=f"{priority}: oldest (s)"
                    )
                    for priority, queue in run_queues.items()
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Dead letters",
                left=[
                    run_dlq.metric_approximate_number_of_messages_visible(period=MINUTE, label="run DLQ"),
                    dead_run_queue.metric_approximate_number_of_messages_visible(
                        period=MINUTE, label="dead runs"
                    ),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Worker",
                left=[
                    cloudwatch.Metric(
                        namespace="AWS/Lambda",
                        metric_name="ConcurrentExecutions",
                        dimensions_map={"FunctionName": worker.function_name},
                        statistic="Maximum",
                        period=MINUTE,
                        label=numbered("concurrency", number),
                    )
                    for number, worker in enumerate(workers, 1)
                ],
                right=[
                    metric
                    for number, worker in enumerate(workers, 1)
                    for metric in (
                        worker.metric_errors(period=MINUTE, label=numbered("errors", number)),
                        worker.metric_throttles(period=MINUTE, label=numbered("throttles", number)),
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Planner",
                left=[
                    tickwork_metric("PlannerTickMs", statistic="Maximum", label="tick ms (max)"),
                    tickwork_metric("PlannerTickMs", statistic="p50", label="tick ms (p50)"),
                ],
                right=[tickwork_metric("PlannerDueJobs", statistic="Sum", label="due jobs")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Pools",
                left=[
                    tickwork_metric("PoolLeasesLapsed", statistic="Sum", label="leases lapsed"),
                    tickwork_metric("PoolRunsWaitingLong", statistic="Sum", label="runs waiting long"),
                ],
                right=[
                    tickwork_metric("PoolRunOldestWaitMs", statistic="Maximum", label="longest wait (ms)")
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Flow control by tenant (while runs wait)",
                left=[tenant_gauges("TenantRunsWaiting"), tenant_gauges("TenantRunsThrottled")],
                right=[tenant_gauges("TenantRunsRunning")],
                width=12,
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=12),
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = AT_LEAST,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int | None = None,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            treat_missing_data=missing,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[construct_id] = alarm
        return alarm
