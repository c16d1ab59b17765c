"""Models named by a string: ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-haiku-4-5"``.

A string fits where a configuration file or a command line names the model;
the known OpenAI-compatible servers need no ``base_url`` to be spelled out.
"""

from __future__ import annotations

import os
from typing import Any

from ..core.errors import MissingAPIKey
from ._provider import Provider
from .anthropic import anthropic
from .openai import openai

__all__ = ["COMPATIBLE", "model"]

# OpenAI-compatible servers: their usual address and the variable of their key
# (None: a local server that takes any key).
COMPATIBLE: dict[str, tuple[str, str | None]] = {
    "ollama": ("http://localhost:11434/v1", None),
    "lmstudio": ("http://localhost:1234/v1", None),
    "vllm": ("http://localhost:8000/v1", None),
    "llamacpp": ("http://localhost:8080/v1", None),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
}


def model(spec: str, **settings: Any) -> Provider:
    """The model ``spec`` names, as a policy: ``"provider:model-id"``.

    Providers: ``openai`` (Chat Completions), ``openai-responses``,
    ``anthropic``, and the OpenAI-compatible ``ollama``, ``lmstudio``,
    ``vllm``, ``llamacpp`` and ``openrouter`` (``OPENROUTER_API_KEY``). The
    model id is everything after the first colon, so ids with colons of their
    own work. ``settings`` go to :func:`openai` or :func:`anthropic`.
    """
    provider, sep, model_id = spec.partition(":")
    if not sep or not provider or not model_id:
        raise ValueError(
            f"a model string is 'provider:model', e.g. 'openai:gpt-4.1-mini', not {spec!r}"
        )
    if provider == "openai":
        return openai(model_id, **settings)
    if provider == "openai-responses":
        return openai(model_id, **{"api": "responses", **settings})
    if provider == "anthropic":
        return anthropic(model_id, **settings)
    if provider in COMPATIBLE:
        base_url, env_var = COMPATIBLE[provider]
        settings.setdefault("base_url", base_url)
        settings.setdefault("name", spec)
        if "api_key" not in settings and "client" not in settings:
            key = os.environ.get(env_var) if env_var else "none"
            if not key:
                raise MissingAPIKey(
                    f"{provider} needs an API key: set the {env_var} environment variable "
                    f"(export {env_var}=...), or pass api_key=..."
                )
            settings["api_key"] = key
        return openai(model_id, **settings)
    known = ", ".join(["openai", "openai-responses", "anthropic", *COMPATIBLE])
    raise ValueError(f"unknown provider {provider!r} in {spec!r}; known providers: {known}")
