"""A folder of exported runs as a parametrized pytest suite.

Either use the helper in a test module::

    from stalwart.testing import replay
    from stalwart.testing.pytest_plugin import recordings

    @pytest.mark.parametrize("recording", recordings("tests/recordings"))
    def test_reproduces(recording):
        assert replay(recording, my_agent)

or load this module as a plugin (``-p stalwart.testing.pytest_plugin``, or
``pytest_plugins`` in the top-level conftest) and mark a test that takes a
``recording`` argument: ``@pytest.mark.stalwart_recordings("tests/recordings")``.
Each ``*.jsonl`` export in the folder is one test, named after its file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["pytest_configure", "pytest_generate_tests", "recordings"]


def recordings(folder: str | Path) -> list[Any]:
    """One ``pytest.param`` per export file in ``folder``, sorted by name; a
    folder with none is an error (an empty suite would pass silently)."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no exported runs (*.jsonl) in {folder}")
    return [pytest.param(f, id=f.stem) for f in files]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "stalwart_recordings(folder): run the test once per exported run in folder"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("stalwart_recordings")
    if marker is None or "recording" not in metafunc.fixturenames:
        return
    folder = Path(marker.args[0])
    if not folder.is_absolute():
        folder = Path(metafunc.definition.path).parent / folder
    metafunc.parametrize("recording", recordings(folder))
