"""Fallback models: when the first model is rate limited, the next one answers.

Two OpenAI-compatible models are served by a small HTTP server this program
starts on 127.0.0.1, so it runs without a key: ``primary`` always answers
429 (rate limited), ``backup`` answers. The agent's model is
``llm.fallback(primary, backup)``; each attempt is a recorded step, so the
ledger shows the rate-limited call and the answer, and the usage is the
backup's. Run it twice with the same run id and the second run replays the
answer from the ledger without sending a request:

    python examples/fallback_model.py
    python examples/fallback_model.py --store sqlite:///fallback.db --run-id capital

With real models, the chain is the same line:
``llm.fallback("openai:gpt-5-mini", "anthropic:claude-haiku-4-5")``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import stalwart as sw
from stalwart import llm

RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for primary-model on requests per min (RPM): Limit 3.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def completion(text: str) -> dict[str, Any]:
    """A Chat Completions answer, as an OpenAI-compatible server sends it."""
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 0,
        "model": "backup-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28},
    }


class Server(ThreadingHTTPServer):
    requests: list[str]  # the path of every request served, in order


class Handler(BaseHTTPRequestHandler):
    """``/primary/...`` is rate limited; ``/backup/...`` answers."""

    server: Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.requests.append(self.path)
        if self.path.startswith("/primary/"):
            status, body = 429, RATE_LIMITED
        else:
            status, body = 200, completion("Paris is the capital of France.")
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextmanager
def local_models() -> Iterator[Server]:
    """The two models' server, on a free port, for the duration of the block."""
    server = Server(("127.0.0.1", 0), Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def build_agent(base_url: str) -> llm.Agent:
    """An agent whose model is ``primary``, falling back to ``backup``."""
    # max_retries=0: move on at the first 429 instead of retrying the primary.
    primary = llm.openai(
        "primary-model", base_url=f"{base_url}/primary/v1", max_retries=0, name="primary"
    )
    backup = llm.openai("backup-model", base_url=f"{base_url}/backup/v1", name="backup")
    model = llm.fallback(primary, backup, on=["rate_limit", "overloaded", "server_error"])
    return llm.Agent(model, instructions="Answer in one sentence.", name="geographer")


async def ask(store: str, run_id: str, question: str, base_url: str) -> None:
    agent = build_agent(base_url)
    async with sw.Runner(store) as runner:
        answer = await runner.run(agent, question=question, run_id=run_id)
        steps = await runner.steps(run_id)
    print(f"answer: {answer}")
    for step in sorted(steps, key=lambda s: s.key):
        failed = json.loads(step.error)["type"].rpartition(".")[2] if step.error else None
        outcome = f"failed: {failed}" if failed else "answered"
        print(f"step {step.key:<4} {step.name:<18} {outcome}")
    for model, usage in llm.run_usage_by_model(steps).items():
        print(f"usage of {model}: {usage.input_tokens} in, {usage.output_tokens} out")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An agent on a chain of models.")
    parser.add_argument("--store", default="sqlite:///fallback.db", help="the ledger's URL")
    parser.add_argument("--run-id", default="capital", help="the run's id")
    parser.add_argument("question", nargs="?", default="What is the capital of France?")
    args = parser.parse_args(argv)
    with local_models() as server:
        base_url = f"http://127.0.0.1:{server.server_address[1]}"
        asyncio.run(ask(args.store, args.run_id, args.question, base_url))
        print(f"requests sent: {len(server.requests)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
