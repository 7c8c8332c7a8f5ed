"""``workflow``: a DAG of tasks, each with a target of its own (:mod:`tickwork.domain.workflow`). Nothing is
called for the workflow itself: its run runs its tasks as child runs, and each task's target is checked, and
called, as its own kind's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tickwork.domain.models import WORKFLOW_TASK_ID, WorkflowTarget, WorkflowTask, payload_size
from tickwork.domain.targets import AwsTargetPolicy
from tickwork.errors import InvalidInput, PayloadTooLarge, TickworkError
from tickwork.targets.envelope import Delivery
from tickwork.targets.kind import CheckContext, DeliveryContext
from tickwork.targets.registry import kind_of, register
from tickwork.targets.result import TargetResult, permanent


class WorkflowKind:
    type = "workflow"
    model = WorkflowTarget
    # The tasks' kinds bring the IAM actions and ARNs: a workflow names none of its own.
    actions: tuple[str, ...] = ()
    arn_service = None
    payload_limit = None
    pattern_words = MappingProxyType(
        {WORKFLOW_TASK_ID: "must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit"}
    )

    def arn(self, target: WorkflowTarget, policy: AwsTargetPolicy) -> tuple[str, str] | None:
        return None

    def validate(self, target: WorkflowTarget, context: CheckContext) -> None:
        """Each task's target is checked as a job's of its kind would be, and its payload fits that kind."""
        for position, task in enumerate(target.tasks):
            try:
                _check_task(task, context)
            except InvalidInput as error:
                raise _within_task(error, task, position) from error

    def deliver(
        self, target: WorkflowTarget, delivery: Delivery, body: bytes, context: DeliveryContext
    ) -> TargetResult:
        # A workflow run runs its tasks; a call reaching here is a fault, recorded on the run, not retried.
        return permanent(
            "workflow_not_callable",
            "a workflow run runs its tasks as child runs; the workflow is never called",
        )

    def summary(self, target: Mapping[str, Any], show: Callable[[Any], str]) -> str:
        tasks = target.get("tasks")
        count = len(tasks) if isinstance(tasks, list) else 0
        return f"workflow {count} task{'' if count == 1 else 's'}"


def _check_task(task: WorkflowTask, context: CheckContext) -> None:
    kind = kind_of(task.target)
    limit = kind.payload_limit
    if limit is not None and (size := payload_size(task.payload)) > limit:
        raise PayloadTooLarge(
            f"payload is {size} bytes once serialized; a {task.target.type} target takes at most {limit}",
            field="payload",
        )
    kind.validate(task.target, context)


def _within_task(error: TickworkError, task: WorkflowTask, position: int) -> TickworkError:
    """The error of a task's own check, naming the task and the field inside it."""
    field = f"target.tasks.{position}.{error.field}" if error.field else f"target.tasks.{position}"
    return type(error)(f"task '{task.id}': {error.message}", field=field, code=error.code, **error.context)


WORKFLOW_KIND = register(WorkflowKind())
