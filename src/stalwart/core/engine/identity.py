"""A step's identity as recorded and compared on replay (S1, S5): its
arguments (offered options by name), their JSON and hash; and, per execution,
what is new in its list arguments.

:class:`ArgsLog` keeps the list arguments recent steps were given, so that a
step whose list argument extends an earlier one's (an agent's conversation)
records and hashes only what is new (``core/stepargs.py`` has the record's
form). The hash stays that of the whole arguments' JSON, fed incrementally,
so replay compares as it always did (S5).
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable
from typing import Any

from .. import codec
from ..errors import DuplicatePolicy, SerializationError
from ..keys import key_parts
from ..message import Message, ReadOnlyDict, ReadOnlyList, ReadOnlySet
from ..policy import Policy, ToolSpec, as_policy, same_policy, where_defined
from ..recorded import SCALARS
from ..stepargs import ext_node, out_node, step_hash

# The keyword a caller offers policies with (``ctx.call(llm, options=[...])``),
# public API, which makes a step an options dispatch (.dispatch). Inside the
# core "options" means only this; a policy's own settings are
# ``Policy.settings()`` and ``Policy.with_settings``.
OPTIONS = "options"

__all__ = [
    "OPTIONS",
    "ArgsLog",
    "args_for_record",
    "arguments_of",
    "check_keywords",
    "identity_json",
    "is_option",
    "option_policies",
    "record_json",
    "scalars_json",
    "step_hash",
    "strip_ids",
]


def arguments_of(key: str, run_id: str | None = None) -> str:
    """How an error names a step's arguments: with the run when it is known
    (a worker executes many runs, and step keys repeat in each); a path into
    the value (``['*'][0]``) may follow."""
    if run_id is None:
        return f"arguments of step {key}"
    return f"arguments of run {run_id!r}, step {key}"


def check_keywords(kwargs: dict[str, Any], key: str, run_id: str | None = None) -> None:
    """Refuse a keyword argument named ``*``: the ledger records positional
    arguments under that name, so two different calls would share one
    identity (S5).

    The engine applies it to every call a context makes
    (:meth:`~.engine.Engine.call_from`), in memory too: a program that runs
    in memory must not fail once it is given a store; and again where a
    step's identity is made, for units of work that do not enter through a
    context's call. The error names step ``key`` and, when given, run
    ``run_id``.
    """
    if "*" in kwargs:
        raise SerializationError(
            f"{arguments_of(key, run_id)}: a keyword argument may not be named '*' "
            "(the ledger records positional arguments under that name)"
        )


def args_for_record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments as recorded: offered options by name, since policies are code."""

    def tidy(v: Any) -> Any:
        if isinstance(v, Policy):
            return f"<policy {v.name}>"
        if isinstance(v, list | tuple) and v and all(is_option(x) for x in v):
            return [f"<policy {as_policy(x).name}>" for x in v]
        return v

    out: dict[str, Any] = {}
    if args:
        out["*"] = [tidy(a) for a in args]
    for k, v in kwargs.items():
        if k == OPTIONS and isinstance(v, list | tuple):
            option_policies(v)  # a clear error for anything that is not an option
            out[k] = [f"<policy {as_policy(x).name}>" for x in v]
        else:
            out[k] = tidy(v)
    return out


def option_policies(options: Any) -> list[Policy[Any, Any]]:
    """The policies offered as options; a TypeError naming any that is not one."""
    out: dict[str, Policy[Any, Any]] = {}
    for i, opt in enumerate(options or ()):
        if isinstance(opt, str | ToolSpec):
            # The engine resolves names and specs before a step runs
            # (Dispatch.offered): one here was never offered through it.
            named = opt if isinstance(opt, str) else opt.name
            raise TypeError(
                f"options[{i}] names {named!r} but is not a policy: names and tool specs "
                "are resolved when a step is offered them (ctx.call(model, options=[...])); "
                "called any other way, offer the policy itself"
            )
        if not is_option(opt):
            raise TypeError(
                f"options[{i}] is {opt!r} ({type(opt).__name__}), which is not a policy; "
                "offer policies or async functions"
            )
        pol = as_policy(opt)
        other = out.setdefault(pol.name, pol)
        if other is not pol and not same_policy(other, pol):
            raise DuplicatePolicy(
                f"two different options are named {pol.name!r}: {where_defined(other)} and "
                f"{where_defined(pol)}; a model could not tell them apart"
            )
    return list(out.values())


