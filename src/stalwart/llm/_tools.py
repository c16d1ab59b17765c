"""What a model is told about the options it may call, and how its calls are read."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..core.policy import ToolSpec, as_policy

__all__ = ["MAX_DEPTH", "ToolSpec", "parse_arguments", "tool_specs"]

# ``ToolSpec`` is the core's: a policy's ``spec`` already is what a model is
# told, so providers render that one class and there is nothing to convert.


def tool_specs(options: Iterable[Any]) -> list[ToolSpec]:
    """The specs of the options a model is offered, in the order offered.

    Options are policies (anything :func:`~stalwart.core.policy.as_policy` takes);
    a :class:`ToolSpec` passes as it is, for callers that describe a tool the
    engine will not run for them. A name is refused with the reason: the
    engine resolves ``options=["web_search"]`` to policies before a model
    step runs, so a model called directly must be given the policies.
    """
    specs: list[ToolSpec] = []
    for i, o in enumerate(options):
        if isinstance(o, ToolSpec):
            specs.append(o)
        elif isinstance(o, str):
            raise TypeError(
                f"options[{i}] is the name {o!r}: names are resolved by the engine when a "
                "step is offered them (ctx.call(model, options=[...])); a model called "
                "directly needs the policy itself"
            )
        else:
            specs.append(as_policy(o).spec)
    return specs


# How deeply a model's tool arguments may nest. No tool's input is deeper, and
# a deeper tree could not be parsed, validated and recorded without running
# out of stack, so it is refused before it is parsed.
MAX_DEPTH = 100

# What an error shows of arguments it refuses: enough to see what went wrong.
_SHOWN = 2000


def parse_arguments(
    raw: str | None, *, truncated: bool = False
) -> tuple[dict[str, Any], str | None]:
    """Parse a model's tool arguments without ever raising.

    Models do write broken JSON (and a reply cut off by the token limit always
    does). Raising here would fail the whole model call and lose the reply, so
    the call is kept with ``{}`` and the reason, raw text included, goes into
    ``invalid`` for the engine to hand back to the model as an error result.
    An empty string means no arguments: some servers send it for
    parameterless functions. Arguments nested more than :data:`MAX_DEPTH`
    levels deep are refused the same way, before they are parsed.
    """
    if raw is None or not raw.strip():
        return {}, None
    cut = " (the reply was cut off by the output token limit)" if truncated else ""
    deep = _too_deep(raw)
    if deep is not None:
        return {}, (
            f"the arguments are nested more than {MAX_DEPTH} levels deep (at character "
            f"{deep}){cut}: {_shown(raw)}"
        )
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        pos = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return {}, f"the arguments are not valid JSON ({reason}{pos}){cut}: {_shown(raw)}"
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        return {}, f"the arguments must be a JSON object, not {kind}{cut}: {_shown(raw)}"
    return value, None


def _too_deep(raw: str) -> int | None:
    """Where ``raw`` first opens an array or object deeper than MAX_DEPTH, if it does.

    Read without recursion, brackets inside strings not counted; text that is
    not JSON is left for the parser to name.
    """
    if raw.count("[") + raw.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(raw):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif ch in "]}":
            depth -= 1
    return None


def _shown(raw: str) -> str:
    if len(raw) <= _SHOWN:
        return raw
    return f"{raw[:_SHOWN]}... ({len(raw) - _SHOWN} more characters)"
