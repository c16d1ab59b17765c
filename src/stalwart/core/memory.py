"""Long-term memory: namespaced values a run writes and later runs read.

A namespace is a path of names (``("users", "u-42")``, or one string); in
it, a key holds one JSON value and the text that search reads. Memory
lives in the run's store (tables beside the ledger, :class:`MemoryLedger`),
so it outlives runs and conversations.

Inside a run (``ctx.memory``) every operation is a step of the run,
recorded under its key (S1) like any other unit of work (``run_unit``): a
resumed run replays what it wrote and read without touching the memory
tables (S2), and sees what the live run saw. A write is an upsert of its
namespace and key, so a run that dies after its write and before its record
writes the same row again on resume: one copy. Outside a run
(``Memory(store)``) the same calls go to the store directly.

Names and values are data. A namespace, a key or a query is only ever
compared and stored, never imported or called; each is checked before
anything is written, and a bad one is an error naming the field.

A memory step records scalars only: its namespace as :func:`namespace_text`
and a written value as its JSON text. A list in a step's record may be kept
as a reference to an earlier step's (:mod:`.stepargs`); a memory record
neither holds one (a drop finds the namespace in it as written) nor is the
target of one (masking it never breaks another step's record).

Deleting a namespace (:meth:`Memory.drop`) deletes its rows and masks its
copies in the ledger: the records of memory steps on that namespace keep
their key, name and argument hash (replay still checks them, S5) but lose
their arguments, and reads replay as if the namespace were empty.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import codec
from .errors import StoreError

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "MASKED_ARGS",
    "MAX_VALUE_BYTES",
    "MEMORY_STEPS",
    "Embed",
    "Memory",
    "MemoryItem",
    "MemoryLedger",
    "MemoryRecord",
    "cosine",
    "masked_output",
    "names_namespace",
    "namespace_of",
    "namespace_text",
    "search_words",
]

#: The largest value, as JSON, one key may hold, and the longest text search
#: reads of it, in characters (a clear error beyond either).
MAX_VALUE_BYTES = 256 * 1024
_MAX_KEY = 512
_MAX_PART = 256
_MAX_PARTS = 16
_MAX_LIMIT = 1000
_MAX_WORDS = 32

#: The recorded step names of memory operations whose records copy a
#: namespace's data (what :meth:`Memory.drop` masks in the ledger).
MEMORY_STEPS = (
    "stalwart.memory.put",
    "stalwart.memory.get",
    "stalwart.memory.search",
    "stalwart.memory.list",
    "stalwart.memory.delete",
)

#: The arguments a masked memory record keeps.
MASKED_ARGS = '{"masked":"memory namespace deleted"}'

#: An embedding model: text to a vector, sync or async.
Embed = Callable[[str], Sequence[float] | Awaitable[Sequence[float]]]

_WORD = re.compile(r"\w+")


def masked_output(name: str, output: str | None) -> str | None:
    """What the record of memory step ``name`` holds as output once its
    namespace is deleted: reads replay as if the namespace were empty, a
    write or a delete keeps its output (null, or whether a row went)."""
    if name in ("stalwart.memory.search", "stalwart.memory.list"):
        return "[]"
    if name == "stalwart.memory.get":
        return "null"
    return output


def names_namespace(args: str | None, namespace: str) -> bool:
    """Whether a memory step's recorded arguments name ``namespace``
    (:func:`namespace_text`; a list in records made before it was text)."""
    if args is None or args == MASKED_ARGS:
        return False
    try:
        data = json.loads(args)
    except ValueError:
        return False
    found = data.get("namespace") if isinstance(data, dict) else None
    if isinstance(found, list):
        found = json.dumps(found, separators=(",", ":"))
    return found == namespace


@dataclass(slots=True)
class MemoryRecord:
    """One row of memory as a store keeps it: text only, JSON where a value
    is (``namespace`` is :func:`namespace_text`, ``vector`` a JSON list of
    floats or None)."""

    namespace: str
    key: str
    value: str
    text: str
    vector: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A value read from memory: where it is, what it holds, and, from a
    search, how well it matched (higher is better; text scores are the
    store's own, vector scores are cosine similarities)."""

    namespace: tuple[str, ...]
    key: str
    value: Any
    text: str
    updated_at: float
    score: float | None = None


