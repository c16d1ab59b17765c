"""A run of thousands of steps: its page shows the latest ones and a way back.

The run's page shows its latest 50 steps (in the order they finished), says
which of how many they are, and links to the earlier ones; following those
links shows every step exactly once, and the live part of an earlier page
keeps showing that page.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from tests.records import step_record

from stalwart.core.ledger import RunRecord, StoredStep
from stalwart.stores.base import this_host
from stalwart.stores.sqlite import SQLiteStore

from .conftest import client

START = 1_700_000_000.0
STEPS = 2_000


async def _seed(url: str) -> None:
    store = SQLiteStore.from_url(url)
    await store.open()
    try:
        await store.create_run(RunRecord("long", "loop", "{}"))
        claim = await store.claim("long", f"{this_host()}:{os.getpid()}:web", 60.0)
        assert claim is not None
        for i in range(1, STEPS + 1):
            step = step_record(str(i), str(i), name="tick", started_at=START + i)
            await store.record_step("long", claim.fence, StoredStep.of(step))
    finally:
        await store.close()


def _keys(page: str) -> list[int]:
    return [int(k) for k in re.findall(r'<span class="key">([^<]*)</span>', page)]


def _link(page: str, cls: str) -> str | None:
    found = re.search(rf'<a class="{cls}" href="([^"]*)"', page)
    return None if found is None else html.unescape(found.group(1))


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def test_a_run_of_thousands_of_steps_shows_the_latest_page_and_links_to_earlier_ones(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    await _seed(url)
    async with client(url) as c:
        page = (await c.get("/run", params={"id": "long"})).text
        assert _keys(page) == list(range(1951, 2001))
        assert "Steps 1951 to 2000 of 2000" in _text(page) and "1950 earlier" in _text(page)
        assert _link(page, "later") is None
        seen = _keys(page)
        earlier = _link(page, "earlier")
        pages = 1
        while earlier is not None:
            page = (await c.get(earlier)).text
            assert len(_keys(page)) == 50
            seen = _keys(page) + seen
            earlier = _link(page, "earlier")
            pages += 1
        assert seen == list(range(1, STEPS + 1)) and pages == 40
        assert "Steps 1 to 50 of 2000" in _text(page)
        # From the first page, later steps, and back to the latest.
        later = _link(page, "later")
        assert later is not None
        assert _keys((await c.get(later)).text) == list(range(51, 101))
        latest = _link(page, "latest")
        assert latest is not None
        assert _keys((await c.get(latest)).text) == list(range(1951, 2001))


async def test_the_live_part_of_an_earlier_page_shows_that_page(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    await _seed(url)
    async with client(url) as c:
        latest = (await c.get("/run", params={"id": "long"})).text
        earlier = _link(latest, "earlier")
        assert earlier is not None
        page = (await c.get(earlier)).text
        live = re.search(r'data-live="([^"]*)"', page)
        assert live is not None
        fragment = (await c.get(html.unescape(live.group(1)))).text
        assert _keys(fragment) == list(range(1901, 1951))


async def test_a_bad_step_cursor_is_a_400_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    await _seed(url)
    async with client(url) as c:
        bad = await c.get("/run", params={"id": "long", "before": "yesterday"})
        assert bad.status_code == 400 and "bad step cursor 'yesterday'" in _text(bad.text)
