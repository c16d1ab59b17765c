"""Run PocketJoe's own test suites against ``stalwart.pocketjoe``.

``python tests/pocketjoe/upstream.py 0.1.0.1 [0.1.0.4 ...]`` fetches each
``pocket-joe`` sdist from PyPI into a temporary folder (never vendored),
copies its ``tests/`` there next to a ``conftest.py`` that makes
``import pocket_joe`` (and ``pocket_joe.core``, ``pocket_joe.policy_spec_mcp``)
import ``stalwart.pocketjoe``, and runs pytest on them. The sdist's own
package is never on the path, so every test exercises Stalwart's code.
Exit status: pytest's, the worst of the versions.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ALIAS = '''
import sys
import stalwart.pocketjoe as _pj
import stalwart.pocketjoe.core as _core
import stalwart.pocketjoe.policy_spec_mcp as _spec
import stalwart.pocketjoe.runtime as _runtime
sys.modules["pocket_joe"] = _pj
sys.modules["pocket_joe.core"] = _core
sys.modules["pocket_joe.policy_spec_mcp"] = _spec
sys.modules["pocket_joe.memory_runtime"] = _runtime
sys.modules["pocket_joe.policy_wrappers"] = _runtime
'''


def fetch(version: str, into: Path) -> Path:
    """The unpacked sdist of ``pocket-joe==version`` (it declares Python 3.12,
    hence ``--python-version``: only the source is downloaded, nothing installed)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
         "--python-version", "3.12", "--only-binary=:none:", "-q",
         f"pocket-joe=={version}", "-d", str(into)],
        check=True,
    )
    archive = next(into.glob(f"pocket_joe-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"pocket_joe-{version}"


def run(version: str, extra: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src = fetch(version, Path(tmp))
        suite = Path(tmp) / "suite"
        shutil.copytree(src / "tests", suite / "tests")
        (suite / "conftest.py").write_text(ALIAS)
        print(f"== pocket-joe {version}: its tests against stalwart.pocketjoe", flush=True)
        return subprocess.run(
            [sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q",
             "-o", "asyncio_mode=auto", "--rootdir", str(suite), *extra],
            cwd=suite,
        ).returncode


def main(argv: list[str]) -> int:
    versions = [a for a in argv if not a.startswith("-")] or ["0.1.0.1"]
    extra = [a for a in argv if a.startswith("-")]
    return max(run(v, extra) for v in versions)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
