"""A run's inputs on its page: by parameter name when the inspector was
given the application's policies (``create_app(policies=...)``), as recorded
(``args``, ``kwargs``) when it was not; the inspector executes nothing
either way."""

from __future__ import annotations

import json
import re

import markupsafe
import pytest

import stalwart as sw

from .conftest import client


@sw.policy
async def refund(order: str, amount: int) -> str:
    return f"refunded {order}"


def inputs_of(page: str) -> object:
    found = re.search(r'<pre class="inputs">(.*?)</pre>', page, re.S)
    assert found, page[:500]
    return json.loads(markupsafe.Markup(found.group(1)).unescape())


async def test_inputs_given_by_keyword_are_shown_by_name_when_the_policy_is_known(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[refund]) as r:
        await r.run(refund, order="A-42", amount=120, run_id="refund-42")
    async with client(store_url, policies=(refund,)) as c:
        page = (await c.get("/run", params={"id": "refund-42"})).text
        assert inputs_of(page) == {"order": "A-42", "amount": 120}
    async with client(store_url) as c:
        page = (await c.get("/run", params={"id": "refund-42"})).text
        assert inputs_of(page) == {"args": ["A-42", 120], "kwargs": {}}


@pytest.mark.slow
def test_stalwart_ui_names_inputs_with_app(sqlite_url: str) -> None:
    """``stalwart ui --app MODULE``, as a user types it, reads the policies'
    parameter names; the run stays as it was (the inspector executes nothing)."""
    import asyncio

    import httpx

    from .ui_server import serving_ui

    async def record() -> None:
        async with sw.Runner(sqlite_url, policies=[refund]) as r:
            await r.run(refund, order="A-42", amount=120, run_id="refund-42")

    asyncio.run(record())
    with serving_ui(sqlite_url, "--app", "tests.web.test_inputs_by_name:refund") as ui:
        page = httpx.get(f"{ui.base}/run", params={"id": "refund-42"}, timeout=10).text
    assert inputs_of(page) == {"order": "A-42", "amount": 120}
