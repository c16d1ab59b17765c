"""A deprecated name keeps working and warns, naming its replacement and the
version that removes it; none outlives that version."""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Iterator

import pytest
from tools.public_api import PUBLIC

import stalwart as sw
from stalwart.core.deprecation import DEPRECATIONS, deprecated, warn


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@pytest.fixture(autouse=True)
def _forget_test_deprecations() -> Iterator[None]:
    before = dict(DEPRECATIONS)
    yield
    DEPRECATIONS.clear()
    DEPRECATIONS.update(before)


def test_a_deprecated_function_works_and_warns_with_its_replacement_and_version() -> None:
    @deprecated(replacement="stalwart.new_total", removed_in="0.3")
    def old_total(a: int, b: int = 1) -> int:
        return a + b

    with pytest.warns(DeprecationWarning) as caught:
        assert old_total(2, b=3) == 5
    message = str(caught[0].message)
    assert "old_total is deprecated" in message
    assert "use stalwart.new_total instead" in message and "Stalwart 0.3" in message
    assert caught[0].filename == __file__  # the warning points at the caller


async def test_a_deprecated_async_function_stays_async_and_warns() -> None:
    @deprecated(replacement="stalwart.fetch_now", removed_in="0.3")
    async def fetch_later(x: str) -> str:
        return x.upper()

    assert inspect.iscoroutinefunction(fetch_later)
    with pytest.warns(DeprecationWarning, match="use stalwart.fetch_now instead"):
        assert await fetch_later("a") == "A"


def test_a_deprecated_class_warns_when_made_and_keeps_its_signature() -> None:
    @deprecated(replacement="stalwart.Runner", removed_in="1.0")
    class Engine:
        def __init__(self, store: str) -> None:
            self.store = store

    with pytest.warns(DeprecationWarning, match="Engine is deprecated"):
        assert Engine("sqlite:///x.db").store == "sqlite:///x.db"
    assert list(inspect.signature(Engine).parameters) == ["store"]


def test_a_renamed_module_attribute_warns_through_warn() -> None:
    def module_getattr(name: str) -> object:
        if name == "OldRunner":
            warn("stalwart.OldRunner", replacement="stalwart.Runner", removed_in="0.3")
            return sw.Runner
        raise AttributeError(name)

    with pytest.warns(DeprecationWarning, match="stalwart.OldRunner is deprecated") as caught:
        assert module_getattr("OldRunner") is sw.Runner
    assert caught[0].filename == __file__
    assert DEPRECATIONS["stalwart.OldRunner"].removed_in == "0.3"


def test_a_deprecation_must_name_a_replacement_and_a_version() -> None:
    with pytest.raises(ValueError, match="name a replacement and the version"):

        @deprecated(replacement="", removed_in="0.3")
        def nothing() -> None: ...


def test_no_deprecated_name_outlives_the_version_that_removes_it() -> None:
    for module_name in PUBLIC:  # importing them registers their deprecations
        with contextlib.suppress(ImportError):  # an extra not installed
            importlib.import_module(module_name)
    current = _version(sw.__version__)
    overdue = [d.name for d in DEPRECATIONS.values() if _version(d.removed_in) <= current]
    assert overdue == [], f"remove these, deprecated until {sw.__version__} or before: {overdue}"
