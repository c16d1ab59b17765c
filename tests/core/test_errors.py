"""The error tree: every error Stalwart raises is a StalwartError, defined in
stalwart.core.errors, drawn in that module's docstring as it is, and exported
from the one public place the drawing names."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import stalwart
from stalwart.core import errors

# Control flow, not errors: the engine and a flow unwind with these, and no
# ``except Exception`` may catch them.
NOT_ERRORS = {
    "stalwart.core.engine.unwind.Suspend",
    "stalwart.core.engine.unwind.Halt",
    "stalwart.flow.visits.Stopped",
}
# Raised and caught inside one function; never seen by a caller.
PRIVATE = {
    "stalwart.core.expects._TooCostly",
    "stalwart.testing.guard._Stop",
    "stalwart.timetravel.export._NonFinite",
    "stalwart.timetravel.rebase._Reached",
}

ROW = re.compile(r"^(?P<indent>(?:[│ ] {3})*)(?:[├└]── )?(?P<name>\w+)(?: \((?P<base>\w+)\))?")


def _drawing() -> list[tuple[int, str, str | None, str]]:
    """(depth, class, builtin base, public place) for each row of the tree."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines():
        line = line[4:]
        m = ROW.match(line)
        assert m is not None, line
        depth = len(m["indent"]) // 4 + (0 if line.startswith(m["name"]) else 1)
        rows.append((depth, m["name"], m["base"], line[40:].strip() if len(line) > 40 else ""))
    return rows


def _import(name: str) -> object:
    """Import a Stalwart module, or skip the test when it needs an extra that
    is not installed (CI's Python 3.12 leg has only the postgres and dev
    extras; the full suite has them all)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.startswith("stalwart"):
            raise
        pytest.skip(f"{name} needs {exc.name}, from an extra not installed here")


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(stalwart.__path__, "stalwart."):
        if info.name.endswith("__main__"):
            continue
        module = _import(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("stalwart")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_error_is_a_stalwart_error_defined_in_core_errors() -> None:
    misplaced = []
    for name, cls in _exception_classes().items():
        if name in NOT_ERRORS:
            assert not issubclass(cls, Exception), name
            continue
        if name in PRIVATE:
            continue
        assert issubclass(cls, errors.StalwartError), f"{name} is not a StalwartError"
        if cls.__module__ != errors.__name__:
            misplaced.append(name)
    assert misplaced == [], "defined outside stalwart.core.errors"


def test_the_drawing_is_the_tree() -> None:
    rows = _drawing()
    drawn = [name for _, name, _, _ in rows]
    assert sorted(drawn) == sorted(errors.__all__)
    parents: list[str] = []
    for depth, name, base, _ in rows:
        cls = getattr(errors, name)
        parents = parents[:depth]
        if parents:
            assert cls.__bases__[0] is getattr(errors, parents[-1]), name
        else:
            assert cls is errors.StalwartError
        builtin = [b.__name__ for b in cls.__bases__[1:]]
        assert builtin == ([base] if base else []), name
        parents.append(name)


@pytest.mark.parametrize("row", _drawing(), ids=lambda row: row[1])
def test_each_error_is_exported_where_the_drawing_says(
    row: tuple[int, str, str | None, str],
) -> None:
    _, name, _, place = row
    if place.startswith("("):  # the command line's own, not a library name
        return
    module = _import(place)
    assert getattr(module, name) is getattr(errors, name)
    assert name in module.__all__


def test_the_reference_page_shows_the_same_tree() -> None:
    page = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn = "\n".join(line[4:] for line in block.splitlines())
    assert f"```text\n{drawn}\n```" in page


def test_the_records_public_methods_return_are_exported() -> None:
    from stalwart.core.ledger import RunRecord, StepRecord

    assert stalwart.RunRecord is RunRecord
    assert stalwart.StepRecord is StepRecord
    assert {"RunRecord", "StepRecord"} <= set(stalwart.__all__)
