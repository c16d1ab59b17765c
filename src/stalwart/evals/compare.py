"""What experiments and counterfactuals left in a store, read back and set
side by side, case by case: the read model of the inspector's pages.

An experiment keeps a row a case under ``("stalwart.evals", "experiment",
NAME)`` (:mod:`.experiment`), a counterfactual a row a forked run under
``("stalwart.evals", "counterfactual", NAME)`` (:mod:`.counterfactual`).
:func:`kept_evals` lists both kinds; :func:`compare_experiments` sets two
experiments' cases side by side (B against A), and
:func:`compare_counterfactual` a counterfactual's recorded runs against
their forks (new against old): the same :class:`Comparison`.

Everything here is read as data (S13): a row is JSON, checked field by
field; one that is not what an experiment writes is counted in
:attr:`Comparison.unreadable` and left out, never guessed at.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..core.ledger import RunRecord
from ..core.memory import MemoryRecord, namespace_text
from ..core.tags import decode_tags
from ..stores.base import Store
from .dataset_store import RESERVED
from .scorers import Score, Verdict

__all__ = [
    "KEPT_MOST",
    "Change",
    "Comparison",
    "KeptEval",
    "Row",
    "Side",
    "compare_counterfactual",
    "compare_experiments",
    "kept_evals",
]

Kind = Literal["experiment", "counterfactual"]
#: How side B's case compares with side A's: ``added`` is only in B,
#: ``dropped`` only in A.
Change = Literal["better", "worse", "same", "added", "dropped"]
_RANK: dict[str, int] = {"worse": 0, "same": 1, "better": 2}
_VERDICTS = ("better", "worse", "same")
_MOST = 100_000
#: Experiments and counterfactuals :func:`kept_evals` lists at most.
KEPT_MOST = 500


@dataclass(frozen=True)
class Side:
    """One side of a case: the run that ran it (its row when the store still
    has it), its status, its verdict against the reference (None for the
    recorded run a counterfactual forked: it is the reference), each
    scorer's score, and the tokens it used."""

    run_id: str
    status: str
    verdict: Verdict | None
    scores: Mapping[str, Score]
    tokens: int
    run: RunRecord | None = None


@dataclass(frozen=True)
class Row:
    """A case on both sides (None where a side lacks it) and how B compares
    with A."""

    case_id: str
    a: Side | None
    b: Side | None
    change: Change


@dataclass(frozen=True)
class Comparison:
    """Cases side by side: ``a`` and ``b`` name the sides, ``rows`` hold the
    cases (A's order, then those only B has), ``scorers`` every scorer
    named on either side, ``unreadable`` the rows left out."""

    kind: Kind
    a: str
    b: str
    rows: list[Row] = field(default_factory=list)
    scorers: list[str] = field(default_factory=list)
    unreadable: int = 0

    def count(self, change: Change) -> int:
        return sum(r.change == change for r in self.rows)

    def tokens(self, side: Literal["a", "b"]) -> int:
        """The tokens every case of one side used."""
        return sum(s.tokens for r in self.rows if (s := getattr(r, side)) is not None)

    def passed(self, side: Literal["a", "b"]) -> tuple[int, int]:
        """How many of one side's scored cases no scorer called worse, of
        how many it scored."""
        scored = [s for r in self.rows if (s := getattr(r, side)) is not None and s.verdict]
        return sum(s.verdict != "worse" for s in scored), len(scored)


@dataclass(frozen=True)
class KeptEval:
    """An experiment or a counterfactual the store holds: its name, how
    many cases, their verdicts, the tokens they used, and when its latest
    case was scored. An experiment's own run (``eval:<name>``) says the
    dataset, its version and the policy."""

    kind: Kind
    name: str
    cases: int
    better: int
    worse: int
    same: int
    tokens: int
    updated_at: float
    run: RunRecord | None = None
    dataset: str = ""
    version: str = ""
    policy: str = ""


