r"""What a step records of its arguments, and how a reader gets them whole.

A model call's arguments hold the whole conversation so far, so an agent of
N turns would record O(N²) bytes if every step kept a full copy. Instead a
list argument (a keyword argument, or a positional one) whose first ``n``
items are those of the same argument of an *earlier* step of the run is
recorded as a reference to that step plus only the new items::

    {"$t": "ext", "k": "<the earlier step's key>", "n": n, "v": [<new items>]}

in place of the list (the same argument: a keyword argument of the same
name, or the positional argument at the same index, never one for the other,
so a keyword named ``"*5"`` is not the sixth positional argument); and a
tool's result message among the new items,
whose value is exactly what an earlier step (the tool's) returned, records
that value as ``{"$t": "out", "k": "<the step's key>"}``, since the step's
output already holds it. Everything else of the record is the JSON it always
was. ``"$t"`` is the codec's tag key: a user's dict that has one is recorded
as ``{"$t": "dict", ...}``, so this node can never be a user's value. A
reference always points backwards, to a step the ledger already held when
this one was written, made earlier in S1 order (:mod:`.keys`): a chain of
references ends, and a prefix of a run's steps (what a fork or an export
copies) holds every step its records refer to.

The identity hash (``args_hash``) is still the hash of the *whole* arguments'
JSON, so replay compares calls exactly as before (S5). The compact form stays
behind the store boundary, typed apart: a :class:`StoredStep` is a step as a
store keeps it, which only the engine's writer and replay and the moves of
whole runs (export, import, fork) handle; every reader gets
:class:`~.ledger.StepRecord`\ s whose ``args`` are whole, rebuilt once at
load by :func:`whole_steps` (iteratively, each list rebuilt once per table,
checked against ``args_hash``). A reference that does not resolve is a
:class:`CorruptedRecord` naming the run, the step and the argument, raised by
the load, never a crash or an unbounded walk.
"""

from __future__ import annotations

import hashlib
import json
from collections import ChainMap
from collections.abc import Mapping
from typing import Any

from .errors import CorruptedRecord
from .keys import key_parts
from .ledger import StepRecord, StoredStep

__all__ = [
    "ArgsTable",
    "check_references",
    "ext_node",
    "full_args",
    "is_compact",
    "out_node",
    "step_hash",
    "whole_steps",
]

EXT = "ext"
OUT = "out"
# How the nodes start in the text the engine writes: a cheap test that a
# record may hold one (a user's string cannot contain it unescaped).
_MARK = '"$t":"ext"'
_OUT_MARK = '"$t":"out"'


# A record whose arguments a table reads: stored, or already whole (a reader's).
_Record = StoredStep | StepRecord


