"""Tool approval: how a person's decision on a model's tool calls is sent and read.

An option made with ``approval=`` (:func:`~stalwart.core.policy.policy`)
makes the options dispatch stop before a reply's calls run and wait, as a
durable wait (S7), for a signal deciding the calls that need approval
(:mod:`.engine.approvals`). This module is the format of that wait and of
its answer, shared by the engine, which reads it in the run, and the
runner, which checks it when it is sent.

The wait's signal is named ``approval:<key>`` (the key of the wait's
deadline record): one name per wait, so a decision sent twice (a double
click) is never taken by a later wait. What it asks is recorded as the
wait's note (``stalwart.ask``) with ``about``::

    {"calls": [{"id": "c1", "tool": "refund", "arguments": {...}}, ...],
     "problem": "why the last decision was refused"}   # only after one was

The answer (the signal's payload) is one of:

* ``true``: approve every call the wait asks about; ``false``: deny every one;
* an object from call ids to decisions, deciding those calls (the others
  are asked again, in a new wait)::

      {"c1": {"decision": "approve"},
       "c2": {"decision": "deny", "reason": "over the limit"},
       "c3": {"decision": "edit", "arguments": {"amount": 100}}}

  ``reason`` (deny, optional) is what the model reads as the call's error;
  ``arguments`` (edit) replace the named arguments, the others keep the
  model's values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .errors import ApprovalError

__all__ = [
    "APPROVAL_PREFIX",
    "DENIED",
    "approval_signal",
    "describe_call",
    "read_decisions",
    "taken_key",
    "wait_key",
    "waiting_calls",
]

#: Every tool approval's signal name starts so: ``approval:<key>``.
APPROVAL_PREFIX = "approval:"

#: The error type a denied call's result has (the model reads "ApprovalDenied: reason").
DENIED = "ApprovalDenied"

# The key of an approval wait's deadline: under the reply's step, at ``#0``.
_WAIT_KEY = re.compile(r".+#0\.[0-9]+")

_DECISIONS = ("approve", "deny", "edit")
_FIELDS = {
    "approve": {"decision"},
    "deny": {"decision", "reason"},
    "edit": {"decision", "arguments"},
}


def approval_signal(deadline_key: str) -> str:
    """The signal a tool approval waiting at ``deadline_key`` is answered by."""
    return f"{APPROVAL_PREFIX}{deadline_key}"


def wait_key(signal: str) -> str | None:
    """The deadline key of the approval wait ``signal`` answers, or None
    when ``signal`` is not a tool approval's: an approval wait is keyed
    ``<step>#0.<n>`` (``#0`` is never a call's number), so a program's own
    signal named ``approval:budget`` is not one."""
    if not signal.startswith(APPROVAL_PREFIX):
        return None
    key = signal[len(APPROVAL_PREFIX) :]
    return key if _WAIT_KEY.fullmatch(key) else None


def taken_key(deadline_key: str) -> str:
    """The key of the signal an approval wait at ``deadline_key`` took, once
    it took one: the next key after the deadline's (``ctx.wait_for``)."""
    head, dot, last = deadline_key.rpartition(".")
    if not last.isdigit():
        return f"{deadline_key}+"  # no wait is keyed so: never recorded
    return f"{head}{dot}{int(last) + 1}"


def describe_call(tool: str, arguments: Any) -> str:
    """A call as a person reads it: ``refund(order="A-17", amount=250.0)``."""
    if not isinstance(arguments, dict):
        return f"{tool}()"
    shown = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items()
    )
    return f"{tool}({shown})"


def waiting_calls(note: Any) -> list[str] | None:
    """The ids of the calls an approval wait's recorded note asks about, or
    None when ``note`` (the ``stalwart.ask`` record's value) is not one."""
    if not isinstance(note, dict):
        return None
    about = note.get("about")
    calls = about.get("calls") if isinstance(about, dict) else None
    if not isinstance(calls, list):
        return None
    ids = [c.get("id") for c in calls if isinstance(c, dict)]
    return [i for i in ids if isinstance(i, str)]


def read_decisions(
    payload: Any, calls: Sequence[str] | None, where: str
) -> dict[str, dict[str, Any]]:
    """The decisions ``payload`` makes, by call id, in one shape:
    ``{"decision": "approve"}``, ``{"decision": "deny", "reason": str}`` or
    ``{"decision": "edit", "arguments": {...}}``.

    ``calls`` are the ids the wait asks about (None: not known here, ids
    not checked). A payload that does not fit raises :class:`ApprovalError`
    naming the field, prefixed with ``where`` (the run and the signal).
    """
    if payload is True or payload is False:
        if calls is None:
            return {}
        if payload:
            return {c: {"decision": "approve"} for c in calls}
        return {c: {"decision": "deny", "reason": "denied"} for c in calls}
    if not isinstance(payload, dict) or not payload:
        raise _bad(
            where,
            "",
            "a decision is true (approve every call), false (deny every call) or an object "
            'from call ids to decisions ({"c1": {"decision": "approve"}}), not '
            f"{_shown(payload)}",
        )
    out: dict[str, dict[str, Any]] = {}
    for call_id, decision in payload.items():
        field = f"[{call_id!r}]"
        if calls is not None and call_id not in calls:
            waiting = ", ".join(repr(c) for c in calls) or "(none)"
            problem = f"no call with this id waits for a decision; waiting: {waiting}"
            raise _bad(where, field, problem)
        out[call_id] = _one(decision, where, field)
    return out


def _one(decision: Any, where: str, field: str) -> dict[str, Any]:
    if not isinstance(decision, dict):
        raise _bad(
            where,
            field,
            'a decision is an object such as {"decision": "approve"}, not ' + _shown(decision),
        )
    kind = decision.get("decision")
    if kind not in _DECISIONS:
        raise _bad(
            where,
            f"{field}['decision']",
            f"is one of approve, deny, edit, not {_shown(kind)}",
        )
    extra = sorted(set(decision) - _FIELDS[kind], key=str)
    if extra:
        allowed = ", ".join(sorted(_FIELDS[kind]))
        raise _bad(
            where,
            f"{field}[{extra[0]!r}]",
            f"is not a field of a decision to {kind} (its fields: {allowed})",
        )
    if kind == "approve":
        return {"decision": "approve"}
    if kind == "deny":
        reason = decision.get("reason", "denied")
        if not isinstance(reason, str) or not reason.strip():
            raise _bad(where, f"{field}['reason']", f"is a text, not {_shown(reason)}")
        return {"decision": "deny", "reason": reason}
    arguments = decision.get("arguments")
    if not isinstance(arguments, dict) or not arguments:
        raise _bad(
            where,
            f"{field}['arguments']",
            'are the arguments to change, as an object (e.g. {"amount": 100}), not '
            + _shown(arguments),
        )
    return {"decision": "edit", "arguments": arguments}


def _bad(where: str, field: str, problem: str) -> ApprovalError:
    at = f"{where}{field}" if field else where
    return ApprovalError(f"{at}: {problem}", field)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:200] + "..."
