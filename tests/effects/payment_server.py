"""A payment API that charges once per Idempotency-Key, run as its own
process by the crash test (it outlives the worker that is killed).

    python payment_server.py hold|answer

It listens on a free local port and prints ``listening <port>``. ``POST
/charges`` with a key it has not seen makes a charge and prints ``received
<key>``; with a key it has seen, it answers with that key's charge and makes
none. In ``hold`` mode the first answer for a key is held until the client
goes away (a worker killed mid-call); in ``answer`` mode it is sent at once.
``GET /charges`` answers the charges made, by key, and how many requests each
key came with.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD = sys.argv[1] == "hold"
CHARGES: dict[str, str] = {}
REQUESTS: dict[str, int] = {}
LOCK = threading.Lock()


class Payments(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        with LOCK:
            self._reply({"charges": CHARGES, "requests": REQUESTS})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Idempotency-Key")
        if key is None:
            self._reply({"error": "an Idempotency-Key header is required"}, 400)
            return
        with LOCK:
            REQUESTS[key] = REQUESTS.get(key, 0) + 1
            first = key not in CHARGES
            if first:
                CHARGES[key] = f"ch_{len(CHARGES) + 1}"
            charge = CHARGES[key]
        if first:
            print(f"received {key}", flush=True)
            if HOLD:
                self._hold()
                return
        self._reply({"id": charge})

    def _hold(self) -> None:
        """Answer nothing until the client closes the connection."""
        conn = self.connection
        while True:
            readable, _, _ = select.select([conn], [], [], 0.1)
            if readable and conn.recv(1, socket.MSG_PEEK) == b"":
                return

    def _reply(self, body: object, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: standard output is for the lines the test reads."""


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Payments)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()
