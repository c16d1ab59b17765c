"""A deterministic stand-in for the OpenAI and Anthropic HTTP APIs, offline.

Programs written against the official SDKs run unchanged against it: the
SDKs read their address from ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL``,
which :attr:`OfflineModel.env` sets. Each answer is a function of the
request's text alone, so two runs of one program (under PocketFlow and under
``stalwart run``) are told the same things:

- a prompt that shows a fenced ```yaml (or ```json) block, the format it
  wants its answer in, gets that block back, the last one shown: a program
  parsing its reply finds the fields it asked for;
- any other prompt gets one line naming a digest of the prompt;
- an Anthropic request asking for extended thinking gets a thinking block
  before the text, as the API sends.

The server counts the requests it answers, which is how a test counts the
model calls of a program it cannot change, and it can hold the n-th request
unanswered (:meth:`OfflineModel.hold`) so that a test kills the program
while that call is in flight.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OfflineModel", "answer", "offline_model"]

_FENCED = re.compile(r"```(yaml|json)[ \t]*\n(.*?)```", re.DOTALL)


def answer(prompt: str) -> str:
    """The reply to ``prompt``: its last fenced yaml/json block, or a line
    naming the prompt's digest."""
    blocks = _FENCED.findall(prompt)
    if blocks:
        kind, body = blocks[-1]
        return f"```{kind}\n{body}```"
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"Offline answer {digest}."


def _text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _prompt(body: dict[str, Any]) -> str:
    """Everything the request says, system prompt and messages, in order."""
    parts = [_text(body.get("system", ""))]
    parts += [_text(m.get("content", "")) for m in body.get("messages", [])]
    return "\n".join(p for p in parts if p)


def _openai_reply(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-offline",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "offline"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _anthropic_reply(body: dict[str, Any], text: str) -> dict[str, Any]:
    content: list[dict[str, str]] = [{"type": "text", "text": text}]
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        # Extended thinking: the API puts a thinking block before the text.
        content.insert(0, {"type": "thinking", "thinking": "Offline.", "signature": "offline"})
    return {
        "id": "msg_offline",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "offline"),
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class OfflineModel:
    """The server's state: the requests answered and the one held, if any."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        self._held_at = 0
        self.arrived = threading.Event()  # the held request has come in
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def env(self) -> dict[str, str]:
        """What a program's environment needs to reach this server through
        the official SDKs (the keys are placeholders, never checked)."""
        return {
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "OPENAI_API_BASE": f"{self.url}/v1",
            "OPENAI_API_KEY": "offline",
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "offline",
        }

    @property
    def requests(self) -> int:
        """How many requests have come in (the held one included)."""
        with self._lock:
            return len(self.prompts)

    def reset(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self.prompts.clear()

    def hold(self, nth: int) -> None:
        """Leave the ``nth`` request from now unanswered until
        :meth:`release` (:attr:`arrived` is set when it comes)."""
        with self._lock:
            self._held_at = len(self.prompts) + nth
        self.arrived.clear()
        self._release.clear()

    def release(self) -> None:
        """Answer the held request (if its caller still listens) and hold no
        more."""
        with self._lock:
            self._held_at = 0
        self._release.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def _received(self, prompt: str) -> bool:
        """Count a request; whether it is the one to hold."""
        with self._lock:
            self.prompts.append(prompt)
            held = len(self.prompts) == self._held_at
        if held:
            self.arrived.set()
        return held

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = _prompt(body)
                if model._received(prompt):
                    model._release.wait(timeout=120)
                text = answer(prompt)
                if self.path.rstrip("/").endswith("/messages"):
                    reply = _anthropic_reply(body, text)
                else:
                    reply = _openai_reply(body, text)
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the caller was killed while it waited
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def offline_model() -> Iterator[OfflineModel]:
    """A running :class:`OfflineModel`, stopped on exit."""
    model = OfflineModel()
    model.start()
    try:
        yield model
    finally:
        model.stop()
