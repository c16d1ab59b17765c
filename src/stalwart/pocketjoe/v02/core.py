"""PocketJoe 0.2's core names: ``OptionSchema``, ``BaseContext`` and the
message types (re-exported here, as PocketJoe's ``core`` does).

A context binds policy *functions* (``self.llm = self._bind(llm_policy)``)
through its runner; the runner makes each a Stalwart step
(:mod:`stalwart.pocketjoe.v02.policy_wrappers`). Options are named by their
``@policy.tool`` name, as in PocketJoe 0.2 (0.1 named them by attribute).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from ...core.declared import register_type
from .message import (
    MediaPart,
    Message,
    MessageBuilder,
    OptionCallPayload,
    OptionResultBuilder,
    OptionResultPayload,
    Part,
    Payload,
    TextPart,
)

__all__ = [
    "BaseContext",
    "MediaPart",
    "Message",
    "MessageBuilder",
    "OptionCallPayload",
    "OptionResultBuilder",
    "OptionResultPayload",
    "OptionSchema",
    "Part",
    "Payload",
    "TextPart",
]

T = TypeVar("T", bound="BaseContext")
F = TypeVar("F")


class OptionSchema(BaseModel):
    """What a model is told about an option: its name, description and the
    JSON schema of its arguments (Stalwart's, which validates them too)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None
    parameters: dict[str, Any]

    def __hash__(self) -> int:
        # Frozen, so hashable by value: equal schemas (same fields) hash alike.
        return hash((self.name, self.description, json.dumps(self.parameters, sort_keys=True)))

    @classmethod
    def from_func(cls, functions: list[Callable[..., Any]]) -> list[OptionSchema]:
        """The schemas of policy functions (or of their bindings: ``ctx.web_search``)."""
        schemas: list[OptionSchema] = []
        for given in functions:
            # A binding (ctx.web_search) carries the function it binds.
            func = getattr(given, "__policy_func__", given)
            schema = getattr(func, "_option_schema", None)
            if not isinstance(schema, OptionSchema):
                what = getattr(func, "__qualname__", None) or repr(func)
                raise ValueError(
                    f"{what} cannot be offered as an option: it has no schema; "
                    "decorate it with @policy.tool(...) or @policy.resource(...)"
                )
            schemas.append(schema)
        return schemas

    @classmethod
    def from_func_single(cls, function: Callable[..., Any]) -> OptionSchema:
        return cls.from_func([function])[0]


# Offered options are arguments of a model's step, recorded with it.
register_type(OptionSchema)


class BaseContext:
    """The application context: subclasses bind policy functions in
    ``__init__`` (``self.llm = self._bind(llm_policy)``); policies reach it
    with ``AppContext.get_ctx()``.

    Each subclass has its own context variable, set when an instance is made:
    the runs started from it (their tasks copy the variable) find it there.
    """

    _current: ClassVar[ContextVar[Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._current = ContextVar(f"pocketjoe context {cls.__module__}:{cls.__qualname__}")

    def __init__(self, runner: Any) -> None:
        cls = type(self)
        if cls._current is None:  # BaseContext made directly, not a subclass
            cls._current = ContextVar("pocketjoe context BaseContext")
        self._runner = runner
        self._bindings: dict[str, Any] = {}
        cls._current.set(self)

    @classmethod
    def get_ctx(cls: type[T]) -> T:
        """The context of this class made last in this task (or its parent)."""
        current = cls._current
        try:
            if current is None:
                raise LookupError(cls.__name__)
            ctx: T = current.get()
        except LookupError:
            raise RuntimeError(
                f"{cls.__name__}.get_ctx(): no {cls.__name__} was made in this task; "
                f"make one ({cls.__name__}(runner)) before calling its policies"
            ) from None
        return ctx

    def _bind(self, policy: F) -> F:
        """Bind a ``@policy.tool`` function through the runner; typed as the
        function, so ``ctx.llm(...)`` completes like it. Two policies of one
        name cannot both be bound (a model could not tell them apart)."""
        name = OptionSchema.from_func_single(policy).name  # type: ignore[arg-type]
        if name in self._bindings:
            raise ValueError(
                f"Duplicate policy name {name!r} on {type(self).__name__}: a model could not "
                "tell the two options apart; give one another @policy.tool(name=...)"
            )
        bound = self._runner._bind_strategy(policy, self)
        bound.__policy_func__ = policy
        self._bindings[name] = bound
        return bound  # type: ignore[no-any-return]

    def get_policy(self, policy_name: str) -> Callable[..., Any]:
        """The policy function bound under option name ``policy_name``."""
        if policy_name not in self._bindings:
            known = ", ".join(sorted(self._bindings)) or "nothing yet"
            raise ValueError(
                f"Bound policy not found: {type(self).__name__} has no option "
                f"{policy_name!r} (bound: {known})"
            )
        func = getattr(self._bindings[policy_name], "__policy_func__", None)
        if func is None:
            raise ValueError(
                f"option {policy_name!r} on {type(self).__name__} is bound to something "
                "that is not a policy function (bind policies with self._bind)"
            )
        return func  # type: ignore[no-any-return]

    def bound_policies(self) -> dict[str, Any]:
        """Every binding, by option name: what a model may call when a policy
        offers no options."""
        return dict(self._bindings)
