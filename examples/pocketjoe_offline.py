"""Offline stand-ins for what PocketJoe's example programs import from
their ``examples.utils`` package (0.2), or leave to the reader (0.1's README
example), so those programs (fetched from the ``pocket-joe`` sdist at test
time, never kept here) and our own ``pocketjoe_agent.py`` (0.1 API) and
``pocketjoe_v02_agent.py`` run without a network, an API key or a model.

What the programs use, and what stands in for it here:

* ``CompletionsAdapter``: turns the conversation and the offered options
  into something a chat model reads, and its reply back into messages. Its
  ``client()`` is a small rule-following model written below, not an HTTP
  client: it calls the first option it is offered with the user's words,
  then answers from what the option returned; it turns a video transcript
  into topics, and a topic into answers, in the YAML the summarizer parses.
* ``web_seatch_ddgs_policy`` (the upstream spelling, which is the option's
  name): looks words up in a three-entry corpus.
* ``transcribe_youtube_policy`` and ``TranscriptResult``: knows one video.

For PocketJoe 0.1 (its ``Message(actor, type, payload)``), the same
offline model is reached through ``offline_openai`` (awaited like an OpenAI
client: ``.chat.completions.create(model=, messages=, tools=)``), with
``completions_messages`` and ``completions_tools`` to build its input from
0.1 messages and a context's bound options, ``reply_messages`` to turn its
reply into 0.1 messages, and ``OfflineSearch`` (``.text(query,
max_results)``, a list of ``title``/``href``/``body`` dicts). The README
launcher imports them under the names the README example uses.

For the tests: each stand-in writes one word to the file named by
``$PJ_LOG`` when it really runs (``llm``, ``llm:topics``, ``llm:answer``,
``search``, ``transcribe``), so a test can tell what ran again after a
crash; ``PJ_SLOW_SEARCH`` and ``PJ_SLOW_ANSWER`` (seconds) hold the search
and the topic answers long enough to kill the program in the middle.
``OfflineSearch`` is synchronous, like the search library it stands in
for, so its pause blocks the event loop (nothing else runs; it is killed).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlparse

from pydantic import BaseModel

from stalwart import pocketjoe as v01
from stalwart.pocketjoe.v02 import (
    Message,
    MessageBuilder,
    OptionCallPayload,
    OptionResultPayload,
    OptionSchema,
    policy,
)

__all__ = [
    "CompletionsAdapter",
    "OfflineSearch",
    "TranscriptResult",
    "completions_messages",
    "completions_tools",
    "note",
    "offline_openai",
    "pause",
    "reply_messages",
    "transcribe_youtube_policy",
    "web_seatch_ddgs_policy",
]


def note(event: str) -> None:
    """Record, for a test, that ``event`` really happened (not replayed)."""
    log = os.environ.get("PJ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{event}\n")


async def pause(variable: str) -> None:
    """Wait as many seconds as ``$variable`` says (none when unset): the
    window a crash test kills the program in."""
    await asyncio.sleep(float(os.environ.get(variable) or 0))


# -- the conversation, as the offline model reads it ----------------------------------
def _turns(observations: list[Message]) -> list[dict[str, Any]]:
    """Text messages as ``{"role", "content"}``; an answered option call as
    one ``{"role": "tool", "option", "content"}`` turn. A call without its
    result is left out: the model has nothing to read from it yet."""
    answered: dict[str, OptionResultPayload] = {}
    for message in observations:
        if isinstance(message.payload, OptionResultPayload):
            answered[message.payload.invocation_id] = message.payload
    turns: list[dict[str, Any]] = []
    for message in observations:
        if message.parts:
            turns.append(
                {"role": message.role_hint_for_llm or "assistant", "content": str(message)}
            )
            continue
        call = message.payload
        if isinstance(call, OptionCallPayload) and call.invocation_id in answered:
            result = answered[call.invocation_id].result
            shown = result if isinstance(result, str) else json.dumps(result, default=str)
            turns.append({"role": "tool", "option": call.option_name, "content": shown})
    return turns


class CompletionsAdapter:
    """The conversation and options for the offline model, and its reply
    back as PocketJoe messages (text, or one option call)."""

    def __init__(self, observations: list[Message], options: list[OptionSchema] | None = None):
        self.messages = _turns(observations)
        self.tools = [option.model_dump() for option in options or []]

    @staticmethod
    def client(**settings: Any) -> Any:
        """The offline model; ``settings`` (an API key, a base URL) are
        accepted and ignored, as there is no server to send them to."""
        return SimpleNamespace(chat=SimpleNamespace(completions=_OfflineModel()))

    def decode(self, response: Any, policy: str = "completions") -> list[Message]:
        """The model's reply: a text message, or an option call message."""
        if response.call is None:
            builder = MessageBuilder(policy=policy, role_hint_for_llm="assistant")
            return [builder.add_text(response.text).to_message()]
        name, arguments, call_id = response.call
        payload = OptionCallPayload(invocation_id=call_id, option_name=name, arguments=arguments)
        return [Message(policy=policy, role_hint_for_llm="assistant", payload=payload)]


