"""A flow run's page draws its graph: the flow's nodes and actions when the
inspector has the flow, the path taken, and the node the run failed in;
every name, markup included, drawn as text."""

from __future__ import annotations

import re
from html import unescape

import pytest

from .conftest import client
from .shapes_app import POLICIES, review, seed
from .web_app import HOSTILE


def _nodes(html: str) -> dict[str, str]:
    """Each drawn node's name and the state its box is drawn in."""
    found = re.findall(r'<g class="node ?([a-z]*)" data-node="([^"]*)">', html)
    return {unescape(name): state for state, name in found}


def _edges(html: str) -> dict[str, bool]:
    """Each drawn action and whether the run took it."""
    found = re.findall(r'<g class="edge( taken)?" data-action="([^"]*)">', html)
    return {unescape(action): bool(taken) for taken, action in found}


@pytest.fixture
async def seeded_shapes(store_url: str) -> str:
    await seed(store_url)
    return store_url


async def test_the_whole_graph_with_the_path_taken_and_the_failed_node(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes, policies=tuple(POLICIES)) as c:
        html = (await c.get("/run", params={"id": "review-1"})).text
    drawn = {"Draft": "visited", "Check": "visited", HOSTILE: "failed", "Archive": ""}
    assert _nodes(html) == drawn
    assert _edges(html) == {"check": True, "revise": True, HOSTILE: True, "shelve": False}
    assert html.count("(ran 2 times)") == 2  # Draft and Check: the loop
    assert f"{HOSTILE} failed: RuntimeError" in unescape(html)
    assert "<script>" not in html and "<img" not in html


async def test_without_the_flow_the_graph_is_the_path_the_ledger_shows(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes) as c:
        html = (await c.get("/run", params={"id": "review-1"})).text
    assert "the path the steps show" in html
    assert _nodes(html) == {"Draft": "visited", "Check": "visited", HOSTILE: "failed"}
    assert _edges(html) == {"check": True, "revise": True, HOSTILE: True}


async def test_a_run_that_is_no_flow_has_no_graph(seeded_shapes: str) -> None:
    async with client(seeded_shapes, policies=tuple(POLICIES)) as c:
        html = (await c.get("/run", params={"id": "trio-1"})).text
    assert 'class="flow-graph"' not in html


async def test_a_flow_not_started_yet_is_at_its_start_node(sqlite_url: str) -> None:
    import stalwart as sw

    async with sw.Runner(sqlite_url, serving=False) as r:
        await r.enqueue(review, shared={}, run_id="review-later")
    async with client(sqlite_url, policies=tuple(POLICIES)) as c:
        html = (await c.get("/run", params={"id": "review-later"})).text
    assert _nodes(html)["Draft"] == "current"
    assert "The run is at <b>Draft</b>." in html