async def kept_evals(store: Store) -> list[KeptEval]:
    """Every experiment and counterfactual ``store`` holds (at most
    :data:`KEPT_MOST`), the latest scored first."""
    found: list[KeptEval] = []
    for kind in ("experiment", "counterfactual"):
        for name in await _names(store, kind):
            rows = await store.memory_list(_namespace(kind, name), _MOST)
            cases, _ = _sides(kind, rows)
            latest = max((r.updated_at for r in rows), default=0.0)
            found.append(_summary(kind, name, cases, latest))
    runs = await _runs(store, [f"eval:{k.name}" for k in found if k.kind == "experiment"])
    out = []
    for k in found:
        run = runs.get(f"eval:{k.name}") if k.kind == "experiment" else None
        if run is not None:  # the experiment's own run says what it ran
            tags = _tags(run)
            k = replace(
                k,
                updated_at=max(k.updated_at, run.updated_at),
                run=run,
                dataset=tags.get("stalwart.dataset", ""),
                version=tags.get("stalwart.version", ""),
                policy=run.policy.removeprefix("stalwart.evals.experiment:"),
            )
        out.append(k)
    out.sort(key=lambda k: (-k.updated_at, k.kind, k.name))
    return out[:KEPT_MOST]


async def compare_experiments(store: Store, a: str, b: str) -> Comparison:
    """Experiment ``b``'s cases against experiment ``a``'s, by case id: a
    case is better in B when its verdict is (worse < same < better), worse
    when it is lower, else the same. A KeyError names an experiment the
    store has no case of."""
    sides: list[dict[str, tuple[float, Side]]] = []
    unreadable = 0
    for name in (a, b):
        rows = await store.memory_list(_namespace("experiment", name), _MOST)
        if not rows:
            raise KeyError(f"no experiment {name!r} in this store")
        found, bad = _sides("experiment", rows)
        sides.append(found)
        unreadable += bad
    runs = await _runs(store, [s.run_id for side in sides for _, s in side.values()])
    left, right = ({k: _with_run(s, runs) for k, (_, s) in _ordered(side)} for side in sides)
    table: list[Row] = []
    for case_id, side_a in left.items():
        side_b = right.get(case_id)
        table.append(Row(case_id, side_a, side_b, "dropped" if side_b is None
                         else _change(side_a.verdict, side_b.verdict)))  # fmt: skip
    table += [Row(k, None, s, "added") for k, s in right.items() if k not in left]
    return Comparison("experiment", a, b, table, _scorers(table), unreadable)


async def compare_counterfactual(store: Store, name: str) -> Comparison:
    """Counterfactual ``name``'s recorded runs (A) against their forks (B):
    a case's change is its verdict. A KeyError if the store has no case
    of it."""
    rows = await store.memory_list(_namespace("counterfactual", name), _MOST)
    if not rows:
        raise KeyError(f"no counterfactual {name!r} in this store")
    found, unreadable = _sides("counterfactual", rows)
    pairs = [(k, s) for k, (_, s) in _ordered(found)]
    olds = {r.key: _old_side(r) for r in rows if r.key in found}
    runs = await _runs(store, [s.run_id for _, s in pairs] + [o.run_id for o in olds.values()])
    table = [
        Row(k, _with_run(olds[k], runs), _with_run(s, runs), s.verdict or "same") for k, s in pairs
    ]
    return Comparison("counterfactual", f"{name}: recorded", f"{name}: forked", table,
                      _scorers(table), unreadable)  # fmt: skip


# -- reading rows ---------------------------------------------------------------
def _namespace(kind: Kind, name: str) -> str:
    return namespace_text((RESERVED, kind, name))


async def _names(store: Store, kind: Kind) -> list[str]:
    """The names of ``kind`` with rows: their namespaces are one run of the
    store's ordered namespaces, after ``["stalwart.evals","<kind>",``."""
    prefix = namespace_text((RESERVED, kind, ""))[:-2]  # the list left open
    names: list[str] = []
    after = prefix
    while len(names) < KEPT_MOST:
        page = await store.memory_namespaces(after, 200)
        for ns in page:
            if not ns.startswith(prefix):
                return names
            try:
                parts = json.loads(ns)
            except (ValueError, RecursionError):
                continue
            if isinstance(parts, list) and len(parts) == 3 and isinstance(parts[2], str):
                names.append(parts[2])
        if len(page) < 200:
            break
        after = page[-1]
    return names


