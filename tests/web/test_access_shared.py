"""The inspector's token and host checks, the ones it shares with the API
(``stalwart.http.access``): what a request that gets them wrong is answered."""

from __future__ import annotations

from .conftest import client

TOKEN = "s3cret-token-value"


async def test_a_malformed_host_header_is_refused_not_an_error(seeded: str) -> None:
    """A Host header no URL parser reads (an unclosed IPv6 bracket) names
    no loopback host: the inspector refuses it as it refuses any other."""
    async with client(seeded, hosts=("127.0.0.1", "localhost")) as c:
        broken = await c.get("/runs", headers={"host": "[::1"})
        ok = await c.get("/runs")
    assert broken.status_code == 421, broken.text
    assert "answers to 127.0.0.1, localhost only" in broken.text
    assert ok.status_code == 200


async def test_a_token_of_another_length_or_scheme_is_refused(seeded: str) -> None:
    async with client(seeded, token=TOKEN, hosts=None) as c:
        answers = [
            await c.get("/runs", headers={"authorization": f"Bearer {TOKEN}x"}),
            await c.get("/runs", headers={"authorization": f"Bearer {TOKEN[:-1]}"}),
            await c.get("/runs", headers={"authorization": f"Basic {TOKEN}"}),
            await c.get("/runs", headers={"authorization": "Bearer"}),
            await c.get("/runs", params={"token": TOKEN.upper()}),
            await c.get("/runs", headers={"cookie": f"stalwart_token={TOKEN}x"}),
        ]
        lower = await c.get("/runs", headers={"authorization": f"bearer  {TOKEN} "})
        c.cookies.clear()
        cookie = await c.get("/runs", headers={"cookie": f"stalwart_token={TOKEN}"})
    assert [r.status_code for r in answers] == [401] * len(answers)
    assert lower.status_code == cookie.status_code == 200


async def test_an_action_from_a_malformed_origin_is_refused_not_an_error(seeded: str) -> None:
    async with client(seeded) as c:
        page = (await c.get("/run", params={"id": "ship-1"})).text
        token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        broken = await c.post(
            "/run/cancel",
            data={"id": "ship-1", "csrf": token},
            headers={"origin": "http://[::1"},
        )
        after = (await c.get("/run", params={"id": "ship-1"})).text
    assert broken.status_code == 403, broken.text
    assert "s-suspended" in after  # nothing happened to the run
