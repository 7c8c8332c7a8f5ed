"""The target kinds, by ``type``. A kind joins with :func:`register`, from its own module:

    register(SqsKind())

and from then on job specs take its ``type`` (its model joins the target union), the job service checks it,
the worker delivers to it and infra grants its IAM actions. The built-in kinds are registered on import.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel

from tickwork.domain.models import set_target_models, target_models
from tickwork.targets.kind import TargetKind

_kinds: dict[str, TargetKind[Any]] = {}


def register(kind: TargetKind[Any]) -> TargetKind[Any]:
    """Add ``kind`` under its ``type``, which must be new and be the one value its model's ``type`` takes."""
    if kind.type in _kinds:
        raise ValueError(f"a target kind of type {kind.type!r} is registered already")
    field = kind.model.model_fields.get("type")
    if field is None or get_args(field.annotation) != (kind.type,):
        raise ValueError(f"{kind.model.__name__}.type must be Literal[{kind.type!r}]")
    _kinds[kind.type] = kind
    if kind.model not in target_models():
        set_target_models((*target_models(), kind.model))
    return kind


def unregister(type_: str) -> None:
    """Remove the kind of that ``type`` and its model from the target union (for tests)."""
    kind = _kinds.pop(type_)
    set_target_models(tuple(model for model in target_models() if model is not kind.model))


def kinds() -> tuple[TargetKind[Any], ...]:
    """Every registered kind, in the order of the target union."""
    return tuple(_kinds[type_] for type_ in target_types())


def target_types() -> tuple[str, ...]:
    """The ``type`` values jobs may use, in the order of the target union."""
    return tuple(get_args(model.model_fields["type"].annotation)[0] for model in target_models())


def kind_for(type_: str) -> TargetKind[Any]:
    """The kind registered under ``type_``; KeyError if none is."""
    return _kinds[type_]


def kind_of(target: BaseModel) -> TargetKind[Any]:
    """The kind of a validated target."""
    return _kinds[target.type]  # type: ignore[attr-defined]


# The built-in kinds register themselves; imported last, since each of them imports register from here.
from tickwork.targets import kinds as _builtin  # noqa: E402,F401
