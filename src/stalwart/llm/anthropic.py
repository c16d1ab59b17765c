"""Anthropic models as policies, through the Messages API.

The system prompt is a request parameter there, not a message: the leading
system messages of the conversation become it (see
:func:`~._convert_anthropic.to_anthropic_messages`). ``max_tokens`` is
required by the API, so it has a default here.

The ``anthropic`` package is imported when a model is built, not before.
"""

from __future__ import annotations

from typing import Any

from ..core.message import Message
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
        self, observations: list[Message], tools: list[ToolSpec], *, stream: bool
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
        if stream:
            request["stream"] = True
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        return await self.client.messages.create(**request)

    def _read(self, response: Any) -> tuple[list[Message], Usage]:
        return from_anthropic_message(response, actor=self.name)

    def _accumulator(self) -> Accumulator:
        return AnthropicStreamAccumulator(actor=self.name)


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
