"""Alarms (and their thresholds) to one SNS topic, and the dashboard."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tickwork.observability import NAMESPACE, SERVICE

from infra.config import StageConfig
from infra.functions import numbered
from tests.infra.conftest import Synthesized


def _alarm(synthesized: Synthesized, name: str) -> dict[str, Any]:
    alarm = synthesized.stack.monitoring.alarms[name]
    properties: dict[str, Any] = synthesized.resources[synthesized.logical_id(alarm)]["Properties"]
    return properties


def _queue(synthesized: Synthesized, attribute: str) -> dict[str, Any]:
    queue = getattr(synthesized.stack.storage, attribute)
    return {"Fn::GetAtt": [synthesized.logical_id(queue), "QueueName"]}


@pytest.mark.parametrize(
    ("name", "queue"), [("RunDlqNotEmpty", "run_dlq"), ("DeadRunsNotEmpty", "dead_run_queue")]
)
def test_dead_letter_depth_of_one_alarms(synthesized: Synthesized, name: str, queue: str) -> None:
    alarm = _alarm(synthesized, name)
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": _queue(synthesized, queue)}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)


def test_run_queue_age_alarm_takes_the_oldest_of_the_three_priorities_queues(
    synthesized: Synthesized,
) -> None:
    alarm = _alarm(synthesized, "RunQueueOldMessage")
    metrics = {query["Id"]: query for query in alarm["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "MAX([high, normal, low])"
    queues = synthesized.stack.storage.run_queues
    for priority, queue in queues.items():
        stat = metrics[priority]["MetricStat"]
        assert stat["Metric"]["MetricName"] == "ApproximateAgeOfOldestMessage"
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "QueueName", "Value": {"Fn::GetAtt": [synthesized.logical_id(queue), "QueueName"]}}
        ]
        assert stat["Stat"] == "Maximum"
        assert metrics[priority]["ReturnData"] is False
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == synthesized.stack.config.queue_age_alarm_seconds


@pytest.mark.parametrize("role", ["Worker", "Planner", "Api"])
@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_function_errors_and_throttles_alarm(synthesized: Synthesized, role: str, metric: str) -> None:
    alarm = _alarm(synthesized, f"{role}{metric}")
    function = getattr(synthesized.stack, f"{role.lower()}_function").function
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", metric, "Sum")
    assert alarm["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": synthesized.logical_id(function)}}
    ]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_worker_function_has_its_own_errors_and_throttles_alarm(
    synthesized: Synthesized, metric: str
) -> None:
    workers = synthesized.stack.worker_functions
    for number, worker in enumerate(workers, 1):
        alarm = _alarm(synthesized, f"{numbered('Worker', number)}{metric}")
        assert alarm["MetricName"] == metric
        assert alarm["Dimensions"] == [
            {"Name": "FunctionName", "Value": {"Ref": synthesized.logical_id(worker.function)}}
        ]
    alarmed = [name for name in synthesized.stack.monitoring.alarms if name.endswith(metric)]
    assert len(alarmed) == len(workers) + 3  # and the planner's, the API's and the indexer's


def test_trigger_lag_p99_above_five_seconds_alarms(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": NAMESPACE,
            "MetricName": "TriggerLagMs",
            "Dimensions": [{"Name": "service", "Value": SERVICE}],
            "ExtendedStatistic": "p99",
            "ComparisonOperator": "GreaterThanThreshold",
            "Threshold": 5000,
        },
    )


def test_missing_planner_ticks_for_three_minutes_alarm(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": NAMESPACE,
            "MetricName": "PlannerTickMs",
            "Statistic": "SampleCount",
            "Period": 60,
            "EvaluationPeriods": 3,
            "ComparisonOperator": "LessThanThreshold",
            "Threshold": 1,
            "TreatMissingData": "breaching",
        },
    )


def test_lapsed_pool_leases_alarm_at_the_configured_count_in_five_minutes(synthesized: Synthesized) -> None:
    alarm = _alarm(synthesized, "PoolLeasesLapsed")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        NAMESPACE,
        "PoolLeasesLapsed",
        "Sum",
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": SERVICE}]
    assert (alarm["Period"], alarm["EvaluationPeriods"]) == (300, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] == synthesized.stack.config.pool_lapsed_leases_alarm
    assert alarm["TreatMissingData"] == "notBreaching"


def test_pool_runs_waiting_past_the_threshold_alarm_while_they_keep_waiting(synthesized: Synthesized) -> None:
    alarm = _alarm(synthesized, "PoolRunsWaitingLong")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        NAMESPACE,
        "PoolRunsWaitingLong",
        "Sum",
    )
    # No tenant or pool dimension: one metric for the deployment (the log line names them)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": SERVICE}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    # A run still waiting is counted again one threshold later (and the sweep runs every minute): any count
    # within the threshold and two minutes holds the alarm, so it does not flap between counts
    threshold = synthesized.stack.config.pool_wait_alarm_seconds
    assert alarm["Period"] == 60
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (threshold // 60 + 2, 1)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert str(threshold) in alarm["AlarmDescription"]


def test_the_pool_wait_threshold_reaches_the_functions(synthesized: Synthesized) -> None:
    threshold = str(synthesized.stack.config.pool_wait_alarm_seconds)
    for function in (synthesized.stack.planner_function, *synthesized.stack.worker_functions):
        properties = synthesized.resources[synthesized.logical_id(function.function)]["Properties"]
        assert properties["Environment"]["Variables"]["TICKWORK_POOL_WAIT_ALARM_SECONDS"] == threshold


def test_the_pool_alarms_follow_the_configuration() -> None:
    assert (StageConfig().pool_wait_alarm_seconds, StageConfig().pool_lapsed_leases_alarm) == (900, 1)
    with pytest.raises(ValidationError):
        StageConfig(pool_wait_alarm_seconds=43_201)  # the alarm's look-back would pass a day
    with pytest.raises(ValidationError):
        StageConfig(pool_wait_alarm_seconds=59)


def test_every_alarm_notifies_the_topic(synthesized: Synthesized) -> None:
    topic = {"Ref": synthesized.logical_id(synthesized.stack.monitoring.topic)}
    alarms = synthesized.of_type("AWS::CloudWatch::Alarm")
    # 6 on queues, lag, ticks and the indexer's stream, 2 on pools, and errors and throttles of the planner,
    # the API, the indexer and each worker function
    expected = 6 + 2 + 2 * (3 + synthesized.stack.config.worker_functions)
    assert len(alarms) == len(synthesized.stack.monitoring.alarms) == expected
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [topic]
        assert alarm["Properties"]["OKActions"] == [topic]


def test_topic_is_encrypted_and_mails_only_when_asked(
    default_stack: Synthesized, full_stack: Synthesized
) -> None:
    for synthesized in (default_stack, full_stack):
        key = {"Fn::GetAtt": [synthesized.logical_id(synthesized.stack.key), "Arn"]}
        synthesized.template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": key})
    assert default_stack.of_type("AWS::SNS::Subscription") == {}
    full_stack.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )


def test_dashboard_shows_lag_outcomes_queues_worker_and_planner(synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.of_type("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for worker in synthesized.stack.worker_functions:
        assert synthesized.logical_id(worker.function) in body
    for expected in (
        '"TriggerLagMs"',
        '"stat":"p50"',
        '"stat":"p99"',
        '"RunsSucceeded"',
        '"RunsDead"',
        '"RunsFailed"',
        '"ApproximateNumberOfMessagesVisible"',
        '"ApproximateAgeOfOldestMessage"',
        '"ConcurrentExecutions"',
        '"Errors"',
        '"PlannerTickMs"',
        '"PlannerDueJobs"',
        '"PoolLeasesLapsed"',
        '"PoolRunsWaitingLong"',
        '"PoolRunOldestWaitMs"',
        "TenantRunsWaiting",
        "TenantRunsThrottled",
        "TenantRunsRunning",
    ):
        assert expected in body, expected
