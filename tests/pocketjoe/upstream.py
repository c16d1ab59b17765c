"""Run PocketJoe's own test suites against ``stalwart.pocketjoe``.

``python tests/pocketjoe/upstream.py 0.1.0.1 0.2.0.10 [--coverage] [pytest options]``
fetches each ``pocket-joe`` sdist from PyPI into a temporary folder (never
vendored), copies its ``tests/`` there next to a ``conftest.py`` that makes
``import pocket_joe`` (and its submodules) import Stalwart's modules:
``stalwart.pocketjoe`` for 0.1, ``stalwart.pocketjoe.v02`` for 0.2. The
sdist's own package is never on the path, so every test exercises Stalwart's
code. With ``--coverage``, the run is measured with coverage.py and the
coverage of Stalwart's modules is printed. Exit status: pytest's, the worst
of the versions.

PocketJoe's example programs are run the same way, from the sdist in a
temporary folder, by ``upstream_examples.py`` (0.2's programs) and
``upstream_readme.py`` (0.1's README example); see there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The release whose example programs upstream_examples.py runs.
EXAMPLES_VERSION = "0.2.0.10"

# pocket_joe's module -> the Stalwart module it is, by release line.
MODULES = {
    "0.1": {
        "pocket_joe": "stalwart.pocketjoe",
        "pocket_joe.core": "stalwart.pocketjoe.core",
        "pocket_joe.policy_spec_mcp": "stalwart.pocketjoe.policy_spec_mcp",
        "pocket_joe.memory_runtime": "stalwart.pocketjoe.runtime",
        "pocket_joe.policy_wrappers": "stalwart.pocketjoe.runtime",
    },
    "0.2": {
        "pocket_joe": "stalwart.pocketjoe.v02",
        "pocket_joe.core": "stalwart.pocketjoe.v02.core",
        "pocket_joe.message": "stalwart.pocketjoe.v02.message",
        "pocket_joe.memory_runtime": "stalwart.pocketjoe.v02.memory_runtime",
        "pocket_joe.policy_wrappers": "stalwart.pocketjoe.v02.policy_wrappers",
        "pocket_joe.policy_decorators": "stalwart.pocketjoe.v02.policy_decorators",
    },
}


def alias(version: str) -> str:
    """The conftest.py that makes ``pocket_joe`` Stalwart's module."""
    line = ".".join(version.split(".")[:2])
    lines = ["import importlib", "import sys"]
    for name, module in MODULES[line].items():
        lines.append(f"sys.modules[{name!r}] = importlib.import_module({module!r})")
    return "\n".join(lines) + "\n"


def fetch(version: str, into: Path) -> Path:
    """The unpacked sdist of ``pocket-joe==version`` (it declares Python 3.12,
    hence ``--python-version``: only the source is downloaded, nothing installed)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--python-version",
            "3.12",
            "--only-binary=:none:",
            "-q",
            f"pocket-joe=={version}",
            "-d",
            str(into),
        ],
        check=True,
    )
    archive = next(into.glob(f"pocket_joe-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"pocket_joe-{version}"


def run(version: str, extra: list[str], coverage: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src = fetch(version, Path(tmp))
        suite = Path(tmp) / "suite"
        shutil.copytree(src / "tests", suite / "tests")
        (suite / "conftest.py").write_text(alias(version))
        print(f"== pocket-joe {version}: its tests against Stalwart", flush=True)
        pytest = ["-m", "pytest", "tests", "-p", "no:cacheprovider", "-q",
                  "-o", "asyncio_mode=auto", "--rootdir", str(suite), *extra]  # fmt: skip
        if not coverage:
            return subprocess.run([sys.executable, *pytest], cwd=suite).returncode
        data = str(suite / ".coverage")
        code = subprocess.run(
            [sys.executable, "-m", "coverage", "run", f"--data-file={data}",
             "--source=stalwart", *pytest],
            cwd=suite,
        ).returncode  # fmt: skip
        # The modules that do the work: this version's drop-in, the core
        # (policy, schema, engine) and the runner. (``--source`` alone would
        # count the CLI, the stores and the inspector, which no test reaches.)
        # The other release line's drop-in is not this run's business.
        other = "*/pocketjoe/[a-z]*.py" if version.startswith("0.2") else "*/pocketjoe/v02/*"
        print(f"== coverage of Stalwart's modules in pocket-joe {version}'s suite", flush=True)
        subprocess.run(
            [sys.executable, "-m", "coverage", "report", f"--data-file={data}",
             "--include=*/stalwart/pocketjoe/*,*/stalwart/core/*,*/stalwart/runner/*",
             f"--omit={other}", "--skip-empty"],
            cwd=suite,
        )  # fmt: skip
        return code


def main(argv: list[str]) -> int:
    versions = [a for a in argv if not a.startswith("-")] or ["0.1.0.1", "0.2.0.10"]
    coverage = "--coverage" in argv
    extra = [a for a in argv if a.startswith("-") and a != "--coverage"]
    return max(run(v, extra, coverage) for v in versions)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