def identity_json(
    args: tuple[Any, ...], kwargs: dict[str, Any], key: str, run_id: str | None = None
) -> str:
    """The arguments as recorded and compared on replay (S5); errors name
    step ``key`` and, when given, run ``run_id``.

    Message ids are left out: they are random per execution, so a history
    rebuilt on replay (``Message.user(question)`` inside a policy) would never
    match its record otherwise. What a message says is compared; its id is not.
    """
    check_keywords(kwargs, key, run_id)
    if all(type(v) in SCALARS for v in args) and all(
        type(v) in SCALARS for v in kwargs.values()
    ):  # the common case: plain arguments give the same bytes without the tree walk
        return scalars_json(args, kwargs, key, run_id)
    return record_json(args_for_record(args, kwargs), arguments_of(key, run_id))


def scalars_json(
    args: tuple[Any, ...], kwargs: dict[str, Any], key: str, run_id: str | None = None
) -> str:
    """Plain arguments' JSON. The error's words
    (:func:`arguments_of`) are made only when there
    is an error, so good values pay nothing for them."""
    out: dict[str, Any] = {"*": list(args)} if args else {}
    out.update(kwargs)
    try:
        text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise SerializationError(f"{arguments_of(key, run_id)}: {exc}") from exc
    if "\\" in text:  # an escape, maybe of a lone surrogate: the codec decides
        codec.check_json(text, out, arguments_of(key, run_id))
    return text


def record_json(record: dict[str, Any], where: str) -> str:
    """Arguments as :func:`args_for_record` gives them, as JSON; ``where``
    names them in errors (:func:`arguments_of`)."""
    tree = strip_ids(codec.encode(record, where))
    try:
        text = json.dumps(tree, separators=(",", ":"), allow_nan=False)
        return codec.check_json(text, record, where)
    except ValueError as exc:
        raise SerializationError(f"{where}: {exc}") from exc


def strip_ids(tree: Any) -> Any:
    if isinstance(tree, list):
        return [strip_ids(v) for v in tree]
    if isinstance(tree, dict):
        if tree.get("$t") == "msg":
            inner = {k: strip_ids(v) for k, v in tree["v"].items() if k != "id"}
            return {"$t": "msg", "v": inner}
        return {k: strip_ids(v) for k, v in tree.items()}
    return tree


def is_option(x: Any) -> bool:
    return isinstance(x, Policy) or (callable(x) and not isinstance(x, type | Message))


# -- what is new in a step's list arguments ------------------------------------------

# Items an identical object always encodes the same: scalars, and messages,
# which are immutable (``Message`` is frozen: a changed message is a new
# one). A container can change in place, so one is encoded again each time.
_TRUSTED: frozenset[type] = frozenset({str, bytes, int, float, bool, type(None), Message})
# Payload types a message holds as a copy of the value it was given.
_COPIED: frozenset[type] = frozenset({ReadOnlyDict, ReadOnlyList, ReadOnlySet, tuple})
# A list whose JSON is this small (bytes) is written out whole, never kept
# for later steps to refer to: a reference would save nothing.
_SMALL = 64
# How many recent lists are kept per argument name (an agent's conversation,
# a summarizer's, a sub-agent's), newest first.
_KEEP = 4


def _item_json(value: Any, where: str) -> str:
    tree = strip_ids(codec.encode(value, where))
    return codec.check_json(json.dumps(tree, separators=(",", ":"), allow_nan=False), value, where)


class _Seen:
    """A list argument as one step passed it, for the next steps to extend.

    ``prefix``: the (256-bit) hash of the arguments' JSON before the list,
    ``h8``/``h32`` the hash states after its items, so a step whose list
    starts with these items, after the same prefix, hashes only its new ones.
    """

    __slots__ = (
        "committed",
        "h8",
        "h32",
        "items",
        "key",
        "order",
        "prefix",
        "size",
        "texts",
        "untrusted",
    )

    def __init__(
        self,
        key: str,
        order: tuple[Any, ...],
        items: list[Any],
        texts: list[str],
        untrusted: list[int],
        size: int,
        prefix: bytes,
        h8: Any,
        h32: Any,
    ) -> None:
        self.key = key
        self.order = order
        self.items = items
        self.texts = texts
        self.untrusted = untrusted  # indices of items of types not in _TRUSTED
        self.size = size  # bytes of the items' JSON
        self.prefix = prefix
        self.h8 = h8
        self.h32 = h32
        self.committed = False  # in the ledger: a later record may refer to it


