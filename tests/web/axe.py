"""axe-core, the accessibility engine, run on a page a browser test shows.

axe-core is an npm package (``tests/web/js``, installed by
:func:`tests.npm.npm_dir`); its script is run in the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.npm import npm_dir

_JS = Path(__file__).parent / "js"


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on ``page``, each as
    ``rule: the first offending element``."""
    script = npm_dir(_JS) / "node_modules" / "axe-core" / "axe.min.js"
    # Evaluated through the browser's debugging protocol, as a test's own
    # code: the inspector's Content-Security-Policy refuses any script tag
    # a page did not load from itself, and stays on.
    page.evaluate(script.read_text() + "\n;0")
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        f"{v['id']}: {v['nodes'][0]['html'] if v['nodes'] else ''}"
        for v in found
        if v.get("impact") in ("serious", "critical")
    ]
