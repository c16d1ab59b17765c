"""The inspector's live regions read what moved, not whole ledgers.

``/run/live`` is fetched every ``refresh`` seconds while a run is unfinished
and ``/waiting/live`` while the waiting page is open; each used to read the
ledger of every run it showed on every fetch. These tests drive the
inspector's ASGI app over a real SQLite file through a store that counts the
step rows its reads return, with a second store on the same file playing the
worker, and check what a user relies on: a quiet refresh reads no step row,
and anything the page shows that moved (a step, the run's row, a child's
status, a new question) is shown at the next refresh. What the browser sends
back to say what it shows is data: anything but the server's own token
costs a full render, never a wrong page.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from tests.records import step_record

from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.stores.base import SPILL_BYTES, this_host
from stalwart.stores.sqlite import SQLiteStore
from stalwart.web import create_app

OWNER = f"{this_host()}:{os.getpid()}:web-incremental"
START = 1_700_000_000.0
HOSTILE = "<script>alert('x')</script>"


class CountingSQLiteStore(SQLiteStore):
    """A SQLite store that counts the step rows its reads return."""

    rows = 0

    async def load_steps(self, run_id: str) -> dict[str, StepRecord]:
        found = await super().load_steps(run_id)
        self.rows += len(found)
        return found

    async def steps_by_key(self, run_id: str, keys: Any, held: Any = None) -> dict[str, StepRecord]:
        found = await super().steps_by_key(run_id, keys, held)
        self.rows += len(found)
        return found


class Worker:
    """A store on the inspector's file, driven from a thread and an event loop
    of its own, as another process's would be: its writes commit while the
    inspector waits for the file's lock (both stores on one loop would wait
    for each other). Its methods are the store's, awaited from the test."""

    def __init__(self, url: str) -> None:
        self.store = SQLiteStore.from_url(url)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _call(self, name: str, *args: Any) -> Any:
        done = asyncio.run_coroutine_threadsafe(getattr(self.store, name)(*args), self._loop)
        return await asyncio.wrap_future(done)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        return functools.partial(self._call, name)

    async def stop(self) -> None:
        await self._call("close")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


@dataclass
class Inspector:
    client: httpx.AsyncClient
    store: CountingSQLiteStore  # what the inspector reads through
    worker: Any  # a Worker: another process writing the same file

    async def live(self, run_id: str, shown: str | None) -> httpx.Response:
        params = {"id": run_id} if shown is None else {"id": run_id, "shown": shown}
        return await self.client.get("/run/live", params=params)


@asynccontextmanager
async def inspector(tmp_path: Path) -> AsyncIterator[Inspector]:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    store = CountingSQLiteStore.from_url(url)
    app = create_app(store, hosts=("127.0.0.1",))
    async with app.router.lifespan_context(app):
        worker = Worker(url)
        await worker.open()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                yield Inspector(c, store, worker)
        finally:
            await worker.stop()


def step(key: str, at: float, output: object = None, name: str = "echo") -> StepRecord:
    return step_record(key, json.dumps(output if output else key), name=name, started_at=at)


def asked(key: str, at: float, prompt: str, signal: str = "approve") -> StepRecord:
    value = {"prompt": prompt, "signal": signal, "about": None}
    return step_record(
        key,
        json.dumps(value),
        name="stalwart.ask",
        args_hash="",
        args=None,
        started_at=at,
        kind="ask",
    )


async def running(store: Any, run_id: str) -> int:
    """Create ``run_id`` and hold it, as a worker does; its fence."""
    await store.create_run(RunRecord(run_id, "echo", "{}"))
    claimed = await store.claim(run_id, OWNER, 3600.0)
    assert claimed is not None
    return claimed.fence


def shown_of(page: str) -> str:
    """The token a run's fragment carries for its next refresh."""
    found = re.search(r'data-shown="([^"]*)"', page)
    assert found is not None, page[:400]
    return html.unescape(found.group(1))


