"""What a journey's tool sees and changes: the :class:`ToolContext`.

A tool moves the journey or updates its state, but a tool step is not run
again on replay: its recorded result is all a resumed run gets back. So a
tool never changes the journey in place. It works on its own copy of the
state, and what it changed (the fields it set, the step it moved to, whether
it finished the journey) travels in its result, in ``meta["journey"]`` of the
message the model reads. The journey applies those effects from the results
of the model call, in call order, the same way live and on replay: the
decision is taken from recorded data only.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel

from ..core.context import Context
from ..core.message import Message, Text, plain
from ..core.policy import Policy, as_policy

__all__ = ["EFFECTS", "Effects", "Scope", "ToolContext", "offered", "scope"]

#: The key of a tool result's ``meta`` that carries what the tool changed.
EFFECTS = "journey"


@dataclass(frozen=True, slots=True)
class Scope:
    """The journey as the model call that offers the tools left it.

    ``state`` is the state as JSON: each tool builds its own copy from it, so
    tools the model calls in parallel never see each other's changes.
    """

    journey: str
    step: Enum
    state: dict[str, Any]
    state_type: type[BaseModel]
    moves: Collection[Enum] | None


# The scope of the model call in progress. The engine runs the tool calls in
# tasks started inside that call, and tasks copy the context variables of the
# task that starts them, so each tool sees the scope of the call that asked
# for it.
_SCOPE: ContextVar[Scope | None] = ContextVar("stalwart_journey_scope", default=None)


def scope() -> ContextVar[Scope | None]:
    """The variable the journey sets around each model call (for :mod:`.journey`)."""
    return _SCOPE


@dataclass(frozen=True, slots=True)
class Effects:
    """What one tool call changed: fields set, the step moved to, finished."""

    fields: dict[str, Any]
    goto: str | None
    finish: bool

    def to_json(self) -> dict[str, Any]:
        return {"set": self.fields, "goto": self.goto, "finish": self.finish}

    @classmethod
    def from_json(cls, data: Any) -> Effects | None:
        """Read :meth:`to_json`'s form back; anything else changes nothing."""
        if not isinstance(data, dict):
            return None
        fields = data.get("set")
        goto = data.get("goto")
        return cls(
            fields if isinstance(fields, dict) else {},
            goto if isinstance(goto, str) else None,
            data.get("finish") is True,
        )


class ToolContext(Context):
    """The context of a journey's tool: the state to read and change, and moves.

    Annotate a tool's first parameter with it (``ctx: ToolContext``); the model
    never sees that parameter. ``ctx.state`` is this call's own copy of the
    journey's state (mutate it); :meth:`goto` moves the journey to another
    step and :meth:`finish` ends it after this turn's reply. A ToolContext is a
    :class:`~stalwart.core.context.Context`, so the tool can make recorded
    calls of its own (``await ctx.call(...)``).
    """

    @property
    def scope(self) -> Scope:
        found = _SCOPE.get()
        if found is None:
            raise RuntimeError(
                "this tool takes a journey ToolContext, but it was not called by a journey's model"
            )
        return found

    @property
    def step(self) -> Enum:
        """The step the journey was at when the model called this tool."""
        return self.scope.step

    @property
    def state(self) -> Any:
        """This call's copy of the journey's state (the journey's pydantic model)."""
        if "_state" not in self.__dict__:
            where = self.scope
            self.__dict__["_state"] = where.state_type.model_validate(where.state)
        return self.__dict__["_state"]

    def goto(self, step: Enum) -> None:
        """Move the journey to ``step`` once this tool returns.

        The next model call of the same turn already gets that step's
        instructions and tools.
        """
        where = self.scope
        if type(step) is not type(where.step):
            raise ValueError(
                f"journey {where.journey!r}: {step!r} is not one of its steps "
                f"({type(where.step).__name__})"
            )
        if where.moves is not None and step not in where.moves and step is not where.step:
            allowed = ", ".join(s.name for s in where.moves) or "(none)"
            raise ValueError(
                f"journey {where.journey!r} cannot move from {where.step.name} to {step.name}; "
                f"from {where.step.name} it may move to {allowed}"
            )
        self.__dict__["_goto"] = step

    def finish(self) -> None:
        """End the journey once this turn's reply is given."""
        self.__dict__["_finish"] = True

    def effects(self) -> Effects | None:
        """What this call changed, validated; None when it changed nothing.

        The state is validated as a whole here, inside the tool, so a bad
        value is the tool's error (the model reads it), not the run's.
        """
        goto: Enum | None = self.__dict__.get("_goto")
        finish = bool(self.__dict__.get("_finish"))
        fields: dict[str, Any] = {}
        if "_state" in self.__dict__:
            where = self.scope
            mine = self.__dict__["_state"]
            # Validated from its attributes, not a dump: a dump of a bad value warns.
            now = where.state_type.model_validate(
                {name: getattr(mine, name) for name in where.state_type.model_fields}
            )
            after = now.model_dump(mode="json")
            fields = {k: v for k, v in after.items() if where.state.get(k) != v}
        if not fields and goto is None and not finish:
            return None
        return Effects(fields, goto.name if goto is not None else None, finish)


def offered(tool: Any) -> Policy[Any, Any]:
    """The policy a journey offers for ``tool``: itself, or, for a tool that
    takes a :class:`ToolContext`, a wrapper that returns what it changed with its answer."""
    pol = as_policy(tool)
    if pol.ctx_class is None or not issubclass(pol.ctx_class, ToolContext):
        return pol
    return Policy(_carrying_effects(pol.fn), name=pol.name, description=pol.description)


def _carrying_effects(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose result carries the ToolContext's effects (its signature kept for the schema)."""

    @functools.wraps(fn)
    async def tool(ctx: ToolContext, /, *args: Any, **kwargs: Any) -> Any:
        value = fn(ctx, *args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        effects = ctx.effects()
        if effects is None:
            return value
        if value is None:
            text = "done"
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(plain(value), ensure_ascii=False)
        return Message("tool", ctx.scope.journey, (Text(text),), meta={EFFECTS: effects.to_json()})

    return tool
