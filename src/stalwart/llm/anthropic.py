"""Anthropic models as policies, through the Messages API.

The system prompt is a request parameter there, not a message: the leading
system messages of the conversation become it (see
:func:`~._convert_anthropic.to_anthropic_messages`). ``max_tokens`` is
required by the API, so it has a default here.

The ``anthropic`` package is imported when a model is built, not before.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.message import Message, Text, plain
from ._convert_anthropic import (
    AnthropicStreamAccumulator,
    from_anthropic_message,
    to_anthropic_messages,
    to_anthropic_tools,
)
from ._provider import DEFAULT_MAX_RETRIES, Accumulator, Provider, import_sdk, resolve_api_key
from ._tools import ToolSpec
from ._usage import Usage

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicMessages", "anthropic"]

ENV_VAR = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 4096


class AnthropicMessages(Provider):
    """A Claude model behind the Messages API (tool use, parallel tool calls)."""

    provider = "anthropic"
    sdk_module = "anthropic"
    env_var = ENV_VAR
    what = "Anthropic Messages"

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        stream: bool = False,
        name: str | None = None,
        **params: Any,
    ) -> None:
        super().__init__(model, client=client, stream=stream, name=name, **params)
        self.max_tokens = max_tokens

    def _request(
        self,
        observations: list[Message],
        tools: list[ToolSpec],
        *,
        stream: bool,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        system, messages = to_anthropic_messages(observations)
        request = dict(self.params)
        request["model"] = self.model
        request["max_tokens"] = self.max_tokens
        request["messages"] = messages
        if system is not None:
            # A ``system`` given as a parameter comes first; the conversation's own follows.
            given = request.get("system")
            request["system"] = f"{given}\n\n{system}" if isinstance(given, str) else system
        if tools:
            request["tools"] = [*request.get("tools", ()), *to_anthropic_tools(tools)]
        if output is not None:
            _answer_tool(request, output, has_tools=bool(tools))
        if stream:
            request["stream"] = True
        return request

    def _answer(self, messages: list[Message], output: dict[str, Any]) -> list[Message]:
        """The answer tool's call as the JSON text of its input; the text
        written beside it (a preamble) left out, other calls kept."""
        name = output["name"]
        answers = [m for m in messages if m.action_call is not None and m.action_call.name == name]
        if not answers:
            return messages
        call = answers[-1].action_call
        assert call is not None
        text = call.invalid or json.dumps(plain(call.arguments), ensure_ascii=False)
        answer = Message("assistant", self.name, (Text(text),), meta=messages[0].meta)
        others = [m for m in messages if m.action_call is not None and m.action_call.name != name]
        return [answer, *others]

    async def _create(self, request: dict[str, Any]) -> Any:
        return await self.client.messages.create(**request)

    def _read(self, response: Any) -> tuple[list[Message], Usage]:
        return from_anthropic_message(response, actor=self.name)

    def _accumulator(self) -> Accumulator:
        return AnthropicStreamAccumulator(actor=self.name)


def _answer_tool(request: dict[str, Any], output: dict[str, Any], *, has_tools: bool) -> None:
    """Ask for the answer as the input of a tool whose schema is the output
    type's: the only tool the model may call when it has no others, else one
    it must call among them (``tool_choice`` "any"), so it ends on it."""
    name = output["name"]
    if any(t.get("name") == name for t in request.get("tools", ())):
        raise ValueError(
            f"the output type {name!r} has the name of one of the tools; "
            "rename the output type (Anthropic is asked for it as a tool of that name)"
        )
    tool = {
        "name": name,
        "description": "Give your final answer with this tool, once you have it.",
        "input_schema": output["schema"],
    }
    request["tools"] = [*request.get("tools", ()), tool]
    request["tool_choice"] = {"type": "any"} if has_tools else {"type": "tool", "name": name}


def anthropic(
    model: str,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    api_key: str | None = None,
    base_url: str | None = None,
    client: Any = None,
    stream: bool = False,
    name: str | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = None,
    **params: Any,
) -> AnthropicMessages:
    """An Anthropic model as a policy.

    Args:
        model: The model id, e.g. ``"claude-haiku-4-5"``.
        max_tokens: The most output tokens per call (the API requires a limit).
        api_key: The key; by default ``ANTHROPIC_API_KEY``.
        base_url: Another endpoint for the same API (a proxy, a gateway).
        client: An ``anthropic.AsyncAnthropic`` to use as it is (its own key,
            retries and timeout apply).
        stream: Stream token deltas to the run's listeners while the call runs.
        name: The policy's name (default ``"anthropic:<model>"``).
        max_retries: Retries of rate limits, overload and transient errors,
            done by the SDK with backoff.
        timeout: Seconds per request (the SDK's default otherwise).
        params: Sent with every request (``temperature``, ``tool_choice``...).
    """
    if client is None:
        sdk = import_sdk("anthropic", "anthropic", "the Anthropic provider")
        client_settings: dict[str, Any] = {
            "api_key": resolve_api_key(api_key, ENV_VAR, "the Anthropic provider"),
            "max_retries": max_retries,
        }
        if base_url is not None:
            client_settings["base_url"] = base_url
        if timeout is not None:
            client_settings["timeout"] = timeout
        client = sdk.AsyncAnthropic(**client_settings)
    return AnthropicMessages(
        model, client=client, max_tokens=max_tokens, stream=stream, name=name, **params
    )
