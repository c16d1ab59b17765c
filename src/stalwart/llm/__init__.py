"""LLM providers: conversion of Messages to and from provider formats.

The provider SDKs (``openai``, ``anthropic``) are optional extras: nothing here
imports them, so ``import stalwart.llm`` works without either installed.
"""

from __future__ import annotations

from ._tools import ToolSpec
from ._usage import Usage

__all__ = ["ToolSpec", "Usage"]
