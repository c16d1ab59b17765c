"""Datasets: named cases an experiment runs, drawn from recorded runs or
written by hand.

A :class:`DatasetCase` is a policy's inputs (as a run records them: plain
JSON, messages as ``{"$t": "msg", ...}`` trees) and the reference outcome a
new run is scored against (status, result, error), with where it came from
(the source run's id) and tags. :func:`cases_from_runs` draws them from the
ledger through a :class:`~.selection.Selection`; :class:`Dataset` holds a
named version of them and reads and writes them as JSON Lines (a first line
naming the dataset, then one case a line), the file a repository keeps.
Where they are kept in a store is :mod:`.dataset_store`.

Everything read here is data: a case's fields are checked and a bad one is
an error naming the file, the line and the field; its inputs are decoded
only into the types the program declared (S13), when the case is run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import codec
from ..core.ledger import RunRecord
from ..core.tags import check_tags, decode_tags
from ..runner.runner import Runner
from .scorers import Outcome
from .selection import Selection, recorded_inputs, select_runs

__all__ = ["Dataset", "DatasetCase", "cases_from_runs", "check_name"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_STATUSES = ("succeeded", "failed", "cancelled")


def check_name(name: object, what: str = "dataset") -> str:
    """A dataset's (or an experiment's) name: 1 to 128 letters,
    digits, ``_``, ``.`` or ``-``, starting with a letter or digit."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)[:80]
        raise ValueError(
            f"{what} name {shown} is not 1 to 128 letters, digits, '_', '.' or '-' "
            "(starting with a letter or digit)"
        )
    return name