def texts(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def step_keys(page: str) -> list[str]:
    return re.findall(r'<span class="key">([^<]*)</span>', page)


async def test_a_quiet_refresh_of_a_run_reads_no_step_row(tmp_path: Path) -> None:
    async with inspector(tmp_path) as ui:
        fence = await running(ui.worker, "long")
        for i in range(50):
            await ui.worker.record_step("long", fence, step(str(i + 1), START + i))
        page = (await ui.client.get("/run", params={"id": "long"})).text
        assert len(step_keys(page)) == 50
        shown = shown_of(page)
        before = ui.store.rows
        for _ in range(5):
            quiet = await ui.live("long", shown)
            assert quiet.status_code == 204 and quiet.content == b""
        assert ui.store.rows == before  # five refreshes, not one step row read

        # A new step: the next refresh shows it, and says so with a new token.
        # The page shows the latest 50: the new one, not the first.
        await ui.worker.record_step("long", fence, step("51", START + 60, "the new one"))
        moved = await ui.live("long", shown)
        assert moved.status_code == 200
        keys = step_keys(moved.text)
        assert len(keys) == 50 and "51" in keys and "1" not in keys
        assert "the new one" in moved.text and "Steps 2 to 51 of 51" in texts(moved.text)
        assert "<html" not in moved.text  # the fragment, not the page
        again = shown_of(moved.text)
        assert again != shown
        before = ui.store.rows
        assert (await ui.live("long", again)).status_code == 204
        assert ui.store.rows == before


async def test_a_run_whose_row_moved_without_a_step_is_rendered_again(tmp_path: Path) -> None:
    async with inspector(tmp_path) as ui:
        fence = await running(ui.worker, "held")
        await ui.worker.record_step("held", fence, step("1", START))
        shown = shown_of((await ui.client.get("/run", params={"id": "held"})).text)
        assert (await ui.live("held", shown)).status_code == 204
        await ui.worker.suspend_run("held", fence, None, HOSTILE)  # the row moves, not the ledger
        waiting = await ui.live("held", shown)
        assert waiting.status_code == 200
        assert HOSTILE in texts(waiting.text) and "<script>alert" not in waiting.text
        await ui.worker.send_signal("held", HOSTILE, '"go"')
        claimed = await ui.worker.claim("held", OWNER, 3600.0)
        assert claimed is not None
        resumed = await ui.live("held", shown_of(waiting.text))
        assert resumed.status_code == 200 and "Waiting for the signal" not in texts(resumed.text)
        await ui.worker.request_cancel("held")
        cancelling = await ui.live("held", shown_of(resumed.text))
        assert cancelling.status_code == 200 and "cancel requested" in texts(cancelling.text)
        await ui.worker.finish_run("held", claimed.fence, "succeeded", '"done"', None)
        done = await ui.live("held", shown_of(cancelling.text))
        assert done.status_code == 200 and "data-final" in done.text


async def test_a_child_that_moved_is_shown_though_its_parent_did_not(tmp_path: Path) -> None:
    """A parent waiting for its children keeps its row and its ledger while
    they run: the children's rows are part of what its page shows."""
    async with inspector(tmp_path) as ui:
        fence = await running(ui.worker, "parent")
        kids = ["parent~1/0", "parent~1/1"]
        await ui.worker.record_step("parent", fence, step("1", START, kids, "stalwart.spawn:kid"))
        for kid in kids:
            await ui.worker.create_run(RunRecord(kid, "kid", "{}", parent_id="parent"))
        await ui.worker.suspend_run("parent", fence, None, "stalwart.children:parent~1/")
        page = (await ui.client.get("/run", params={"id": "parent"})).text
        assert texts(page).count("pending") >= 2
        shown = shown_of(page)
        before = ui.store.rows
        assert (await ui.live("parent", shown)).status_code == 204
        assert ui.store.rows == before
        claimed = await ui.worker.claim(kids[0], OWNER, 3600.0)
        assert claimed is not None
        await ui.worker.finish_run(kids[0], claimed.fence, "succeeded", '"hi"', None)
        moved = await ui.live("parent", shown)
        assert moved.status_code == 200
        children = texts(moved.text.split('class="children"', 1)[1])
        assert f"{kids[0]} succeeded" in children and f"{kids[1]} pending" in children


async def test_what_the_browser_sends_back_is_only_ever_a_hint(tmp_path: Path) -> None:
    async with inspector(tmp_path) as ui:
        fence = await running(ui.worker, "r")
        await ui.worker.record_step("r", fence, step("1", START))
        shown = shown_of((await ui.client.get("/run", params={"id": "r"})).text)
        count, digest = shown.split(".")
        forged = [
            "",
            "nonsense",
            HOSTILE,
            "1." + "0" * 32,  # the right count, another digest
            f"2.{digest}",  # another count, the right digest
            f"{count}.{digest.upper()}",
            f"-1.{digest}",
            f"99999999999999999999.{digest}",
            shown + "x" * 5000,
        ]
        for text in forged:
            page = await ui.live("r", text)
            assert page.status_code == 200, text
            assert step_keys(page.text) == ["1"] and shown_of(page.text) == shown
            assert "<script>alert" not in page.text
        assert (await ui.live("r", shown)).status_code == 204

    # Another inspector on the same file (a restart: forms carry a new CSRF
    # token) does not take this one's token for what it shows.
    async with inspector(tmp_path) as ui:
        page = await ui.live("r", shown)
        assert page.status_code == 200 and shown_of(page.text) != shown


async def test_a_live_refresh_reads_spilled_and_late_steps_whole(tmp_path: Path) -> None:
    """A step whose output was spilled out of the hot row, and one recorded
    late with an earlier time (another worker's clock), are shown: the
    spilled value read whole (its preview cut as every long value is, the
    rest counted exactly and served whole by its link)."""
    big = "x" * (SPILL_BYTES + 10)
    async with inspector(tmp_path) as ui:
        fence = await running(ui.worker, "r")
        await ui.worker.record_step("r", fence, step("2", START + 10))
        shown = shown_of((await ui.client.get("/run", params={"id": "r"})).text)
        await ui.worker.record_step("r", fence, step("1", START - 300, big))
        moved = await ui.live("r", shown)
        assert moved.status_code == 200
        assert step_keys(moved.text) == ["1", "2"] and big[:3000] in moved.text
        assert big not in moved.text  # cut: a page never carries the whole of it
        cut = re.search(r"… (\d+) more characters", moved.text)
        assert cut is not None
        assert 4000 + int(cut.group(1)) == len(json.dumps(big))  # the whole value was read
        whole = await ui.client.get(
            "/run/value", params={"id": "r", "step": "1", "field": "output"}
        )
        assert whole.status_code == 200 and big in whole.text


async def waiting_run(store: Any, run_id: str, prompt: str, at: float) -> None:
    fence = await running(store, run_id)
    await store.record_step(run_id, fence, step("1", at, {"prompt": "not the question"}))
    await store.record_step(run_id, fence, asked("2.0", at + 1, prompt))
    await store.suspend_run(run_id, fence, None, "approve")


async def test_a_quiet_refresh_of_the_waiting_list_reads_no_step_row(tmp_path: Path) -> None:
    async with inspector(tmp_path) as ui:
        await waiting_run(ui.worker, "w1", "Ship the parcel?", START)
        page = texts((await ui.client.get("/waiting")).text)
        assert "Ship the parcel?" in page and "not the question" not in page
        before = ui.store.rows
        for _ in range(3):
            live = await ui.client.get("/waiting/live")
            assert "Ship the parcel?" in texts(live.text)
        assert ui.store.rows == before  # the question is known: no ledger read

        # A new waiting run costs its own ledger, once.
        await waiting_run(ui.worker, "w2", HOSTILE, START + 100)
        live = await ui.client.get("/waiting/live")
        assert "Ship the parcel?" in texts(live.text) and HOSTILE in texts(live.text)
        assert "<script>alert" not in live.text
        assert ui.store.rows == before + 2
        await ui.client.get("/waiting/live")
        assert ui.store.rows == before + 2

        # w1 resumes and asks again, another question under the same signal.
        await ui.worker.send_signal("w1", "approve", "false")
        claimed = await ui.worker.claim("w1", OWNER, 3600.0)
        assert claimed is not None
        assert await ui.worker.take_signal("w1", "approve", "2") == "false"
        await ui.worker.record_step("w1", claimed.fence, asked("3.0", START + 200, "Really not?"))
        await ui.worker.suspend_run("w1", claimed.fence, None, "approve")
        shown = texts((await ui.client.get("/waiting/live")).text)
        assert "Really not?" in shown and "Ship the parcel?" not in shown
