"""A run's timeline: steps as bars on one time axis, tool calls run at
once overlapping, sleeps and waits as gaps labelled with what they waited
for, and every name as text."""

from __future__ import annotations

import asyncio
import re
from html import unescape

import pytest

from .conftest import client
from .shapes_app import seed
from .web_app import HOSTILE


def _rows(html: str) -> dict[str, tuple[str, float, float]]:
    """Each timeline row's key: its classes, and its bar's left and right."""
    section = html.split('<section class="timeline">', 1)[1].split("</section>", 1)[0]
    rows = re.findall(
        r'<tr class="row ([^"]*)" data-key="([^"]*)">.*?'
        r'<rect x="([\d.]+)" y="0.5" width="([\d.]+)"',
        section,
        re.S,
    )
    return {key: (cls, float(x), float(x) + float(w)) for cls, key, x, w in rows}


@pytest.fixture
async def seeded_shapes(store_url: str) -> str:
    await seed(store_url)
    return store_url


async def test_three_tool_calls_of_one_reply_are_three_overlapping_bars(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes) as c:
        html = (await c.get("/run", params={"id": "trio-1"})).text
    rows = _rows(html)
    assert list(rows) == ["1", "1#1", "1#2", "1#3", "2"]
    calls = [rows[f"1#{i}"] for i in (1, 2, 3)]
    assert all(cls == "step parallel" for cls, _, _ in calls)
    assert max(left for _, left, _ in calls) < min(right for _, _, right in calls)
    assert rows["2"][0] == "step ok"  # the reply after them ran alone
    assert rows["1"][1] <= min(left for _, left, _ in calls)  # the model call came first


async def test_a_sleep_and_a_wait_are_gaps_labelled_with_what_they_waited_for(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes) as c:
        html = (await c.get("/run", params={"id": "napper-1"})).text
    rows = _rows(html)
    assert rows["1"][0] == "sleep ok" and rows["2"][0] == "wait ok"
    assert rows["1"][2] <= rows["2"][1] + 0.5  # the wait began when the sleep ended
    section = unescape(html.split('<section class="timeline">', 1)[1].split("</section>")[0])
    assert re.search(r"sleeps 2\d\d ms", section)
    assert re.search(rf"waited \d+ ms for signal {re.escape(HOSTILE)}", section)
    assert "<script>" not in html.split('<section class="timeline">', 1)[1]


async def test_a_run_still_waiting_shows_the_wait_running_to_now(sqlite_url: str) -> None:
    import stalwart as sw

    from .web_app import POLICIES, ship

    async with sw.Runner(sqlite_url, policies=POLICIES) as r:
        await r.start(ship, "a box", run_id="waits")
        while (await r.store.get_run("waits")).status != "suspended":  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
    async with client(sqlite_url) as c:
        html = (await c.get("/run", params={"id": "waits"})).text
    rows = _rows(html)
    cls, _, right = rows["1"]
    assert cls == "wait waiting" and right == 1000.0
    assert "for signal approve" in html


async def test_the_time_in_model_calls_tools_and_waits_is_counted_once(
    seeded_shapes: str,
) -> None:
    async with client(seeded_shapes) as c:
        trio = (await c.get("/run", params={"id": "trio-1"})).text
        napper = (await c.get("/run", params={"id": "napper-1"})).text
    spent = re.search(r'<p class="spent">(.*?)</p>', trio, re.S)
    assert spent is not None
    said = re.sub(r"<[^>]+>", "", spent.group(1))
    assert "(2 calls)" in said and "(3 calls," in said
    assert "summed: they ran at once" in said  # three at once: the clock counts them once
    waits = re.search(r'<b class="waits">([^<]*)</b>', napper)
    model = re.search(r'<b class="model">([^<]*)</b>', napper)
    assert waits is not None and waits.group(1).endswith("ms") and waits.group(1) != "0 ms"
    assert model is not None and model.group(1) == "0 ms"  # no model in that run
