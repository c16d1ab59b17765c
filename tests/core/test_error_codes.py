"""Every public error class has its own stable ``error_code``, a client's
handle on it that survives a new message or a renamed class."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from tools.public_api import PUBLIC

import stalwart as sw
from stalwart.core import errors


def _public_errors() -> dict[str, type[sw.StalwartError]]:
    found: dict[str, type[sw.StalwartError]] = {}
    for module_name in ("stalwart.core.errors", *PUBLIC):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an extra not installed (the Python 3.12 leg of CI)
            continue
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, sw.StalwartError):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_public_error_class_defines_its_own_code() -> None:
    missing = [where for where, cls in _public_errors().items() if "error_code" not in vars(cls)]
    assert missing == [], (
        f"these error classes have no error_code of their own: {missing}; "
        "give each one (the class name in snake case) and list it in docs/reference.md"
    )


def test_error_codes_are_unique_snake_case_words() -> None:
    by_code: dict[str, list[str]] = {}
    for where, cls in _public_errors().items():
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", cls.error_code), where
        by_code.setdefault(cls.error_code, []).append(where)
    shared = {code: names for code, names in by_code.items() if len(names) > 1}
    assert shared == {}


def test_the_codes_of_the_common_errors_are_the_documented_ones() -> None:
    assert sw.RunNotFound.error_code == "run_not_found"
    assert sw.StoreUnavailable.error_code == "store_unavailable"
    assert errors.RateLimited.error_code == "rate_limited"
    assert errors.ToolChanged.error_code == "tool_changed"


def test_an_instance_carries_its_class_code_next_to_a_provider_code() -> None:
    limited = errors.RateLimited("slow down", provider="openai", code="rate_limit_exceeded")
    assert limited.error_code == "rate_limited"
    assert limited.code == "rate_limit_exceeded"
    assert errors.CLIError("no such run", 2).code == 2


def test_every_code_is_listed_in_the_reference() -> None:
    reference = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    unlisted = [
        cls.error_code
        for cls in _public_errors().values()
        if f"| `{cls.__name__}` | `{cls.error_code}` |" not in reference
    ]
    assert unlisted == [], f"docs/reference.md does not list {unlisted}"
