"""The public surface of Stalwart, one line per name, and its baseline.

    python tools/public_api.py          # rewrite tests/public_api.txt from the code

`tests/test_public_api.py` compares the code's surface with the checked-in
baseline and fails with a diff when they differ. Run this after a deliberate
change of the public API (a name added, a signature changed), read the diff
in `git diff tests/public_api.txt`, and commit it with the change.

The surface is every name in `__all__` of the public modules (`PUBLIC`), with
its kind and signature; a class also lists the public methods, properties and
class attributes it defines or inherits from Stalwart's own classes (not
pydantic's or the standard library's).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

#: The modules whose ``__all__`` is public API (docs/reference.md, the
#: "Stability and deprecation" section of docs/contributing.md).
PUBLIC = (
    "stalwart",
    "stalwart.a2a",
    "stalwart.api",
    "stalwart.codecs",
    "stalwart.conversations",
    "stalwart.evals",
    "stalwart.flow",
    "stalwart.journey",
    "stalwart.llm",
    "stalwart.mcp",
    "stalwart.metrics",
    "stalwart.otel",
    "stalwart.pocketjoe",
    "stalwart.schedules",
    "stalwart.stores",
    "stalwart.stores.encryption",
    "stalwart.testing",
    "stalwart.timetravel",
    "stalwart.web",
)

BASELINE = Path(__file__).resolve().parent.parent / "tests" / "public_api.txt"
UPDATE = "python tools/public_api.py"

# A default's repr may hold an address (<object object at 0x7f...>).
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN = (str, int, float, bool, type(None))


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return _ADDRESS.sub("", text)


def _value(value: Any) -> str:
    if isinstance(value, (enum.Enum, _PLAIN)):
        return repr(value)
    return type(value).__name__


def _function(obj: Any) -> str:
    kind = "async function" if inspect.iscoroutinefunction(obj) else "function"
    return f"{kind}{_signature(obj)}"


def _member(name: str, raw: Any) -> str | None:
    """One line for a member found in a class's ``__dict__``."""
    if isinstance(raw, property):
        return "property"
    if isinstance(raw, classmethod):
        return f"classmethod{_signature(raw.__func__)}"
    if isinstance(raw, staticmethod):
        return f"staticmethod{_signature(raw.__func__)}"
    if inspect.isfunction(raw):
        kind = "async method" if inspect.iscoroutinefunction(raw) else "method"
        return f"{kind}{_signature(raw)}"
    if inspect.isclass(raw):
        return "class"
    if isinstance(raw, types.MemberDescriptorType):
        return "attribute"  # a slot
    if hasattr(raw, "__get__") and not isinstance(raw, _PLAIN):
        return "descriptor"  # functools.cached_property and the like
    return f"attribute = {_value(raw)}"


def _class(qualified: str, cls: type) -> list[str]:
    bases = ", ".join(b.__name__ for b in cls.__bases__ if b is not object)
    kind = f"class({bases})" if bases else "class"
    lines = [f"{qualified}: {kind}{_signature(cls)}"]
    seen: dict[str, str] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("stalwart"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen or name == "model_config":
                continue
            if isinstance(cls, type) and issubclass(cls, enum.Enum) and name in cls.__members__:
                seen[name] = f"member = {cls[name].value!r}"
                continue
            line = _member(name, raw)
            if line is not None:
                seen[name] = line
    # A dataclass's or a pydantic model's fields are its signature already.
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    for field in [*fields, *getattr(cls, "model_fields", {})]:
        seen.pop(field, None)
    lines += [f"{qualified}.{name}: {seen[name]}" for name in sorted(seen)]
    return lines


def _entry(qualified: str, obj: Any) -> list[str]:
    if inspect.isclass(obj):
        return _class(qualified, obj)
    if inspect.isroutine(obj):
        return [f"{qualified}: {_function(obj)}"]
    if inspect.ismodule(obj):
        return [f"{qualified}: module {obj.__name__}"]
    if callable(obj):
        return [f"{qualified}: callable {type(obj).__name__}{_signature(obj)}"]
    return [f"{qualified}: value {_value(obj)}"]


def surface(modules: tuple[str, ...] = PUBLIC) -> list[str]:
    """The public surface as sorted lines, ``module.Name[.member]: kind signature``."""
    lines: list[str] = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in sorted(module.__all__):
            lines += _entry(f"{module_name}.{name}", getattr(module, name))
    return lines


def read_baseline(path: Path = BASELINE) -> list[str]:
    """The checked-in surface (empty when there is no baseline yet)."""
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def difference(baseline: list[str], current: list[str]) -> str | None:
    """None when the two surfaces agree; else a message with the unified diff
    (``-`` the baseline, ``+`` the code) and how to accept the change."""
    if baseline == current:
        return None
    diff = "\n".join(difflib.unified_diff(baseline, current, "baseline", "code", n=1, lineterm=""))
    return (
        "the public API differs from tests/public_api.txt "
        "(- the baseline, + the code):\n"
        f"{diff}\n"
        "A deliberate change? Rewrite the baseline with "
        f"`{UPDATE}`, check `git diff tests/public_api.txt`, and commit it with the change "
        "(a removed or renamed name needs a deprecation first: docs/contributing.md)."
    )


_HEADER = (
    "# The public API of Stalwart: every name in __all__ of the public modules,\n"
    "# with its kind and signature. Checked by tests/test_public_api.py;\n"
    f"# rewritten by `{UPDATE}` after a deliberate change.\n"
)


def write_baseline(path: Path = BASELINE) -> list[str]:
    """Rewrite the baseline from the code; the lines written."""
    lines = surface()
    path.write_text(_HEADER + "\n".join(lines) + "\n")
    return lines


def main() -> None:
    src = Path(__file__).resolve().parent.parent / "src"
    sys.path.insert(0, str(src))  # this checkout's code, not an installed copy
    before = read_baseline()
    after = write_baseline()
    change = difference(before, after)
    if change is None:
        print(f"{BASELINE.name}: unchanged ({len(after)} lines)")
    else:
        added = len(set(after) - set(before))
        removed = len(set(before) - set(after))
        print(f"{BASELINE.name}: rewritten, {added} lines added, {removed} removed")


if __name__ == "__main__":
    main()
