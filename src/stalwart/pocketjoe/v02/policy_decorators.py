"""``@policy.tool`` and ``@policy.resource``: PocketJoe 0.2's decorators.

PocketJoe builds the metadata with FastMCP's extractors; here it is
Stalwart's :class:`~stalwart.core.schema.Signature` (type hints and the
docstring's parameter docs), so the schema a model is shown is the one its
arguments are validated against before the call runs. The function is
returned as it is, so it can still be awaited directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...core.schema import Signature
from .core import OptionSchema

__all__ = ["PolicyDecorators", "ResourceMetadata", "ToolMetadata", "policy"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolMetadata:
    """What ``@policy.tool`` records (``func._tool_metadata``)."""

    name: str
    description: str | None
    parameters: dict[str, Any]
    title: str | None = None
    tags: frozenset[str] = frozenset()
    annotations: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True


@dataclass(frozen=True)
class ResourceMetadata:
    """What ``@policy.resource`` records (``func._resource_metadata``)."""

    uri: str
    name: str
    description: str | None
    title: str | None = None
    mime_type: str | None = None
    tags: frozenset[str] = frozenset()
    annotations: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True


def _schema(func: Callable[..., Any], name: str, exclude: list[str]) -> tuple[str, dict[str, Any]]:
    sig = Signature(func, False, name, None)
    schema = sig.json_schema()
    for arg in exclude:
        schema["properties"].pop(arg, None)
        if arg in schema.get("required", ()):
            schema["required"] = [r for r in schema["required"] if r != arg]
    return sig.description, schema


class PolicyDecorators:
    """The ``policy`` namespace: ``@policy.tool(...)``, ``@policy.resource(...)``."""

    @staticmethod
    def tool(
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Any] | None = None,
        tags: set[str] | None = None,
        annotations: Any = None,
        exclude_args: list[str] | None = None,
        output_schema: Any = None,
        serializer: Callable[[Any], str] | None = None,
        meta: dict[str, Any] | None = None,
        enabled: bool | None = None,
    ) -> Callable[[F], F]:
        """Give a policy function its option name, description and schema."""

        def decorate(func: F) -> F:
            tool_name = name or func.__name__
            summary, parameters = _schema(func, tool_name, exclude_args or [])
            text = description if description is not None else (summary or None)
            target: Any = func
            target._tool_metadata = ToolMetadata(
                tool_name,
                text,
                parameters,
                title,
                frozenset(tags or ()),
                annotations,
                dict(meta or {}),
                enabled is not False,
            )
            target._policy_type = "tool"
            target._option_schema = OptionSchema(
                name=tool_name, description=text, parameters=parameters
            )
            return func

        return decorate

    @staticmethod
    def resource(
        uri: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Any] | None = None,
        mime_type: str | None = None,
        tags: set[str] | None = None,
        enabled: bool | None = None,
        annotations: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Mark a policy function as a resource at ``uri`` (it takes no arguments)."""

        def decorate(func: F) -> F:
            res_name = name or func.__name__
            summary, _ = _schema(func, res_name, [])
            text = description if description is not None else (summary or None)
            target: Any = func
            target._resource_metadata = ResourceMetadata(
                str(uri),
                res_name,
                text,
                title,
                mime_type,
                frozenset(tags or ()),
                annotations,
                dict(meta or {}),
                enabled is not False,
            )
            target._policy_type = "resource"
            target._option_schema = OptionSchema(name=res_name, description=text, parameters={})
            return func

        return decorate


policy = PolicyDecorators()
