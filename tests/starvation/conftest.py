"""A fresh store URL of every kind, memory included: the policy filter of
``claim_due`` is part of the Store interface, so every store honours it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import drop_schema, pg_schema_url, require_postgres


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        require_postgres()
        schema = f"t_{uuid.uuid4().hex[:12]}"
        yield pg_schema_url(schema)
        drop_schema(schema)
