"""Validation of TrainJobs against the upstream ``kubeflow-trainer-api`` pydantic models.

The walk is our own (the generated models cannot validate a plain dict in one call: their
``Quantity``/``IntOrString`` one-of models need ``from_dict``), so that every error names its full
field path. Wrong types and missing required fields become causes of a 422 Invalid ``Status``,
like the apiserver's OpenAPI schema check; with ``reject_unknown`` unknown fields do too (the
apiserver's ``fieldValidation=Strict``). CEL rules and defaulting are not modelled.
"""

from __future__ import annotations

import types
import typing
from functools import cache
from typing import Any

from .errors import invalid
from .resources import ResourceType

JSON = dict[str, Any]


def _cause(reason: str, message: str, field: str) -> JSON:
    return {"reason": reason, "message": message, "field": field}


@cache
def _adapter(annotation: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(annotation)


def _is_model(tp: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _check(value: Any, annotation: Any, path: str, reject_unknown: bool, causes: list[JSON]) -> None:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value is None:
            return
        if len(non_none) == 1:
            _check(value, non_none[0], path, reject_unknown, causes)
            return
    if origin is typing.Annotated:
        _check(value, args[0], path, reject_unknown, causes)
        return
    if origin in (list, typing.List):  # noqa: UP006
        if not isinstance(value, list):
            causes.append(_cause("FieldValueTypeInvalid", "Invalid value: expected array", path))
            return
        for i, item in enumerate(value):
            _check(item, args[0], f"{path}[{i}]", reject_unknown, causes)
        return
    if origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            causes.append(_cause("FieldValueTypeInvalid", "Invalid value: expected object", path))
            return
        for key, item in value.items():
            _check(item, args[1], f"{path}.{key}", reject_unknown, causes)
        return
    if _is_model(annotation):
        if "actual_instance" in annotation.model_fields:  # generated one-of wrapper
            try:
                annotation.from_dict(value)
            except ValueError:
                causes.append(_cause("FieldValueTypeInvalid", f"Invalid value: {value!r}", path))
            return
        _check_model(value, annotation, path, reject_unknown, causes)
        return
    from pydantic import ValidationError

    try:
        _adapter(annotation).validate_python(value)
    except ValidationError as exc:
        causes.append(_cause("FieldValueTypeInvalid", exc.errors()[0]["msg"], path))


def _check_model(value: Any, model: Any, path: str, reject_unknown: bool, causes: list[JSON]) -> None:
    if not isinstance(value, dict):
        causes.append(_cause("FieldValueTypeInvalid", "Invalid value: expected object", path))
        return
    by_alias = {(f.alias or name): f for name, f in model.model_fields.items()}
    for key, item in value.items():
        sub = f"{path}.{key}" if path else key
        field = by_alias.get(key)
        if field is None:
            if reject_unknown:
                causes.append(_cause("FieldValueInvalid", f'unknown field "{sub}"', sub))
            continue
        _check(item, field.annotation, sub, reject_unknown, causes)
    for key, field in by_alias.items():
        if field.is_required() and key not in value:
            sub = f"{path}.{key}" if path else key
            causes.append(_cause("FieldValueRequired", "Required value", sub))


def validate_trainjob(rt: ResourceType, obj: JSON, reject_unknown: bool) -> None:
    """Raise a 422 ``StatusError`` if ``obj`` does not validate as ``TrainerV1alpha1TrainJob``."""
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob  # type: ignore[import-untyped]

    body = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(body.get("metadata") or {})
    # server-populated metadata is not the client's to get wrong
    for key in ("managedFields", "uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(key, None)
    body["metadata"] = meta
    causes: list[JSON] = []
    _check_model(body, TrainerV1alpha1TrainJob, "", reject_unknown, causes)
    if causes:
        raise invalid(rt, meta.get("name", ""), causes)
