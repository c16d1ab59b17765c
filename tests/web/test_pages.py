"""The pages, read through the ASGI app over a real SQLite file (and PostgreSQL)."""

from __future__ import annotations

import html
import re
import time

import pytest

from stalwart.web.views import link

from .conftest import client
from .web_app import HOSTILE, seed


def texts(page: str) -> str:
    """The page's text as a browser shows it: tags dropped, entities decoded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def run_ids(page: str) -> list[str]:
    """The run ids the runs table links to, in order."""
    table = page.split('<table class="runs">', 1)[1]
    return [html.unescape(m) for m in re.findall(r'class="runid" href="[^"]*">([^<]*)</a>', table)]


async def test_runs_list_counts_by_status_and_lists_every_run(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/runs")).text
    shown = texts(page)
    for count, status in ((9, "all"), (6, "succeeded"), (1, "failed"), (2, "suspended")):
        assert re.search(rf"\b{count}\s+{status}\b", shown), (status, shown[:600])
    assert set(run_ids(page)) == {
        "greet-ada", "broken-1", "agent-1", "family", "family~1/0", "family~1/1",
        HOSTILE, "ship-1", "waits-hostile",
    }  # fmt: skip
    assert run_ids(page)[0] == "waits-hostile"  # newest first


async def test_filters_combine_and_text_is_literal(seeded: str) -> None:
    async with client(seeded) as c:
        suspended = run_ids((await c.get("/runs", params={"status": "suspended"})).text)
        by_policy = run_ids((await c.get("/runs", params={"policy": "greet"})).text)
        children = run_ids((await c.get("/runs", params={"id": "~1/"})).text)
        percent = run_ids((await c.get("/runs", params={"id": "%"})).text)
        future = run_ids((await c.get("/runs", params={"after": "2999-01-01T00:00"})).text)
        past = run_ids((await c.get("/runs", params={"before": str(time.time() - 3600)})).text)
        other_queue = run_ids((await c.get("/runs", params={"queue": "nope"})).text)
    assert sorted(suspended) == ["ship-1", "waits-hostile"]
    assert sorted(by_policy) == sorted(["greet-ada", "family~1/0", "family~1/1", HOSTILE])
    assert sorted(children) == ["family~1/0", "family~1/1"]
    assert percent == future == past == other_queue == []


async def test_paging_by_cursor_visits_every_run_once(seeded: str) -> None:
    seen: list[str] = []
    url = link("/runs", limit=4)
    async with client(seeded) as c:
        for _ in range(5):
            page = (await c.get(url)).text
            seen += run_ids(page)
            nxt = re.search(r'class="next" href="([^"]*)"', page)
            if nxt is None:
                break
            url = html.unescape(nxt.group(1))
            assert "cursor=" in url
    assert len(seen) == 9 and len(set(seen)) == 9


async def test_bad_filters_say_why(seeded: str) -> None:
    async with client(seeded) as c:
        bad_time = await c.get("/runs", params={"after": "yesterday-ish"})
        bad_status = await c.get("/runs", params={"status": "<b>done</b>"})
        bad_cursor = await c.get("/runs", params={"cursor": "nonsense"})
    assert bad_time.status_code == bad_status.status_code == bad_cursor.status_code == 400
    assert "yesterday-ish" in texts(bad_time.text)
    assert "unknown status '<b>done</b>'" in texts(bad_status.text)
    assert "<b>done</b>" not in bad_status.text
    assert "bad page cursor" in texts(bad_cursor.text)


async def test_agent_run_shows_conversation_usage_tree_and_timeline(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/run", params={"id": "agent-1"})).text
    shown = texts(page)
    convo = texts(page.split('class="conversation"', 1)[1].split("</section>", 1)[0])
    order = [
        "Answer from the library.",  # system
        "What is Stalwart?",  # user
        "calls lookup",  # the model's tool call, with its arguments
        '"query": "stalwart"',
        "result of lookup",  # the tool's result
        f"found stalwart: {HOSTILE}",
        f"The answer, with markup: {HOSTILE}",  # the final answer
    ]
    at = [convo.find(t) for t in order]
    assert -1 not in at and at == sorted(at), list(zip(order, at, strict=True))
    assert convo.count("What is Stalwart?") == 1  # each message once, though recorded twice
    assert re.search(r"test-model-1\s+1\s+120\s+30\s+150", shown)
    tree = page.split('<ul class="tree">', 1)[1]
    keys = re.findall(r'<span class="key">([^<]*)</span>', tree)
    assert keys == ["1", "1#1", "2"]
    assert tree.index(">1#1<") < tree.index("</ul>")  # 1#1 nests inside 1
    assert page.split('<section class="timeline">', 1)[1].count("<rect ") == 3  # one a step
    assert "<script>alert" not in page and "<img src=x" not in page


async def test_failed_run_shows_its_error_as_text(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/run", params={"id": "broken-1"})).text
    assert f"ValueError: {HOSTILE}" in texts(page)
    assert "<script>" not in page.replace('<script src="/static/live.js" defer></script>', "")
    assert "data-final" in page  # finished: no live refresh


async def test_parent_lists_children_and_child_links_back(seeded: str) -> None:
    async with client(seeded) as c:
        parent = (await c.get("/run", params={"id": "family"})).text
        child = (await c.get("/run", params={"id": "family~1/1"})).text
    kids = parent.split('class="children"', 1)[1]
    assert run_ids('<table class="runs">' + kids) == ["family~1/0", "family~1/1"]
    assert 'href="/run?id=family"' in child


async def test_hostile_run_id_is_text_everywhere(seeded: str) -> None:
    async with client(seeded) as c:
        listing = (await c.get("/runs")).text
        page = (await c.get("/run", params={"id": HOSTILE})).text
        live = (await c.get("/runs/live")).text
    for body in (listing, page, live):
        assert "<script>alert" not in body and "<img src=x" not in body
    assert HOSTILE in texts(page) and HOSTILE in run_ids(listing)


async def test_waiting_page_lists_runs_waiting_for_a_signal_oldest_first(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/waiting")).text
        ship = (await c.get("/run", params={"id": "ship-1"})).text
    waiting = re.findall(r'class="runid" href="[^"]*">([^<]*)</a>', page)
    assert [html.unescape(w) for w in waiting] == ["ship-1", "waits-hostile"]
    assert texts(page).count(f"waits for {HOSTILE}") == 1
    assert "<script>alert" not in page
    # Each has a form for its own signal, with approve and reject.
    assert (
        page.count('name="verdict" value="approve"') == 2 and 'name="name" value="approve"' in page
    )
    assert "Waiting for the signal" in texts(ship) and 'value="approve"' in ship


async def test_live_fragments_are_parts_and_stop_when_finished(seeded: str) -> None:
    async with client(seeded) as c:
        runs = (await c.get("/runs/live", params={"status": "failed"})).text
        done = (await c.get("/run/live", params={"id": "agent-1"})).text
        waiting = (await c.get("/run/live", params={"id": "ship-1"})).text
        missing = await c.get("/run", params={"id": "no-such-run"})
    assert "<html" not in runs and run_ids(runs) == ["broken-1"]
    assert "data-final" in done and "data-final" not in waiting
    assert missing.status_code == 404 and "no-such-run" in missing.text


async def test_pages_read_a_postgresql_store(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite is covered by every other test here")
    await seed(store_url)
    async with client(store_url) as c:
        listing = (await c.get("/runs", params={"status": "suspended"})).text
        page = (await c.get("/run", params={"id": "agent-1"})).text
        waiting = (await c.get("/waiting")).text
    assert sorted(run_ids(listing)) == ["ship-1", "waits-hostile"]
    assert "test-model-1" in page and "calls" in texts(page)
    assert "ship-1" in waiting
