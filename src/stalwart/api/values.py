"""Records as the plain JSON an HTTP client reads.

The ledger keeps values in the codec's tagged form (``{"$t": "dc", "c":
"app.Ticket", "v": {...}}``) so that a replayed step returns the same
Python type. A client of the API is not Python: it gets the data without
the tags. This is done on the JSON tree alone (:func:`json.loads`, then a
walk): no recorded value is decoded back into a class, so nothing a store
holds can make the API process import or construct anything (S13), and a
row the codec would refuse is still shown as the data it is.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.inputs import inputs_by_name
from ..core.ledger import RunRecord, StepRecord
from ..core.policy import Policy
from ..core.sealed import sealed_state
from ..core.tags import decode_tags
from .models import ErrorInfo, Run, Step

__all__ = ["error_info", "finite", "load", "named_inputs", "plain", "run_json", "step_json"]

_TAG = "$t"
_DEPTH = 200  # deeper trees are cut: a hostile row cannot exhaust the stack


def load(text: str | None) -> Any:
    """The JSON tree of a recorded value; text that is not JSON stays text."""
    if text is None:
        return None
    try:
        return json.loads(text, parse_constant=str)  # NaN stays text: responses are JSON
    except (ValueError, RecursionError):
        state = sealed_state(text)  # encrypted at rest, no key held; or erased
        return text if state is None else f"({state})"


def plain(tree: Any, depth: int = 0) -> Any:
    """``tree`` without the codec's tags: a dataclass, a model, a Message, an
    enum become their fields or value; tuples and sets become lists; a map
    with non-string keys becomes a list of ``[key, value]`` pairs; bytes stay
    base64 text, datetimes, dates and UUIDs their ISO text."""
    if depth > _DEPTH:
        return "(nested too deeply)"
    if isinstance(tree, list):
        return [plain(v, depth + 1) for v in tree]
    if isinstance(tree, dict):
        if _TAG in tree and "v" in tree and isinstance(tree[_TAG], str):
            return plain(tree["v"], depth + 1)
        return {str(k): plain(v, depth + 1) for k, v in tree.items()}
    return tree


def error_info(text: str | None) -> ErrorInfo | None:
    """A recorded error as ``{type, message}`` (its type's last name)."""
    if text is None:
        return None
    tree = load(text)
    if isinstance(tree, dict):
        kind = str(tree.get("type", "Error")).rsplit(".", 1)[-1]
        return ErrorInfo(type=kind, message=str(tree.get("message", "")))
    return ErrorInfo(type="Error", message=str(tree))


def named_inputs(rec: RunRecord, pol: Policy[Any, Any] | None) -> Any:
    """A run's inputs by parameter name when its policy is known here (the
    ledger binds them positionally), else as recorded (``args``, ``kwargs``):
    :func:`~stalwart.core.inputs.inputs_by_name`, as every surface names them."""
    tree = plain(load(rec.inputs))
    named = inputs_by_name(tree, pol)
    return tree if named is None else named


def finite(when: float | None) -> float | None:
    """A recorded time as JSON can carry it: a wake time that never comes
    (``enqueue(delay=float("inf"))`` from Python) has no JSON number, and
    one such row must not break every listing; it is shown as none."""
    return when if when is None or math.isfinite(when) else None


def run_json(
    rec: RunRecord, pol: Policy[Any, Any] | None = None, stranded: str | None = None
) -> Run:
    """What the API says about a run: where it stands, and its outcome once
    finished; ``stranded``, why no live worker can continue it."""
    return Run(
        id=rec.id,
        policy=rec.policy,
        status=rec.status,
        inputs=named_inputs(rec, pol),
        result=plain(load(rec.result)) if rec.status == "succeeded" else None,
        error=error_info(rec.error),
        waiting_for=rec.waiting_for,
        wake_at=finite(rec.wake_at),
        cancel_requested=bool(rec.cancel_requested),
        queue=rec.queue,
        priority=rec.priority,
        parent_id=rec.parent_id,
        tags=decode_tags(rec.tags),
        created_at=rec.created_at,
        updated_at=rec.updated_at,
        code_version=rec.code_version,
        stranded=stranded,
    )


def step_json(step: StepRecord) -> Step:
    """One recorded step: what was called, with what, and what came of it."""
    return Step(
        key=step.key,
        name=step.name,
        kind=step.kind,
        arguments=plain(load(step.args)),
        output=plain(load(step.output)) if step.error is None else None,
        error=error_info(step.error),
        attempts=step.attempts,
        started_at=step.started_at,
        finished_at=step.finished_at,
    )
