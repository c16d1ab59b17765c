"""Token usage, reported the same way whatever the provider."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


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
