"""What an agent's parts ask of a value without importing the agent module,
which imports them: whether it is an :class:`~stalwart.llm.Agent`."""

from __future__ import annotations

__all__ = ["is_agent"]


def is_agent(value: object) -> bool:
    """Whether ``value`` is an ``llm.Agent`` (its class says so)."""
    return getattr(type(value), "__stalwart_agent__", False) is True
