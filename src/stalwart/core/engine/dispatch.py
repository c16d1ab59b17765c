"""Options dispatch: a step called with ``options`` returns action calls;
the engine, not the policy, executes them.

Each call is checked against the offered options (an allow-list), its
arguments validated against the option's schema, and it runs as a recorded
step of its own, concurrently with its siblings, keyed in call order (S1). A
failure becomes an error result the model can read; a halted run stays
halted. The reply is the messages followed by the results, in call order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import SerializationError, StepError
from ..message import Message
from ..policy import Policy
from ..schema import ArgumentError
from .control import NOT_STEP_ERRORS, Halt, leaves_of
from .identity import option_policies
from .journal import Journal

__all__ = ["Dispatch"]


class Dispatch(Journal):
    """The options dispatch of an execution."""

    if TYPE_CHECKING:

        def step(
            self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Coroutine[Any, Any, Any]: ...

    async def dispatch(self, key: str, result: Any, options: Any, pol: Policy[Any, Any]) -> Any:
        """Run the action calls in ``result`` (the reply of step ``key``,
        offered ``options``) and return the messages followed by the results."""
        # With options, a reply is always a list of messages (``history +=``).
        if isinstance(result, Message):
            messages = [result]
        elif isinstance(result, list) and result and all(isinstance(m, Message) for m in result):
            messages = result
        else:
            return result
        calls = [m.action_call for m in messages if m.action_call is not None]
        if not calls:
            return messages
        allowed = {p.name: p for p in option_policies(options)}
        limit = pol.max_parallel or self.max_parallel
        keys = [f"{key}#{i}" for i in range(1, len(calls) + 1)]  # S1: in call order, now
        if len(calls) == 1:
            results = [await self._action(keys[0], allowed, calls[0])]
            return [*messages, *results]
        sem = asyncio.Semaphore(limit) if limit else None
        tasks: list[asyncio.Task[Message]] = []
        try:
            async with asyncio.TaskGroup() as tg:
                for k, call in zip(keys, calls, strict=True):
                    tasks.append(tg.create_task(self._limited(sem, k, allowed, call)))
        except BaseExceptionGroup as group:
            # A store failure or nondeterminism in one call is the run's
            # problem, not a result: surface it as itself, not as a group.
            for exc in leaves_of(group):
                if isinstance(exc, Halt | NOT_STEP_ERRORS):
                    raise exc from group
            raise
        results = [t.result() for t in tasks]
        return [*messages, *results]

    async def _limited(
        self,
        sem: asyncio.Semaphore | None,
        key: str,
        allowed: dict[str, Policy[Any, Any]],
        call: Any,
    ) -> Message:
        if sem is None:
            return await self._action(key, allowed, call)
        async with sem:
            return await self._action(key, allowed, call)

    async def _action(self, key: str, allowed: dict[str, Policy[Any, Any]], call: Any) -> Message:
        name = call.name
        if call.invalid is not None:
            return Message.result(
                call,
                error_type="InvalidArguments",
                error_message=f"arguments for {name!r} are not valid JSON: {call.invalid}",
            )
        pol = allowed.get(name)
        if pol is None:
            names = ", ".join(sorted(allowed)) or "(none)"
            return Message.result(
                call,
                error_type="UnknownOption",
                error_message=f"{name!r} is not an allowed option; allowed options: {names}",
            )
        try:
            kwargs = pol.validate(call.arguments)
        except ArgumentError as exc:
            return Message.result(call, error_type="InvalidArguments", error_message=str(exc))
        try:
            value = await self.step(key, pol, (), kwargs)
        except NOT_STEP_ERRORS:
            raise
        except Exception as exc:
            err_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
            msg = exc.error_message if isinstance(exc, StepError) else str(exc)
            return Message.result(call, error_type=err_type, error_message=msg)
        try:
            codec.encode(value, f"result of {name!r}")
        except SerializationError as exc:
            return Message.result(call, error_type="SerializationError", error_message=str(exc))
        message = Message.result(call, value, actor=pol.name)
        if isinstance(value, Message) and value.parts:
            # An option that answers with a message (an MCP tool's text and
            # images, say): its parts are what the model reads, media included.
            message = replace(message, parts=value.parts)
        return message
