"""The order S1 step keys define: :mod:`stalwart.core.keys`, kept importable
from here, where time travel (fork at a step, export in step order) reads it."""

from __future__ import annotations

from ..core.keys import before, is_ancestor, key_parts, sort_keys

__all__ = ["before", "is_ancestor", "key_parts", "sort_keys"]
