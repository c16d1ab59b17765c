"""Token usage, reported the same way whatever the provider, and summed per run."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.message import Message

__all__ = ["Price", "Usage", "read_prices", "run_usage", "run_usage_by_model", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one or more model calls consumed.

    ``input_tokens`` counts every prompt token the provider processed, cached
    or not (Anthropic reports cache reads and writes apart from
    ``input_tokens``; they are added in here), so that numbers from different
    providers compare. Usages add up, so a run can total its calls with ``sum``
    starting from ``Usage()``.
    """

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )

    def to_dict(self) -> dict[str, int]:
        """The JSON form kept in ``Message.meta["usage"]``."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    @classmethod
    def from_dict(cls, data: Any) -> Usage:
        """Read :meth:`to_dict`'s form back; anything else counts as no usage."""
        if not isinstance(data, Mapping):
            return cls()
        return cls(_int(data.get("input_tokens")), _int(data.get("output_tokens")))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class Price:
    """What a model charges per million tokens, input and output, in the
    currency of your price table (Stalwart never converts or fetches prices).

    ``Price(0.40, 1.60).cost(usage)`` is what ``usage`` cost. A table of
    prices is a plain mapping of model name (``meta["model"]`` of a reply,
    ``"gpt-4.1-mini"``) to ``Price``.
    """

    input: float
    output: float

    def __post_init__(self) -> None:
        for field in ("input", "output"):
            value = getattr(self, field)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"Price.{field}: expected a finite number >= 0 (per million tokens), "
                    f"got {value!r}"
                )

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost at this price."""
        return (usage.input_tokens * self.input + usage.output_tokens * self.output) / 1e6


def read_prices(data: Any, where: str = "prices") -> dict[str, Price]:
    """A price table from its JSON form, ``{"gpt-4.1-mini": {"input": 0.4,
    "output": 1.6}, ...}`` (per million tokens): a ``ValueError`` names the
    model and field that is wrong. What ``stalwart worker --prices`` reads."""
    if not isinstance(data, Mapping):
        raise ValueError(
            f"{where}: expected an object of model name -> {{'input': N, 'output': N}}, "
            f"got {type(data).__name__}"
        )
    table: dict[str, Price] = {}
    for model, price in data.items():
        if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
            raise ValueError(
                f"{where}[{model!r}]: expected {{'input': N, 'output': N}} "
                "(per million tokens), got "
                + (repr(sorted(price)) if isinstance(price, Mapping) else type(price).__name__)
            )
        try:
            table[str(model)] = Price(price["input"], price["output"])
        except ValueError as exc:
            raise ValueError(f"{where}[{model!r}]: {exc}") from None
    return table


def usage_of(messages: Iterable[Message]) -> Usage:
    """The usage the model replies among ``messages`` carry, each reply once.

    A provider puts a call's usage in ``meta["usage"]`` of the first message
    of its reply; messages are counted once per id, so a conversation that
    holds the same reply twice does not count it twice.
    """
    seen: set[str] = set()
    total = Usage()
    for m in messages:
        if m.meta and "usage" in m.meta and m.id not in seen:
            seen.add(m.id)
            total += Usage.from_dict(m.meta["usage"])
    return total


def run_usage(steps: Iterable[Any] | Mapping[str, Any]) -> Usage:
    """The tokens a run's model calls used, from the run's recorded steps.

    ``steps`` are the run's step records (``await runner.steps(run_id)``, or
    the mapping a store loads): anything with an ``output`` holding the
    recorded JSON. Every message recorded in an output counts its
    ``meta["usage"]`` once per message id, at any depth: a policy that returns
    the conversation it got from its model calls repeats those replies, and
    they must not count twice. The recorded JSON is read as plain data, so no
    class a step returned needs to be importable where the usage is summed
    (the CLI).
    """
    return sum((usage for _, usage in _replies(steps).values()), Usage())


def run_usage_by_model(steps: Iterable[Any] | Mapping[str, Any]) -> dict[str, Usage]:
    """:func:`run_usage`, split by the model that answered: its name (the
    ``actor`` of its reply, ``"openai:gpt-4.1-mini"`` unless it was named),
    so a run whose calls fell back to another model counts each model apart."""
    out: dict[str, Usage] = {}
    for model, usage in _replies(steps).values():
        out[model] = out.get(model, Usage()) + usage
    return out


def _replies(steps: Iterable[Any] | Mapping[str, Any]) -> dict[str, tuple[str, Usage]]:
    """The model replies recorded in ``steps`` that carry usage: by message id,
    the model that answered and the usage."""
    records = steps.values() if isinstance(steps, Mapping) else steps
    usages: dict[str, tuple[str, Usage]] = {}
    for rec in records:
        output = getattr(rec, "output", None)
        if not output:
            continue
        try:
            tree = json.loads(output)
        except ValueError:
            continue
        _collect(tree, usages)
    return usages


def _collect(tree: Any, usages: dict[str, tuple[str, Usage]]) -> None:
    """Find recorded messages (``{"$t": "msg", "v": {...}}``) that carry usage."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("$t") == "msg" and isinstance(node.get("v"), dict):
                message = node["v"]
                meta = message.get("meta")
                if isinstance(meta, dict) and "usage" in meta:
                    usages.setdefault(
                        str(message.get("id")),
                        (str(message.get("actor")), Usage.from_dict(meta["usage"])),
                    )
            stack.extend(node.values())
