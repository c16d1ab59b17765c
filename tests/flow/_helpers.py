"""Helpers shared by the flow tests."""

from __future__ import annotations

import warnings


class Caught:
    """The warnings raised during a test, as their texts."""

    def __init__(self, records: list[warnings.WarningMessage]) -> None:
        self.records = records

    @property
    def messages(self) -> list[str]:
        return [str(r.message) for r in self.records]

    @property
    def categories(self) -> list[type[Warning]]:
        return [r.category for r in self.records]