class ArgsLog:
    """Per execution: the list arguments recent steps were given, so a step
    records and hashes only what is new in its own (``core/stepargs.py``).

    A reference is made only to a step already in the ledger
    (:meth:`commit`: recorded by this execution, or replayed from the
    ledger) and made earlier in S1 order; what is recorded never changes
    the identity hash, which is always that of the whole arguments.
    """

    __slots__ = ("_by_text", "_outputs", "_pending", "_seen", "run_id")

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id  # named in errors, with the step
        # By argument: a keyword's name, or a positional argument's index.
        self._seen: dict[str | int, list[_Seen]] = {}
        self._pending: dict[str, list[_Seen]] = {}
        # Large values steps returned, by identity: (value, step key, its
        # recorded JSON, the key's S1 order). A tool's result message in a
        # later model call's arguments refers to the step's output instead
        # of copying it.
        self._outputs: dict[int, tuple[Any, str, str, tuple[Any, ...]]] = {}
        # The same, by recorded JSON: a result message holds a read-only
        # copy of a dict or list value (core/message.py), not the object the
        # step returned, so it is found by its JSON instead.
        self._by_text: dict[str, tuple[Any, str, str, tuple[Any, ...]]] = {}

    def identify(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], key: str
    ) -> tuple[str, str, Callable[[], str] | None]:
        """The step's arguments as recorded, their identity hash, and (when
        the record refers to earlier steps) how to build the whole JSON."""
        check_keywords(kwargs, key, self.run_id)
        if all(type(v) in SCALARS for v in args) and all(
            type(v) in SCALARS for v in kwargs.values()
        ):
            text = scalars_json(args, kwargs, key, self.run_id)
            return text, step_hash(text), None
        record = args_for_record(args, kwargs)
        positional = record.get("*", ())
        if "$t" in record or not (
            any(isinstance(v, list) for k, v in record.items() if k != "*")
            or any(isinstance(v, list) for v in positional)
        ):
            text = record_json(record, arguments_of(key, self.run_id))
            return text, step_hash(text), None
        try:
            return _Build(self, key).run(record)
        except (SerializationError, ValueError):
            identity_json(args, kwargs, key, self.run_id)  # the error the whole arguments give
            raise

    def commit(self, key: str) -> None:
        """Step ``key`` is in the ledger: later steps may refer to its lists."""
        if self._pending:
            for seen in self._pending.pop(key, ()):
                seen.committed = True

    def output(self, key: str, value: Any, text: str | None) -> None:
        """Step ``key`` (in the ledger) returned ``value``, recorded as ``text``."""
        if text is not None and len(text) > _SMALL:
            hit = self._outputs[id(value)] = (value, key, text, key_parts(key))
            if type(value) not in SCALARS:
                self._by_text.setdefault(text, hit)

    def shortened(self, item: Any, text: str, order: tuple[Any, ...]) -> str | None:
        """``item``'s JSON ``text`` with its result value recorded as a
        reference to the step whose output it is, if it is a tool's result
        message holding exactly that output, of a step made earlier in S1
        order than the step at ``order`` (a concurrent branch keyed later may
        have handed the value over: a reference to it would be refused by
        every reader, and missing from a fork's or an export's prefix)."""
        if type(item) is not Message or item.action_result is None or not self._outputs:
            return None
        result = item.action_result
        hit = self._outputs.get(id(result.value))
        if hit is None or hit[0] is not result.value:
            # A dict or list value is the message's read-only copy of what
            # the step returned: the same JSON is the same value.
            hit = None
            if type(result.value) in _COPIED:
                hit = self._by_text.get(codec.dumps(result.value, "a result value"))
        if hit is None or not hit[3] < order:
            return None
        _, key, out, _ = hit
        head = (
            f'"result":{{"call_id":{json.dumps(result.call_id)},'
            f'"name":{json.dumps(result.name)},"value":'
        )
        at = text.find(head)
        if at < 0:
            return None
        start = at + len(head)
        end = start + len(out)
        if not text.startswith(out, start) or text[end : end + 1] not in (",", "}"):
            return None  # another value (a message's id left out, say): kept as it is
        return f"{text[:start]}{out_node(key)}{text[end:]}"

    def _keep(self, field: str | int, seen: _Seen) -> None:
        kept = self._seen.setdefault(field, [])
        kept.insert(0, seen)
        del kept[_KEEP:]
        self._pending.setdefault(seen.key, []).append(seen)