@dataclass(frozen=True)
class DatasetCase:
    """One case: ``args`` and ``kwargs`` for the policy, and the reference
    it is scored against: ``expected`` (the result, plain JSON), ``status``
    and ``error``. ``source`` is the run it was drawn from (None for a case
    written by hand). Values are kept as the JSON trees a run records: JSON
    as it is (a ``{"$t": ...}`` object is taken as encoded already), anything
    else (a message, a model) encoded at once."""

    id: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    expected: Any = None
    status: str = "succeeded"
    error: str | None = None
    source: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"case {self.id!r}"
        if (
            not isinstance(self.id, str)
            or not 1 <= len(self.id) <= 500
            or not self.id.isprintable()
        ):
            raise ValueError(f"{where}: field 'id' is 1 to 500 printable characters")
        kwargs = self.kwargs
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"{where}: field 'kwargs' is a mapping of names to values")
        if isinstance(self.args, str | bytes) or not isinstance(self.args, Sequence):
            raise TypeError(f"{where}: field 'args' is a list of values")
        if self.status not in _STATUSES:
            raise ValueError(f"{where}: field 'status' is one of {', '.join(_STATUSES)}")
        if self.error is not None and not isinstance(self.error, str):
            raise TypeError(f"{where}: field 'error' is text or null")
        if self.source is not None and not isinstance(self.source, str):
            raise TypeError(f"{where}: field 'source' is a run id or null")
        object.__setattr__(self, "args", _tree(list(self.args), f"{where}: field 'args'"))
        object.__setattr__(self, "kwargs", _tree(dict(self.kwargs), f"{where}: field 'kwargs'"))
        object.__setattr__(self, "expected", _tree(self.expected, f"{where}: field 'expected'"))
        object.__setattr__(self, "tags", check_tags(self.tags, f"{where}: field 'tags'"))

    def reference(self, steps: Sequence[Any] = ()) -> Outcome:
        """The reference as a scorer's old :class:`Outcome` (``steps``: the
        source run's, while it is in the store)."""
        return Outcome(self.source or self.id, self.status, self.expected, self.error, steps)

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments decoded into the values the policy takes."""
        where = f"case {self.id!r}"
        args = codec.decode(list(self.args), f"{where}: field 'args'")
        kwargs = codec.decode(dict(self.kwargs), f"{where}: field 'kwargs'")
        return tuple(args), dict(kwargs)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "expected": self.expected,
            "status": self.status,
            "error": self.error,
            "source": self.source,
            "tags": dict(self.tags),
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> DatasetCase:
        """A case from its JSON (:meth:`to_json`); an error naming ``where``
        and the field for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: a case is a JSON object, not {type(data).__name__}")
        unknown = sorted(set(data) - {"id", "args", "kwargs", "expected", "status", "error",
                                      "source", "tags"})  # fmt: skip
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        if "id" not in data:
            raise ValueError(f"{where}: field 'id' is missing")
        try:
            case = cls(
                data["id"],
                data.get("args", []),
                data.get("kwargs", {}),
                data.get("expected"),
                data.get("status", "succeeded"),
                data.get("error"),
                data.get("source"),
                data.get("tags", {}),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        return case


@dataclass(frozen=True)
class Dataset:
    """A named version of cases (version 0: not saved yet). A saved version
    never changes: saving other cases under the name makes the next one."""

    name: str
    cases: Sequence[DatasetCase]
    version: int = 0
    description: str = ""
    created_at: float | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        seen: set[str] = set()
        for c in self.cases:
            if c.id in seen:
                raise ValueError(f"dataset {self.name!r}: case id {c.id!r} appears twice")
            seen.add(c.id)

    def __len__(self) -> int:
        return len(self.cases)

    def case(self, case_id: str) -> DatasetCase:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(f"dataset {self.name!r} has no case {case_id!r}")

    def jsonl(self) -> str:
        """The dataset as JSON Lines: a header, then one case a line, keys
        sorted (a file that diffs well in a repository), ASCII only (safe to
        print)."""
        head = {"dataset": self.name, "version": self.version, "description": self.description}
        lines = [json.dumps(head, sort_keys=True)]
        lines += [json.dumps(c.to_json(), sort_keys=True) for c in self.cases]
        return "\n".join(lines) + "\n"

    def write_jsonl(self, path: str | Path) -> None:
        """Write :meth:`jsonl` to ``path``."""
        Path(path).write_text(self.jsonl(), encoding="utf-8")

    @classmethod
    def read_jsonl(cls, path: str | Path, name: str | None = None) -> Dataset:
        """A dataset read from a JSON Lines file :meth:`write_jsonl` wrote (or
        one of cases only, given ``name``), unsaved (version 0)."""
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where}: cannot be read ({exc})") from None
        rows: list[tuple[int, Any]] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((n, json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{where}, line {n}: not JSON ({exc})") from None
        description = ""
        if rows and isinstance(rows[0][1], dict) and "dataset" in rows[0][1]:
            n, head = rows.pop(0)
            found = head.get("dataset")
            description = head.get("description") or ""
            if not isinstance(description, str):
                raise ValueError(f"{where}, line {n}: field 'description' is text")
            name = name or found
        if name is None:
            raise ValueError(f"{where}: no header line names the dataset; give it a name")
        cases = [DatasetCase.from_json(data, f"{where}, line {n}") for n, data in rows]
        try:
            return cls(check_name(name), cases, description=description)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def _tree(value: Any, where: str) -> Any:
    """``value`` as a recorded JSON tree: plain JSON kept, the rest encoded."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return codec.encode(value, where)  # NaN and infinities are refused, named
    if isinstance(value, list):
        return [_tree(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _tree(v, f"{where}[{k!r}]") for k, v in value.items()}
    return codec.encode(value, where)


async def cases_from_runs(runner: Runner, selection: Selection) -> list[DatasetCase]:
    """The runs ``selection`` finds (:func:`~.selection.select_runs`) as
    cases, oldest first: each run's inputs as recorded, its outcome as the
    reference, its id as the case's id and ``source``, its tags. A run not
    finished yet (no outcome to be a reference) is left out."""
    runs = await select_runs(runner, selection)
    return [_case(run) for run in runs if run.status in _STATUSES]


def _case(run: RunRecord) -> DatasetCase:
    inputs = recorded_inputs(run)
    return DatasetCase(
        run.id,
        inputs["args"],
        inputs["kwargs"],
        json.loads(run.result) if run.result else None,
        run.status,
        run.error,
        run.id,
        decode_tags(run.tags),
    )
