"""The inspector over a recorded value nested deeper than Python's JSON decoder goes.

``values.load`` catches ValueError only; ``json.loads`` of a value nested
100,000 deep raises RecursionError, so the run's page is a 500 (the CLI
shows the same run, marking the value unreadable). A row written behind
the engine's back, or an imported export, is enough.
"""

from __future__ import annotations

import httpx
import pytest
from tests.hostile import write_row

import stalwart as sw
from stalwart.web import create_app

DEEP = "[" * 100_000 + "]" * 100_000


@sw.policy
async def echo(text: str) -> str:
    return text


@pytest.mark.parametrize("column", ["result", "inputs", "error"])
async def test_run_page_survives_a_deeply_nested_value(sqlite_url: str, column: str) -> None:
    url = sqlite_url
    async with sw.Runner(url, policies=[echo]) as r:
        await r.run(echo, "x", run_id="deep")
    write_row(url, f"UPDATE runs SET {column} = ? WHERE id = 'deep'", DEEP)
    app = create_app(url, hosts=("127.0.0.1",))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            page = await c.get("/run", params={"id": "deep"})
            listed = await c.get("/runs")
    assert listed.status_code == 200
    assert page.status_code == 200, page.text[:200]


@sw.policy
async def calls_echo(ctx: sw.Context) -> str:
    return str(await ctx.call(echo, "x"))


async def test_a_short_step_result_nested_too_deep_to_edit_leaves_its_fork_form_empty(
    sqlite_url: str,
) -> None:
    # Short enough to come with the page in the step's fork form, too deep to parse.
    short = "[" * 990 + "]" * 990
    url = sqlite_url
    async with sw.Runner(url, policies=[calls_echo, echo]) as r:
        await r.run(calls_echo, run_id="deep-step")
    write_row(url, "UPDATE steps SET output = ? WHERE run_id = 'deep-step' AND key = '1'", short)
    app = create_app(url, hosts=("127.0.0.1",), policies=[calls_echo, echo])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            page = await c.get("/run", params={"id": "deep-step"})
    assert page.status_code == 200, page.text[:200]
    assert 'data-source="/run/value?id=deep-step&amp;step=1&amp;field=output"' in page.text


async def test_values_the_parser_reads_but_the_encoders_cannot_lay_out_are_shown_as_text(
    sqlite_url: str,
) -> None:
    # Somewhere below the parser's depth, a value parses from a shallow stack
    # but is too deep for the encoders called from the page's deeper one:
    # every depth across that edge is tried, as a run's result and a step's.
    url = sqlite_url
    async with sw.Runner(url, policies=[calls_echo, echo]) as r:
        await r.run(calls_echo, run_id="deep-edge")
    app = create_app(url, hosts=("127.0.0.1",), policies=[calls_echo, echo])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for depth in range(900, 1000, 4):
                nested = '{"a":' * depth + "1" + "}" * depth
                write_row(url, "UPDATE runs SET result = ? WHERE id = 'deep-edge'", nested)
                write_row(
                    url,
                    "UPDATE steps SET output = ? WHERE run_id = 'deep-edge' AND key = '1'",
                    nested,
                )
                for path in ("/run", "/run/live"):
                    page = await c.get(path, params={"id": "deep-edge"})
                    assert page.status_code == 200, (depth, path, page.text[:200])
                value = await c.get("/run/value", params={"id": "deep-edge", "field": "result"})
                assert value.status_code == 200 and value.text.startswith("{"), depth