class _OfflineModel:
    """Rules instead of weights; the same answer for the same conversation,
    so a run replayed after a crash sees what the first execution saw."""

    async def create(
        self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> SimpleNamespace:
        asked = str(messages[-1]["content"]) if messages else ""
        if "VIDEO TITLE:" in asked:
            note("llm:topics")
            return _says(_topics(asked))
        if "TOPIC:" in asked and "QUESTIONS:" in asked:
            note("llm:answer")
            await pause("PJ_SLOW_ANSWER")
            return _says(_answers(asked))
        note("llm")
        heard = [m for m in messages if m["role"] == "tool"]
        if heard:
            first_line = heard[-1]["content"].strip().splitlines()[0]
            return _says(f"According to {heard[-1]['option']}: {first_line}")
        users = [m["content"] for m in messages if m["role"] == "user"]
        if tools and users:
            tool = tools[0]
            wanted = tool["parameters"].get("required") or list(tool["parameters"]["properties"])
            arguments = {wanted[0]: users[-1]} if wanted else {}
            return SimpleNamespace(
                text=None, call=(tool["name"], arguments, f"turn-{len(messages)}")
            )
        return _says("I have nothing to go on.")


def _says(text: str) -> SimpleNamespace:
    return SimpleNamespace(text=text, call=None)


def _quoted(text: str) -> str:
    """A YAML scalar: a JSON string is a valid YAML double-quoted one."""
    return json.dumps(text)


def _topics(asked: str) -> str:
    found = re.search(r"VIDEO TITLE:\s*(.+)", asked)
    subject = found.group(1).strip() if found else "this video"
    lines = [
        "topics:",
        f"  - title: {_quoted(f'What {subject} are for')}",
        "    questions:",
        f"      - {_quoted('Which failure do they guard against?')}",
        f"      - {_quoted('What does it cost to use them?')}",
        f"  - title: {_quoted('Recovery')}",
        "    questions:",
        f"      - {_quoted('Where does a restarted program pick up?')}",
    ]
    return "```yaml\n" + "\n".join(lines) + "\n```"


_GIST = "The talk says: **keep a record** of each step and resume from it."


def _answers(asked: str) -> str:
    found = re.search(r"TOPIC:\s*(.+)", asked)
    topic = found.group(1).strip() if found else "The topic"
    listed = asked.split("QUESTIONS:", 1)[1].split("FULL TRANSCRIPT:", 1)[0]
    questions = re.findall(r"^\s*\d+\.\s*(.+?)\s*$", listed, re.MULTILINE)
    lines = [f"rephrased_title: {_quoted(topic + ', briefly')}", "questions:"]
    for question in questions:
        lines += [
            f"  - original: {_quoted(question)}",
            f"    rephrased: {_quoted('In short: ' + question)}",
            f"    answer: {_quoted(_GIST)}",
        ]
    return "```yaml\n" + "\n".join(lines) + "\n```"


# -- the options ------------------------------------------------------------------------
_PAGES = [
    ("python", "Python 3.14 is the newest Python release (python.org)."),
    ("sqlite", "SQLite keeps a whole database in one file (sqlite.org)."),
    ("pocketjoe", "PocketJoe: agents as policies over observations and options."),
]


@policy.tool(description="Search the web (offline: a three-page corpus) and list what matches.")
async def web_seatch_ddgs_policy(query: str) -> str:
    """Look ``query``'s words up in a tiny corpus, one matching page a line.

    Args:
        query: Words to look for.
    """
    note("search")
    await pause("PJ_SLOW_SEARCH")
    words = set(re.findall(r"[a-z0-9]+", query.lower()))
    hits = [page for key, page in _PAGES if key in words]
    return "\n".join(hits) or "No page matched."


class TranscriptResult(BaseModel):
    """A video's title, transcript and thumbnail, or why there are none."""

    title: str
    transcript: str
    thumbnail_url: str
    video_id: str
    error: str | None = None


_VIDEOS = {
    "h_Zk4fDDcSY": (
        "Durable agents",
        "A program that talks to a model for an hour should not start over when the "
        "machine restarts. Write down each step's answer as it happens; after a crash, "
        "read the notes back and carry on from the first step without one.",
    )
}


def _video_id(url: str) -> str | None:
    """The id in a ``youtu.be/<id>`` or ``youtube.com/watch?v=<id>`` link."""
    parsed = urlparse(url)
    if parsed.hostname == "youtu.be":
        return parsed.path.strip("/") or None
    given = parse_qs(parsed.query).get("v")
    return given[0] if given else None


@policy.tool(description="Fetch a YouTube video's title and transcript (offline: one video).")
async def transcribe_youtube_policy(url: str) -> TranscriptResult:
    """The title and transcript of the video at ``url``.

    Args:
        url: A youtu.be or youtube.com/watch link.
    """
    note("transcribe")
    video = _video_id(url)
    if video is None or video not in _VIDEOS:
        why = "not a YouTube video link" if video is None else f"no transcript for {video}"
        return TranscriptResult(
            title="", transcript="", thumbnail_url="", video_id=video or "", error=why
        )
    title, transcript = _VIDEOS[video]
    thumbnail = f"https://i.ytimg.com/vi/{video}/hqdefault.jpg"
    return TranscriptResult(
        title=title, transcript=transcript, thumbnail_url=thumbnail, video_id=video
    )


# -- PocketJoe 0.1: the same model, for ``Message(actor, type, payload)`` ---------------
def completions_messages(observations: list[v01.Message]) -> list[dict[str, Any]]:
    """0.1 messages as the offline model reads them: ``text`` ones as
    ``{"role": actor, "content"}``; an ``action_call`` answered by an
    ``action_result`` (same ``tool_id``) as one ``{"role": "tool", "option",
    "content"}`` turn; an unanswered call is left out, as in ``_turns``."""
    answered = {m.tool_id: m for m in observations if m.type == "action_result"}
    turns: list[dict[str, Any]] = []
    for message in observations:
        if message.type == "text":
            turns.append({"role": message.actor, "content": str(message.payload.get("content"))})
        elif message.type == "action_call" and message.tool_id in answered:
            said = answered[message.tool_id].payload
            content = said.get("content", said)
            shown = content if isinstance(content, str) else json.dumps(content, default=str)
            option = str(message.payload.get("policy"))
            turns.append({"role": "tool", "option": option, "content": shown})
    return turns


def completions_tools(ctx: v01.BaseContext, options: list[str] | None) -> list[dict[str, Any]]:
    """The options a 0.1 policy offers (attribute names on ``ctx``) as the
    model sees them: each bound policy's spec, under the name it is called by."""
    tools: list[dict[str, Any]] = []
    for name in options or []:
        spec = v01.get_policy_spec(ctx.get_policy(name))
        tools.append(
            {"name": name, "description": spec.description, "parameters": spec.input_schema}
        )
    return tools


def reply_messages(reply: Any, actor: str = "assistant") -> list[v01.Message]:
    """The offline model's reply as 0.1 messages: one ``text``, or one
    ``action_call`` whose ``tool_id`` is the model's (stable on replay)."""
    if reply.call is None:
        return [v01.Message(actor=actor, type="text", payload={"content": reply.text})]
    name, arguments, call_id = reply.call
    call = {"policy": name, "payload": arguments}
    return [v01.Message(actor=actor, type="action_call", payload=call, tool_id=call_id)]


# Awaited like an OpenAI client; answers by the rules of ``_OfflineModel``.
offline_openai = SimpleNamespace(chat=SimpleNamespace(completions=_OfflineModel()))

_RESULTS = [
    ("python", "Python 3.14 is out", "https://www.python.org/downloads/",
     "The newest Python release, with the changes it brings."),
    ("sqlite", "SQLite file format", "https://sqlite.org/fileformat.html",
     "A whole database in one ordinary file."),
]  # fmt: skip


class OfflineSearch:
    """A web search over two pages: ``text(query)`` lists the pages whose
    key word is among the query's words, as ``title``/``href``/``body``."""

    def text(self, query: str, max_results: int = 5) -> list[dict[str, str]]:
        note("search")
        time.sleep(float(os.environ.get("PJ_SLOW_SEARCH") or 0))
        words = set(re.findall(r"[a-z0-9]+", query.lower()))
        found = [
            {"title": title, "href": href, "body": body}
            for key, title, href, body in _RESULTS
            if key in words
        ]
        return found[:max_results]
