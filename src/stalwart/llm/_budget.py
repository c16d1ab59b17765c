"""An agent's token budget, shared with the sub-agents it runs as tools.

The budget is counted from recorded data only: the usage each model reply
carries in its ``meta``, and the usage a sub-agent's answer carries. A
replayed run therefore stops at the same model call as the live one did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from contextvars import ContextVar

from ..core.errors import BudgetExceeded
from ..core.message import Message
from ._usage import Usage, usage_of

__all__ = ["Tally", "inherited_budget", "passing_down"]

# What the enclosing agent has left of its token budget, seen by the agents it
# runs as tools (context variables reach the tasks the engine starts for
# them). None: no enclosing budget. It is what was left as the enclosing
# agent's round began: the usage of the model call that asked for the sub-agent
# is known to the agent only once the engine has run the calls, and counting
# it earlier from live data would make a replay decide differently.
_BUDGET_LEFT: ContextVar[int | None] = ContextVar("stalwart_agent_budget_left", default=None)


def inherited_budget() -> int | None:
    """What the enclosing agent had left when it called this one (None: no limit)."""
    return _BUDGET_LEFT.get()


@contextlib.contextmanager
def passing_down(left: int | None) -> Iterator[None]:
    """Let the sub-agents a model call starts see ``left`` as their caller's budget."""
    token = _BUDGET_LEFT.set(left)
    try:
        yield
    finally:
        _BUDGET_LEFT.reset(token)


class Tally:
    """Tokens used by one agent invocation, against its limit.

    The limit is the agent's own budget or what its caller had left, whichever
    is smaller; the error says which one ran out.
    """

    def __init__(self, own: int | None, inherited: int | None) -> None:
        limits = [x for x in (own, inherited) if x is not None]
        self.limit = min(limits) if limits else None
        self.inherited = inherited is not None and (own is None or inherited < own)
        self.used = Usage()

    @property
    def left(self) -> int | None:
        return None if self.limit is None else self.limit - self.used.total_tokens

    def check(self, agent: str) -> None:
        """Refuse the next model call once the budget is spent."""
        if self.limit is None or self.used.total_tokens <= self.limit:
            return
        if self.inherited:
            over = f"the {self.limit} tokens its caller had left of its budget"
        else:
            over = f"its budget of {self.limit}"
        raise BudgetExceeded(
            f"agent {agent!r} used {self.used.total_tokens} tokens "
            f"({self.used.input_tokens} in, {self.used.output_tokens} out), over {over}; "
            "it stopped before its next model call"
        )

    def count(self, out: list[Message], agent: str, sub_agents: Collection[str]) -> None:
        """Add the tokens of a model call, and of the sub-agents it ran, to the tally.

        A sub-agent that ran out of the budget it was handed stops this agent
        too, when this agent has a limit: its caller's budget is spent.
        """
        self.used += usage_of(m for m in out if m.action_result is None)
        for m in out:
            result = m.action_result
            if result is None or result.name not in sub_agents:
                continue
            if result.is_error:
                if result.error_type == "BudgetExceeded" and self.limit is not None:
                    raise BudgetExceeded(
                        f"agent {agent!r} stopped: its sub-agent {result.name!r} "
                        f"ran out of budget ({result.error_message})"
                    )
            elif isinstance(result.value, Message) and result.value.meta:
                self.used += Usage.from_dict(result.value.meta.get("agent_usage"))
