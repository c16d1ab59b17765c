"""What a wait for a signal expects: a JSON schema, and the check a payload passes.

``ctx.wait_for(signal, schema={...})`` (and ``ctx.ask``) records the schema
with the wait's note, beside its prompt: whoever answers (the inspector,
before it sends) checks the payload against it and says which field is
wrong. The run itself never reads it back: it is a note for readers, as the
prompt is.

The check covers the part of JSON Schema an answer's shape needs, the same
part the inspector's page checks in the browser (``web/static/actions.js``):
``type`` (one or a list), ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties`` (false or a schema), ``items``, ``anyOf`` and
``oneOf`` (read as any of), ``minimum``, ``maximum``, ``minLength``,
``maxLength``, ``minItems``, ``maxItems``, and ``$ref`` to ``#/$defs/...``
(what ``Model.model_json_schema()`` writes). Other keywords are not checked
(``pattern`` among them: no regular expression from a schema is run).
A schema is data: it is only compared with, never executed, and a check
costs at most :data:`MAX_CHECKS` steps, whatever the schema (``anyOf``
nested through ``$ref`` would otherwise take exponential time).
"""

from __future__ import annotations

import heapq
import json
from typing import Any

__all__ = ["check_schema", "schema_problems"]

#: How deep a schema (and a value checked against it) may nest: a ``$ref``
#: loop or a hostile payload stops here, with a message.
MAX_DEPTH = 64
#: The problems one check reports at most.
MAX_PROBLEMS = 20
#: The steps one check takes at most (a schema node applied to a value,
#: an ``enum``'s choice compared): past it the check stops and says so.
MAX_CHECKS = 100_000


class _TooCostly(Exception):
    """A check that would take more than :data:`MAX_CHECKS` steps."""


class _Budget:
    """The steps a check has left, and the ``$ref`` targets it found (each
    pointer walked once a check, however long, however often it is met)."""

    __slots__ = ("left", "refs")

    def __init__(self) -> None:
        self.left = MAX_CHECKS
        self.refs: dict[str, dict[str, Any] | None] = {}

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise _TooCostly


def check_schema(schema: object, where: str = "wait_for") -> dict[str, Any]:
    """``schema`` as a wait records it: a JSON object (a TypeError naming
    the field otherwise)."""
    if not isinstance(schema, dict):
        raise TypeError(
            f"{where}: field 'schema': a JSON schema (a dict), not {type(schema).__name__}; "
            "for a pydantic model pass Model.model_json_schema()"
        )
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: field 'schema' is not JSON: {exc}") from None
    return schema


def schema_problems(value: Any, schema: Any) -> list[str]:
    """What is wrong with ``value`` (decoded JSON) against ``schema``, each
    naming the field (``answer``, ``answer.amount``, ``answer[2]``); empty
    when it fits. A check that would take more than :data:`MAX_CHECKS`
    steps is one problem that says so: the payload is not known to fit."""
    out: list[str] = []
    root = schema if isinstance(schema, dict) else {}
    try:
        _check(value, schema, "answer", root, out, 0, _Budget())
    except _TooCostly:
        return [
            f"answer: not checked: the schema takes more than {MAX_CHECKS} steps to check "
            "against this value (anyOf or oneOf nested through $ref?)"
        ]
    return out[:MAX_PROBLEMS]


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    for name in ("object", "array", "string", "integer", "number", "null"):
        if isinstance(value, _TYPES[name]):
            return name
    return type(value).__name__


def _is(value: Any, name: str) -> bool:
    if name not in _TYPES:
        return True  # a type this check does not know: not refused
    if isinstance(value, bool):
        return name == "boolean"
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[name])


def _resolve(
    schema: dict[str, Any], root: dict[str, Any], budget: _Budget
) -> dict[str, Any] | None:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    if ref not in budget.refs:
        budget.refs[ref] = _target(ref, root)
    return budget.refs[ref]


