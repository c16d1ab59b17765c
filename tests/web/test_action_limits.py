"""What the action forms refuse and what they hold against: JSON nested past
the parser's depth, a wait's schema that would take the check exponential
time, the same fork form sent twice, and inputs the run's policy does not
take; each answered with a 4xx naming the field, on a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import markupsafe
import pytest

import stalwart as sw

from .act_app import POLICIES, costly_ask, order
from .conftest import client


@pytest.fixture(autouse=True)
def act_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STALWART_ACT_DIR", str(tmp_path))
    (tmp_path / "stock.txt").write_text("5")
    return tmp_path


ALL = tuple(POLICIES)


async def _started(url: str, target: Any, *args: Any, run_id: str) -> None:
    async with sw.Runner(url, policies=ALL) as r:
        if target is order:
            await r.run(order, *args, run_id=run_id)
            return
        await r.start(target, *args, run_id=run_id)
        async with asyncio.timeout(10):
            while (await r.get_run(run_id)).status != "suspended":
                await asyncio.sleep(0.01)


async def _csrf(c: httpx.AsyncClient, run_id: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', (await c.get(f"/run?id={run_id}")).text)
    assert found, "the page has no action form"
    return found.group(1)


def _said(response: httpx.Response) -> str:
    found = re.search(r'class="message">(.*?)</p>', response.text, re.S)
    assert found, response.text[:600]
    return str(markupsafe.Markup(found.group(1)).unescape())


async def test_json_nested_past_the_parsers_depth_is_a_400_naming_the_field(
    sqlite_url: str,
) -> None:
    await _started(sqlite_url, order, "tea", 2, run_id="order-deep")
    await _started(sqlite_url, costly_ask, run_id="ask-deep")
    deep = "[" * 100_000 + "]" * 100_000
    async with client(sqlite_url, policies=ALL) as c:
        token = await _csrf(c, "ask-deep")
        sent = await c.post(
            "/run/signal", data={"csrf": token, "id": "ask-deep", "name": "other", "payload": deep}
        )
        assert sent.status_code == 400
        assert _said(sent).startswith("the payload is not JSON: maximum recursion depth")
        fork = {"csrf": token, "id": "order-deep", "value": deep}
        sent = await c.post("/run/fork", data={**fork, "at": "1", "replace": "result"})
        assert sent.status_code == 400
        assert "field 'value' (step 1) is not JSON" in _said(sent)
        sent = await c.post("/run/fork", data={**fork, "replace": "inputs"})
        assert sent.status_code == 400
        assert "field 'value' (the run's inputs) is not JSON" in _said(sent)
        async with sw.Runner(sqlite_url) as r:
            assert [x.id for x in await r.store.list_runs(None, 10) if "fork" in x.id] == []


async def test_a_schema_too_costly_to_check_is_a_400_saying_so_not_a_hang(
    sqlite_url: str,
) -> None:
    await _started(sqlite_url, costly_ask, run_id="ask-costly")
    async with client(sqlite_url, policies=ALL) as c:
        page = (await c.get("/run?id=ask-costly")).text
        assert "data-schema=" in page  # the page's own check gets it, and stops likewise
        form = {"csrf": await _csrf(c, "ask-costly"), "id": "ask-costly", "name": "answer"}
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            sent = await c.post("/run/signal", data={**form, "payload": "1"})
        assert sent.status_code == 400
        assert "answer: not checked: the schema takes more than 100000 steps" in _said(sent)
        sent = await c.post("/run/signal", data={**form, "payload": '"fits"'})
        assert sent.status_code == 303


async def _forks_of(url: str, run_id: str) -> list[str]:
    async with sw.Runner(url) as r:
        return sorted(x.id for x in await r.store.list_runs(None, 50) if x.id != run_id)


def _form(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the page's first form posting to ``action``."""
    found = re.search(rf'<form[^>]*action="{action}">(.*?)</form>', page, re.S)
    assert found, f"the page has no form posting to {action}"
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(1))
    return {k: str(markupsafe.Markup(v).unescape()) for k, v in fields}


