"""The ``stalwart`` command line (typer + rich).

Only the entry point imports this package: ``import stalwart`` stays free of
typer and rich, and each command imports the pieces it needs when it
runs, so ``stalwart --help`` starts quickly.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``stalwart`` console script."""
    from .app import app

    app(prog_name="stalwart")
