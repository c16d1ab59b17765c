"""What a chat front end sees of a durable run or of a conversation's turn.

The two protocols front ends are written against, AG-UI (:mod:`.agui`) and
the AI SDK's UI message stream (:mod:`.aisdk`), say the same things in two
vocabularies: an assistant's text as it streams, the tools it calls and
what they returned, a tool call waiting for a person's approval, how the
run ended. This module reads those from a run's stream (:func:`.events.run_stream`:
the ledger's steps, plus the live token deltas of a run executing in this
process) as :data:`UIEvent` values; each protocol's module only spells them.

From the ledger, so a stream can be served again from the start after a
client's disconnect or the server's restart, by any API process:

- a model call is a recorded step whose output is the assistant's messages:
  its text, and its action calls, each with the call id the model gave;
- the tool a model called runs as the step ``<model step>#<n>``, for the
  reply's ``n``-th call: its output, or its error, is that call's result;
- a tool call waiting for approval is the wait's note (``stalwart.ask``)
  naming the calls; a denied call is in the decision's record
  (``stalwart.approvals``) and never runs.

Live only: a model's text deltas (``ctx.stream_text``) while its call runs.
Text seen live is ended when the call's record arrives; text of a step
never seen live (a stream served again, another process's run) comes whole,
as one delta. Ids are made from the run id and step keys, so a stream
served again names every message and call as the first did.

A conversation's turn is a window of the conversation's run: from the
receive that took the turn's message to the send of its reply.

Where a flow or a journey stands, from the ledger too (:class:`Stage` and
:class:`StateChanged`):

- a flow run (a run of a flow's policy) walks its nodes: each visit of its
  walk is a stage, begun at the visit's first record naming its node (its
  ``exec``, or a sub-flow's ``prep``) and finished at its ``post``, whose
  record holds the change of the shared store: the store, rebuilt from the
  run's inputs and those changes, is the state's ``shared``;
- a journey's step is a stage, from the record (``stalwart.journey``) or the
  wait (``about``) that names it until another step's (its first step from
  the start, when the journey is the run's policy and known here); each
  record holds the journey's step and typed state: the state's ``journey``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.approval import APPROVAL_PREFIX
from ..core.ledger import RunRecord
from ..journey import Journey
from ..runner import Runner
from .events import Cursor, StreamEvent, run_stream
from .values import named_inputs

__all__ = [
    "ApprovalAsked",
    "Finished",
    "Stage",
    "StateChanged",
    "Status",
    "TextDelta",
    "TextEnded",
    "TextStarted",
    "ToolAnswered",
    "ToolCalled",
    "ToolDenied",
    "UIEvent",
    "ui_events",
]


@dataclass(frozen=True, slots=True)
class TextStarted:
    """An assistant's message begins (one per model call that says something)."""

    message_id: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    message_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class TextEnded:
    message_id: str


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """A model called a tool: its call id, the tool's name, the arguments."""

    call_id: str
    name: str
    arguments: Any
    message_id: str


@dataclass(frozen=True, slots=True)
class ToolAnswered:
    """A tool call's result: its output, or its error as text (``error``)."""

    call_id: str
    output: Any
    error: str | None
    message_id: str


@dataclass(frozen=True, slots=True)
class ToolDenied:
    """A person denied a tool call: it did not run."""

    call_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    """Tool calls wait for a person's decision, sent as the signal ``signal``
    (see docs/approvals.md): ``calls`` are ``(call id, tool, arguments)``.
    ``answered``: the decision came already (a stream served again shows
    what was asked on the way); else the run waits for it now."""

    signal: str
    prompt: str | None
    calls: tuple[tuple[str, str, Any], ...]
    answered: bool = False


@dataclass(frozen=True, slots=True)
class Status:
    """Where the run stands (a state snapshot): its status, what it waits
    for, what that wait asks (``{"prompt", "about"}`` of ``ctx.wait_for``:
    a journey's step is in ``about``), and the value the run emitted last
    (``ctx.emit``, live only)."""

    status: str
    waiting_for: str | None
    asked: Any = None
    emitted: Any = None


@dataclass(frozen=True, slots=True)
class Stage:
    """A flow's node or a journey's step begins (``started``) or ends: the
    flow's walk or the journey moves on. ``name`` is the node's or step's."""

    name: str
    started: bool


@dataclass(frozen=True, slots=True)
class StateChanged:
    """What the run's records say it holds now, as JSON data: ``field`` is
    ``shared`` (a flow's store) or ``journey`` (``{"name", "step", "state",
    "done"}``), ``value`` its whole new value."""

    field: str
    value: Any


