"""Long values: a page shows the first few thousand characters of each, says
how many more there are, and links to the whole value, served as plain text
by ``/run/value``; the live refresh cuts them the same way."""

from __future__ import annotations

import html
import json
import re

import httpx
import markupsafe
import pytest

import stalwart as sw
from stalwart.web.values import PREVIEW

from .conftest import client

BIG = 1_000_000
PAGE_BOUND = 200_000  # bytes: a page of a run holding three 1 MB values


@sw.policy
async def shout(text: str) -> str:
    """A step whose result is as long as its argument."""
    return text.upper()


@sw.policy
async def holds_long_values(text: str) -> int:
    """A run whose input, and a step's argument and result, are 1 MB each."""
    return len(await shout(text))


def big_text() -> str:
    """1 MB of text that is not one character repeated, with markup in it."""
    words = "<b>alpha</b> beta & gamma 'delta' \"epsilon\" "
    return (words * (BIG // len(words) + 1))[:BIG]


async def seed_long(url: str) -> str:
    text = big_text()
    async with sw.Runner(url, policies=[holds_long_values, shout]) as r:
        assert await r.run(holds_long_values, text, run_id="long-1") == BIG
    return text


def links(page: str) -> list[str]:
    """The addresses of the whole values a page links to, unescaped."""
    return [html.unescape(h) for h in re.findall(r'href="(/run/value\?[^"]*)"', page)]


async def whole(c: httpx.AsyncClient, href: str) -> str:
    got = await c.get(href)
    assert got.status_code == 200, got.text[:300]
    assert got.headers["content-type"].startswith("text/plain")
    assert got.headers["x-content-type-options"] == "nosniff"
    return got.text


async def test_a_run_of_megabyte_values_is_a_small_page_linking_to_each_whole(
    store_url: str,
) -> None:
    text = await seed_long(store_url)
    async with client(store_url) as c:
        page = await c.get("/run", params={"id": "long-1"})
        assert page.status_code == 200
        assert len(page.content) < PAGE_BOUND, len(page.content)
        assert re.search(r"… \d+ more characters", page.text)
        hrefs = links(page.text)
        inputs = [h for h in hrefs if "step=" not in h and "field=inputs" in h]
        output = [h for h in hrefs if "step=1" in h and "field=output" in h]
        args = [h for h in hrefs if "step=1" in h and "field=args" in h]
        assert inputs and output and args, hrefs

        recorded_inputs = json.loads(await whole(c, inputs[0]))
        assert recorded_inputs == {"args": [text], "kwargs": {}}
        assert json.loads(await whole(c, output[0])) == text.upper()
        assert [text] in json.loads(await whole(c, args[0])).values()  # the step's arguments

        # The preview is the beginning of the whole value, escaped in the page.
        shown = await whole(c, inputs[0])
        assert str(markupsafe.escape(shown[:200])) in page.text
        more = len(shown) - PREVIEW
        assert f"… {more} more characters" in page.text

        live = await c.get("/run/live", params={"id": "long-1"})
        assert live.status_code == 200
        assert len(live.content) < PAGE_BOUND, len(live.content)
        assert links(live.text) == hrefs


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"id": "nobody", "field": "inputs"}, "no run 'nobody'"),
        ({"id": "long-1", "field": "secrets"}, "no field 'secrets' of a run"),
        ({"id": "long-1"}, "no field '' of a run"),
        ({"id": "long-1", "step": "1", "field": "inputs"}, "no field 'inputs' of a step"),
        ({"id": "long-1", "step": "9.9", "field": "output"}, "has no step '9.9'"),
        ({"id": "long-1", "field": "error"}, "has no error recorded"),
        ({"id": "long-1", "step": "1", "field": "error"}, "has no error recorded"),
    ],
)
async def test_an_unknown_run_step_or_field_is_a_404_that_names_it(
    sqlite_url: str, params: dict[str, str], says: str
) -> None:
    await seed_long(sqlite_url)
    async with client(sqlite_url) as c:
        got = await c.get("/run/value", params=params)
        assert got.status_code == 404
        assert str(markupsafe.escape(says)) in got.text


async def test_the_whole_value_needs_the_token_as_every_page_does(sqlite_url: str) -> None:
    await seed_long(sqlite_url)
    token = "a-token-long-enough-1234"
    async with client(sqlite_url, token=token) as c:
        refused = await c.get("/run/value", params={"id": "long-1", "field": "inputs"})
        assert refused.status_code == 401 and "long-1" not in refused.text
        given = await c.get(
            "/run/value",
            params={"id": "long-1", "field": "result"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert given.status_code == 200 and given.text == str(BIG)


async def test_markup_in_a_whole_value_is_plain_text(sqlite_url: str) -> None:
    await seed_long(sqlite_url)
    async with client(sqlite_url) as c:
        got = await c.get("/run/value", params={"id": "long-1", "field": "inputs"})
        assert got.headers["content-type"] == "text/plain; charset=utf-8"
        assert "<b>alpha</b>" in got.text  # as recorded: served as text, never as a page
