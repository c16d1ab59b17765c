"""The inspector and the HTTP API show a value to whoever holds the key,
"(encrypted)" to whoever does not, "(erased)" once its subject is erased;
never its ciphertext."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from stalwart.runner import Runner

from .app import KEY_1, MARK, POLICIES, keys_text, waiter
from .conftest import encrypted, suspended


@contextlib.asynccontextmanager
async def _client(app: object) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c


async def _seed(url: str) -> None:
    async with Runner(encrypted(url), policies=POLICIES) as r:
        await r.start(waiter, f"ada {MARK}", run_id="ada-1", tags={"subject": "ada"})
        await r.start(waiter, f"bob {MARK}", run_id="bob-1", tags={"subject": "bob"})
        await suspended(r, "ada-1")
        await suspended(r, "bob-1")
        store = r.store
        assert hasattr(store, "erase_subject")
        await store.erase_subject("ada")


async def _pages(url: str) -> dict[str, str]:
    from stalwart.api import create_app as api_app
    from stalwart.web import create_app as web_app

    out = {}
    async with _client(web_app(url, hosts=("127.0.0.1",))) as web:
        for run_id in ("ada-1", "bob-1"):
            page = await web.get("/run", params={"id": run_id})
            assert page.status_code == 200, page.text
            out[f"web {run_id}"] = page.text
    async with _client(api_app(url, POLICIES, hosts=("127.0.0.1",))) as api:
        for run_id in ("ada-1", "bob-1"):
            run = await api.get(f"/runs/{run_id}")
            steps = await api.get(f"/runs/{run_id}/steps")
            assert run.status_code == 200 and steps.status_code == 200, run.text
            out[f"api {run_id}"] = run.text + steps.text
    return out


async def test_readers_show_values_to_the_key_holder_and_say_encrypted_or_erased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The inspector and the API: the web extras (the Python 3.12 and 3.13
    # legs of CI install only the stores').
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    url = f"sqlite:///{tmp_path / 'readers.db'}"
    await _seed(url)

    monkeypatch.delenv("STALWART_KEYS", raising=False)
    monkeypatch.delenv("STALWART_KEYS_FILE", raising=False)
    without = await _pages(url)
    for name, text in without.items():
        assert "enc:1:" not in text and MARK not in text, name
        assert "(encrypted)" in text, name  # without the key, erased or not cannot be told

    monkeypatch.setenv("STALWART_KEYS", keys_text(KEY_1))
    held = await _pages(url)
    for name, text in held.items():
        assert "enc:1:" not in text, name
        if "ada" in name:
            assert "(erased)" in text and MARK not in text, name
        else:
            assert MARK in text and "(encrypted)" not in text, name
