"""Fixtures shared by the flow tests."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from ._helpers import Caught


@pytest.fixture
def caught() -> Iterator[Caught]:
    """Record every warning, none filtered out or deduplicated.

    "always" matters: the default filter shows a warning once per code
    location, which would hide a second "Flow ends" and make "exactly once"
    untestable.
    """
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield Caught(records)
