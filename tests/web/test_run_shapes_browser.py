"""In a real browser: the shape of a run as its page draws it, on SQLite
and PostgreSQL: a flow's graph marks the node a SIGKILL stopped the run in,
three tool calls of one reply are three overlapping bars on the timeline,
and names that are markup are drawn as text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.crash import kill, wait_for_line

from .browser import chromium, inspector, require_browser
from .conftest import seed_sync, start
from .shapes_app import seed
from .web_app import HOSTILE

APP = "tests.web.shapes_app"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def test_the_graph_marks_the_node_a_sigkill_interrupted(browser: Any, store_url: str) -> None:
    proc = start(["-m", APP, store_url, "crash"])
    wait_for_line(proc, "in slow")  # the flow is inside Slow's exec
    kill(proc)
    with inspector(store_url, app=APP) as base:
        page = browser.new_page()
        page.goto(f"{base}/run?id=crashing-1")
        assert page.locator(".run-head .status").inner_text() == "running"
        graph = page.locator(".flow-graph svg")
        assert graph.locator('g.node.interrupted[data-node="Slow"]').count() == 1
        assert graph.locator('g.node.visited[data-node="Fetch"]').count() == 1
        assert graph.locator('g.node[data-node="Save"]').get_attribute("class") == "node"
        assert graph.locator("g.edge.taken").count() == 1  # Fetch to Slow
        said = page.locator(".flow-graph").inner_text()
        assert "The run was at Slow when its holder stopped" in said


def test_names_that_are_markup_are_drawn_as_text(browser: Any, store_url: str) -> None:
    seed_sync(store_url, seed)
    dialogs: list[str] = []
    with inspector(store_url, app=APP) as base:
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{base}/run?id=review-1")
        failed = page.locator(".flow-graph g.node.failed")
        assert failed.get_attribute("data-node") == HOSTILE
        assert failed.locator("title").text_content().startswith(HOSTILE)
        assert failed.locator("text").text_content() == HOSTILE[:18] + "…"
        taken = page.locator(".flow-graph g.edge.taken title").all_text_contents()
        assert f"{HOSTILE}: taken 1 time" in taken
        page.goto(f"{base}/run?id=napper-1")
        waited = page.locator('.timeline tr[data-key="2"] .gap-label').inner_text()
        assert waited.endswith(f"for signal {HOSTILE}")
        page.wait_for_timeout(700)  # a live refresh or two
        assert page.locator("main script, main img, svg script, svg foreignObject").count() == 0
    assert dialogs == []


def test_three_parallel_tool_calls_are_three_overlapping_bars(browser: Any, store_url: str) -> None:
    seed_sync(store_url, seed)
    with inspector(store_url) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/run?id=trio-1")
        boxes = []
        for i in (1, 2, 3):
            bar = page.locator(f'.timeline tr[data-key="1#{i}"] rect')
            assert "parallel" in (bar.get_attribute("class") or "")
            boxes.append(bar.bounding_box())
        assert all(b is not None and b["width"] > 20 for b in boxes)
        lefts = [b["x"] for b in boxes]
        rights = [b["x"] + b["width"] for b in boxes]
        assert max(lefts) < min(rights)  # on the screen, the three bars overlap in time
        tops = [b["y"] for b in boxes]
        assert tops == sorted(tops) and len(set(tops)) == 3  # side by side, one row each
        title = page.locator('.timeline tr[data-key="1#3"] title').text_content()
        assert "ran beside others" in title