class _Build:
    """One step's arguments: the recorded text, the whole text's pieces and
    its hash, built top-level argument by argument."""

    __slots__ = ("compact", "h8", "h32", "key", "log", "order", "stored", "where", "whole")

    def __init__(self, log: ArgsLog, key: str) -> None:
        self.log = log
        self.key = key
        self.where = arguments_of(key, log.run_id)
        self.order = key_parts(key)
        self.h8 = hashlib.blake2b(digest_size=8)
        self.h32 = hashlib.blake2b()
        self.stored: list[str] = []
        self.whole: list[str | list[str]] = []
        self.compact = False

    def run(self, record: dict[str, Any]) -> tuple[str, str, Callable[[], str] | None]:
        self.text("{")
        for i, (name, value) in enumerate(record.items()):
            self.text(("," if i else "") + json.dumps(name) + ":")
            if name == "*":
                self.text("[")
                for j, arg in enumerate(value):
                    if j:
                        self.text(",")
                    self.value(j, arg)  # an int: never a keyword's name
                self.text("]")
            else:
                self.value(name, value)
        self.text("}")
        whole = self.whole

        def full() -> str:
            return "".join(p if isinstance(p, str) else f"[{','.join(p)}]" for p in whole)

        return "".join(self.stored), self.h8.hexdigest(), full if self.compact else None

    def feed(self, text: str) -> None:
        data = text.encode()
        self.h8.update(data)
        self.h32.update(data)

    def text(self, text: str) -> None:
        self.feed(text)
        self.stored.append(text)
        self.whole.append(text)

    def value(self, field: str | int, value: Any) -> None:
        if isinstance(value, list):
            self.listed(field, value)
        else:
            self.text(_item_json(value, self.where))

    def listed(self, field: str | int, items: list[Any]) -> None:
        """A list argument: compared with the lists recent steps passed under
        the same name (identity first, then JSON), its new items encoded,
        hashed from the state a matching list left, recorded as a reference
        to a step in the ledger when that saves bytes."""
        known: dict[int, str] = {}
        best: _Seen | None = None
        ref: _Seen | None = None
        m = ref_m = 0
        for seen in self.log._seen.get(field, ()):
            k = self.common(items, seen, known)
            if k > m:
                best, m = seen, k
            if seen.committed and k > ref_m and seen.order < self.order:
                ref, ref_m = seen, k
            if seen.committed and k == len(seen.items):
                break  # the newest recorded list it extends: none older does better
        texts = best.texts[:m] if best is not None else []
        short: dict[int, str] = {}  # new items recorded shorter than their JSON
        for i in range(m, len(items)):
            text = known.get(i)
            if text is None:
                text = _item_json(items[i], self.where)
            texts.append(text)
            alt = self.log.shortened(items[i], text, self.order)
            if alt is not None:
                short[i] = alt
        self.feed("[")
        prefix = self.h32.copy().digest()
        whole_prefix = best is not None and m == len(best.items)
        if best is not None and whole_prefix and best.prefix == prefix:
            self.h8, self.h32 = best.h8.copy(), best.h32.copy()
            if m < len(texts):
                self.feed(("," if m else "") + ",".join(texts[m:]))
        elif texts:
            self.feed(",".join(texts))
        size = (best.size if best is not None and whole_prefix else sum(map(len, texts[:m]))) + sum(
            map(len, texts[m:])
        )
        if ref is not None:
            saved = ref.size if ref_m == len(ref.items) else sum(map(len, texts[:ref_m]))
            if saved > _SMALL:
                tail = [short.get(i, texts[i]) for i in range(ref_m, len(texts))]
                self.stored.append(ext_node(ref.key, ref_m, tail))
                self.compact = True
            else:
                ref = None
        if ref is None:
            self.stored.append(f"[{','.join(short.get(i, t) for i, t in enumerate(texts))}]")
            self.compact = self.compact or bool(short)
        self.whole.append(texts)
        if size > _SMALL:
            untrusted = [j for j in best.untrusted if j < m] if best is not None else []
            untrusted += [i for i in range(m, len(items)) if type(items[i]) not in _TRUSTED]
            seen = _Seen(
                self.key,
                self.order,
                list(items),
                texts,
                untrusted,
                size,
                prefix,
                self.h8.copy(),
                self.h32.copy(),
            )
            self.log._keep(field, seen)
        self.feed("]")

    def common(self, items: list[Any], seen: _Seen, known: dict[int, str]) -> int:
        """How many leading items of ``items`` are those ``seen`` holds: the
        same object of a trusted type, else the same JSON (encoded once)."""
        old, texts = seen.items, seen.texts
        n = min(len(items), len(old))
        if all(map(operator.is_, items, old)):
            same = n  # the common case, at C speed: every item the same object
        else:
            same = next(i for i in range(n) if items[i] is not old[i])
        for j in seen.untrusted:  # the same object, but it may have changed
            if j >= same:
                break
            if self.encoded(items, j, known) != texts[j]:
                return j
        i = same
        while i < n:
            item = items[i]
            trusted = item is old[i] and type(item) in _TRUSTED
            if not trusted and self.encoded(items, i, known) != texts[i]:
                return i
            i += 1
        return n

    def encoded(self, items: list[Any], i: int, known: dict[int, str]) -> str:
        text = known.get(i)
        if text is None:
            text = known[i] = _item_json(items[i], self.where)
        return text
