"""A chat over HTTP: one durable run per conversation, one signal per message.

Serve it (one process that also executes the runs; a static page at /):

    stalwart serve --app examples/chat_api/app.py:policies --store sqlite:///chat.db \\
        --static examples/chat_api/static --execute --no-auth

then open http://127.0.0.1:8000/. The page starts a run of ``chat``, streams
its events (``GET /runs/{id}/events``) and sends each message as a signal
(``POST /runs/{id}/signals/message``). Every message and every reply is a
recorded step, so a page reloaded, a server restarted or a worker killed
mid-conversation loses nothing: the stream rebuilds the conversation from
the ledger.

The replies come from a small rule-based model so the example runs offline;
swap ``reply`` for an ``llm.Agent`` to talk to a real one.
"""

from __future__ import annotations

import stalwart as sw

BYE = ("bye", "goodbye", "quit")


def said_bye(text: str) -> bool:
    return any(word.strip("!,.?") in BYE for word in text.lower().split())


@sw.policy
async def reply(history: list[dict[str, str]], name: str) -> str:
    """The assistant's next message, given the conversation so far (a recorded
    step: a resumed conversation never asks for a finished reply again)."""
    if not history:
        return f"Hi {name}! What shall we talk about? (say bye to finish)"
    said = history[-1]["text"].strip()
    turns = sum(1 for m in history if m["role"] == "user")
    words = [w.strip("!,.?") for w in said.lower().split()]
    if not words:
        return "Say something, and I will answer."
    if words[0] in ("hello", "hi", "hey"):
        return f"Hello {name}! I am a durable chat: reload the page, I remember."
    if said_bye(said):
        return f"Goodbye {name}! You sent {turns} messages."
    if said.endswith("?"):
        return f"A good question. I am offline, so I can only echo it: {said}"
    return f"You said: {said} (message {turns})"


@sw.policy
async def chat(ctx: sw.Context, name: str = "friend") -> str:
    """A conversation: greet, then answer each message until the user says bye.

    Args:
        name: Who is chatting, for the greeting.
    """
    history: list[dict[str, str]] = []
    while True:
        answer = await reply(history, name)
        history.append({"role": "assistant", "text": answer})
        if len(history) > 1 and said_bye(history[-2]["text"]):
            return answer
        # Suspended until the page sends a message: a row in the store, no task.
        message = await ctx.wait_for("message", prompt=answer)
        text = str(message.get("text", "")) if isinstance(message, dict) else str(message)
        history.append({"role": "user", "text": text})


policies = [chat]
