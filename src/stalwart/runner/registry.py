"""The policies a runner was given, by the name its run rows record (S13).

A run row names its policy; a runner resumes it only with a policy it was
handed (``Runner(policies=...)``, ``register``, or by starting it), never by
importing what a row says.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.errors import DuplicatePolicy
from ..core.ledger import RunRecord
from ..core.policy import Policy, as_policy, same_policy, where_defined

__all__ = ["Registry"]

_log = logging.getLogger("stalwart.runner")


class Registry:
    """Policies by name; one name means one policy."""

    def __init__(self) -> None:
        self._by_name: dict[str, Policy[Any, Any]] = {}
        self._unknown: set[str] = set()
        self._names: frozenset[str] = frozenset()

    def register(self, target: Any) -> Policy[Any, Any]:
        """Make ``target`` known; a different policy under a taken name is refused."""
        pol = as_policy(target)
        known = self._by_name.get(pol.name)
        if known is not None and known is not pol and not same_policy(known, pol):
            raise DuplicatePolicy(
                f"two different policies are named {pol.name!r}: "
                f"{where_defined(known)} and {where_defined(pol)}; "
                "give one of them another name (@policy(name=...), Agent(name=...))"
            )
        if known is None:
            self._by_name[pol.name] = pol
            self._names = frozenset(self._by_name)
        return known or pol

    @property
    def names(self) -> frozenset[str]:
        """Every name :meth:`find` answers to, as a claim pass asks the
        store for (policies registered later included): built once per new
        policy, not once per pass."""
        return self._names

    def find(self, name: str) -> Policy[Any, Any] | None:
        """The policy a run row names, if registered; never an import."""
        return self._by_name.get(name)

    def can_run(self, rec: RunRecord) -> bool:
        """Whether this runner has the run's policy; says once per name when not."""
        if self.find(rec.policy) is not None:
            return True
        if rec.policy not in self._unknown:  # said once per name, not every poll
            self._unknown.add(rec.policy)
            _log.warning(
                "run %r needs policy %r, which this runner was not given "
                "(Runner(policies=[...]) or --app); it stays for a runner that has it",
                rec.id,
                rec.policy,
            )
        return False

    def declare_for(self, rec: RunRecord) -> None:
        """Declare the types of the run's policy, if registered, to read its result."""
        pol = self._by_name.get(rec.policy)
        if pol is not None:
            pol.declare_types()