def step_hash(text: str) -> str:
    """The identity hash of a step's arguments (their whole JSON text)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def ext_node(key: str, n: int, tail: list[str]) -> str:
    """The JSON text of a list recorded as step ``key``'s first ``n`` items,
    then ``tail`` (each item's JSON text)."""
    return f'{{"$t":"ext","k":{json.dumps(key)},"n":{n},"v":[{",".join(tail)}]}}'


def out_node(key: str) -> str:
    """The JSON text of a value recorded as step ``key``'s output."""
    return f'{{"$t":"out","k":{json.dumps(key)}}}'


def is_compact(args: str | None) -> bool:
    """Whether a record's arguments may refer to an earlier step's."""
    return args is not None and (_MARK in args or _OUT_MARK in args)


# An argument of a step's record: a keyword argument's name, or the index of
# a positional one (an int, so that a keyword named "*5" is never taken for
# the sixth positional argument, nor the other way round).
Field = str | int


def _shown(field: Field) -> str:
    return f"*[{field}]" if isinstance(field, int) else field


class ArgsTable:
    """The recorded arguments of one run's steps, rebuilt whole on demand.

    Each list an ``"$t": "ext"`` node stands for is rebuilt once (following
    the chain of references iteratively, each hop to a step earlier in S1
    order, so the walk ends) and kept for the next step that extends it.
    """

    def __init__(self, run_id: str, steps: Mapping[str, _Record]) -> None:
        self.run_id = run_id
        self.steps = steps
        self._trees: dict[str, dict[str, Any]] = {}
        # Each rebuilt list as (items, length): the step's list is
        # ``items[:length]``. A step that extends a list by new items only
        # appends them to the same ``items`` when that list ends where its
        # own prefix does, so a chain of N steps is held in O(N) slots, not
        # in N copies of a growing list (O(N²): gigabytes at 10,000 turns).
        self._lists: dict[tuple[str, Field], tuple[list[Any], int]] = {}
        self._outputs: dict[str, Any] = {}

    def _bad(self, key: str, field: Field | None, what: str) -> CorruptedRecord:
        where = f"run {self.run_id[:80]!r}, step {key[:80]}"
        if field is not None:
            where += f", argument {_shown(field)[:80]!r}"
        return CorruptedRecord(f"{where}: {what}")

    def full(self, key: str) -> str | None:
        """Step ``key``'s arguments as their whole JSON text (what the engine
        hashed); a CorruptedRecord if a reference does not resolve."""
        step = self.steps[key]
        text = step.args
        if not is_compact(text):
            return text
        tree = dict(self._tree(key, None))
        for name, node in tree.items():
            if name == "*" and isinstance(node, list):
                positional = list(node)
                for i, arg in enumerate(positional):
                    if _is_ext(arg):
                        arg = self._items(key, i)
                    if isinstance(arg, list):
                        positional[i] = self._with_outputs(key, i, arg)
                tree["*"] = positional
                continue
            if _is_ext(node):
                node = self._items(key, name)
            if isinstance(node, list):
                tree[name] = self._with_outputs(key, name, node)
        try:
            whole = json.dumps(tree, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:
            raise self._bad(key, None, f"the recorded arguments are not JSON ({exc})") from None
        if step.args_hash and step_hash(whole) != step.args_hash:
            raise self._bad(
                key,
                None,
                "the arguments rebuilt from the steps it refers to do not match "
                "the recorded hash (a reference points at the wrong step or items)",
            )
        return whole

    def check(self) -> None:
        """Check every reference's shape and target without rebuilding (what
        an import checks before it writes anything)."""
        for key, step in self.steps.items():
            if is_compact(step.args):
                tree = self._tree(key, None)
                for field, node in _ext_fields(tree):
                    self._reference(key, field, node)
                for field, items in _list_fields(tree):
                    for item in items:
                        ref = _out_ref(item)
                        if ref is not None:
                            self._output_ref(key, field, ref)

    # -- rebuilding ----------------------------------------------------------------
    def _tree(self, key: str, referrer: tuple[str, Field] | None) -> dict[str, Any]:
        tree = self._trees.get(key)
        if tree is not None:
            return tree
        step = self.steps.get(key)
        text = None if step is None else step.args
        if text is None:
            if referrer is None:
                raise self._bad(key, None, "it records no arguments")
            raise self._bad(*referrer, f"it extends step {key[:80]!r}, which records no arguments")
        try:
            tree = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self._bad(key, None, f"the recorded arguments are not JSON ({exc})") from None
        if not isinstance(tree, dict):
            raise self._bad(key, None, "the recorded arguments are not a JSON object")
        self._trees[key] = tree
        return tree

    def _node(self, key: str, field: Field, referrer: tuple[str, Field] | None) -> Any:
        tree = self._tree(key, referrer)
        if isinstance(field, int):
            positional = tree.get("*")
            has = isinstance(positional, list) and field < len(positional)
            node = positional[field] if has else None  # type: ignore[index]
        else:
            node = tree.get(field)
        if isinstance(node, list) or _is_ext(node):
            return node
        if referrer is None:
            raise self._bad(key, field, "the recorded argument is not a list")
        raise self._bad(
            *referrer, f"it extends step {key[:80]!r}, which has no list argument {_shown(field)!r}"
        )

    def _reference(
        self, key: str, field: Field, node: dict[str, Any]
    ) -> tuple[str, int, list[Any]]:
        ref, n, tail = node.get("k"), node.get("n"), node.get("v")
        if not isinstance(ref, str) or ref not in self.steps:
            raise self._bad(key, field, f"it extends step {str(ref)[:80]!r}, which the run lacks")
        if not key_parts(ref) < key_parts(key):
            raise self._bad(
                key, field, f"it extends step {ref[:80]!r}, which does not come before it"
            )
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise self._bad(key, field, f"the count of items it extends is {str(n)[:40]!r}")
        if not isinstance(tail, list):
            raise self._bad(key, field, "the new items are not a list")
        return ref, n, tail

    def _output_ref(self, key: str, field: Field, ref: Any) -> str:
        if not isinstance(ref, str) or ref not in self.steps:
            raise self._bad(
                key, field, f"it holds the output of step {str(ref)[:80]!r}, which the run lacks"
            )
        if not key_parts(ref) < key_parts(key):
            raise self._bad(
                key,
                field,
                f"it holds the output of step {ref[:80]!r}, which does not come before it",
            )
        return ref

    def _with_outputs(self, key: str, field: Field, items: list[Any]) -> list[Any]:
        """``items`` with each result value recorded as a step's output put back."""
        out: list[Any] | None = None
        for i, item in enumerate(items):
            ref = _out_ref(item)
            if ref is None:
                continue
            ref = self._output_ref(key, field, ref)
            if ref not in self._outputs:
                text = self.steps[ref].output
                if text is None:
                    raise self._bad(
                        key, field, f"it holds the output of step {ref[:80]!r}, which has none"
                    )
                try:
                    self._outputs[ref] = json.loads(text)
                except (ValueError, RecursionError):
                    raise self._bad(
                        key, field, f"the output of step {ref[:80]!r} is not JSON"
                    ) from None
            if out is None:
                out = list(items)
            message = item["v"]
            result = {**message["result"], "value": self._outputs[ref]}
            out[i] = {**item, "v": {**message, "result": result}}
        return items if out is None else out

    def _items(self, key: str, field: Field) -> list[Any]:
        """The whole list of argument ``field`` of step ``key``."""
        chain: list[tuple[str, int, list[Any]]] = []
        current: str = key
        referrer: tuple[str, Field] | None = None
        owned = True  # ``items`` is a list of this table's, not a parsed record's
        while True:  # ends: each hop goes to a step earlier in S1 order
            view = self._lists.get((current, field))
            if view is not None:
                items, size = view
                break
            node = self._node(current, field, referrer)
            if isinstance(node, list):
                items, size, owned = node, len(node), False
                break
            ref, n, tail = self._reference(current, field, node)
            chain.append((current, n, tail))
            current, referrer = ref, (current, field)
        for at, n, tail in reversed(chain):
            if n > size:
                raise self._bad(at, field, f"it extends {n} items of an argument that has {size}")
            if owned and n == size == len(items):
                items.extend(tail)  # every view of ``items`` reads only its own prefix
            else:
                items, owned = items[:n] + tail, True
            size = n + len(tail)
            self._lists[(at, field)] = (items, size)
        return items[:size]


def _is_ext(node: Any) -> bool:
    return isinstance(node, dict) and node.get("$t") == EXT


def _out_ref(item: Any) -> Any:
    """The step a message item's result value refers to, if it does."""
    if not (isinstance(item, dict) and item.get("$t") == "msg"):
        return None
    message = item.get("v")
    result = message.get("result") if isinstance(message, dict) else None
    value = result.get("value") if isinstance(result, dict) else None
    if isinstance(value, dict) and value.get("$t") == OUT:
        return value.get("k")
    return None


def _list_fields(tree: dict[str, Any]) -> list[tuple[Field, list[Any]]]:
    """The top-level list arguments recorded inline, and the new items of
    those recorded as references."""
    out: list[tuple[Field, list[Any]]] = []
    for name, node in tree.items():
        args: list[tuple[Field, Any]] = (
            list(enumerate(node)) if name == "*" and isinstance(node, list) else [(name, node)]
        )
        for field, arg in args:
            if isinstance(arg, list):
                out.append((field, arg))
            elif _is_ext(arg) and isinstance(arg.get("v"), list):
                out.append((field, arg["v"]))
    return out


def _ext_fields(tree: dict[str, Any]) -> list[tuple[Field, dict[str, Any]]]:
    """The top-level arguments recorded as references: ``name``, or ``i``
    (an int) for the i-th positional argument."""
    out: list[tuple[Field, dict[str, Any]]] = []
    for name, node in tree.items():
        if name == "*" and isinstance(node, list):
            out += [(i, a) for i, a in enumerate(node) if _is_ext(a)]
        elif _is_ext(node):
            out.append((name, node))
    return out


def whole_steps(
    run_id: str, steps: Mapping[str, StoredStep], refs: Mapping[str, _Record] | None = None
) -> dict[str, StepRecord]:
    """``steps`` (one run's, by key, as a store keeps them) as records with
    whole arguments, every reference resolved now: a record that cannot be
    rebuilt is a CorruptedRecord naming the run and the step, raised here.
    ``refs``: more of the run's steps the references may point to (the
    whole records a reader already holds: a stream reads a run's steps a
    few at a time), looked up after ``steps``."""
    table = ArgsTable(run_id, steps if not refs else ChainMap(steps, refs))  # type: ignore[arg-type]
    whole: dict[str, StepRecord] = {}
    try:
        texts = {k: table.full(k) for k, s in steps.items() if is_compact(s.args)}
    except CorruptedRecord:  # the first unreadable record in S1 order is the one named
        for k in sorted(steps, key=key_parts):
            if is_compact(steps[k].args):
                table.full(k)
        raise
    for key, s in steps.items():
        args = texts.get(key, s.args)
        whole[key] = StepRecord(
            s.key,
            s.name,
            s.args_hash,
            args,
            s.output,
            s.error,
            s.attempts,
            s.started_at,
            s.finished_at,
            s.kind,
        )
    return whole


def full_args(run_id: str, step: StoredStep, steps: Mapping[str, StoredStep]) -> str | None:
    """``step``'s whole arguments, its references resolved among ``steps``
    (and ``step`` itself): what a nondeterminism error shows."""
    if not is_compact(step.args):
        return step.args
    return ArgsTable(run_id, {**steps, step.key: step}).full(step.key)


def check_references(run_id: str, steps: Mapping[str, StoredStep]) -> None:
    """A CorruptedRecord if a compact record of ``steps`` refers to a step
    they lack, or to one that does not come before it."""
    ArgsTable(run_id, steps).check()
