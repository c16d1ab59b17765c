"""What a wait for a human shows: its question and the details it attached
(``about=``), on the run's page and on "Waiting for a human", escaped; and,
once answered, what happens to the run next."""

from __future__ import annotations

import asyncio
import re

import httpx
import markupsafe

import stalwart as sw

from .conftest import client
from .web_app import HOSTILE


@sw.policy
async def refund(ctx: sw.Context, order: str, amount: int) -> str:
    """Wait for a human to approve a refund, showing what is refunded."""
    ok = await ctx.wait_for("approve", about={"order": order, "amount": amount, "note": HOSTILE})
    return "refunded" if ok else "refused"


@sw.policy
async def survey(ctx: sw.Context, customer: str) -> str:
    """Ask a question, with details."""
    return str(await ctx.ask(f"How was it, {customer}?", signal="answer", about=[customer, 3]))


POLICIES = [refund, survey]


async def waiting(url: str) -> None:
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.start(refund, "A-42", 120, run_id="refund-42")
        await r.start(survey, "Ada", run_id="survey-1")
        for _ in range(300):
            runs = {x.id: x.status for x in await r.list_runs(limit=10)}
            if runs.get("refund-42") == runs.get("survey-1") == "suspended":
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the runs never suspended")


def esc(text: str) -> str:
    return str(markupsafe.escape(text))


async def csrf_of(c: httpx.AsyncClient, page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', (await c.get(page)).text)
    assert found, "the page has no action form"
    return found.group(1)


async def test_what_a_wait_is_about_is_on_both_pages_escaped(store_url: str) -> None:
    await waiting(store_url)
    async with client(store_url) as c:
        for page in ("/waiting", "/waiting/live", "/run?id=refund-42", "/run/live?id=refund-42"):
            body = (await c.get(page)).text
            assert '"order": "A-42"' in markupsafe.Markup(body).unescape(), page
            assert esc('"amount": 120') in body, page
            assert esc(HOSTILE) in body, page
            assert HOSTILE not in body and "<script>" not in body, page
        survey_page = (await c.get("/run", params={"id": "survey-1"})).text
        assert esc("How was it, Ada?") in survey_page
        assert re.search(r'class="about">.*?&#34;Ada&#34;,\s+3', survey_page, re.S)


async def test_after_an_answer_the_page_says_the_run_waits_for_a_worker(store_url: str) -> None:
    await waiting(store_url)
    async with client(store_url) as c:
        token = await csrf_of(c, "/waiting")
        form = {"csrf": token, "id": "refund-42", "name": "approve", "verdict": "approve"}
        sent = await c.post("/run/signal", data={**form, "back": "/waiting"})
        assert sent.status_code == 303
        after = await c.get(sent.headers["location"])
        note = re.search(r'<p class="flash" role="status">(.*?)</p>', after.text, re.S)
        assert note, after.text[:500]
        said = markupsafe.Markup(note.group(1)).unescape()
        assert "Sent 'approve' to run 'refund-42'" in said
        assert "pending until a worker on this store picks it up" in said
        assert "stalwart worker --app MODULE" in said and "'refund'" in said
        assert "refund-42" not in (await c.get("/waiting/live")).text  # no longer waiting

        # From the run's page, the note comes back to the run's page.
        token = await csrf_of(c, "/run?id=survey-1")
        form = {"csrf": token, "id": "survey-1", "name": "other", "verdict": "send"}
        sent = await c.post(
            "/run/signal", data={**form, "payload": "1", "back": "/run?id=survey-1"}
        )
        assert sent.headers["location"].startswith("/run?id=survey-1&")
        said = markupsafe.Markup((await c.get(sent.headers["location"])).text).unescape()
        assert "still waits for 'answer'" in said and "kept until it does" in said


async def test_an_answered_run_a_worker_finished_is_said_to_have_finished(
    store_url: str,
) -> None:
    await waiting(store_url)
    async with client(store_url) as c:
        token = await csrf_of(c, "/waiting")
        form = {"csrf": token, "id": "refund-42", "name": "approve", "verdict": "reject"}
        sent = await c.post("/run/signal", data={**form, "back": "/waiting"})
        stop = asyncio.Event()
        worker = sw.Runner(store_url, policies=POLICIES, poll_interval=0.05)
        serving = asyncio.create_task(worker.serve(stop))
        try:
            async with asyncio.timeout(20):
                while (await worker.get_run("refund-42")).status != "succeeded":
                    await asyncio.sleep(0.03)
        finally:
            stop.set()
            await serving
        said = markupsafe.Markup((await c.get(sent.headers["location"])).text).unescape()
        assert "It has finished: succeeded." in said


async def test_the_address_after_an_answer_stays_on_this_server(sqlite_url: str) -> None:
    await waiting(sqlite_url)
    async with client(sqlite_url) as c:
        token = await csrf_of(c, "/waiting")
        for back in (
            "/\t/evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "https://evil.example/",
        ):
            form = {"csrf": token, "id": "survey-1", "name": "x", "verdict": "send", "back": back}
            sent = await c.post("/run/signal", data=form)
            assert sent.status_code == 303
            where = sent.headers["location"]
            assert where.startswith("/") and not where.startswith(("//", "/\\")), where
            assert "evil" not in where.split("?")[0], where
