"""How the demo prints a step: one line each, with what its result says."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..core.message import Message

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["describe", "message_line", "sort_key", "step_line"]


def message_line(m: Message) -> str:
    if m.action_call is not None:
        args = ", ".join(f"{k}={v!r}" for k, v in m.action_call.arguments.items())
        return f"{m.action_call.name}({args})"
    return m.text


def describe(name: str, result: Any) -> str:
    """A short account of a step's result for the printout."""
    if isinstance(result, list) and result and all(isinstance(m, Message) for m in result):
        calls = [message_line(m) for m in result if m.is_action_call]
        if calls:
            return "→ " + ", ".join(calls)
        return "answers"
    if name == "search_corpus" and isinstance(result, list):
        plural = "s" if len(result) != 1 else ""
        return f"{len(result)} hit{plural}: " + ", ".join(h["id"] for h in result)
    if name == "read_document" and isinstance(result, dict):
        return f"read {result['title']} ({result['released']})"
    text = str(result)
    return text if len(text) < 70 else text[:67] + "..."


def step_line(console: Console, how: str, key: str, name: str, took: str, what: str) -> None:
    from rich.text import Text

    line = Text.from_markup(f"   {how}")
    line.pad_right(max(0, 15 - len(line)))
    line.append(f"{key:<5}{name:<14}{took:>6}  ")
    line.append(what, style="dim")
    console.print(line, no_wrap=True, overflow="ellipsis")


def sort_key(key: str) -> list[tuple[int, int]]:
    return [(0 if sep != "#" else 1, int(n)) for sep, n in re.findall(r"(^|[.#])(\d+)", key)]
