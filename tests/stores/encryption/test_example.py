"""examples/encrypted_support.py runs as its docstring says, and leaves no
plain text of a customer's question in the database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .app import KEY_1, keys_text
from .conftest import database_text

ROOT = Path(__file__).resolve().parents[3]


def test_the_encrypted_support_example_runs_as_written(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(keys_text(KEY_1) + "\n")
    url = f"sqlite:///{tmp_path / 'support.db'}"
    out = subprocess.run(
        [sys.executable, "examples/encrypted_support.py", "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "STALWART_KEYS_FILE": str(keys)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "erased subject ada (1 key)",
        "bob: Thanks for asking about bob's refund; here is how.",
        "ada: ValueErased - inputs of run 't-ada'",
        "ada's inputs now read: enc:erased:ada",
    ]
    stored = database_text(url)
    assert "invoice" not in stored and "refund" not in stored