class MemoryLedger(Protocol):
    """What memory needs from a store (:class:`~stalwart.stores.base.Store`
    implements it in memory, SQLite and PostgreSQL)."""

    async def memory_put(self, record: MemoryRecord) -> None:
        """Insert or replace the row at ``(namespace, key)`` (its first
        ``created_at`` kept)."""
        ...

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None: ...

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        """The namespace's rows, most recently updated first."""
        ...

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        """The rows whose text holds any of ``words``, best first, with scores."""
        ...

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        """The namespace's rows that have a vector (scored by the caller)."""
        ...

    async def memory_delete(self, namespace: str, key: str) -> bool: ...

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        """Delete the namespace's rows and mask the records of memory steps
        on it (:data:`MEMORY_STEPS`, :data:`MASKED_ARGS`,
        :func:`masked_output`), in one transaction; ``(rows, records)``."""
        ...


# -- checks: data in, a clear error naming the field out ------------------------
def _text_field(value: object, where: str, field: str, most: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: field {field!r}: a string, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{where}: field {field!r} is empty")
    if len(value) > most:
        raise ValueError(f"{where}: field {field!r} is {len(value)} characters, more than {most}")
    _plain_text(value, where, field)
    return value


def _plain_text(value: str, where: str, field: str) -> None:
    """Refuse what no store can keep as text: a NUL, a lone surrogate."""
    if "\x00" in value:
        raise ValueError(f"{where}: field {field!r} holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where}: field {field!r} is not valid Unicode text") from None


def namespace_of(namespace: object, where: str = "memory") -> tuple[str, ...]:
    """``namespace`` (a string or a sequence of strings) as a tuple of its
    names; an error naming the field if it is empty or not names."""
    if isinstance(namespace, str):
        parts: tuple[object, ...] = (namespace,)
    elif isinstance(namespace, tuple | list):
        parts = tuple(namespace)
    else:
        raise TypeError(
            f"{where}: field 'namespace': a string or a tuple of strings, "
            f"not {type(namespace).__name__}"
        )
    if not parts:
        raise ValueError(f"{where}: field 'namespace' is empty")
    if len(parts) > _MAX_PARTS:
        raise ValueError(f"{where}: field 'namespace' has {len(parts)} names, more than 16")
    return tuple(_text_field(p, where, f"namespace[{i}]", _MAX_PART) for i, p in enumerate(parts))


def namespace_text(parts: tuple[str, ...]) -> str:
    """How a store keys a namespace: its names as a JSON list (ASCII)."""
    return json.dumps(list(parts), separators=(",", ":"))


def search_words(query: str) -> list[str]:
    """The words of a search query, lower case, each once, in order: what
    every store matches (any of them), so no query is ever parsed as a
    store's query syntax."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(query.lower()):
        seen.setdefault(w, None)
    return list(seen)[:_MAX_WORDS]


def scan_text(
    rows: Iterable[MemoryRecord], words: Sequence[str], limit: int
) -> list[tuple[MemoryRecord, float]]:
    """The rows whose text holds any of ``words``, best first: scored by how
    many of the words each holds, ties by key. Stores without an index of
    their own (the in-memory one, an encrypted one) search this way."""
    wanted = set(words)
    scored = []
    for rec in rows:
        hits = len(wanted & set(_WORD.findall(rec.text.lower())))
        if hits:
            scored.append((float(hits), rec.key, rec))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [(rec, score) for score, _, rec in scored[:limit]]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one length (0 for a zero vector)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def _limit(limit: object, where: str) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_LIMIT:
        raise ValueError(f"{where}: field 'limit' must be a whole number from 1 to {_MAX_LIMIT}")
    return limit


def _item(data: Mapping[str, Any], namespace: tuple[str, ...]) -> MemoryItem:
    return MemoryItem(
        namespace,
        str(data["key"]),
        data["value"],
        str(data["text"]),
        float(data["updated_at"]),
        None if data.get("score") is None else float(data["score"]),
    )


def _row(rec: MemoryRecord, where: str, score: float | None = None) -> dict[str, Any]:
    """A row as a step records it (plain JSON data)."""
    return {
        "key": rec.key,
        "value": codec.loads(rec.value, f"{where}: key {rec.key[:80]!r}"),
        "text": rec.text,
        "updated_at": rec.updated_at,
        "score": score,
    }


class Memory:
    """Namespaced long-term memory over a store.

    ``Memory(store)`` reads and writes directly (a script, a web handler,
    an admin task); ``ctx.memory`` is the same memory as steps of the run
    (recorded, replayed). ``embed`` (text to a vector, sync or async) makes
    writes store a vector and searches rank by cosine similarity;
    :meth:`with_embedder` gives a copy with one.
    """

    __slots__ = ("_ctx", "_embed", "_store")

    def __init__(
        self,
        store: MemoryLedger | None,
        *,
        embed: Embed | None = None,
        ctx: Context | None = None,
    ) -> None:
        self._store = store
        self._embed = embed
        self._ctx = ctx

    def with_embedder(self, embed: Embed) -> Memory:
        """This memory, writing and searching with the embedding model ``embed``."""
        return Memory(self._store, embed=embed, ctx=self._ctx)

    # -- the operations ----------------------------------------------------------
    async def put(self, namespace: Any, key: str, value: Any, *, text: str | None = None) -> None:
        """Keep ``value`` (JSON data) at ``key`` in ``namespace``, replacing
        what was there. ``text`` is what search reads (default: the value
        if it is a string, else its JSON)."""
        where = self._where("put")
        ns = namespace_of(namespace, where)
        key = _text_field(key, where, "key", _MAX_KEY)
        value_json = codec.dumps(value, f"{where}: field 'value'")
        if len(value_json) > MAX_VALUE_BYTES:
            raise ValueError(
                f"{where}: field 'value' is {len(value_json)} bytes as JSON, "
                f"more than {MAX_VALUE_BYTES}"
            )
        if text is None:
            text = value if isinstance(value, str) else value_json
        elif not isinstance(text, str):
            raise TypeError(f"{where}: field 'text': a string, not {type(text).__name__}")
        if len(text) > MAX_VALUE_BYTES:  # PostgreSQL's text index refuses past 1 MB
            raise ValueError(
                f"{where}: field 'text' is {len(text)} characters, more than {MAX_VALUE_BYTES}"
            )
        _plain_text(text, where, "text")
        found_text = text

        async def work() -> None:
            store = self._need(where)
            vector = None if self._embed is None else await self._vector(found_text, where)
            now = time.time()
            rec = MemoryRecord(namespace_text(ns), key, value_json, found_text, vector, now, now)
            await store.memory_put(rec)

        args = {"namespace": namespace_text(ns), "key": key, "value": value_json, "text": text}
        await self._step("put", args, work)

    async def get(self, namespace: Any, key: str) -> MemoryItem | None:
        """The value at ``key`` in ``namespace``, or None."""
        where = self._where("get")
        ns = namespace_of(namespace, where)
        key = _text_field(key, where, "key", _MAX_KEY)

        async def work() -> dict[str, Any] | None:
            rec = await self._need(where).memory_get(namespace_text(ns), key)
            return None if rec is None else _row(rec, where)

        found = await self._step("get", {"namespace": namespace_text(ns), "key": key}, work)
        return None if found is None else _item(found, ns)

    async def search(
        self,
        namespace: Any,
        query: str,
        *,
        limit: int = 5,
        by: Literal["text", "vector"] | None = None,
    ) -> list[MemoryItem]:
        """The best matches for ``query`` in ``namespace``, best first: by
        vector similarity when this memory has an embedding model (or
        ``by="vector"``), else by words (full-text search: any word of the
        query)."""
        where = self._where("search")
        ns = namespace_of(namespace, where)
        if not isinstance(query, str):
            raise TypeError(f"{where}: field 'query': a string, not {type(query).__name__}")
        limit = _limit(limit, where)
        how = by or ("vector" if self._embed is not None else "text")
        if how not in ("text", "vector"):
            raise ValueError(f"{where}: field 'by' is 'text' or 'vector', not {how!r}")
        if how == "vector" and self._embed is None:
            raise ValueError(f"{where}: a search by vector needs an embedding model (embed=...)")

        async def work() -> list[dict[str, Any]]:
            store = self._need(where)
            nst = namespace_text(ns)
            if how == "text":
                words = search_words(query)
                if not words:
                    return []
                found = await store.memory_search_text(nst, words, limit)
                return [_row(rec, where, score) for rec, score in found]
            wanted = json.loads(await self._vector(query, where))
            scored = []
            for rec in await store.memory_vectors(nst):
                vec = json.loads(rec.vector or "[]")
                if len(vec) != len(wanted):
                    raise ValueError(
                        f"{where}: key {rec.key[:80]!r} has a vector of {len(vec)} "
                        f"numbers, the query one of {len(wanted)} (another embedding model?)"
                    )
                scored.append((cosine(wanted, vec), rec.key, rec))
            scored.sort(key=lambda t: (-t[0], t[1]))
            return [_row(rec, where, score) for score, _, rec in scored[:limit]]

        args = {"namespace": namespace_text(ns), "query": query, "limit": limit, "by": how}
        found = await self._step("search", args, work)
        return [_item(d, ns) for d in found]

    async def recent(self, namespace: Any, *, limit: int = 100) -> list[MemoryItem]:
        """The namespace's values, most recently written first."""
        where = self._where("list")
        ns = namespace_of(namespace, where)
        limit = _limit(limit, where)

        async def work() -> list[dict[str, Any]]:
            rows = await self._need(where).memory_list(namespace_text(ns), limit)
            return [_row(rec, where) for rec in rows]

        found = await self._step("list", {"namespace": namespace_text(ns), "limit": limit}, work)
        return [_item(d, ns) for d in found]

    async def delete(self, namespace: Any, key: str) -> bool:
        """Delete the value at ``key``; whether there was one."""
        where = self._where("delete")
        ns = namespace_of(namespace, where)
        key = _text_field(key, where, "key", _MAX_KEY)

        async def work() -> bool:
            return await self._need(where).memory_delete(namespace_text(ns), key)

        return bool(await self._step("delete", {"namespace": namespace_text(ns), "key": key}, work))

    async def drop(self, namespace: Any) -> int:
        """Delete the namespace everywhere: its rows, and its copies in the
        ledger (the records of memory steps on it are masked, see the module
        docstring). Returns how many rows went."""
        where = self._where("drop")
        ns = namespace_of(namespace, where)

        async def work() -> int:
            # The dropping run keeps its own records: a resume replays what it read (S2).
            keep = self._ctx.run_id if self._ctx is not None else None
            rows, _ = await self._need(where).memory_drop(namespace_text(ns), keep)
            return rows

        return int(await self._step("drop", {"namespace": namespace_text(ns)}, work))

    # -- how -----------------------------------------------------------------------
    def _where(self, op: str) -> str:
        ctx = self._ctx
        if ctx is None:
            return f"memory.{op}"
        return f"run {ctx.run_id!r}, step {ctx.next_step_key()}: memory.{op}"

    def _need(self, where: str) -> MemoryLedger:
        if self._store is None:
            raise StoreError(f"{where}: no store keeps memory here")
        return self._store

    async def _vector(self, text: str, where: str) -> str:
        assert self._embed is not None
        made = self._embed(text)
        if inspect.isawaitable(made):
            made = await made
        try:
            vector = [float(x) for x in made]
        except (TypeError, ValueError):
            raise TypeError(f"{where}: the embedding model returned no list of numbers") from None
        if not vector or not all(math.isfinite(x) for x in vector):
            raise ValueError(f"{where}: the embedding model returned an empty or non-finite vector")
        return json.dumps(vector, separators=(",", ":"))

    async def _step(self, op: str, args: dict[str, Any], work: Callable[[], Awaitable[Any]]) -> Any:
        """``work``, as the run's step ``stalwart.memory.<op>`` inside a run."""
        ctx = self._ctx
        if ctx is None:
            return await work()

        async def unit(_: Context) -> Any:
            return await work()

        return await ctx.engine.run_unit(ctx.next_key(), f"stalwart.memory.{op}", unit, args)
