"""A run's identity: the policy name and inputs it is recorded under.

One run id is one run (S13): starting an id again must be the same call,
compared as values (keyword or positional, defaults, key and set order and
message ids aside), under the same policy.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from ..core import codec
from ..core.errors import CorruptedRecord, InputMismatchError
from ..core.ledger import RunRecord
from ..core.policy import Policy

__all__ = [
    "check_same_run",
    "code_version",
    "legacy_ref",
    "read_inputs",
    "run_inputs",
    "same_inputs",
]


def legacy_ref(pol: Policy[Any, Any]) -> str:
    """How version 0.1 named a run's policy (``module:qualname``), still
    recognised in old rows; it depends on how the module was loaded
    (``__main__`` as a script), so runs are recorded by policy name now."""
    fn = pol.fn
    module = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if module and qual and "<locals>" not in qual and inspect.isroutine(fn):
        return f"{module}:{qual}"
    return pol.name


def run_inputs(
    pol: Policy[Any, Any], run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """A run's inputs as recorded: arguments bound to the policy's parameters,
    so that passing one by keyword or by position records the same thing."""
    pol.declare_types()
    sig = _binding(pol)
    if sig is not None:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            pass  # the call itself will say what is wrong
        else:
            args, kwargs = bound.args, bound.kwargs
    return codec.dumps({"args": list(args), "kwargs": kwargs}, f"inputs of run {run_id!r}")


def _binding(pol: Policy[Any, Any]) -> inspect.Signature | None:
    """The parameters a caller passes (the injected context left out)."""
    if "_binding" not in pol.__dict__:
        fn: Any = pol.fn
        try:
            sig: inspect.Signature | None = inspect.signature(
                fn if inspect.isroutine(fn) else type(fn).__call__.__get__(fn)
            )
        except (TypeError, ValueError):
            sig = None
        if sig is not None and pol.takes_ctx:
            sig = sig.replace(parameters=list(sig.parameters.values())[1:])
        pol.__dict__["_binding"] = sig
    result: inspect.Signature | None = pol.__dict__["_binding"]
    return result


def same_inputs(pol: Policy[Any, Any], stored: str, given: str) -> bool:
    """Whether two recorded inputs are the same call, compared as values:
    keyword or positional, key order, set order and message ids aside."""
    if stored == given:
        return True
    try:
        a, b = json.loads(stored), json.loads(given)
    except ValueError:
        return False
    sig = _binding(pol)
    if sig is not None:
        try:
            x = sig.bind(*a["args"], **a["kwargs"])
            y = sig.bind(*b["args"], **b["kwargs"])
        except (TypeError, KeyError):
            pass
        else:
            x.apply_defaults()
            y.apply_defaults()
            a, b = x.arguments, y.arguments
    return _canonical_text(a) == _canonical_text(b)


def _canonical_text(tree: Any) -> str:
    return json.dumps(_canonical(tree), sort_keys=True, separators=(",", ":"))


def _canonical(tree: Any) -> Any:
    """One spelling of a recorded value: sets and maps in a fixed order,
    message ids left out, 2.0 written as 2 (True stays true, not 1)."""
    if isinstance(tree, list):
        return [_canonical(v) for v in tree]
    if isinstance(tree, dict):
        tag, inner = tree.get("$t"), tree.get("v")
        if tag in ("set", "frozenset") and isinstance(inner, list):
            return {"$t": tag, "v": sorted((_canonical(v) for v in inner), key=_canonical_text)}
        if tag == "map" and isinstance(inner, list):
            pairs = [_canonical(p) for p in inner]
            return {"$t": tag, "v": sorted(pairs, key=_canonical_text)}
        if tag == "msg" and isinstance(inner, dict):
            return {"$t": tag, "v": {k: _canonical(v) for k, v in inner.items() if k != "id"}}
        return {k: _canonical(v) for k, v in tree.items()}
    if type(tree) is float and tree.is_integer():
        return int(tree)
    return tree


def read_inputs(run_id: str, inputs: str) -> dict[str, Any]:
    """A run's recorded inputs, or CorruptedRecord naming the run and field."""
    data = codec.loads(inputs, f"inputs of run {run_id!r}")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("args"), list)
        or not isinstance(data.get("kwargs"), dict)
        or not all(isinstance(k, str) for k in data["kwargs"])
    ):
        raise CorruptedRecord(
            f"inputs of run {run_id!r}: not a record of arguments "
            '({"args": [...], "kwargs": {...}})'
        )
    return data


def check_same_run(
    pol: Policy[Any, Any], stored: RunRecord, given: RunRecord, same_policy: bool
) -> None:
    """Starting a run id that exists is idempotent only for the same call."""
    if stored.parent_id is not None:
        raise InputMismatchError(f"run {given.id!r} is a child run of {stored.parent_id!r}")
    if not same_policy:
        raise InputMismatchError(
            f"run {given.id!r} exists as a run of another policy:\n"
            f"  stored: {stored.policy}\n  given:  {given.policy}"
        )
    if not same_inputs(pol, stored.inputs, given.inputs):
        raise InputMismatchError(
            f"run {given.id!r} exists with other inputs:\n  stored: {stored.inputs}\n"
            f"  given:  {given.inputs}"
        )


def code_version(pol: Policy[Any, Any]) -> str:
    cached = pol.__dict__.get("_code_version")
    if cached is None:
        try:
            src = inspect.getsource(pol.fn if inspect.isroutine(pol.fn) else type(pol.fn))
        except (OSError, TypeError):
            src = pol.name
        cached = hashlib.blake2b(src.encode(), digest_size=6).hexdigest()
        pol.__dict__["_code_version"] = cached
    return str(cached)
