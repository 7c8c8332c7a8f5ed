"""The planner: one EventBridge rule per shard group, each invoking the planner with its own shards."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import StageConfig

TICK = events.Schedule.rate(Duration.minutes(1))
# A tick that waited longer than this is stale: the next one is already due.
TICK_MAX_AGE = Duration.seconds(60)


class Planner(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, function: lambda_.Function
    ):
        super().__init__(scope, construct_id)
        self.function = function
        # A throttled or failed tick is not retried: the next tick redoes its work.
        function.configure_async_invoke(retry_attempts=0, max_event_age=TICK_MAX_AGE)
        self.rules: list[events.Rule] = []
        for group, shards in enumerate(config.shard_groups()):
            rule = events.Rule(
                self,
                f"Tick{group}",
                description=f"tickwork planner tick, shard group {group}: shards {shards}",
                schedule=TICK,
            )
            rule.add_target(
                targets.LambdaFunction(
                    function,
                    event=events.RuleTargetInput.from_object({"shards": shards}),
                    retry_attempts=0,
                    max_event_age=TICK_MAX_AGE,
                )
            )
            self.rules.append(rule)


def planner_concurrency(config: StageConfig) -> int:
    """Each group may overlap one slow tick with the next, and no more."""
    return 2 * len(config.shard_groups())
