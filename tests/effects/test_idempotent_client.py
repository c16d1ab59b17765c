"""IdempotentClient: every request sent in a step carries the step's
numbered idempotency key, the same again when the step runs again.

Requests go through httpx's own transport plug-in (``MockTransport``), which
sees each request as the server would; the crash test
(``test_charge_once_after_a_kill.py``) sends them to a real server.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

import stalwart as sw
from stalwart.effects import IdempotentClient

SENT: list[httpx.Request] = []


def _answer(request: httpx.Request) -> httpx.Response:
    SENT.append(request)
    return httpx.Response(200, json={"ok": True})


@pytest.fixture(autouse=True)
def _forget() -> None:
    SENT.clear()


def _client(**kwargs: object) -> IdempotentClient:
    return IdempotentClient(
        base_url="https://pay.example", transport=httpx.MockTransport(_answer), **kwargs
    )


def _keys(header: str = "Idempotency-Key") -> list[str | None]:
    return [r.headers.get(header) for r in SENT]


@sw.policy
async def pay(ctx: sw.Context, cents: int) -> int:
    async with _client() as client:
        await client.post("/charges", json={"cents": cents})
        await client.get("/charges/latest")  # every request, not only POSTs
    return cents


async def test_each_request_of_a_step_sends_the_steps_next_key() -> None:
    @sw.policy
    async def order(ctx: sw.Context) -> int:
        return await pay(5) + await pay(7)

    assert await sw.Runner().run(order, run_id="order-42") == 12
    assert _keys() == ["order-42:1/1", "order-42:1/2", "order-42:2/1", "order-42:2/2"]


async def test_a_retried_step_sends_the_keys_its_first_attempt_sent(sqlite_url: str) -> None:
    tries: list[int] = []

    @sw.policy(retries=1, backoff=0)
    async def pay_once(ctx: sw.Context) -> str:
        async with _client() as client:
            await client.post("/charges", json={"cents": 5})
            tries.append(1)
            if len(tries) == 1:
                raise ConnectionError("the answer was lost")
            await client.post("/receipts")
        return "paid"

    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(pay_once, run_id="r") == "paid"
    assert _keys() == ["r:/1", "r:/1", "r:/2"]


async def test_one_client_serves_every_step_it_is_used_in() -> None:
    async with _client() as shared:

        @sw.policy
        async def one(ctx: sw.Context) -> None:
            await shared.post("/charges")

        @sw.policy
        async def both(ctx: sw.Context) -> None:
            await one()
            await one()

        await sw.Runner().run(both, run_id="r")
    assert _keys() == ["r:1/1", "r:2/1"]


async def test_requests_sent_together_keep_their_numbers() -> None:
    @sw.policy
    async def fan(ctx: sw.Context) -> None:
        async with _client() as client:
            await asyncio.gather(*(client.post(f"/charges/{i}") for i in range(3)))

    await sw.Runner().run(fan, run_id="r")
    assert {r.url.path: r.headers["Idempotency-Key"] for r in SENT} == {
        "/charges/0": "r:/1",
        "/charges/1": "r:/2",
        "/charges/2": "r:/3",
    }


async def test_a_key_the_caller_set_is_sent_as_it_is_and_takes_no_number() -> None:
    @sw.policy
    async def mine(ctx: sw.Context) -> None:
        async with _client() as client:
            await client.post("/charges", headers={"idempotency-key": "order-42-charge"})
            await client.post("/receipts")

    await sw.Runner().run(mine, run_id="r")
    assert _keys() == ["order-42-charge", "r:/1"]


async def test_the_header_can_be_named_for_an_api_that_reads_another() -> None:
    @sw.policy
    async def other(ctx: sw.Context) -> None:
        async with _client(header="X-Request-Key") as client:
            await client.post("/charges")

    await sw.Runner().run(other, run_id="r")
    assert _keys("X-Request-Key") == ["r:/1"]
    assert _keys() == [None]


async def test_a_request_outside_any_step_is_refused_naming_it() -> None:
    async with _client() as client:
        with pytest.raises(RuntimeError, match=r"POST https://pay.example/charges: sent outside"):
            await client.post("/charges")
        with pytest.raises(RuntimeError) as refused:  # credentials in the URL stay out of it
            await client.post("https://ada:s3cret@pay.example/charges?token=t0k3n")
        assert "s3cret" not in str(refused.value) and "t0k3n" not in str(refused.value)
        assert "POST https://pay.example/charges: sent outside a step" in str(refused.value)
        await client.post("/charges", headers={"Idempotency-Key": "mine"})  # a key of its own
    assert _keys() == ["mine"]


async def test_a_run_id_a_header_cannot_carry_is_sent_percent_encoded() -> None:
    @sw.policy
    async def order(ctx: sw.Context) -> None:
        async with _client() as client:
            await client.post("/charges")

    runner = sw.Runner()
    for run_id in ["commande-é", "50% off", "50%25 off", "plain:id/ok"]:
        await runner.run(order, run_id=run_id)
    assert _keys() == [
        "commande-%C3%A9:/1",
        "50%25%20off:/1",
        "50%2525%20off:/1",  # a % of the run id's own is encoded: no two ids collide
        "plain:id/ok:/1",
    ]