@dataclass(frozen=True, slots=True)
class Finished:
    """The end: ``status`` (succeeded, failed, cancelled, pruned), the
    result (the reply, for a turn) or the error as text."""

    status: str
    result: Any = None
    error: str | None = None


UIEvent = (
    TextStarted
    | TextDelta
    | TextEnded
    | ToolCalled
    | ToolAnswered
    | ToolDenied
    | ApprovalAsked
    | Status
    | Stage
    | StateChanged
    | Finished
)

_TOOL_STEP = re.compile(r"(.+)#([1-9][0-9]*)")
#: A record of a visit of a flow run's own walk: its number and phase.
_VISIT = re.compile(r"1\.walk\.([1-9][0-9]*)\.(prep|exec|post)(?:#[0-9]+)?")
#: The kinds of a flow's own records (:mod:`stalwart.flow.visits`).
_FLOW_RECORDS = ("flow.prep", "flow.post")


def _assistant_messages(output: Any) -> list[dict[str, Any]] | None:
    """A model step's output as its messages; None for any other step."""
    items = [output] if isinstance(output, dict) else output
    if not isinstance(items, list) or not items:
        return None
    if not all(isinstance(m, dict) and m.get("role") == "assistant" for m in items):
        return None
    return items


def _text_of(messages: list[dict[str, Any]]) -> str:
    return "".join(
        str(p.get("text", ""))
        for m in messages
        for p in m.get("parts") or ()
        if isinstance(p, dict) and p.get("type") == "text"
    )


def _store_key(key: Any) -> str:
    """A flow store's key as a JSON object's: text as itself, any other its JSON."""
    return key if isinstance(key, str) else json.dumps(key, ensure_ascii=False)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    return str(error)


