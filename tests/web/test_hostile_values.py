"""No value a user can send the inspector's new pages and actions gets a
server error: query parameters and form fields drawn by Hypothesis (huge,
empty, NUL, markup, unicode, numbers out of range, JSON nested deep, ids of
runs in every state and of none), sent to an app on a real SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
testclient = pytest.importorskip("starlette.testclient")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import stalwart as sw  # noqa: E402
from stalwart.web import create_app  # noqa: E402

from .act_app import POLICIES, order, refund  # noqa: E402
from .conftest import seed_sync  # noqa: E402
from .web_app import HOSTILE  # noqa: E402

RUNS = ["ok", "bad", "waiting", "cancelled", "nope", ""]


async def _seed(url: str) -> None:
    """A run of each state a form may name: succeeded, failed, suspended, cancelled."""
    act = Path(os.environ["STALWART_ACT_DIR"])
    (act / "stock.txt").write_text("5")
    async with sw.Runner(url, policies=POLICIES) as r:
        await r.run(order, "tea", 2, run_id="ok")
        (act / "stock.txt").unlink()
        with contextlib.suppress(FileNotFoundError):
            await r.run(order, "tea", 2, run_id="bad")
        for run_id in ("waiting", "cancelled"):
            await r.start(refund, run_id, run_id=run_id)
            async with asyncio.timeout(10):
                while (await r.get_run(run_id)).status != "suspended":
                    await asyncio.sleep(0.01)
        await r.cancel("cancelled")


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, str]]:
    where = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STALWART_ACT_DIR", str(where))
        url = f"sqlite:///{where / 'store.db'}"
        seed_sync(url, _seed)
        app = create_app(url, hosts=("127.0.0.1",), policies=POLICIES)
        with testclient.TestClient(app, base_url="http://127.0.0.1") as c:
            page = c.get("/run", params={"id": "ok"}).text
            found = re.search(r'name="csrf" value="([^"]+)"', page)
            assert found
            yield c, found.group(1)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# Text a browser can send (no lone surrogates: UTF-8 cannot carry them).
texts = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    st.sampled_from(
        [HOSTILE, "\x00", "-1", "1e309", "NaN", "inf", "9" * 400, "x" * 20_000, "../..", "~0"]
    ),
    st.sampled_from([40, 900, 2_000, 100_000]).map(_deep),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids),
        max_leaves=12,
    ).map(lambda v: json.dumps(v)),
)
# What fits in an address (the client refuses a longer one before sending).
queries = texts.filter(lambda t: len(t) < 4_000)


def _fine(response: object) -> None:
    status = response.status_code  # type: ignore[attr-defined]
    assert status < 500, response.text[:800]  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    page=st.sampled_from(["/health", "/experiments", "/experiments/compare", "/run/value"]),
    params=st.dictionaries(
        st.sampled_from(["window", "a", "b", "only", "counterfactual", "id", "field", "step"]),
        queries,
        max_size=4,
    ),
)
def test_no_query_gets_a_server_error(
    inspector: tuple[object, str], page: str, params: dict[str, str]
) -> None:
    c, _ = inspector
    _fine(c.get(page, params=params))  # type: ignore[attr-defined]


def _either(*good: str) -> st.SearchStrategy[str]:
    """A field's value: one that names what is there, or any text."""
    return st.sampled_from(good) | texts


FIELDS = {
    "at": _either("1", "2"),
    "replace": _either("result", "inputs", "nothing"),
    "value": _either("7", '{"item": "tea", "qty": 1}', '{"qty": "x"}'),
    "new_id": _either("ok", "bad", "fresh-id"),
    "name": _either("refund", "other"),
    "payload": _either('{"amount": 3}', "null"),
    "verdict": _either("approve", "reject", "send"),
    "back": _either("/runs", "//evil.example", "/run?id=ok"),
}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    action=st.sampled_from(["/run/fork", "/run/rerun", "/run/signal", "/run/cancel"]),
    run=st.sampled_from(RUNS) | texts,
    fields=st.fixed_dictionaries({}, optional=FIELDS),
)
@example("/run/fork", "ok", {"at": "1", "replace": "result", "value": _deep(100_000)})
@example("/run/fork", "ok", {"replace": "inputs", "value": _deep(100_000)})
@example("/run/signal", "waiting", {"name": "other", "payload": _deep(100_000)})
def test_no_form_gets_a_server_error(
    inspector: tuple[object, str], action: str, run: str, fields: dict[str, str]
) -> None:
    c, csrf = inspector
    _fine(c.post(action, data={"csrf": csrf, "id": run, **fields}))  # type: ignore[attr-defined]
