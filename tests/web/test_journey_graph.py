"""A journey run's page draws the journey's steps and the moves it made
between them, read from its ``stalwart.journey`` records."""

from __future__ import annotations

import importlib.util
import re
import sys
from html import unescape
from pathlib import Path
from typing import Any

from stalwart.testing import ScriptedLLM

from .conftest import ROOT, client

EXAMPLE = ROOT / "examples" / "support_journey.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("examples_support_journey_web", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _nodes(html: str) -> dict[str, str]:
    found = re.findall(r'<g class="node ?([a-z]*)" data-node="([^"]*)">', html)
    return {unescape(name): state for state, name in found}


def _moves(html: str) -> dict[str, bool]:
    found = re.findall(r'<g class="edge( taken)?" data-action="([^"]*)">', html)
    return {unescape(action): bool(taken) for taken, action in found}


async def test_a_journey_shows_its_steps_and_the_moves_it_made(
    store_url: str, tmp_path: Path
) -> None:
    example = _example()
    journey = example.support_journey(ScriptedLLM(example.SCRIPT))
    await example.converse(store_url, journey, "ticket-1")
    async with client(store_url, policies=(journey,)) as c:
        html = (await c.get("/run", params={"id": "ticket-1"})).text
    assert "Journey: its steps and moves" in html
    stages = [m.name for m in example.Stage]
    assert set(_nodes(html)) == set(stages)
    assert all(state == "visited" for state in _nodes(html).values())
    moves = _moves(html)
    assert all(moves.values()) and len(moves) == len(stages) - 1  # one move into each later step
    async with client(store_url) as c:  # without the journey: the steps its records show
        html = (await c.get("/run", params={"id": "ticket-1"})).text
    assert "the path the steps show" in html and set(_nodes(html)) <= set(stages)
