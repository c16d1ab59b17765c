"""Structured output: the type an agent's final answer must be, read from its text.

A model answers in text. When the agent is given an ``output_type``, the
system prompt carries the type's JSON schema, and the final answer is read
as JSON (from a code fence, or from the first brace to the last, since
models wrap JSON in prose) and validated by pydantic. An answer that does
not validate is sent back with what is wrong, so that the model repairs it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

__all__ = ["OutputType", "json_text", "problems", "repair_request"]

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.S)


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
