"""What is new in a step's list arguments: :class:`ArgsLog` keeps, per
execution, the list arguments recent steps were given, so that a step whose
list argument extends an earlier one's (an agent's conversation) records and
hashes only what is new (``core/stepargs.py`` has the record's form). The
hash stays that of the whole arguments' JSON, fed incrementally, so replay
compares as it always did (S5).
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable
from typing import Any

from .. import codec
from ..errors import SerializationError
from ..keys import key_parts
from ..message import Message, ReadOnlyDict, ReadOnlyList, ReadOnlySet
from ..recorded import SCALARS
from ..stepargs import args_digest, ext_node, out_node
from .identity import (
    args_for_record,
    arguments_of,
    check_keywords,
    identity_json,
    record_json,
    scalars_json,
    strip_ids,
)

__all__ = ["ArgsLog"]


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
            return text, args_digest(text), None
        record = args_for_record(args, kwargs)
        positional = record.get("*", ())
        if "$t" in record or not (
            any(isinstance(v, list) for k, v in record.items() if k != "*")
            or any(isinstance(v, list) for v in positional)
        ):
            text = record_json(record, arguments_of(key, self.run_id))
            return text, args_digest(text), None
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
