"""Fork from a step, fork with other inputs, re-run a failed run, answer a
wait that says what it expects: posted as a browser posts a form, executed
by a worker (a Runner serving in this process, never the web app), and
written in the run's history, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import markupsafe
import pytest

import stalwart as sw

from .act_app import HOSTILE, POLICIES, order, refund
from .conftest import client


@pytest.fixture(autouse=True)
def act_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STALWART_ACT_DIR", str(tmp_path))
    return tmp_path


@contextlib.asynccontextmanager
async def serving(url: str) -> AsyncIterator[sw.Runner]:
    stop = asyncio.Event()
    runner = sw.Runner(url, policies=POLICIES, poll_interval=0.05)
    task = asyncio.create_task(runner.serve(stop))
    try:
        yield runner
    finally:
        stop.set()
        await task


async def finished(runner: sw.Runner, run_id: str) -> sw.RunRecord:
    async with asyncio.timeout(20):
        while True:
            run = await runner.get_run(run_id)
            if run is not None and run.status in ("succeeded", "failed", "cancelled"):
                return run
            await asyncio.sleep(0.03)


async def csrf_of(c: httpx.AsyncClient, run_id: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', (await c.get(f"/run?id={run_id}")).text)
    assert found, "the page has no action form"
    return found.group(1)


def history_of(page: str) -> str:
    found = re.search(r'<table class="history">(.*?)</table>', page, re.S)
    assert found, "the page shows no history"
    return str(markupsafe.Markup(found.group(1)).striptags())


def forked_id(page: str) -> str:
    found = re.search(
        r'<table class="history">.*?<a class="runid" href="[^"]+">([^<]+)</a>', page, re.S
    )
    assert found, "the history links to no run"
    return str(markupsafe.Markup(found.group(1)).unescape())


async def ordered(
    url: str, act_dir: Path, run_id: str, item: str = "tea", stocked: bool = True
) -> None:
    if stocked:
        (act_dir / "stock.txt").write_text("5")
    async with sw.Runner(url, policies=POLICIES) as r:
        with contextlib.suppress(Exception):
            await r.run(order, item, 2, run_id=run_id)


def prices(act_dir: Path) -> int:
    log = act_dir / "price.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_a_fork_from_a_step_with_its_result_edited_finishes_on_a_worker(
    store_url: str, act_dir: Path
) -> None:
    await ordered(store_url, act_dir, "order-1")
    assert prices(act_dir) == 1
    async with client(store_url, policies=tuple(POLICIES)) as c, serving(store_url) as worker:
        page = (await c.get("/run?id=order-1")).text
        assert 'action="/run/fork"' in page and 'name="at" value="1"' in page
        form = {"csrf": await csrf_of(c, "order-1"), "id": "order-1", "at": "1"}
        sent = await c.post("/run/fork", data={**form, "replace": "result", "value": "7"})
        assert sent.status_code == 303, sent.text
        assert sent.headers["location"] == "/run?id=order-1#history"
        page = (await c.get("/run?id=order-1")).text
        new = forked_id(page)
        assert new.startswith("order-1-fork-")
        said = history_of(page)
        assert "fork" in said and "at step 1, result replaced" in said
        assert "the inspector, from" in said
        run = await finished(worker, new)
        assert (run.status, run.result) == ("succeeded", '"2 x tea at 7 each, 5 in stock"')
        assert prices(act_dir) == 1  # the edited step was not executed
        assert "forked from" in history_of((await c.get("/run", params={"id": new})).text)
        original = await worker.get_run("order-1")
        assert original is not None and original.result == '"2 x tea at 3 each, 5 in stock"'


async def test_a_fork_with_other_inputs_runs_again_from_the_start(
    store_url: str, act_dir: Path
) -> None:
    await ordered(store_url, act_dir, "order-2")
    async with client(store_url, policies=tuple(POLICIES)) as c, serving(store_url) as worker:
        page = (await c.get("/run?id=order-2")).text
        prefilled = re.search(r'data-json="inputs"[^>]*>(.*?)</textarea>', page, re.S)
        assert prefilled and '"qty": 2' in markupsafe.Markup(prefilled.group(1)).unescape()
        form = {"csrf": await csrf_of(c, "order-2"), "id": "order-2", "replace": "inputs"}
        sent = await c.post("/run/fork", data={**form, "value": '{"item": "coffee", "qty": 9}'})
        assert sent.status_code == 303, sent.text
        new = forked_id((await c.get("/run?id=order-2")).text)
        run = await finished(worker, new)
        assert run.result == '"9 x coffee at 6 each, 5 in stock"'
        assert prices(act_dir) == 2


async def test_a_failed_run_is_re_run_from_the_step_that_failed(
    store_url: str, act_dir: Path
) -> None:
    await ordered(store_url, act_dir, "order-3", stocked=False)
    async with client(store_url, policies=tuple(POLICIES)) as c, serving(store_url) as worker:
        before = await worker.get_run("order-3")
        assert before is not None and before.status == "failed"
        page = (await c.get("/run?id=order-3")).text
        assert 'action="/run/rerun"' in page
        (act_dir / "stock.txt").write_text("3")
        sent = await c.post(
            "/run/rerun", data={"csrf": await csrf_of(c, "order-3"), "id": "order-3"}
        )
        assert sent.status_code == 303, sent.text
        page = (await c.get("/run?id=order-3")).text
        assert "re-run" in history_of(page) and "at step 2" in history_of(page)
        run = await finished(worker, forked_id(page))
        assert (run.status, run.result) == ("succeeded", '"2 x tea at 3 each, 3 in stock"')
        assert prices(act_dir) == 1  # the good step before it was replayed


async def test_forks_that_cannot_be_made_are_refused_with_the_reason(
    store_url: str, act_dir: Path
) -> None:
    await ordered(store_url, act_dir, "order-4")
    async with client(store_url, policies=tuple(POLICIES)) as c:
        token = await csrf_of(c, "order-4")
        base = {"csrf": token, "id": "order-4", "at": "1", "replace": "result"}
        cases = [
            ({**base, "value": "{not json"}, 400, "field 'value' (step 1) is not JSON"),
            ({**base, "value": '"seven"'}, 400, "the new result is a string"),
            ({**base, "at": "9", "value": "7"}, 400, "has no step '9'"),
            ({**base, "replace": "args", "value": "{}"}, 400, "field 'replace'"),
            ({**base, "replace": "inputs", "value": "[1]"}, 400, "a JSON object by parameter name"),
            ({**base, "value": "7", "new_id": "a~b"}, 400, "new_run_id"),
            ({**base, "value": "7", "csrf": "wrong"}, 403, "CSRF"),
            ({**base, "value": "7", "id": "nope"}, 404, "no run 'nope'"),
        ]
        for form, status, said in cases:
            got = await c.post("/run/fork", data=form)
            assert got.status_code == status, (form, got.text[:300])
            assert said in markupsafe.Markup(got.text).unescape(), (form, got.text[:600])
        got = await c.post("/run/rerun", data={"csrf": token, "id": "order-4"})
        assert got.status_code == 409 and "is succeeded, not failed" in got.text
        evil = await c.post(
            "/run/fork", data={**base, "value": "7"}, headers={"origin": "http://evil.example"}
        )
        assert evil.status_code == 403
        assert '<table class="history">' not in (await c.get("/run?id=order-4")).text  # none made
    await suspended_refund(store_url, "refund-4")
    async with client(store_url) as c:  # no policies given: nothing to fork under
        page = (await c.get("/run?id=order-4")).text
        assert "stalwart ui --app MODULE" in page and 'action="/run/fork"' not in page
        token = await csrf_of(c, "refund-4")  # a page with a form (a cancel) gives the token
        got = await c.post("/run/fork", data={**base, "csrf": token, "value": "7"})
        assert got.status_code == 409 and "stalwart ui --app MODULE" in got.text


async def suspended_refund(url: str, run_id: str) -> None:
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.start(refund, run_id, run_id=run_id)
        async with asyncio.timeout(10):
            while (await r.get_run(run_id)).status != "suspended":
                await asyncio.sleep(0.01)


async def test_a_signal_is_checked_against_the_schema_its_wait_recorded(
    store_url: str, act_dir: Path
) -> None:
    await suspended_refund(store_url, "refund-1")
    async with client(store_url, policies=tuple(POLICIES)) as c, serving(store_url) as worker:
        page = (await c.get("/run?id=refund-1")).text
        assert "data-schema=" in page and "The answer it expects" in page
        form = {"csrf": await csrf_of(c, "refund-1"), "id": "refund-1", "name": "refund"}
        refusals = [
            ('{"amount": "ten"}', "answer.amount: expected integer, got string"),
            ('{"amount": 0}', "answer.amount must be at least 1"),
            ("{}", "answer.amount: required, missing"),
            ('{"amount": 3, "by": 1}', "answer.by: not expected"),
            ("[1]", "answer: expected object, got array"),
            ("{oops", "the payload is not JSON"),
        ]
        for payload, said in refusals:
            got = await c.post("/run/signal", data={**form, "verdict": "send", "payload": payload})
            assert got.status_code == 400, payload
            assert said in markupsafe.Markup(got.text).unescape(), (payload, got.text[:600])
        secret = f"card 4111 {HOSTILE}"
        payload = json.dumps({"amount": 10, "note": secret})
        sent = await c.post("/run/signal", data={**form, "verdict": "send", "payload": payload})
        assert sent.status_code == 303, sent.text
        run = await finished(worker, "refund-1")
        assert run.result == '"refunded 10 on refund-1"'
        page = (await c.get("/run?id=refund-1")).text
        said = history_of(page)
        assert "signal" in said and "'refund'" in said and "bytes of JSON" in said
        assert "4111" not in said  # the answer itself is not in the history


async def test_a_cancel_is_in_the_history(store_url: str, act_dir: Path) -> None:
    await suspended_refund(store_url, "refund-2")
    async with client(store_url, policies=tuple(POLICIES)) as c:
        got = await c.post(
            "/run/cancel", data={"csrf": await csrf_of(c, "refund-2"), "id": "refund-2"}
        )
        assert got.status_code == 303
        said = history_of((await c.get("/run?id=refund-2")).text)
        assert "cancel" in said and "requested" in said


async def test_a_tool_approval_editor_carries_the_decisions_it_takes(sqlite_url: str) -> None:
    from stalwart.core.expects import schema_problems

    from .test_tool_approvals import waiting_signal

    await waiting_signal(sqlite_url, "note-1")
    async with client(sqlite_url) as c:
        page = (await c.get("/run?id=note-1")).text
        found = re.search(r'data-schema="([^"]+)"', page)
        assert found, "the editor has no schema"
        schema = json.loads(markupsafe.Markup(found.group(1)).unescape())
        assert set(schema["properties"]) == {"c1"}  # the call the wait asks about
        assert schema_problems(True, schema) == []
        assert schema_problems({"c1": {"decision": "deny", "reason": "no"}}, schema) == []
        assert schema_problems({"c1": {"decision": "maybe"}}, schema) == [
            'answer.c1.decision: must be one of "approve", "deny", "edit"'
        ]
        assert schema_problems({"c9": {"decision": "approve"}}, schema) == [
            "answer.c9: not expected (fields: c1)"
        ]


async def test_hostile_names_in_the_history_are_text(sqlite_url: str) -> None:
    from .web_app import hostile_wait

    async with sw.Runner(sqlite_url, policies=[hostile_wait]) as r:
        await r.start(hostile_wait, run_id="waits-hostile")
        async with asyncio.timeout(10):
            while (await r.get_run("waits-hostile")).status != "suspended":
                await asyncio.sleep(0.01)
    async with client(sqlite_url) as c:
        form = {"csrf": await csrf_of(c, "waits-hostile"), "id": "waits-hostile"}
        sent = await c.post("/run/signal", data={**form, "name": HOSTILE, "payload": "1"})
        assert sent.status_code == 303
        page = (await c.get("/run?id=waits-hostile")).text
        history = re.search(r'<table class="history">(.*?)</table>', page, re.S)
        assert history and str(markupsafe.escape(repr(HOSTILE))) in history.group(1)
        assert "<script>" not in history.group(1) and "<img" not in history.group(1)


async def test_history_entries_that_are_not_ones_are_left_out(sqlite_url: str) -> None:
    from stalwart.core.memory import Memory
    from stalwart.web.actions import HISTORY_SPACE

    await suspended_refund(sqlite_url, "refund-odd")
    entries = [
        {"what": "fork", "by": "me", "at": 10**400},  # no float holds it: not a time
        {"what": "fork", "by": "me", "at": "yesterday"},
        {"what": HOSTILE, "by": "me", "at": 1.0, "detail": 5, "run": ["x"]},
    ]
    async with sw.Runner(sqlite_url) as r:
        for i, entry in enumerate(entries):
            await Memory(r.store).put((HISTORY_SPACE, "refund-odd"), f"k{i}", entry)
    async with client(sqlite_url) as c:
        page = await c.get("/run?id=refund-odd")
        assert page.status_code == 200
        rows = re.findall(r'<td class="what">(.*?)</td>', page.text)
        assert rows == [str(markupsafe.escape(HOSTILE))]  # the one entry that is one, as text
