"""Structured output: the type an agent's final answer must be, read from its text.

A model answers in text. When the agent is given an ``output_type``, it asks
for the type one of two ways:

- natively, when the model has a mode for it (a provider; a fallback chain
  of providers: :func:`takes_output`) and the type is a JSON object: each
  model call of the agent's loop carries ``output=`` (:meth:`OutputType.request`:
  the type's name, its JSON schema and whether OpenAI's strict mode can take
  it), plain data recorded with the call's arguments, so a replay makes the
  same call. The provider sends it its own way (OpenAI's ``response_format``
  / ``text.format`` json_schema, Anthropic's forced tool) and answers with
  the JSON as text;
- otherwise (a scripted model, a function, a type that is not an object),
  the system prompt carries the type's JSON schema.

Either way the final answer is read as JSON (from a code fence, or from the
first brace to the last, since models wrap JSON in prose) and validated by
pydantic. An answer that does not validate is sent back with what is wrong,
so that the model repairs it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

__all__ = [
    "OUTPUT",
    "OutputType",
    "json_text",
    "problems",
    "repair_request",
    "strict_ready",
    "takes_output",
]

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.S)
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")

# The keyword of a model call that asks for a structured answer
# (``ctx.call(model, observations=..., options=..., output={...})``).
OUTPUT = "output"


def takes_output(model: Any) -> bool:
    """Whether ``model`` has a structured output mode of its own: it says so
    with ``takes_output = True`` (providers do) and takes ``output=``."""
    return getattr(model, "takes_output", False) is True


class OutputType:
    """The type of an agent's final answer: its schema, its reading, its repair."""

    def __init__(self, output_type: Any) -> None:
        self.type = output_type
        self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)

    @property
    def name(self) -> str:
        return getattr(self.type, "__name__", None) or repr(self.type)

    def instructions(self) -> str:
        """The part of the system prompt that asks for this type, as JSON."""
        schema = json.dumps(self.adapter.json_schema(), ensure_ascii=False)
        return (
            "Give your final answer as one JSON object and nothing else (no prose, "
            f"no code fence), valid against this JSON schema:\n{schema}"
        )

    def request(self) -> dict[str, Any] | None:
        """What a model call asks for, as ``output=``, when the type is a JSON
        object (the root every provider's mode takes); ``None`` otherwise."""
        schema = self.adapter.json_schema()
        if schema.get("type") != "object":
            return None
        name = _NOT_NAME.sub("_", self.name)[:64] or "answer"
        return {"name": name, "schema": schema, "strict": strict_ready(schema)}

    def read(self, text: str) -> Any:
        """The answer as an instance of the type; raises ``ValidationError``."""
        return self.adapter.validate_json(json_text(text))


def repair_request(problems: str) -> str:
    """What the model is told when its answer does not validate."""
    return (
        "Your final answer does not validate against the required JSON schema: "
        f"{problems}. Answer again with only the corrected JSON object."
    )


def json_text(text: str) -> str:
    """The JSON in a final answer: a fenced block, or from the first brace to the last."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    s = text.strip()
    if s[:1] in ("{", "["):
        return s
    starts = [i for i in (s.find("{"), s.find("[")) if i >= 0]
    end = max(s.rfind("}"), s.rfind("]"))
    if starts and end > min(starts):
        return s[min(starts) : end + 1]
    return s


def problems(exc: ValidationError) -> str:
    """What pydantic found wrong, one ``where: what`` per error, for the model to read."""
    out = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(x) for x in err["loc"]) or "the answer"
        out.append(f"{where}: {err['msg']}")
    return "; ".join(out)


def strict_ready(schema: Any) -> bool:
    """Whether OpenAI's strict mode takes ``schema`` as it is: every object
    closed (``additionalProperties: false``) with every property required, as
    a pydantic model with ``extra="forbid"`` and no defaults gives. Other
    schemas are sent without strict mode rather than rewritten, since a
    rewrite would ask the model for fields the type lets it leave out."""
    if isinstance(schema, list):
        return all(strict_ready(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", ())) != set(properties):
            return False
    return all(strict_ready(v) for k, v in schema.items() if k not in ("required", "enum", "const"))
