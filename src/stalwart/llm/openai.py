"""OpenAI models as policies: Chat Completions and the Responses API.

Chat Completions is the lingua franca of OpenAI-compatible servers (vLLM,
Ollama, llama.cpp, LM Studio, OpenRouter), so it is the default and the one
``base_url`` is meant for; the Responses API is OpenAI's newer interface.
Both send the whole conversation on every call (nothing is kept on the
server's side between calls), because the conversation a run replays is the
one in its ledger.

The ``openai`` package is imported when a model is built, not before.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from ..core.message import Message
from ._convert_openai_chat import (
    ChatStreamAccumulator,
    from_chat_completion,
    to_chat_messages,
    to_chat_tools,
)
from ._convert_openai_responses import (
    ResponsesStreamAccumulator,
    from_response,
    to_responses_input,
    to_responses_tools,
)
from ._provider import DEFAULT_MAX_RETRIES, Accumulator, Provider, import_sdk, resolve_api_key
from ._tools import ToolSpec
from ._usage import Usage

__all__ = ["OpenAIChat", "OpenAIResponses", "openai"]

ENV_VAR = "OPENAI_API_KEY"


class OpenAIChat(Provider):
    """A Chat Completions model (OpenAI, or any server that speaks its API).

    Streaming asks for usage in the last chunk (``stream_options``), which
    OpenAI sends only when asked; pass ``stream_options`` yourself for a server
    that refuses it.
    """

    provider = "openai"
    sdk_module = "openai"
    env_var = ENV_VAR
    what = "OpenAI Chat Completions"

    def _request(
        self,
        observations: list[Message],
        tools: list[ToolSpec],
        *,
        stream: bool,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = dict(self.params)
        request["model"] = self.model
        request["messages"] = to_chat_messages(observations)
        if tools:
            request["tools"] = [*request.get("tools", ()), *to_chat_tools(tools)]
        if output is not None:
            request["response_format"] = {"type": "json_schema", "json_schema": _schema(output)}
        if stream:
            request["stream"] = True
            request.setdefault("stream_options", {"include_usage": True})
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        return await self.client.chat.completions.create(**request)

    def _read(self, response: Any) -> tuple[list[Message], Usage]:
        return from_chat_completion(response, actor=self.name)

    def _accumulator(self) -> Accumulator:
        return ChatStreamAccumulator(actor=self.name)


class OpenAIResponses(Provider):
    """A model behind OpenAI's Responses API, sent the whole conversation each call."""

    provider = "openai"
    sdk_module = "openai"
    env_var = ENV_VAR
    what = "OpenAI Responses"

    def _request(
        self,
        observations: list[Message],
        tools: list[ToolSpec],
        *,
        stream: bool,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = dict(self.params)
        request["model"] = self.model
        request["input"] = to_responses_input(observations)
        if tools:
            request["tools"] = [*request.get("tools", ()), *to_responses_tools(tools)]
        if output is not None:
            # ``text`` may hold other settings given as params (``verbosity``).
            text = {**request.get("text", {}), "format": {"type": "json_schema", **_schema(output)}}
            request["text"] = text
        if stream:
            request["stream"] = True
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        return await self.client.responses.create(**request)

    def _read(self, response: Any) -> tuple[list[Message], Usage]:
        return from_response(response, actor=self.name)

    def _accumulator(self) -> Accumulator:
        return ResponsesStreamAccumulator(actor=self.name)


def _schema(output: dict[str, Any]) -> dict[str, Any]:
    """The json_schema of OpenAI's structured outputs, both APIs' shape."""
    return {"name": output["name"], "schema": output["schema"], "strict": output["strict"]}


def openai(
    model: str,
    *,
    api: Literal["chat", "responses"] = "chat",
    base_url: str | None = None,
    api_key: str | None = None,
    client: Any = None,
    stream: bool = False,
    name: str | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = None,
    **params: Any,
) -> OpenAIChat | OpenAIResponses:
    """An OpenAI model, or a model on any OpenAI-compatible server, as a policy.

    Args:
        model: The model id, e.g. ``"gpt-4.1-mini"``.
        api: ``"chat"`` (Chat Completions, which compatible servers speak) or
            ``"responses"``.
        base_url: An OpenAI-compatible server, e.g.
            ``"http://localhost:11434/v1"`` for Ollama.
        api_key: The key; by default ``OPENAI_API_KEY``. A server at
            ``base_url`` that needs none gets a placeholder.
        client: An ``openai.AsyncOpenAI`` to use as it is (its own key,
            retries and timeout apply).
        stream: Stream token deltas to the run's listeners while the call runs.
        name: The policy's name (default ``"openai:<model>"``).
        max_retries: Retries of rate limits and transient errors, done by the
            SDK with backoff.
        timeout: Seconds per request (the SDK's default otherwise).
        params: Sent with every request (``temperature``, ``tool_choice``...).
    """
    if api not in ("chat", "responses"):
        raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")
    if client is None:
        sdk = import_sdk("openai", "openai", "the OpenAI provider")
        if api_key is None and base_url is not None:
            # A local server (Ollama, vLLM, LM Studio...) takes any key, but the
            # SDK refuses to start without one.
            api_key = os.environ.get(ENV_VAR) or "none"
        client_settings: dict[str, Any] = {
            "api_key": resolve_api_key(api_key, ENV_VAR, "the OpenAI provider"),
            "max_retries": max_retries,
        }
        if base_url is not None:
            client_settings["base_url"] = base_url
        if timeout is not None:
            client_settings["timeout"] = timeout
        client = sdk.AsyncOpenAI(**client_settings)
    cls = OpenAIChat if api == "chat" else OpenAIResponses
    return cls(model, client=client, stream=stream, name=name, **params)
