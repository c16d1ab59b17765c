"""Deprecating a public name: it keeps working, and says what replaces it and
when it goes.

A public function, method or class that is renamed or replaced is not
removed at once. The old name stays, decorated with :func:`deprecated`, for
the time docs/reference.md ("Stability and deprecation") promises; each use
warns with a :class:`DeprecationWarning` naming the replacement and the
version that removes it::

    @deprecated(replacement="stalwart.Runner.start", removed_in="0.3")
    async def launch(...): ...

A name a module only re-exports (a class moved or renamed) is deprecated in
the module's ``__getattr__`` with :func:`warn`, which builds the same message.

Every deprecation is listed in :data:`DEPRECATIONS` when its module is
imported, so a test can check that none outlives the version it names.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["DEPRECATIONS", "Deprecation", "deprecated", "warn"]

T = TypeVar("T")


@dataclass(frozen=True)
class Deprecation:
    """One deprecated name: what replaces it, and the version without it."""

    name: str
    replacement: str
    removed_in: str

    @property
    def message(self) -> str:
        return (
            f"{self.name} is deprecated and goes away in Stalwart {self.removed_in}; "
            f"use {self.replacement} instead"
        )


#: Every deprecation made so far in this process, by the deprecated name.
DEPRECATIONS: dict[str, Deprecation] = {}


def _register(name: str, replacement: str, removed_in: str) -> Deprecation:
    if not replacement or not removed_in:
        raise ValueError(f"deprecating {name}: name a replacement and the version removing it")
    entry = Deprecation(name, replacement, removed_in)
    DEPRECATIONS[name] = entry
    return entry


def warn(name: str, *, replacement: str, removed_in: str, stacklevel: int = 2) -> None:
    """Warn that ``name`` is deprecated, from the caller of the function that
    calls this (``stacklevel=2``): for a name a module's ``__getattr__`` resolves."""
    entry = DEPRECATIONS.get(name) or _register(name, replacement, removed_in)
    warnings.warn(entry.message, DeprecationWarning, stacklevel=stacklevel + 1)


def deprecated(*, replacement: str, removed_in: str) -> Callable[[T], T]:
    """Mark a function, a method (async too) or a class as deprecated: it works
    as before, and each call (for a class, each instance made) warns."""

    def mark(obj: T) -> T:
        name = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"
        entry = _register(name, replacement, removed_in)
        if isinstance(obj, type):
            init: Any = getattr(obj, "__init__")  # noqa: B009 (mypy refuses obj.__init__)

            @functools.wraps(init)
            def warned_init(self: Any, *args: Any, **kwargs: Any) -> None:
                warnings.warn(entry.message, DeprecationWarning, stacklevel=2)
                init(self, *args, **kwargs)

            type.__setattr__(obj, "__init__", warned_init)
            return obj
        if not callable(obj):
            raise TypeError(f"deprecated() marks a function or a class, not {obj!r}")
        fn: Callable[..., Any] = obj
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def warned_async(*args: Any, **kwargs: Any) -> Any:
                warnings.warn(entry.message, DeprecationWarning, stacklevel=2)
                return await fn(*args, **kwargs)

            return warned_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def warned(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(entry.message, DeprecationWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return warned  # type: ignore[return-value]

    return mark