@dataclass
class _Reader:
    """The translation's state: which text is open, which calls each model step made."""

    run_id: str
    turn: str | None
    inside: bool
    open_text: dict[str, str] = field(default_factory=dict)  # step key -> message id
    pending: dict[str, list[str]] = field(default_factory=dict)  # live text held back
    unanswered: set[str] = field(default_factory=set)  # calls shown without a result
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # model key -> calls
    asking: dict[str, ApprovalAsked] = field(default_factory=dict)  # by signal, unanswered
    questions: dict[str, Any] = field(default_factory=dict)  # other waits' notes, by signal
    first: RunRecord | None = None  # the run: a flow's store starts as its inputs say
    find_policy: Callable[[str], Any] | None = None
    shared: dict[str, Any] | None = None  # a flow run's store, as its records rebuild it
    journey: dict[str, Any] | None = None  # a journey's name, step, state, done
    stage: tuple[str, str] | None = None  # the stage open now: (what it is, its name)

    def message_id(self, key: str) -> str:
        return f"{self.run_id}:{key}"

    def delta(self, key: str, text: str) -> list[UIEvent]:
        """A live piece of a model's text: sent at once when its message is
        open; else held until the turn has begun and every tool call shown
        has its result (a model's next text never comes before them)."""
        mid = self.open_text.get(key)
        if mid is not None:
            return [TextDelta(mid, text)]
        self.pending.setdefault(key, []).append(text)
        return self._flush()

    def _flush(self) -> list[UIEvent]:
        if not self.inside or self.unanswered:
            return []
        out: list[UIEvent] = []
        for key, texts in self.pending.items():
            mid = self.open_text[key] = self.message_id(key)
            out += [TextStarted(mid), *(TextDelta(mid, t) for t in texts)]
        self.pending.clear()
        return out

    def step(self, step: dict[str, Any]) -> tuple[list[UIEvent], Finished | None]:
        """What a recorded step shows, and the turn's end if it is its reply."""
        key = str(step["key"])
        self.pending.pop(key, None)  # its record holds the whole text
        shows, end = self._step(key, step)
        return [*shows, *self._flush()], end

    def _step(self, key: str, step: dict[str, Any]) -> tuple[list[UIEvent], Finished | None]:
        kind = step.get("kind")
        output, args = step.get("output"), step.get("arguments")
        if self.turn is not None and not self.inside:
            sender = output.get("from") if isinstance(output, dict) else None
            self.inside = kind == "receive" and sender == self.turn
            return [], None
        if (
            self.turn is not None
            and kind == "send"
            and isinstance(args, dict)
            and args.get("to") == self.turn
        ):
            payload = args.get("payload")
            payload = payload if isinstance(payload, dict) else {"reply": payload}
            if "error" in payload:
                return [], Finished("failed", None, str(payload["error"]))
            return [], Finished("succeeded", payload.get("reply"))
        if kind == "call":
            return [*self._flow(key, kind, step), *self._call(key, step, output)], None
        if kind in _FLOW_RECORDS:
            return self._flow(key, kind, step), None
        if kind == "journey" and isinstance(output, dict):
            return self._journey(output), None
        if kind == "ask" and isinstance(output, dict):
            about = output.get("about")
            moved = self._journey(about) if isinstance(about, dict) else []
            return [*moved, *self._ask(output)], None
        if isinstance(kind, str) and kind.startswith("signal:") and kind[7:] in self.asking:
            answered = self.asking.pop(kind[7:])
            return [replace(answered, answered=True)], None
        if kind == "approvals" and isinstance(output, dict):
            denied = [
                ToolDenied(str(cid), str(d.get("reason") or "denied"))
                for cid, d in output.items()
                if isinstance(d, dict) and d.get("decision") == "deny"
            ]
            self.unanswered -= {d.call_id for d in denied}
            return list(denied), None
        return [], None

    def begin(self) -> list[UIEvent]:
        """What the run shows before its first record: a journey is at its
        first step (recorded only once a tool moves it)."""
        if self.first is None or self.find_policy is None:
            return []
        fn = getattr(self.find_policy(self.first.policy), "fn", None)
        if not isinstance(fn, Journey):
            return []
        return self._journey({"journey": fn.name, "step": fn.start.name})

    def _open(self, what: str, name: str) -> list[UIEvent]:
        """The run is at the stage ``what`` (a visit, a journey's step) now."""
        if self.stage is not None and self.stage[0] == what:
            return []
        out = self._close()
        self.stage = (what, name)
        return [*out, Stage(name, started=True)]

    def _close(self) -> list[UIEvent]:
        if self.stage is None:
            return []
        name, self.stage = self.stage[1], None
        return [Stage(name, started=False)]

    def _flow(self, key: str, kind: Any, step: dict[str, Any]) -> list[UIEvent]:
        """A flow run's record: the visit it belongs to, and the store's change."""
        out: list[UIEvent] = []
        output = step.get("output")
        visit = _VISIT.fullmatch(key)
        if visit is not None:
            name = str(step.get("name") or "")
            if kind == "call" and visit[2] == "exec" and name.endswith(".exec"):
                out += self._open(f"visit {visit[1]}", name.removesuffix(".exec"))
            elif isinstance(output, dict) and isinstance(output.get("node"), str):
                out += self._open(f"visit {visit[1]}", output["node"])
        if kind in _FLOW_RECORDS and isinstance(output, dict) and output.get("flow") == "":
            out += self._change(output)
            if visit is not None and visit[2] == "post":
                out += self._close()
        return out

    def _change(self, record: dict[str, Any]) -> list[UIEvent]:
        """The run's flow store with one record's change applied (the run's
        own flow only: its records hang under the root, ``flow == ""``)."""
        if self.shared is None:
            self.shared = self._first_store()
        for pair in record.get("set") or ():
            if isinstance(pair, list) and len(pair) == 2:
                self.shared[_store_key(pair[0])] = pair[1]
        for gone in record.get("del") or ():
            self.shared.pop(_store_key(gone), None)
        return [StateChanged("shared", dict(self.shared))]

    def _first_store(self) -> dict[str, Any]:
        """The store the flow run started with: its ``shared`` input."""
        if self.first is None or self.find_policy is None:
            return {}
        inputs = named_inputs(self.first, self.find_policy(self.first.policy))
        store: Any = None
        if isinstance(inputs, dict):
            kwargs, args = inputs.get("kwargs"), inputs.get("args")
            store = inputs.get("shared")
            if store is None and isinstance(kwargs, dict):  # the policy is not known here
                store = kwargs.get("shared")
            if store is None and isinstance(args, list) and args:
                store = args[0]
        if not isinstance(store, dict):
            return {}
        return {_store_key(k): v for k, v in store.items()}

    def _journey(self, record: dict[str, Any]) -> list[UIEvent]:
        """A journey's record (its step and state) or a wait naming its step."""
        name, where = record.get("journey"), record.get("step")
        if not isinstance(name, str) or not isinstance(where, str):
            return []
        now = dict(self.journey or {})
        now.update(name=name, step=where)
        if "state" in record:
            now.update(state=record.get("state"), done=record.get("done") is True)
        out = self._open(f"step {where}", where)
        if now != self.journey:
            self.journey = now
            out.append(StateChanged("journey", now))
        if now.get("done") is True:
            out += self._close()
        return out

    def _call(self, key: str, step: dict[str, Any], output: Any) -> list[UIEvent]:
        messages = _assistant_messages(output) if step.get("error") is None else None
        if messages is not None:
            out: list[UIEvent] = []
            text = _text_of(messages)
            mid = self.open_text.pop(key, None)
            if mid is None and text:
                mid = self.message_id(key)
                out += [TextStarted(mid), TextDelta(mid, text)]
            if mid is not None:
                out.append(TextEnded(mid))
            calls = [m["call"] for m in messages if isinstance(m.get("call"), dict)]
            self.calls[key] = calls
            for c in calls:
                out.append(
                    ToolCalled(
                        str(c.get("id")),
                        str(c.get("name")),
                        c.get("arguments"),
                        self.message_id(key),
                    )
                )
            return out
        self.open_text.pop(key, None)  # a model call that failed: its text is not the reply
        tool = _TOOL_STEP.fullmatch(key)
        if tool is None:
            return []
        made = self.calls.get(tool[1])
        n = int(tool[2])
        if made is None or n > len(made):
            return []
        call_id = str(made[n - 1].get("id"))
        self.unanswered.discard(call_id)
        error = step.get("error")
        return [
            ToolAnswered(
                call_id,
                None if error is not None else output,
                None if error is None else _error_text(error),
                self.message_id(key),
            )
        ]

    def _ask(self, note: dict[str, Any]) -> list[UIEvent]:
        signal = note.get("signal")
        about = note.get("about")
        if isinstance(signal, str) and not signal.startswith(APPROVAL_PREFIX):
            self.questions[signal] = {"prompt": note.get("prompt"), "about": note.get("about")}
            return []
        if not isinstance(signal, str):
            return []
        if signal in self.asking or not isinstance(about, dict):
            return []
        calls = tuple(
            (str(c.get("id")), str(c.get("tool")), c.get("arguments"))
            for c in about.get("calls") or ()
            if isinstance(c, dict)
        )
        prompt = note.get("prompt")
        # Shown when the run is seen waiting for it, or answered on the way.
        self.asking[signal] = ApprovalAsked(
            signal, prompt if isinstance(prompt, str) else None, calls
        )
        return []

    def status(self, status: str, waiting_for: str | None) -> list[UIEvent]:
        """What the run's state shows: the approval it waits for, if any."""
        if status == "suspended" and waiting_for in self.asking:
            return [self.asking.pop(waiting_for)]
        return []


