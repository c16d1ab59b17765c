"""The conversation a run holds, as the pages show it: each message once,
the tokens spent per model, and the question a run waiting for a human asked.

Read from records as plain JSON trees, as :mod:`.values` says (S13).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.ledger import ASKED, RunRecord, StepRecord
from .steps import key_order
from .values import EMPTY, Shown, clip, cut, load, value_link

__all__ = [
    "Asked",
    "Bubble",
    "ModelUsage",
    "ToolCall",
    "Turn",
    "bubbles",
    "pending_ask",
    "turns",
    "usage_by_model",
]

_TAG = "$t"
_MSG = "msg"


# -- messages --------------------------------------------------------------
@dataclass(frozen=True)
class Bubble:
    """One message of the conversation, as text fields only; its texts,
    arguments and results cut (:func:`.values.cut`), each linking to the
    whole value of the step it was read from."""

    role: str
    actor: str
    texts: tuple[Shown, ...] = ()
    media: tuple[str, ...] = ()
    call_name: str = ""
    call_id: str = ""
    call_args: Shown = EMPTY
    call_invalid: str = ""
    result_name: str = ""
    result_call_id: str = ""
    result_value: Shown = EMPTY
    result_error: str = ""
    step: str = ""


def _messages(tree: Any) -> Iterator[dict[str, Any]]:
    """Recorded messages (``{"$t": "msg", "v": {...}}``) in a tree, in order."""
    if isinstance(tree, list):
        for item in tree:
            yield from _messages(item)
    elif isinstance(tree, dict):
        if tree.get(_TAG) == _MSG and isinstance(tree.get("v"), dict):
            yield tree["v"]
            return
        for value in tree.values():
            yield from _messages(value)


def _fingerprint(msg: dict[str, Any]) -> str:
    # Recorded arguments leave message ids out, and usage lives in meta: the
    # same message read from a model call's arguments and from the previous
    # call's output differs only there.
    return json.dumps({k: v for k, v in msg.items() if k not in ("id", "meta")}, sort_keys=True)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _audience(msg: dict[str, Any]) -> tuple[set[int], list[dict[str, Any]]]:
    """What an MCP result says of its parts' audience (``meta["mcp"]``, see
    :mod:`stalwart.mcp.content`): the parts for the assistant only, by
    index, and the content blocks for the user only, which are no parts."""
    mcp = _dict(_dict(msg.get("meta")).get("mcp"))
    hidden: set[int] = set()
    notes = mcp.get("annotations")
    for note in notes if isinstance(notes, list) else ():
        audience = _dict(note).get("audience")
        if isinstance(audience, list) and audience and "user" not in audience:
            part = _dict(note).get("part")
            if isinstance(part, int):
                hidden.add(part)
    shown = mcp.get("for_user")
    return hidden, [b for b in shown if isinstance(b, dict)] if isinstance(shown, list) else []


def _bubble(msg: dict[str, Any], step: str, href: str) -> Bubble:
    texts: list[Shown] = []
    media: list[str] = []
    parts = msg.get("parts")
    # A person is shown what is for people: not the parts for the assistant
    # only, and the content a tool gave for the user only.
    hidden, for_user = _audience(msg)
    if _is_message(_dict(msg.get("result")).get("value")):
        parts = None  # a tool's message: its parts are the result's, shown there
    for i, part in enumerate(parts if isinstance(parts, list) else ()):
        if not isinstance(part, dict) or i in hidden:
            continue
        if part.get("type") == "text":
            texts.append(cut(str(part.get("text", "")), href))
        else:
            size = len(str(part.get("data", ""))) * 3 // 4
            where = f"{size} bytes inline" if "data" in part else f"at {part.get('url', '')}"
            media.append(f"{part.get('mime_type', 'media')}, {where}")
    for block in for_user:
        if block.get("type") == "text":
            texts.append(cut(str(block.get("text", "")), href))
        else:
            size = len(str(block.get("data", ""))) * 3 // 4
            media.append(
                f"{block.get('mimeType', block.get('type', 'media'))}, {size} bytes inline"
            )
    call = _dict(msg.get("call"))
    result = _dict(msg.get("result"))
    error = ""
    if result.get("error_type") is not None:
        error = clip(f"{result.get('error_type')}: {result.get('error_message', '')}")
    value = result.get("value")
    return Bubble(
        role=str(msg.get("role", "")),
        actor=str(msg.get("actor", "")),
        texts=tuple(texts),
        media=tuple(media),
        call_name=str(call.get("name", "")),
        call_id=str(call.get("id", "")),
        call_args=cut(
            json.dumps(call.get("arguments"), indent=2, ensure_ascii=False) if call else "", href
        ),
        call_invalid=clip(str(call.get("invalid") or "")),
        result_name=str(result.get("name", "")),
        result_call_id=str(result.get("call_id", "")),
        result_value=cut(_result_text(value, result, step, href), href),
        result_error=error,
        step=step,
    )


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_TAG) == _MSG and isinstance(value.get("v"), dict)


def _result_text(value: Any, result: dict[str, Any], step: str, href: str) -> str:
    """A result's value as text: a message (a tool's) as what a person is
    shown of it, anything else as its JSON."""
    if "value" not in result:
        return ""
    if isinstance(value, str):
        return value
    if _is_message(value):
        shown = _bubble(value["v"], step, href)
        return "\n".join([*(t.text for t in shown.texts), *shown.media])
    return json.dumps(value, indent=2, ensure_ascii=False)


def bubbles(steps: Mapping[str, StepRecord], run_id: str = "") -> list[Bubble]:
    """The conversation run ``run_id``'s steps hold, each message once, in order.

    A model call's arguments hold the whole conversation so far and its
    output the new reply, so the messages of every step, read in the order
    the steps started, give the conversation when each message is kept once.
    "Once" is per count: a message said twice within one step's value (a
    user who typed "yes" twice) stays twice.
    """
    shown: dict[str, int] = {}
    out: list[Bubble] = []
    # The previous value's messages with their fingerprints: a model call's
    # arguments repeat the last one's conversation, and comparing a message
    # with the one at its place there (C's dict equality) is far cheaper
    # than encoding it again (B15). Equal as Python values: a 1 where the
    # last value had 1.0 or true, the rest of the message the same, is taken
    # for the message it replaced.
    before: list[tuple[dict[str, Any], str]] = []
    for s in sorted(steps.values(), key=lambda s: (s.started_at, key_order(s.key))):
        for field, text in (("args", s.args), ("output", s.output)):
            here: dict[str, int] = {}
            seen: list[tuple[dict[str, Any], str]] = []
            for i, msg in enumerate(_messages(load(text))):
                same = i < len(before) and before[i][0] == msg
                fp = before[i][1] if same else _fingerprint(msg)
                seen.append((msg, fp))
                here[fp] = here.get(fp, 0) + 1
                if here[fp] > shown.get(fp, 0):
                    shown[fp] = here[fp]
                    out.append(_bubble(msg, s.key, value_link(run_id, field, s.key)))
            if len(seen) > 1:  # a conversation, not one reply
                before = seen
    return out


@dataclass(frozen=True)
class ToolCall:
    """A tool call a reply asked for, and the result that answered it (None
    while it runs, or when the steps shown do not hold it)."""

    call: Bubble
    result: Bubble | None = None


@dataclass
class Turn:
    """A message as the conversation shows it: ``head``, the message (a
    model's reply: its first message), and the tool calls the reply asked
    for, each with its result, folded under it."""

    head: Bubble
    calls: list[ToolCall]


def turns(shown: list[Bubble]) -> list[Turn]:
    """The conversation's messages as turns: a reply's calls (messages of
    one step, one role, one after the other) gathered under it, and each
    result put under the call it answers (by call id). A result whose call
    is not among the messages stays a message of its own."""
    out: list[Turn] = []
    waiting: dict[str, tuple[Turn, int]] = {}
    for b in shown:
        if b.call_name:
            last = out[-1] if out else None
            same_reply = (
                last is not None
                and last.head.role == b.role
                and last.head.step == b.step
                and (last.calls or not last.head.result_name)
            )
            turn = last if same_reply and last is not None else None
            if turn is None:
                turn = Turn(b, [])
                out.append(turn)
            turn.calls.append(ToolCall(b))
            if b.call_id:
                waiting[b.call_id] = (turn, len(turn.calls) - 1)
            continue
        if b.result_name and b.result_call_id in waiting:
            turn, i = waiting.pop(b.result_call_id)
            turn.calls[i] = ToolCall(turn.calls[i].call, b)
            continue
        out.append(Turn(b, []))
    return out


@dataclass(frozen=True)
class ModelUsage:
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


#: The most tokens a reply's usage may count: more (or fewer than none) is
#: not a count, and is left out, as a value of another type is.
MOST_TOKENS = 2**53


def _int(value: Any) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MOST_TOKENS
    return value if ok else 0


def _cost(value: Any) -> float | None:
    """A recorded cost as a finite number, or None (an int too large for a
    float, or not a number at all, is no cost)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        cost = float(value)
    except OverflowError:
        return None
    return cost if math.isfinite(cost) else None


def usage_by_model(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[ModelUsage]:
    """Tokens (and cost, when a provider recorded one) per model, from the
    usage model replies carry in ``meta``, each reply counted once by id."""
    seen: set[str] = set()
    totals: dict[str, list[Any]] = {}
    texts = [t for s in steps.values() for t in (s.args, s.output)] + [run.result]
    for text in texts:
        for msg in _messages(load(text)):
            meta = msg.get("meta")
            if not isinstance(meta, dict) or not isinstance(meta.get("usage"), dict):
                continue
            ident = str(msg.get("id"))
            if ident in seen:
                continue
            seen.add(ident)
            usage = meta["usage"]
            row = totals.setdefault(str(meta.get("model") or "unknown model"), [0, 0, 0, None])
            row[0] += 1
            row[1] += _int(usage.get("input_tokens"))
            row[2] += _int(usage.get("output_tokens"))
            cost = _cost(meta.get("cost", usage.get("cost")))
            if cost is not None:
                row[3] = (row[3] or 0.0) + cost
    return [ModelUsage(m, *v) for m, v in sorted(totals.items())]


# -- waiting for a human ---------------------------------------------------
@dataclass(frozen=True)
class Asked:
    """What a run waiting for a human asked: its question and the details
    it attached (``about=``, as indented JSON), cut as every value is."""

    prompt: Shown = EMPTY
    about: Shown = EMPTY
    #: What the wait recorded about the answer: the JSON schema it expects
    #: (``wait_for(schema=...)``), or None; for a tool approval, the calls
    #: it asks about (``about``, decoded), else None.
    schema: Any = None
    about_value: Any = None

    def __bool__(self) -> bool:
        return bool(self.prompt) or bool(self.about)


def pending_ask(steps: Mapping[str, StepRecord], signal: str | None, run_id: str = "") -> Asked:
    """What run ``run_id``, waiting for ``signal``, asked, if it recorded it.

    A record whose value is ``{"prompt": ..., "signal": signal, "about":
    ...}`` (what ``ctx.ask`` and ``ctx.wait_for`` write, as a ``stalwart.ask``
    step) is the question; the latest one wins. A wait may attach details
    alone (``wait_for(signal, about=...)``, no prompt). Empty when the run
    recorded none: the page then shows the signal's name alone.
    """
    best: tuple[float, str, dict[str, Any]] | None = None
    asked_name = f"stalwart.{ASKED}"
    for s in steps.values():
        if s.output is None or ('"prompt"' not in s.output and '"about"' not in s.output):
            continue  # no such key: not decoded (a long conversation's output costs a scan)
        value = load(s.output)
        if not isinstance(value, dict) or _TAG in value or value.get("signal", signal) != signal:
            continue
        if not isinstance(value.get("prompt"), str) and s.name != asked_name:
            continue  # details alone are a question only in the engine's own record
        if best is None or (s.finished_at, s.key) >= best[:2]:
            best = (s.finished_at, s.key, value)
    if best is None:
        return Asked()
    key, value = best[1], best[2]
    href = value_link(run_id, "output", key)
    prompt = value.get("prompt")
    about = value.get("about")
    schema = value.get("schema")
    return Asked(
        prompt=cut(prompt, href) if isinstance(prompt, str) else EMPTY,
        about=EMPTY if about is None else cut(_json_text(about), href),
        schema=schema if isinstance(schema, dict) else None,
        about_value=about,
    )


def _json_text(tree: Any) -> str:
    """A value as recorded (codec tags included), as indented JSON text."""
    if isinstance(tree, str):
        return tree
    return json.dumps(tree, indent=2, ensure_ascii=False)
