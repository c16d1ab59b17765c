"""Stalwart ships as a library: `python -m build` makes an sdist and a wheel
from this checkout, `twine check` accepts both, the wheel holds what the
package reads at run time and no tests, and installed alone in a fresh
virtual environment it runs `stalwart demo` with no API key, on SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import stalwart as sw

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "stalwart"


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist, and the wheel `build` makes from that sdist (so the sdist
    is known to hold everything a wheel needs)."""
    out = tmp_path_factory.mktemp("dist")
    # No isolation: hatchling comes with the dev extras, so building needs no index.
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], ROOT)
    (wheel,) = out.glob("stalwart-*.whl")
    (sdist,) = out.glob("stalwart-*.tar.gz")
    return Built(wheel, sdist)


def test_twine_accepts_the_wheel_and_the_sdist(built: Built) -> None:
    output = _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built.wheel), str(built.sdist)],
        ROOT,
    )
    assert output.count("PASSED") == 2, output


def test_the_wheel_holds_the_package_its_data_and_no_tests(built: Built) -> None:
    names = set(zipfile.ZipFile(built.wheel).namelist())
    shipped = {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped - names == set(), "files of src/stalwart missing from the wheel"
    assert "stalwart/py.typed" in names
    assert any(n.startswith("stalwart/web/templates/") and n.endswith(".html") for n in names)
    assert any(n.startswith("stalwart/web/static/") for n in names)
    strays = [n for n in names if not n.startswith(("stalwart/", "stalwart-"))]
    assert strays == [], f"the wheel holds files outside the package: {strays[:10]}"


def test_the_wheel_and_the_sdist_carry_the_package_version(built: Built) -> None:
    assert built.wheel.name.startswith(f"stalwart-{sw.__version__}-")
    metadata = (
        zipfile.ZipFile(built.wheel).read(f"stalwart-{sw.__version__}.dist-info/METADATA").decode()
    )
    assert f"\nVersion: {sw.__version__}\n" in metadata
    assert "Requires-Python: >=3.11" in metadata
    assert "Programming Language :: Python :: 3.13" in metadata


def test_the_sdist_holds_the_sources_and_tests_but_no_caches(built: Built) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "src/stalwart/__init__.py"} <= names
    assert "tests/test_release.py" in names
    strays = [
        n
        for n in names
        if n.startswith((".hypothesis/", ".pytest_cache/", ".ci/", "benchmarks/results/"))
        or "__pycache__" in n
    ]
    assert strays == [], strays[:10]


def test_the_installed_wheel_runs_the_demo_without_an_api_key(built: Built, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    # The wheel alone: not this checkout (PYTHONPATH) and no model's key.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "VIRTUAL_ENV"} and not k.endswith("_API_KEY")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _run([str(python), "-m", "pip", "install", "--quiet", str(built.wheel)], tmp_path, env)
    where = _run([str(python), "-c", "import stalwart; print(stalwart.__file__)"], tmp_path, env)
    assert where.strip().startswith(str(venv)), where
    work = tmp_path / "work"
    work.mkdir()
    output = _run([str(venv / "bin" / "stalwart"), "demo"], work, env)
    assert "the answer equals an uninterrupted run's" in output, output
    assert "no finished step ran twice" in output, output
    assert (work / "stalwart.db").is_file()  # the default store: SQLite, in the working folder
