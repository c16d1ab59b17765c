"""The shared store of a durable flow run, as its journal records it.

After each finished node the journal records the store's *change* since the
previous record (values of the keys that changed, keys removed), each value
encoded on its own so that one that cannot be recorded fails naming its key.
The chain of changes is the snapshot after every finished node: on resume
the store is put back in place from it before the first user code runs live.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import codec
from ..core.context import Journaling
from ..core.errors import CorruptedRecord, SerializationError

__all__ = ["SharedState", "journal_entry"]

# Values compared by identity first: an unchanged scalar is not encoded again.
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


class SharedState:
    """One flow run's store and what the journal last recorded of it."""

    __slots__ = ("flow", "last", "n", "restore", "root", "shared")

    def __init__(self, shared: Any, flow: str, root: str, records: list[dict[str, Any]]) -> None:
        self.shared = shared
        self.flow = flow  # the flow's name, for error messages
        self.root = root  # the key the flow's records hang under
        self.n = 0  # the number of the last change recorded
        self.last: dict[Any, tuple[Any, str]] = {}  # the store as last recorded, per key
        # The changes to apply before going live, when resuming.
        self.restore: list[dict[str, Any]] | None = None
        if records:
            self.restore = sorted(records, key=lambda v: int(v["n"]))
            self.n = int(self.restore[-1]["n"])
        else:
            self.last = self._snapshot(_items(shared), "at the start of the flow")

    def _where(self, key: Any, when: str) -> str:
        return f"flow {self.flow}: shared[{key!r}] {when}"

    def _snapshot(self, items: Any, when: str) -> dict[Any, tuple[Any, str]]:
        return {k: (v, _encoded(v, self._where(k, when))[1]) for k, v in items}

    def change(self, when: str) -> dict[str, Any]:
        """What changed in the store since the last record, as a record's fields."""
        last = self.last
        now: dict[Any, tuple[Any, str]] = {}
        changed: list[list[Any]] = []
        for k, v in _items(self.shared):
            prev = last.get(k)
            if prev is not None and prev[0] is v and type(v) in _SCALARS:
                now[k] = prev
                continue
            where = self._where(k, when)
            tree, text = _encoded(v, where)
            if prev is None or prev[1] != text:
                changed.append([codec.encode(k, f"{where} (the key)"), tree])
            now[k] = (v, text)
        removed = [codec.encode(k) for k in last if k not in now]
        self.last = now
        self.n += 1
        return {"flow": self.root, "n": self.n, "set": changed, "del": removed}

    def go_live(self) -> None:
        """Before the first live call: put the store back as the journal has it."""
        records = self.restore
        if records is None:
            return
        self.restore = None
        state = dict(_items(self.shared))
        for value in records:
            for k, v in value["set"]:
                state[codec.decode(k)] = codec.decode(v)
            for k in value["del"]:
                state.pop(codec.decode(k), None)
        target = self.shared if isinstance(self.shared, dict) else self.shared.__dict__
        target.clear()
        target.update(state)
        self.last = self._snapshot(state.items(), "when resuming")


def journal_entry(engine: Journaling, key: str, value: Any) -> dict[str, Any]:
    """A flow journal record of the shape :meth:`SharedState.change` writes,
    or the run halted with a CorruptedRecord naming the run, the step and
    what is wrong (S14)."""
    problem = None
    if not isinstance(value, dict):
        problem = f"a {type(value).__name__}, not a journal entry"
    elif not isinstance(value.get("flow"), str) or not isinstance(value.get("n"), int):
        problem = "no 'flow' or 'n' field"
    elif not isinstance(value.get("set"), list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in value["set"]
    ):
        problem = "its 'set' field is not a list of [key, value] pairs"
    elif not isinstance(value.get("del"), list):
        problem = "its 'del' field is not a list"
    if problem is not None:
        bad = CorruptedRecord(
            f"step {key} of run {engine.run_id!r}: the flow record holds {problem}"
        )
        raise engine.halt(bad)
    entry: dict[str, Any] = value
    return entry


def _items(shared: Any) -> list[tuple[Any, Any]]:
    if isinstance(shared, dict):
        return list(shared.items())
    attrs = getattr(shared, "__dict__", None)
    if isinstance(attrs, dict):
        return list(attrs.items())
    raise SerializationError(
        "a durable flow needs a dict (or an object with attributes) as its shared store, "
        f"not {type(shared).__module__}.{type(shared).__qualname__}"
    )


def _encoded(value: Any, where: str) -> tuple[Any, str]:
    tree = codec.encode(value, where)
    try:
        return tree, json.dumps(tree, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN or infinity
        raise SerializationError(f"{where}: {exc}") from exc
