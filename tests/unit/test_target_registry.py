"""A target kind is one module and one registration: the kind below, registered here and nowhere else, is
taken by job specs, checked by the job service, delivered to by the worker through ``invoke``, granted by
infra and summarised by the CLI. The built-in kinds go through the same registry."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Annotated, Any, Literal

import pytest
from pydantic import StringConstraints, ValidationError
from tickwork.api.errors import describe_validation_errors
from tickwork.domain.models import Job, JobSpec, RunStatus, StrictModel, target_models
from tickwork.domain.targets import AwsTargetPolicy, check_arn_allowed
from tickwork.errors import InvalidInput
from tickwork.targets import Delivery, LazyClients, TargetResult, invoke
from tickwork.targets.kind import CheckContext, DeliveryContext
from tickwork.targets.registry import kind_for, kinds, register, target_types, unregister
from tickwork.targets.result import success
from tickwork.testing.world import START, World
from tickwork_local.cli.output import target_summary

from infra.config import StageConfig, target_actions
from tests.conftest import TOKENS
from tests.support.apigw import ApiGateway

BUILT_IN = ("http", "sqs", "lambda", "eventbridge", "stepfunctions", "pool", "workflow")
POLICY = AwsTargetPolicy(
    patterns=("arn:aws:sns:eu-west-1:123456789012:ops-*",), region="eu-west-1", account="123456789012"
)


# --- the whole of a new kind ------------------------------------------------------------------------------
class TopicTarget(StrictModel):
    type: Literal["topic"]
    topic: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,63}$")]


PUBLISHED: list[tuple[str, dict[str, Any]]] = []


class TopicKind:
    type = "topic"
    model = TopicTarget
    actions = ("sns:Publish",)
    arn_service: str | None = "sns"
    payload_limit: int | None = 1024
    pattern_words: Mapping[str, str] = MappingProxyType({})

    def arn(self, target: TopicTarget, policy: AwsTargetPolicy) -> tuple[str, str]:
        return (
            f"arn:{policy.partition}:sns:{policy.region}:{policy.account}:{target.topic}",
            "target.topic",
        )

    def validate(self, target: TopicTarget, context: CheckContext) -> None:
        if context.aws_targets is not None:
            check_arn_allowed(*self.arn(target, context.aws_targets), context.aws_targets)

    def deliver(
        self, target: TopicTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        PUBLISHED.append((target.topic, json.loads(body)))
        return success()

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        return f"topic {show(target.get('topic'))}"


@pytest.fixture
def topic_kind() -> Iterator[None]:
    register(TopicKind())
    PUBLISHED.clear()
    try:
        yield
    finally:
        unregister("topic")


def topic_job(**fields: Any) -> dict[str, Any]:
    return {
        "name": "alerts",
        "schedule": {"type": "rate", "every_seconds": 60},
        "target": {"type": "topic", "topic": "ops-alerts"},
        **fields,
    }


# --- the built-in kinds -----------------------------------------------------------------------------------
def test_the_built_in_kinds_are_registered_in_the_order_of_the_target_union() -> None:
    assert target_types() == BUILT_IN
    assert tuple(kind.type for kind in kinds()) == BUILT_IN
    assert tuple(kind.model for kind in kinds()) == target_models()
    assert target_actions() == {
        "sqs": ("sqs:SendMessage",),
        "lambda": ("lambda:InvokeFunction",),
        "events": ("events:PutEvents",),
        "states": ("states:StartExecution",),
    }


def test_a_type_is_registered_once_and_must_be_its_models_type() -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(kind_for("sqs"))

    class Mislabelled(TopicKind):
        type = "other"

    with pytest.raises(ValueError, match=r"TopicTarget.type must be Literal\['other'\]"):
        register(Mislabelled())
    assert target_types() == BUILT_IN


# --- a new kind, registered -------------------------------------------------------------------------------
def test_unregistered_a_kind_is_refused_as_an_invalid_target() -> None:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(topic_job())
    _, body = describe_validation_errors(caught.value.errors())
    assert body["error"] == {
        "code": "invalid_target",
        "message": "target.type must be one of http, sqs, lambda, eventbridge, stepfunctions, pool, workflow",
        "field": "target",
        "details": [body["error"]["details"][0]],
    }
    with pytest.raises(ValueError, match="not an ARN pattern of a target"):
        StageConfig(allowed_target_arns=("arn:aws:sns:eu-west-1:123456789012:ops-*",))


@pytest.mark.usefixtures("topic_kind")
def test_registered_a_kind_is_valid_in_a_job_spec_with_its_own_field_errors() -> None:
    # Given the kind registered, a spec naming it is a job spec, and so is the stored job
    # (statically a job's target is one of the built-in kinds; a registered kind is known at run time)
    spec = JobSpec.model_validate(topic_job())
    target: Any = spec.target
    assert target == TopicTarget(type="topic", topic="ops-alerts")
    stored = {**spec.model_dump(), "job_id": "j", "tenant_id": "t", "created_at": START, "updated_at": START}
    assert Job.model_validate(stored).target == target
    # And a bad value of its fields is reported at the field, as for any target
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(topic_job(target={"type": "topic", "topic": "Not A Topic"}))
    _, body = describe_validation_errors(caught.value.errors())
    assert (body["error"]["code"], body["error"]["field"]) == ("invalid_target", "target.topic")
    # And an unknown type names the new kind among those allowed
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(topic_job(target={"type": "pigeon"}))
    _, body = describe_validation_errors(caught.value.errors())
    assert body["error"]["message"] == (
        "target.type must be one of http, sqs, lambda, eventbridge, stepfunctions, pool, workflow, topic"
    )


@pytest.mark.usefixtures("topic_kind")
def test_the_job_service_checks_a_registered_kind_with_its_own_rules() -> None:
    world = World()
    world.service.aws_targets = POLICY
    # Its allow-list check
    with pytest.raises(InvalidInput) as refused:
        world.create(**topic_job(target={"type": "topic", "topic": "billing"}))
    assert (refused.value.code, refused.value.field) == ("target_not_allowed", "target.topic")
    # Its payload limit
    with pytest.raises(InvalidInput) as too_big:
        world.create(**topic_job(payload="x" * 2000))
    assert (too_big.value.code, too_big.value.field) == ("payload_too_large", "payload")
    assert "a topic target takes at most 1024" in too_big.value.message
    # And what it allows is created
    created: Any = world.create(**topic_job()).target
    assert created == TopicTarget(type="topic", topic="ops-alerts")


@pytest.mark.usefixtures("topic_kind")
def test_the_worker_delivers_to_a_registered_kind_through_invoke() -> None:
    # Given a world whose worker calls targets through invoke, as the deployed worker does
    world = World()

    def through_invoke(job: Job, run: Any, tenant: Any) -> TargetResult:
        delivery = Delivery(
            job_id=job.job_id,
            run_id=run.run_id,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            fencing_token=run.fencing_token,
            payload=job.payload,
            tenant_secret=tenant.signing_secret,
        )
        return invoke(job.target, delivery, clients=LazyClients(), allow_private=False, now_epoch=0)

    world.execute = through_invoke  # type: ignore[method-assign]
    world.default_worker = world.worker("w1")
    job = world.create(
        **topic_job(
            schedule={"type": "once", "at": (START + timedelta(seconds=5)).isoformat()},
            payload={"level": "page"},
        )
    )
    # When its time comes
    world.run_for(10)
    # Then the kind received the envelope and the run succeeded
    assert world.statuses(job) == [RunStatus.SUCCEEDED]
    [(topic, envelope)] = PUBLISHED
    assert topic == "ops-alerts"
    assert (envelope["job_id"], envelope["payload"], envelope["attempt"]) == (
        job.job_id,
        {"level": "page"},
        1,
    )


@pytest.mark.usefixtures("topic_kind")
def test_infra_grants_a_registered_kinds_actions_on_its_allowed_arns() -> None:
    config = StageConfig(
        allowed_target_arns=(
            "arn:aws:sns:eu-west-1:123456789012:ops-*",
            "arn:aws:sqs:eu-west-1:123456789012:a",
        )
    )
    assert config.target_grants == {
        "sns:Publish": ["arn:aws:sns:eu-west-1:123456789012:ops-*"],
        "sqs:SendMessage": ["arn:aws:sqs:eu-west-1:123456789012:a"],
    }


@pytest.mark.usefixtures("topic_kind")
def test_the_cli_summarises_a_registered_kind() -> None:
    assert target_summary({"type": "topic", "topic": "ops-alerts"}) == "topic ops-alerts"


def test_the_cli_shows_a_kind_it_does_not_know_by_its_type() -> None:
    assert target_summary({"type": "pigeon", "loft": "north"}) == "pigeon"
    assert target_summary({"type": "sqs", "queue_url": "https://q"}) == "sqs https://q"


def test_unregistering_restores_the_built_in_union() -> None:
    register(TopicKind())
    unregister("topic")
    assert target_types() == BUILT_IN
    with pytest.raises(ValidationError):
        JobSpec.model_validate(topic_job())


@pytest.mark.usefixtures("topic_kind")
def test_the_api_creates_and_shows_a_job_of_a_registered_kind(api: ApiGateway) -> None:
    created = api.request("POST", "/v1/jobs", token=TOKENS["acme"], body=topic_job())
    assert created.status == 201, created.body
    assert created.body["target"] == {"type": "topic", "topic": "ops-alerts"}
    shown = api.request("GET", f"/v1/jobs/{created.body['job_id']}", token=TOKENS["acme"])
    assert (shown.status, shown.body["target"]) == (200, created.body["target"])
    listed = api.request("GET", "/v1/jobs", token=TOKENS["acme"])
    assert [job["target"] for job in listed.body["items"]] == [created.body["target"]]


def topic_workflow(topic: str = "ops-alerts") -> dict[str, Any]:
    return topic_job(
        target={
            "type": "workflow",
            "tasks": [
                {"id": "build", "target": {"type": "http", "url": "https://hooks.example.com/build"}},
                {"id": "announce", "target": {"type": "topic", "topic": topic}, "depends_on": ["build"]},
            ],
        }
    )


@pytest.mark.usefixtures("topic_kind")
def test_a_workflow_task_may_target_a_registered_kind_checked_by_its_rules() -> None:
    # Given the kind registered, a workflow's task may name it
    spec = JobSpec.model_validate(topic_workflow())
    task: Any = spec.target.tasks[1]  # type: ignore[union-attr]
    assert task.target == TopicTarget(type="topic", topic="ops-alerts")
    # And the job service checks it as a job's own target, naming the task
    world = World()
    world.service.aws_targets = POLICY
    with pytest.raises(InvalidInput) as refused:
        world.create(**topic_workflow("billing"))
    assert (refused.value.code, refused.value.field) == ("target_not_allowed", "target.tasks.1.target.topic")
    assert refused.value.message.startswith("task 'announce': ")


def test_unregistered_a_kind_is_refused_in_a_workflow_task_too() -> None:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(topic_workflow())
    _, body = describe_validation_errors(caught.value.errors())
    assert (body["error"]["code"], body["error"]["field"]) == ("invalid_target", "target.tasks.1.target")


def test_a_workflow_is_never_called_itself() -> None:
    # A workflow run runs its tasks; a delivery reaching the workflow kind is recorded as a permanent fault
    task = {"id": "a", "target": {"type": "pool", "pool": "p"}}
    spec = JobSpec.model_validate(topic_job(target={"type": "workflow", "tasks": [task]}))
    kind = kind_for("workflow")
    delivery = Delivery(
        job_id="j",
        run_id="j:0",
        scheduled_for=START,
        attempt=1,
        fencing_token=1,
        payload=None,
        tenant_secret="s",
    )
    context = DeliveryContext(clients=LazyClients(), allow_private=False, now_epoch=0, resolver=None)  # type: ignore[arg-type]
    result = kind.deliver(spec.target, delivery, b"{}", context)
    assert (result.ok, result.error_code) == (False, "workflow_not_callable")
    assert kind.actions == () and kind.arn_service is None
