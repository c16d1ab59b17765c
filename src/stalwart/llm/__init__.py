"""LLM providers as policies, and a ready tool-calling agent.

    from stalwart import llm

    model = llm.openai("gpt-4.1-mini")            # or llm.anthropic("claude-haiku-4-5"),
    model = llm.model("openai:gpt-4.1-mini")      # or a model string
    model = llm.fallback("openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5")
    agent = llm.Agent(model, instructions="...", tools=[search, read])
    answer = await agent.run("What changed in Python 3.13?")

A model is a policy: ``await ctx.call(model, observations=..., options=[...])``
is one recorded step, and the engine runs the tool calls it returns. The
provider SDKs (``openai``, ``anthropic``) are optional extras, imported only
when a model is built, so ``import stalwart.llm`` works without either.

Note that ``stalwart.llm.openai`` and ``stalwart.llm.anthropic`` are the
constructor functions; their modules' classes are exported here too.
"""

from __future__ import annotations

from ..core.errors import (
    AuthenticationFailed,
    BudgetExceeded,
    FallbackExhausted,
    GuardrailTripped,
    InvalidRequest,
    MaxRoundsExceeded,
    MissingAPIKey,
    MissingDependency,
    OutputValidationError,
    ProviderError,
    ProviderStreamError,
    ProviderUnavailable,
    RateLimited,
)
from ._compaction import Compaction, ContextPolicy, ModelCall, Window, window
from ._fallback import Fallback, fallback
from ._guardrails import Verdict
from ._handoffs import Handoff, HandoffHistory, Summary
from ._model import model
from ._provider import Provider
from ._tools import ToolSpec, tool_specs
from ._usage import Price, Usage, read_prices, run_usage, run_usage_by_model, usage_of
from .agent import Agent
from .anthropic import AnthropicMessages, anthropic
from .memory_tools import memory_scope, recall, remember
from .openai import OpenAIChat, OpenAIResponses, openai

__all__ = [
    "Agent",
    "AnthropicMessages",
    "AuthenticationFailed",
    "BudgetExceeded",
    "Compaction",
    "ContextPolicy",
    "Fallback",
    "FallbackExhausted",
    "GuardrailTripped",
    "Handoff",
    "HandoffHistory",
    "InvalidRequest",
    "MaxRoundsExceeded",
    "MissingAPIKey",
    "MissingDependency",
    "ModelCall",
    "OpenAIChat",
    "OpenAIResponses",
    "OutputValidationError",
    "Price",
    "Provider",
    "ProviderError",
    "ProviderStreamError",
    "ProviderUnavailable",
    "RateLimited",
    "Summary",
    "ToolSpec",
    "Usage",
    "Verdict",
    "Window",
    "anthropic",
    "fallback",
    "memory_scope",
    "model",
    "openai",
    "read_prices",
    "recall",
    "remember",
    "run_usage",
    "run_usage_by_model",
    "tool_specs",
    "usage_of",
    "window",
]