async def ui_events(
    runner: Runner,
    first: RunRecord,
    *,
    turn: str | None = None,
    poll: float,
    live: bool,
    find_policy: Callable[[str], Any],
) -> AsyncIterator[UIEvent]:
    """The UI events of the run ``first`` from its first step, ending with
    :class:`Finished`; with ``turn`` (a turn's run id, ``first`` its
    conversation's run), those of that turn only, ending with its reply.

    The same stream is served again whole on every request: a client that
    lost it (a disconnect, a server restart) asks again and gets every
    event up to where the run stands, then the rest as it happens.
    """
    reader = _Reader(first.id, turn, inside=turn is None, first=first, find_policy=find_policy)
    for ui in reader.begin() if turn is None else ():
        yield ui
    shown: tuple[str, str | None] | None = None
    emitted: Any = None
    stream: AsyncIterator[StreamEvent] = run_stream(
        runner, first, Cursor(), poll=poll, live=live, find_policy=find_policy
    )
    async for ev in stream:
        if ev.event == "delta":
            for ui in reader.delta(str(ev.data["key"]), str(ev.data["text"])):
                yield ui
        elif ev.event == "step":
            shows, end = reader.step(ev.data)
            for ui in shows:
                yield ui
            if end is not None:
                yield end
                return
        elif ev.event == "emit" and reader.inside and shown is not None:
            emitted = ev.data.get("value")
            yield Status(*shown, reader.questions.get(shown[1] or ""), emitted)
        elif ev.event == "status" and reader.inside:
            state = (str(ev.data["status"]), ev.data.get("waiting_for"))
            if state != shown:
                shown = state
                yield Status(*state, reader.questions.get(state[1] or ""), emitted)
            for ui in reader.status(*state):
                yield ui
        elif ev.event == "end":
            data = ev.data
            error = data.get("error")
            if turn is not None:  # the conversation ended before answering the turn
                why = _error_text(error) if error else f"the conversation {data.get('status')}"
                yield Finished("failed", None, why)
            else:
                yield Finished(
                    str(data.get("status")),
                    data.get("result"),
                    None if error is None else _error_text(error),
                )
            return
