"""Where a fork leaves a run: a step key, or a rule read against the run's
recorded steps ("2nd model step", "first call of tool lookup")."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..core.errors import ForkError
from ..core.keys import key_parts, sort_keys
from ..core.ledger import StepRecord

__all__ = ["find_step", "is_model_step"]

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_RULE = re.compile(
    r"^(?P<nth>first|second|third|fourth|fifth|last|(?P<n>\d+)(?:st|nd|rd|th)?)\s+"
    r"(?:(?P<model>model step)|call of (?:tool\s+)?(?P<tool>\S+))$"
)


def is_model_step(step: StepRecord) -> bool:
    """Whether ``step`` is a model's call: a policy step whose recorded
    arguments hold ``observations`` (what every model takes)."""
    if step.kind != "call" or not step.args:
        return False
    try:
        args = json.loads(step.args)
    except ValueError:
        return False
    return isinstance(args, dict) and "observations" in args


def _is_tool_call(step: StepRecord, tool: str) -> bool:
    """A call the engine ran for a model's reply: the last part of its key
    is ``#n``."""
    return step.kind == "call" and step.name == tool and "#" in step.key.rsplit(".", 1)[-1]


def find_step(run_id: str, steps: Sequence[StepRecord], at: str) -> str:
    """The key ``at`` names in run ``run_id``: a key it recorded, or a rule
    ``<nth> model step`` / ``<nth> call of tool <name>`` (``nth``: ``first``
    ... ``fifth``, ``last``, ``2``, ``2nd``). A ForkError names the run and
    what it lacks."""
    keys = {s.key for s in steps if s.key != "0"}
    if at in keys:
        return at
    rule = _RULE.match(at.strip().lower()) if at.strip() else None
    if rule is None:
        raise ForkError(
            f"run {run_id!r}: --at {at!r} is neither a step key it recorded nor a rule "
            "such as '2nd model step' or 'first call of tool lookup'"
        )
    nth = int(rule["n"]) if rule["n"] else _ORDINALS[rule["nth"]]
    tool = None if rule["model"] else at.strip().split()[-1]
    ordered = sorted((s for s in steps if s.key in keys), key=lambda s: key_parts(s.key))
    found = [s.key for s in ordered if (_is_tool_call(s, tool) if tool else is_model_step(s))]
    if nth == 0 or nth > len(found) or not found:
        what = "model steps" if tool is None else f"calls of tool {tool!r}"
        shown = ", ".join(sort_keys(found)) or "none"
        raise ForkError(f"run {run_id!r} has no {at!r}: its {what} are at {shown}")
    return found[nth - 1 if nth > 0 else nth]
