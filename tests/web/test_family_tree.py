"""A parent run's page shows its children, and theirs, as a tree."""

from __future__ import annotations

import re
from html import unescape

from .conftest import client
from .shapes_app import seed


def _tree(html: str) -> list[tuple[int, str]]:
    """(depth, run id) of each run in the children's tree, in order."""
    section = html.split('<section class="children">', 1)[1].split("</section>", 1)[0]
    out, depth = [], -1
    for tag, rid in re.findall(
        r'(<ul[^>]*>|</ul>|class="runid" href="[^"]*">([^<]*)</a>)', section
    ):
        if tag.startswith("<ul"):
            depth += 1
        elif tag == "</ul>":
            depth -= 1
        else:
            out.append((depth, unescape(rid)))
    return out


async def test_grandchildren_are_drawn_under_the_child_that_spawned_them(store_url: str) -> None:
    await seed(store_url)
    async with client(store_url) as c:
        html = (await c.get("/run", params={"id": "tree"})).text
        child = (await c.get("/run", params={"id": "tree~1/0"})).text
    tree = _tree(html)
    assert [rid for _, rid in tree if _ == 0] == ["tree~1/0", "tree~1/1"]
    assert len(tree) == 6
    for depth, rid in tree:
        assert depth == rid.count("~") - 1
    at = [rid for _, rid in tree]
    for branch in ("tree~1/0", "tree~1/1"):
        mine = [r for r in at if r.startswith(branch + "~")]
        assert len(mine) == 2 and at.index(branch) < at.index(mine[0])
    assert [rid for _, rid in _tree(child)] == ["tree~1/0~1/0", "tree~1/0~1/1"]
