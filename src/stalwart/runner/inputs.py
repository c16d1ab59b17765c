"""A run's inputs: the policy name and arguments it is recorded under.

One run id is one run (S13): starting an id again must be the same call,
compared as values (keyword or positional, defaults, key and set order and
message ids aside), under the same policy.
"""

from __future__ import annotations

import inspect
import json
from json.encoder import encode_basestring_ascii as _json_string
from typing import Any

from ..core import codec
from ..core.engine.identity import OPTIONS, is_option
from ..core.errors import CorruptedRecord, InputMismatchError, SerializationError
from ..core.ledger import RunRecord
from ..core.policy import Policy, ToolSpec

__all__ = [
    "check_same_run",
    "read_inputs",
    "run_inputs",
    "same_inputs",
]


def run_inputs(
    pol: Policy[Any, Any], run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """A run's inputs as recorded: arguments bound to the policy's parameters,
    so that passing one by keyword or by position records the same thing.

    Called once a run by ``enqueue`` and ``enqueue_many`` (B11), so the
    common case is kept cheap without changing a byte of what is recorded:
    the binding is planned once per call shape (how many positional
    arguments, which keywords) since ``Signature.bind`` looks only at names,
    never at values; and arguments that are all plain scalars are written as
    JSON directly, the text ``codec.dumps`` would give. Anything else (a
    list, a model, a NaN) goes through ``codec.dumps``, which checks and
    names what cannot be recorded.

    ``options`` (``run(model, observations=..., options=[...])``) stays a
    keyword, whatever the kind of the policy's parameter: given by keyword
    it makes the root an options dispatch, which the run must still be when
    it is read back and executed (by a worker, after a crash). The options
    are recorded by name; a policy offered itself is refused, naming the
    run and the option.
    """
    pol.declare_types()
    if kwargs:
        if OPTIONS in kwargs:
            _check_offered(run_id, kwargs[OPTIONS])
        plan = _plan(pol, len(args), tuple(kwargs))
        if plan is not None:
            slots, names = plan
            given = kwargs
            args = tuple(args[s] if isinstance(s, int) else given[s] for s in slots)
            kwargs = {k: given[k] for k in names}
    text = _plain_text(args, kwargs)
    if text is not None and "\\" not in text:  # an escape may be a lone surrogate
        return text
    return codec.dumps({"args": list(args), "kwargs": kwargs}, f"inputs of run {run_id!r}")


def _check_offered(run_id: str, options: Any) -> None:
    """Refuse policies offered to a run by themselves: its inputs record
    options by name, resolved among the runner's policies when it runs."""
    if not isinstance(options, list | tuple):
        return
    for i, option in enumerate(options):
        if isinstance(option, str | ToolSpec) or not is_option(option):
            continue  # a name or a spec; anything else fails where it is offered
        names = [
            o if isinstance(o, str) else getattr(o, "name", None) or getattr(o, "__name__", "?")
            for o in options
        ]
        raise SerializationError(
            f"inputs of run {run_id!r}: options[{i}] is the policy {names[i]!r}, which a "
            f"run's inputs cannot record; offer options by name (options={names!r}) and "
            "give the runner that executes the run those policies (Runner(policies=[...]))"
        )


def _scalar(value: Any) -> str | None:
    """``value`` as JSON text when it is a plain scalar (exactly ``json.dumps``'s
    text for it), or None for anything that needs the codec."""
    t = value.__class__
    if t is int:
        try:
            return int.__repr__(value)
        except ValueError:  # too many digits to print: the codec says so
            return None
    if t is str:
        return _json_string(value)
    if t is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if t is float and value - value == 0.0:  # finite
        return float.__repr__(value)
    return None


def _plain_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """``{"args": [...], "kwargs": {...}}`` as ``codec.dumps`` writes it, when
    every argument is a plain scalar; None otherwise."""
    parts: list[str] = []
    for value in args:
        text = _scalar(value)
        if text is None:
            return None
        parts.append(text)
    head = '{"args":[' + ",".join(parts) + '],"kwargs":{'
    if not kwargs:
        return head + "}}"
    items: list[str] = []
    for key, value in kwargs.items():
        text = _scalar(value)
        # The codec tags a dict with a key like "$t": any "$" key is left to it.
        if text is None or key.__class__ is not str or key.startswith("$"):
            return None
        items.append(_json_string(key) + ":" + text)
    return head + ",".join(items) + "}}"


class _Slot:
    """A placeholder bound in place of an argument, to learn where it goes."""

    __slots__ = ("source",)

    def __init__(self, source: int | str) -> None:
        self.source = source


_Plan = tuple[tuple["int | str", ...], tuple[str, ...]]
_MAX_PLANS = 256  # call shapes remembered a policy


def _plan(pol: Policy[Any, Any], npos: int, keys: tuple[str, ...]) -> _Plan | None:
    """Where ``Signature.bind`` puts each argument of a call with ``npos``
    positional arguments and keywords ``keys``: the source (index or keyword)
    of each bound positional argument, and the bound keywords in order.
    None when the call does not bind (the call itself will say what is
    wrong) or the policy has no signature; the arguments are kept as given."""
    plans: dict[tuple[int, tuple[str, ...]], _Plan | None] | None = pol.__dict__.get("_plans")
    if plans is None:
        plans = pol.__dict__["_plans"] = {}
    key = (npos, keys)
    if key in plans:
        return plans[key]
    sig = _binding(pol)
    plan: _Plan | None = None
    if sig is not None:
        try:
            bound = sig.bind(*(_Slot(i) for i in range(npos)), **{k: _Slot(k) for k in keys})
        except TypeError:
            pass
        else:
            slots = tuple(s.source for s in bound.args)
            for name, slot in bound.kwargs.items():
                if slot.source != name:  # never: a keyword binds under its own name
                    break
            else:
                plan = (slots, tuple(bound.kwargs))
                if OPTIONS in slots:
                    # Bound positionally, the options would no longer be
                    # offered: they and the parameters after them (keywords
                    # too, as positional arguments come first) stay keywords.
                    i = slots.index(OPTIONS)
                    after = tuple(k for k in slots[i:] if isinstance(k, str))
                    plan = (slots[:i], after + plan[1])
    if len(plans) < _MAX_PLANS:
        plans[key] = plan
    return plan


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
