"""Take the screenshots of the inspector in docs/img/ (run by hand, not by pytest).

    python -m tests.web.screenshots

Seeds a fresh SQLite store with ``web_app.seed``, serves the inspector on
it, and photographs the main pages with the system chromium; then the same
for the runs of ``shapes_app.seed`` (a flow's graph, parallel tool calls),
and the health page over ``health_seed``'s runs and workers.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from .browser import chromium, chromium_path, inspector
from .conftest import ROOT, seed_sync
from .health_seed import seed_health
from .shapes_app import seed as seed_shapes

PAGES = {
    "ui-runs.png": "/runs",
    "ui-run-agent.png": "/run?id=agent-1",
    "ui-run-family.png": "/run?id=family",
    "ui-waiting.png": "/waiting",
}
#: Pages of runs ``shapes_app.seed`` records, shown by an inspector given its policies.
SHAPES = {
    "ui-run-flow.png": "/run?id=review-1",
    "ui-run-parallel.png": "/run?id=trio-1",
}


def main() -> None:
    executable = chromium_path()
    if executable is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    out = ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'shots.db'}"
        seed_sync(url)
        with inspector(url) as base, chromium(executable) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for name, path in PAGES.items():
                page.goto(base + path)
                first_step = page.locator("details[data-key^='step 1']")
                if first_step.count():
                    first_step.first.evaluate("d => d.open = true")
                page.screenshot(path=str(out / name), full_page=True)
                print(out / name)
        shapes = f"sqlite:///{Path(tmp) / 'shapes.db'}"
        seed_sync(shapes, seed_shapes)
        with inspector(shapes, app="tests.web.shapes_app") as base, chromium(executable) as b:
            page = b.new_page(viewport={"width": 1280, "height": 900})
            for name, path in SHAPES.items():
                page.goto(base + path)
                for calls in page.locator("details.tool-calls").all():
                    calls.evaluate("d => d.open = true")
                page.screenshot(path=str(out / name), full_page=True)
                print(out / name)
    health(executable, out)


def health(executable: str, out: Path) -> None:
    """``ui-health.png``: the health page of ``health_seed``'s store."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'health.db'}"
        seed_sync(url, lambda u: seed_health(u, time.time()))
        with inspector(url) as base, chromium(executable) as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/health")
            page.screenshot(path=str(out / "ui-health.png"), full_page=True)
            print(out / "ui-health.png")


if __name__ == "__main__":
    main()
