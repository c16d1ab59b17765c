"""What the inspector records, it can show: a signal payload typed with a
lone surrogate (``"\\ud800"``, legal JSON) is refused with a 400 naming it,
and nothing is queued; a step that failed on a file name holding one (a
surrogateescape decoding) shows on its run page."""

from __future__ import annotations

import re

import pytest

import stalwart as sw

from .conftest import client
from .test_actions import csrf_of, outcome, serving, suspended
from .web_app import POLICIES, ship


async def test_a_signal_payload_holding_one_is_a_400_and_nothing_is_queued(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    await suspended(url, ship, "the parcel", run_id="ship-1")
    async with client(url) as c:
        token = await csrf_of(c, "/run?id=ship-1")
        form = {"csrf": token, "id": "ship-1", "name": "approve", "verdict": "send"}
        bad = await c.post("/run/signal", data={**form, "payload": '{"ok": "\\ud800"}'})
        assert bad.status_code == 400, bad.text
        assert "U+D800" in bad.text and "lone surrogate" in bad.text
        assert bad.headers["x-frame-options"] == "DENY"
        for page in ("/run?id=ship-1", "/waiting", "/runs"):
            assert (await c.get(page)).status_code == 200, page
        async with serving(url):
            sent = await c.post("/run/signal", data={**form, "payload": "false"})
            assert sent.status_code == 303
            assert await outcome(url, "ship-1") == ("succeeded", '"kept the parcel"')


@sw.policy
async def reads_a_file() -> str:
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # as os.listdir gives it
    raise FileNotFoundError(f"no file {name}")


async def test_a_failure_whose_message_holds_one_is_recorded_escaped_and_shown(
    sqlite_url: str,
) -> None:
    url = sqlite_url
    async with sw.Runner(url, policies=[*POLICIES, reads_a_file]) as r:
        handle = await r.start(reads_a_file, run_id="f-1")
        with pytest.raises(FileNotFoundError):
            await handle.result(timeout=10)
        run = await r.get_run("f-1")
    assert run.status == "failed" and run.error is not None
    run.error.encode("utf-8")
    assert "caf\\\\udce9.txt" in run.error  # the escape's text, in JSON
    async with client(url) as c:
        page = await c.get("/run", params={"id": "f-1"})
        assert page.status_code == 200
        assert re.search(r"no file caf\\udce9\.txt", page.text)
        assert (await c.get("/runs")).status_code == 200
