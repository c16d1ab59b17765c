"""axe-core, the accessibility engine, run on a page open in Playwright.

The engine comes from the npm registry (``js/package.json``, installed by
:func:`tests.npm.npm_dir`); it is injected into the page and asked for the
violations of the WCAG A and AA rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.npm import npm_dir

__all__ = ["grave_violations"]

_JS = Path(__file__).with_name("js")


def grave_violations(page: Any) -> list[str]:
    """The serious and critical violations axe-core finds on ``page``, as
    ``rule: where`` lines (none: an empty list)."""
    engine = npm_dir(_JS) / "node_modules" / "axe-core" / "axe.min.js"
    # Through the debugger, not a <script> tag: the inspector's CSP allows
    # its own scripts only, and stays on for the page being checked.
    page.evaluate(engine.read_text(encoding="utf-8") + "\n;undefined")
    found = page.evaluate(
        """async () => {
            const r = await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']});
            return r.violations.map(v => ({id: v.id, impact: v.impact,
                where: v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', ')}));
        }"""
    )
    return [f"{v['id']}: {v['where']}" for v in found if v["impact"] in ("serious", "critical")]
