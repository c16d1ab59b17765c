"""A boolean is not a number: the one rule policy arguments keep beyond pydantic's.

Policy arguments are validated in pydantic's lax mode, so that a model's
``"6"`` for an ``int`` is 6, as the model meant. Lax mode also reads JSON
``true`` as 1 for an ``int`` (and 1.0 for a ``float``), which nobody means:
:func:`refuse_bool_numbers` is put in front of each parameter's validation
and refuses a boolean wherever the parameter's type wants a number and no
boolean, naming where it sits (``items.2``, ``limits.max``).
"""

from __future__ import annotations

import dataclasses
import decimal
import types
import typing
from collections.abc import Mapping
from typing import Any

__all__ = ["refuse_bool_numbers"]

_NUMBERS = (int, float, decimal.Decimal)
_ANY = (Any, object)


def refuse_bool_numbers(annotation: Any) -> Any:
    """A pydantic before-validator for a parameter of type ``annotation``."""

    def check(value: Any) -> Any:
        if isinstance(value, bool | list | tuple | dict):
            where = _misplaced_bool(value, annotation, 0)
            if where is not None:
                from pydantic_core import PydanticCustomError

                at = f" (at {where})" if where else ""
                raise PydanticCustomError(
                    "bool_is_not_a_number",
                    "Input should be a number, not a boolean{at}",
                    {"at": at},
                )
        return value

    return check


def _misplaced_bool(value: Any, ann: Any, depth: int) -> str | None:
    """The path ('' for ``value`` itself) of a boolean where ``ann`` wants a
    number, or None. Types it does not know are left to pydantic."""
    if depth > 64:
        return None
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _misplaced_bool(value, typing.get_args(ann)[0], depth + 1)
    if isinstance(value, bool):
        return "" if _wants_number_not_bool(ann) else None
    if origin in (typing.Union, types.UnionType):
        # A list or dict for a union: the one member of that kind, if only one.
        kinds = [a for a in typing.get_args(ann) if _container_of(a, value)]
        return _misplaced_bool(value, kinds[0], depth + 1) if len(kinds) == 1 else None
    if isinstance(value, list | tuple) and (
        origin in (list, set, frozenset, tuple) or _is_abc_sequence(origin)
    ):
        args = typing.get_args(ann)
        for i, item in enumerate(value):
            if origin is tuple and args and args[-1] is not Ellipsis:
                if i >= len(args):
                    return None
                item_ann = args[i]
            else:
                item_ann = args[0] if args else Any
            found = _misplaced_bool(item, item_ann, depth + 1)
            if found is not None:
                return _join(i, found)
        return None
    if isinstance(value, dict):
        if origin is dict or _is_abc_mapping(origin):
            args = typing.get_args(ann)
            item_ann = args[1] if len(args) == 2 else Any
            for k, v in value.items():
                found = _misplaced_bool(v, item_ann, depth + 1)
                if found is not None:
                    return _join(k, found)
            return None
        fields = _fields_of(ann)
        for k, v in value.items():
            if k in fields:
                found = _misplaced_bool(v, fields[k], depth + 1)
                if found is not None:
                    return _join(k, found)
    return None


def _wants_number_not_bool(ann: Any) -> bool:
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _wants_number_not_bool(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(ann)
        if any(m is bool or m in _ANY for m in members):
            return False
        return any(_wants_number_not_bool(m) for m in members)
    if origin is typing.Literal:
        return all(not isinstance(v, bool) for v in typing.get_args(ann))
    if isinstance(ann, type) and not issubclass(ann, bool):
        return issubclass(ann, _NUMBERS)
    return False


def _container_of(ann: Any, value: Any) -> bool:
    origin = typing.get_origin(ann) or ann
    if isinstance(value, dict):
        return origin is dict or _is_abc_mapping(origin) or bool(_fields_of(ann))
    return origin in (list, set, frozenset, tuple) or _is_abc_sequence(origin)


def _is_abc_sequence(origin: Any) -> bool:
    import collections.abc as abc

    return origin in (abc.Sequence, abc.MutableSequence, abc.Set, abc.MutableSet, abc.Iterable)


def _is_abc_mapping(origin: Any) -> bool:
    import collections.abc as abc

    return origin in (abc.Mapping, abc.MutableMapping)


def _fields_of(ann: Any) -> Mapping[str, Any]:
    """The field types of a pydantic model, a dataclass or a TypedDict."""
    if not isinstance(ann, type):
        return {}
    model_fields = getattr(ann, "model_fields", None)
    if isinstance(model_fields, dict):
        return {k: f.annotation for k, f in model_fields.items()}
    if dataclasses.is_dataclass(ann) or typing.is_typeddict(ann):
        try:
            return typing.get_type_hints(ann, include_extras=True)
        except Exception:
            return {}
    return {}


def _join(key: Any, rest: str) -> str:
    return f"{key}.{rest}" if rest else str(key)
