"""A tool call waiting for approval on the inspector's "Waiting for a human"
page: the page shows the tool and its arguments (escaped) with the approve
and reject buttons, which decide every call the wait asks about; a typed
decision that does not fit is refused naming the field, and the run keeps
waiting. A worker (a Runner serving in this process) resumes the run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import stalwart as sw
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call

from .conftest import client
from .test_actions import csrf_of, outcome

SENT: list[str] = []


@sw.policy(approval=True)
async def send_note(to: str, text: str) -> str:
    """Send a note."""
    SENT.append(text)
    return f"sent to {to}"


noter = Agent(
    ScriptedLLM([call("send_note", _id="c1", to="ada", text="<script>x</script>"), "done"]),
    tools=[send_note],
    name="noter",
)


async def waiting_signal(url: str, run_id: str) -> str:
    async with sw.Runner(url, policies=[noter]) as r:
        await r.start(noter, question="Write to Ada", run_id=run_id)
        for _ in range(300):
            run = await r.get_run(run_id)
            if run.status == "suspended" and run.waiting_for:
                return run.waiting_for
            await asyncio.sleep(0.01)
    raise AssertionError(f"{run_id} never waited")


@contextlib.asynccontextmanager
async def serving(url: str) -> AsyncIterator[None]:
    stop = asyncio.Event()
    runner = sw.Runner(url, policies=[noter], poll_interval=0.05)
    task = asyncio.create_task(runner.serve(stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def test_the_waiting_page_shows_the_call_and_its_buttons_decide_it(sqlite_url: str) -> None:
    SENT.clear()
    signal = await waiting_signal(sqlite_url, "note-1")
    async with client(sqlite_url) as c, serving(sqlite_url):
        page = (await c.get("/waiting")).text
        prompt = (
            "Approve send_note(to=&#34;ada&#34;, text=&#34;&lt;script&gt;x&lt;/script&gt;&#34;)?"
        )
        assert f'<p class="prompt">{prompt}</p>' in page
        assert "&#34;tool&#34;: &#34;send_note&#34;" in page  # the about block, as JSON
        assert "<script>x</script>" not in page
        assert 'value="approve"' in page and 'value="reject"' in page
        assert f'value="{signal}"' in page
        token = await csrf_of(c, "/waiting")
        form = {"csrf": token, "id": "note-1", "name": signal, "back": "/waiting"}
        bad = await c.post("/run/signal", data={**form, "payload": '{"c1": {"decision": 1}}'})
        assert bad.status_code == 400
        assert "[&#39;c1&#39;][&#39;decision&#39;]: is one of approve, deny, edit" in bad.text
        sent = await c.post("/run/signal", data={**form, "verdict": "reject"})
        assert sent.status_code == 303
        assert await outcome(sqlite_url, "note-1") == ("succeeded", '"done"')
    assert SENT == []
