"""A run's recorded inputs by parameter name, for whoever shows them.

The ledger records a run's arguments bound to its policy's parameters
positionally (``{"args": ["A-42", 120], "kwargs": {}}`` whether the caller
wrote ``refund("A-42", 120)`` or ``refund(order="A-42", amount=120)``), so
that one call is recorded one way. A reader that has the policy can give the
names back (``order="A-42", amount=120``); one that has not (the inspector,
``stalwart runs show``, which import no application code) shows the
positions. One function, here, for every surface.
"""

from __future__ import annotations

import inspect
from typing import Any

from .policy import Policy

__all__ = ["inputs_by_name"]


def inputs_by_name(inputs: Any, policy: Policy[Any, Any] | None) -> dict[str, Any] | None:
    """``inputs`` (a recorded ``{"args": [...], "kwargs": {...}}`` tree, as
    parsed from the ledger) as ``{parameter: value}`` in the policy's
    parameter order, keywords after; values are returned as given.

    None when the policy is not known here, the tree is not a record of
    arguments, or there are more positions than named parameters (a policy
    taking ``*args``): the caller then shows the inputs as recorded.
    """
    if policy is None or not isinstance(inputs, dict):
        return None
    args, kwargs = inputs.get("args"), inputs.get("kwargs")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in policy.signature.params if p.kind in positional]
    if len(args) > len(names) or any(not isinstance(k, str) for k in kwargs):
        return None
    named = dict(zip(names, args, strict=False))
    if any(k in named for k in kwargs):
        return None  # a keyword for a filled position: not a call this policy binds
    return {**named, **kwargs}
