"""Charge a card once, although the call that charged it is made twice.

Run it (no account, no network): ``python examples/payment_once.py [--store sqlite:///pay.db]``

What it shows:
- a step pays through :class:`stalwart.effects.IdempotentClient`, which
  sends the step's idempotency key (``<run id>:<step key>/<n>``) as the
  ``Idempotency-Key`` header of each request;
- the payment API here (a small local server) takes the charge and then
  never answers the first request for a key: the client times out, and the
  step's retry sends the same request again, under the same key;
- the API sees a key it knows and answers with the charge it made, so the
  card is charged once. A worker killed mid-charge and a resumed run send
  the same key too (``tests/effects/test_charge_once_after_a_kill.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import select
import socket
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

import stalwart as sw
from stalwart.effects import IdempotentClient


class PaymentAPI(BaseHTTPRequestHandler):
    """A payment API that dedupes by Idempotency-Key and, to show a lost
    answer, keeps the first answer for each key to itself."""

    charges: dict[str, str] = {}

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers["Idempotency-Key"]
        if key in self.charges:
            print(f"API: {key} again: answering with {self.charges[key]}, no new charge")
            self._reply({"id": self.charges[key]})
            return
        self.charges[key] = f"ch_{len(self.charges) + 1}"
        print(f"API: charged {self.charges[key]} for {key}; the answer gets lost")
        while not _closed(self.connection):  # hold it until the client gives up
            pass

    def _reply(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the handler prints what matters."""


def _closed(conn: socket.socket) -> bool:
    readable, _, _ = select.select([conn], [], [], 0.1)
    return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""


@sw.policy(retries=3, backoff=0.1, retry_on=[httpx.TimeoutException])
async def charge(ctx: sw.Context, api: str, order: str, cents: int) -> str:
    """Charge ``cents`` for ``order``; a timeout is retried with the same key."""
    async with IdempotentClient(base_url=api, timeout=0.5) as client:
        reply = await client.post("/charges", json={"order": order, "cents": cents})
    reply.raise_for_status()
    return str(reply.json()["id"])


@sw.policy
async def checkout(ctx: sw.Context, api: str, order: str) -> str:
    charge_id = await charge(api, order, cents=1999)
    return f"{order} paid by {charge_id}"


async def main(store: str) -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PaymentAPI)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        async with sw.Runner(store) as runner:
            result: str = await runner.run(checkout, api=api, order="order-42", run_id="order-42")
    finally:
        server.shutdown()
        server.server_close()
    print(result)
    print("charges made:", len(PaymentAPI.charges))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    store = args.store or f"sqlite:///{Path(tempfile.mkdtemp()) / 'pay.db'}"
    asyncio.run(main(store))