def _sides(kind: Kind, rows: Sequence[MemoryRecord]) -> tuple[dict[str, tuple[float, Side]], int]:
    """The rows as sides by case id, each with its place; and how many rows
    were not readable."""
    found: dict[str, tuple[float, Side]] = {}
    bad = 0
    for r in rows:
        try:
            data = json.loads(r.value)
            place, side = _side(kind, data)
        # RecursionError: nested past the parser's depth; OverflowError: a
        # score no float holds. Rows are data: an unreadable one is counted.
        except (ValueError, TypeError, KeyError, RecursionError, OverflowError):
            bad += 1
            continue
        found[r.key] = (place, side)
    return found, bad


def _side(kind: Kind, data: Any) -> tuple[float, Side]:
    if not isinstance(data, dict):
        raise TypeError("a case row is a JSON object")
    run_id = data["fork_id"] if kind == "counterfactual" else data["run_id"]
    tokens = data["new_tokens"] if kind == "counterfactual" else data["tokens"]
    verdict, status, place = data["verdict"], data["status"], data.get("index", math.inf)
    if verdict not in _VERDICTS or not isinstance(status, str) or not isinstance(run_id, str):
        raise ValueError("a case row's verdict, status or run is not one an experiment writes")
    if not isinstance(tokens, int) or not isinstance(place, int | float):
        raise TypeError("a case row's tokens or place is not a number")
    scores = data["scores"]
    if not isinstance(scores, dict):
        raise TypeError("a case row's scores are a JSON object")
    return place, Side(run_id, status, verdict, {str(n): _score(s) for n, s in scores.items()},
                       tokens)  # fmt: skip


def _old_side(row: MemoryRecord) -> Side:
    """The recorded run a counterfactual forked (the row's key), with the
    tokens the row says it used (its own steps, read when the row was)."""
    old = json.loads(row.value).get("old_tokens")  # readable: _sides read it
    return Side(row.key, "", None, {}, old if isinstance(old, int) else 0)


def _score(data: Any) -> Score:
    if not isinstance(data, dict) or data.get("verdict") not in _VERDICTS:
        raise ValueError("a score is a JSON object with a verdict")
    reason, value = data.get("reason", ""), data.get("value")
    if not isinstance(reason, str) or not (value is None or isinstance(value, int | float)):
        raise TypeError("a score's reason is text and its value a number")
    return Score(data["verdict"], reason, None if value is None else float(value))


def _ordered(found: Mapping[str, tuple[float, Side]]) -> list[tuple[str, tuple[float, Side]]]:
    """By place (the dataset's order, for rows that keep it), then case id."""
    return sorted(found.items(), key=lambda kv: (kv[1][0], kv[0]))


async def _runs(store: Store, ids: Sequence[str]) -> dict[str, RunRecord]:
    wanted = sorted({i for i in ids if i})
    found: dict[str, RunRecord] = {}
    for lo in range(0, len(wanted), 500):
        found.update((r.id, r) for r in await store.get_runs(wanted[lo : lo + 500]))
    return found


def _with_run(side: Side, runs: Mapping[str, RunRecord]) -> Side:
    run = runs.get(side.run_id)
    status = side.status or (run.status if run is not None else "")
    return Side(side.run_id, status, side.verdict, side.scores, side.tokens, run)


def _change(a: Verdict | None, b: Verdict | None) -> Change:
    ra, rb = _RANK.get(a or "same", 1), _RANK.get(b or "same", 1)
    return "better" if rb > ra else "worse" if rb < ra else "same"


def _scorers(rows: Sequence[Row]) -> list[str]:
    names: dict[str, None] = {}
    for r in rows:
        for side in (r.a, r.b):
            if side is not None:
                names.update(dict.fromkeys(side.scores))
    return list(names)


def _summary(
    kind: Kind, name: str, cases: Mapping[str, tuple[float, Side]], latest: float
) -> KeptEval:
    sides = [s for _, s in cases.values()]
    return KeptEval(
        kind,
        name,
        len(sides),
        sum(s.verdict == "better" for s in sides),
        sum(s.verdict == "worse" for s in sides),
        sum(s.verdict == "same" for s in sides),
        sum(s.tokens for s in sides),
        latest,
    )


def _tags(run: RunRecord) -> dict[str, str]:
    try:
        return decode_tags(run.tags)
    except (ValueError, AttributeError):
        return {}
