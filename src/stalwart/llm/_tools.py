"""What a model is told about the options it may call, and how its calls are read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolSpec", "parse_arguments"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """An option offered to a model, independent of any provider's format.

    ``parameters`` is a JSON schema of type ``object``; each provider module
    wraps it in that provider's tool shape.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


def parse_arguments(
    raw: str | None, *, truncated: bool = False
) -> tuple[dict[str, Any], str | None]:
    """Parse a model's tool arguments without ever raising.

    Models do write broken JSON (and a reply cut off by the token limit always
    does). Raising here would fail the whole model call and lose the reply, so
    the call is kept with ``{}`` and the reason, raw text included, goes into
    ``invalid`` for the runtime to hand back to the model as an error result.
    An empty string means no arguments: some servers send it for
    parameterless functions.
    """
    if raw is None or not raw.strip():
        return {}, None
    cut = " (the reply was cut off by the output token limit)" if truncated else ""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        pos = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return {}, f"the arguments are not valid JSON ({reason}{pos}){cut}: {raw}"
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        return {}, f"the arguments must be a JSON object, not {kind}{cut}: {raw}"
    return value, None
