"""The public API changes only on purpose: tests/public_api.txt records every
name in ``__all__`` of the public modules with its kind and signature, and
the code must match it. `python tools/public_api.py` rewrites it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from tools.public_api import PUBLIC, UPDATE, difference, read_baseline, surface


def test_the_public_api_matches_its_baseline() -> None:
    change = difference(read_baseline(), surface())
    assert change is None, change


def test_a_renamed_public_function_fails_with_a_diff_and_the_update_command() -> None:
    current = surface()
    renamed = [
        line.replace("stalwart.policy: function", "stalwart.make_policy: function")
        for line in current
    ]
    assert renamed != current
    change = difference(current, sorted(renamed))
    assert change is not None
    assert "-stalwart.policy: function(" in change
    assert "+stalwart.make_policy: function(" in change
    assert UPDATE in change


def test_a_changed_signature_fails() -> None:
    current = surface()
    start = next(i for i, line in enumerate(current) if line.startswith("stalwart.Runner.start:"))
    changed = list(current)
    changed[start] = changed[start].replace("(self,", "(self, extra: int,", 1)
    change = difference(current, changed)
    assert change is not None
    assert "+stalwart.Runner.start: " in change and "extra: int" in change


def test_the_surface_lists_every_exported_name_once() -> None:
    tops = [line.split(":", 1)[0] for line in surface()]
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert tops.count(f"{module_name}.{name}") == 1, f"{module_name}.{name}"


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_exported_name_exists(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names what it lacks: {missing}"


def test_the_reference_names_every_public_module() -> None:
    reference = (Path(__file__).parents[1] / "docs" / "reference.md").read_text()
    section = reference.split("## Stability and deprecation", 1)[1].split("\n## ", 1)[0]
    unnamed = [name for name in PUBLIC if f"`{name}`" not in section]
    assert unnamed == [], f"docs/reference.md does not say these modules are public: {unnamed}"
