"""axe-core (the npm package of ``tests/web/js``) run in a page a browser
test opened: the accessibility problems it finds, by impact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.npm import npm_dir

JS = Path(__file__).with_name("js")

#: What a page must not have: axe-core's two worst impacts.
SERIOUS = ("serious", "critical")


def axe_violations(page: Any, impacts: tuple[str, ...] = SERIOUS) -> list[str]:
    """What axe-core finds wrong in ``page`` (a Playwright page, opened with
    ``bypass_csp=True``: the inspector's policy refuses inline scripts) at
    ``impacts``, one line a rule: its id, impact, help and first target."""
    script = npm_dir(JS) / "node_modules" / "axe-core" / "axe.min.js"
    page.add_script_tag(path=str(script))
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .map(v => ({id: v.id, impact: v.impact, help: v.help,
                        target: String(v.nodes[0] && v.nodes[0].target)}))"""
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['target']}"
        for v in found
        if v["impact"] in impacts
    ]