async def test_a_fork_or_re_run_form_sent_twice_makes_one_run(
    sqlite_url: str, act_dir: Path
) -> None:
    await _started(sqlite_url, order, "tea", 2, run_id="order-twice")
    async with client(sqlite_url, policies=ALL) as c:
        page = (await c.get("/run?id=order-twice")).text
        form = _form(page, "/run/fork")
        assert form["new_id"].startswith("order-twice-fork-")
        value = {"value": '{"item": "coffee", "qty": 1}'}
        sends = [c.post("/run/fork", data={**form, **value}) for _ in range(2)]
        first, second = await asyncio.gather(*sends)
        assert (first.status_code, second.status_code) == (303, 303), _said(second)
        assert first.headers["location"] == second.headers["location"]
        assert await _forks_of(sqlite_url, "order-twice") == [form["new_id"]]
        again = await c.post("/run/fork", data={**form, **value})  # later, say a reload
        assert again.status_code == 303
        assert await _forks_of(sqlite_url, "order-twice") == [form["new_id"]]
        fresh = _form((await c.get("/run?id=order-twice")).text, "/run/fork")
        assert fresh["new_id"] != form["new_id"]  # a page shown again forks anew
    (act_dir / "stock.txt").unlink()
    with pytest.raises(FileNotFoundError):
        await _started(sqlite_url, order, "tea", 2, run_id="order-failed")
    async with client(sqlite_url, policies=ALL) as c:
        rerun = _form((await c.get("/run?id=order-failed")).text, "/run/rerun")
        sends = [c.post("/run/rerun", data=rerun) for _ in range(2)]
        assert [s.status_code for s in await asyncio.gather(*sends)] == [303, 303]
        assert await _forks_of(sqlite_url, "order-failed") == sorted(
            [form["new_id"], "order-twice", rerun["new_id"]]
        )


async def test_inputs_the_policy_does_not_take_are_refused_naming_the_parameter(
    sqlite_url: str,
) -> None:
    await _started(sqlite_url, order, "tea", 2, run_id="order-inputs")
    async with client(sqlite_url, policies=ALL) as c:
        form = _form((await c.get("/run?id=order-inputs")).text, "/run/fork")
        cases = [
            ('{"nope": 5}', "nope: unexpected argument"),
            ('{"item": [[1]]}', "item: Input should be a valid string"),
            ('{"item": "tea", "qty": "many"}', "qty: Input should be a valid integer"),
        ]
        for value, said in cases:
            sent = await c.post("/run/fork", data={**form, "value": value})
            assert sent.status_code == 400, value
            assert f"field 'value': invalid arguments for 'order': {said}" in _said(sent)
        assert await _forks_of(sqlite_url, "order-inputs") == []
        sent = await c.post("/run/fork", data={**form, "value": '{"qty": "3"}'})
        assert sent.status_code == 303  # the others kept, one changed, as the policy reads it
        assert await _forks_of(sqlite_url, "order-inputs") == [form["new_id"]]
        async with sw.Runner(sqlite_url) as r:
            fork = await r.get_run(form["new_id"])
        assert fork is not None and json.loads(fork.inputs) == {"args": ["tea", 3], "kwargs": {}}


async def test_a_fork_or_re_run_without_this_servers_token_or_from_elsewhere_is_refused(
    sqlite_url: str, act_dir: Path
) -> None:
    (act_dir / "stock.txt").unlink()
    with pytest.raises(FileNotFoundError):
        await _started(sqlite_url, order, "tea", 2, run_id="order-guarded")
    async with client(sqlite_url, policies=ALL) as c:
        page = (await c.get("/run?id=order-guarded")).text
        for action in ("/run/rerun", "/run/fork"):
            form = {**_form(page, action), "value": '{"qty": 1}'}
            refused = [
                await c.post(action, data={k: v for k, v in form.items() if k != "csrf"}),
                await c.post(action, data={**form, "csrf": form["csrf"][:-1]}),
                await c.post(action, data=form, headers={"origin": "http://evil.example"}),
                await c.post(action, data=form, headers={"origin": "null"}),
            ]
            assert [r.status_code for r in refused] == [403] * 4, action
        assert await _forks_of(sqlite_url, "order-guarded") == []


async def test_a_run_with_the_longest_id_is_forked_from_its_page(sqlite_url: str) -> None:
    from stalwart.core.ledger import MAX_RUN_ID

    long_id = "o" * MAX_RUN_ID
    await _started(sqlite_url, order, "tea", 2, run_id=long_id)
    async with client(sqlite_url, policies=ALL) as c:
        form = _form((await c.get("/run", params={"id": long_id})).text, "/run/fork")
        assert len(form["new_id"]) == MAX_RUN_ID and "-fork-" in form["new_id"]
        sent = await c.post("/run/fork", data={**form, "value": '{"qty": 3}'})
        assert sent.status_code == 303, _said(sent)
        assert await _forks_of(sqlite_url, long_id) == [form["new_id"]]