def _target(ref: str, root: dict[str, Any]) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None  # a schema elsewhere: not fetched, not checked
    node: Any = root
    for part in ref[2:].split("/"):
        node = (
            node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
        )
    return node if isinstance(node, dict) else None


def _check(
    value: Any,
    schema: Any,
    path: str,
    root: dict[str, Any],
    out: list[str],
    depth: int,
    budget: _Budget,
) -> None:
    if len(out) >= MAX_PROBLEMS:
        return
    budget.spend()
    if depth > MAX_DEPTH:
        out.append(f"{path}: nested deeper than {MAX_DEPTH} levels")
        return
    if schema is False:
        out.append(f"{path}: no value is allowed here")
        return
    if not isinstance(schema, dict):
        return
    resolved = _resolve(schema, root, budget)
    if resolved is None:
        return
    schema = resolved
    either = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(either, list) and either:
        tries = []
        for option in either:
            found: list[str] = []
            _check(value, option, path, root, found, depth + 1, budget)
            if not found:
                break
            tries.append(found)
        else:
            best = min(tries, key=len)
            out.extend(best if len(tries) == 1 else [f"{path}: fits none of {len(tries)} choices"])
            return
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds:
        budget.spend(len(kinds))
    if kinds and not any(_is(value, k) for k in kinds if isinstance(k, str)):
        wanted = " or ".join(str(k) for k in kinds)
        out.append(f"{path}: expected {wanted}, got {_type_of(value)}")
        return
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: must be {json.dumps(schema['const'])}")
    choices = schema.get("enum")
    if isinstance(choices, list):
        budget.spend(len(choices))
    if isinstance(choices, list) and not any(_same(value, c) for c in choices):
        shown = ", ".join(json.dumps(c) for c in choices[:10])
        out.append(f"{path}: must be one of {shown}")
    if isinstance(value, dict):
        _check_object(value, schema, path, root, out, depth, budget)
    elif isinstance(value, list):
        _check_array(value, schema, path, root, out, depth, budget)
    elif isinstance(value, str):
        _bounds(len(value), schema, "minLength", "maxLength", f"{path}: length", out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _bounds(value, schema, "minimum", "maximum", path, out)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _bounds(
    n: float, schema: dict[str, Any], low: str, high: str, what: str, out: list[str]
) -> None:
    lo, hi = schema.get(low), schema.get(high)
    if isinstance(lo, int | float) and not isinstance(lo, bool) and n < lo:
        out.append(f"{what} must be at least {lo}")
    if isinstance(hi, int | float) and not isinstance(hi, bool) and n > hi:
        out.append(f"{what} must be at most {hi}")


def _check_object(
    value: dict[str, Any],
    schema: dict[str, Any],
    path: str,
    root: dict[str, Any],
    out: list[str],
    depth: int,
    budget: _Budget,
) -> None:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    budget.spend(len(required) + len(value))
    for name in required:
        if isinstance(name, str) and name not in value:
            out.append(f"{path}.{name}: required, missing")
    extra = schema.get("additionalProperties", True)
    known = ""  # the fields a refused one is told of: listed once
    for name, item in value.items():
        if len(out) >= MAX_PROBLEMS:
            return
        where = f"{path}.{name}"
        if name in props:
            _check(item, props[name], where, root, out, depth + 1, budget)
        elif extra is False:
            if not known:
                budget.spend(len(props))
                known = ", ".join(heapq.nsmallest(10, map(str, props))) or "none"
            out.append(f"{where}: not expected (fields: {known})")
        elif isinstance(extra, dict):
            _check(item, extra, where, root, out, depth + 1, budget)


def _check_array(
    value: list[Any],
    schema: dict[str, Any],
    path: str,
    root: dict[str, Any],
    out: list[str],
    depth: int,
    budget: _Budget,
) -> None:
    _bounds(len(value), schema, "minItems", "maxItems", f"{path}: item count", out)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _check(item, items, f"{path}[{i}]", root, out, depth + 1, budget)
