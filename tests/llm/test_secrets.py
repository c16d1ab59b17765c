"""A password in a provider's URL never reaches the ledger (issue 10, item 5).

The providers are driven through the official SDKs, against a local port that
nobody listens on (the SDK's own connection error) or a mock HTTP transport
(a server whose error message quotes the URL), inside a run on a real SQLite
file; the file's bytes are then searched for the password.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from tests.conftest import free_port

import stalwart as sw
from stalwart import llm
from stalwart.core.redact import mask_url, redact
from stalwart.llm import ProviderError, ProviderUnavailable

from .conftest import http_module

PASSWORD = "s3cretpw"


def _run_in_ledger(tmp_path: Path, model: Any) -> tuple[ProviderError, bytes]:
    """Call ``model`` in a durable run; its error, and every byte the ledger holds."""
    db = tmp_path / "runs.db"

    async def go() -> ProviderError:
        async with sw.Runner(f"sqlite:///{db}", serving=False) as runner:
            with pytest.raises(ProviderError) as caught:
                await runner.run(model, [sw.Message.user("hi")], run_id="r")
        return caught.value

    error = asyncio.run(go())
    ledger = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*"))
    assert type(error).__name__.encode() in ledger  # the error was recorded
    return error, ledger


MODELS: dict[str, Callable[[str], Any]] = {
    "openai-chat": lambda url: llm.openai("m", base_url=url, api_key="k", max_retries=0),
    "openai-responses": lambda url: llm.openai(
        "m", api="responses", base_url=url, api_key="k", max_retries=0
    ),
    "anthropic": lambda url: llm.anthropic("m", base_url=url, api_key="k", max_retries=0),
}


@pytest.mark.parametrize("provider", sorted(MODELS))
def test_an_unreachable_server_is_recorded_without_its_password(
    tmp_path: Path, provider: str
) -> None:
    url = f"http://alice:{PASSWORD}@127.0.0.1:{free_port()}/v1"
    error, ledger = _run_in_ledger(tmp_path, MODELS[provider](url))
    assert isinstance(error, ProviderUnavailable)
    assert "could not connect" in str(error)
    assert "alice:***@127.0.0.1" in str(error)  # which server still shows
    assert PASSWORD not in str(error) and PASSWORD not in repr(error)
    assert PASSWORD.encode() not in ledger


def test_a_server_error_quoting_the_url_is_recorded_without_the_password(
    tmp_path: Path,
) -> None:
    """A gateway that echoes the upstream URL, password included, in its error."""
    http = http_module(openai)
    url = f"http://alice:{PASSWORD}@gateway.test/v1"
    seen: list[str] = []

    def serve(request: Any) -> Any:
        seen.append(request.headers.get("authorization", ""))
        message = f"upstream {url} refused the call; retry with password={PASSWORD}"
        return http.Response(502, json={"error": {"message": message, "code": "bad_gateway"}})

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url=url,
        max_retries=0,
        http_client=http.AsyncClient(transport=http.MockTransport(serve)),
    )
    error, ledger = _run_in_ledger(tmp_path, llm.openai("m", client=client))
    assert seen, "the SDK never reached the mock server"
    assert isinstance(error, ProviderUnavailable) and "HTTP 502" in str(error)
    assert "password=***" in str(error)
    assert PASSWORD not in str(error)
    assert PASSWORD.encode() not in ledger


# -- the masking itself --------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://app:pw@db:5432/prod", "postgresql://app:***@db:5432/prod"),
        (
            "postgres://app:p%40ss@db/prod?sslmode=require",
            "postgres://app:***@db/prod?sslmode=require",
        ),
        # Unencoded "@" or "#" in a password: libpq takes them; the tail must not leak.
        ("postgresql://app:p@ss#w@db/prod", "postgresql://app:***@db/prod"),
        ("https://user:pw@example.com", "https://user:***@example.com"),
        (
            "postgresql://db/prod?user=app&password=pw&sslmode=verify-full",
            "postgresql://db/prod?user=app&password=***&sslmode=verify-full",
        ),
        ("postgresql://db/prod?sslpassword=pw", "postgresql://db/prod?sslpassword=***"),
        ("host=db user=app password=pw dbname=prod", "host=db user=app password=*** dbname=prod"),
        ("host=db password='p w\\' x' dbname=prod", "host=db password=*** dbname=prod"),
        ("host=db PASSWORD = pw", "host=db PASSWORD = ***"),
    ],
)
def test_mask_url_hides_the_password_and_keeps_the_rest(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///var/lib/app/stalwart.db",
        "postgresql://app@db:5432/prod",
        "http://localhost:11434/v1",
        "postgresql://db/prod?user=app&sslmode=require",
    ],
)
def test_mask_url_leaves_urls_without_a_password_alone(url: str) -> None:
    assert mask_url(url) == url


def test_redact_masks_every_url_in_free_text() -> None:
    text = (
        "connection to postgresql://a:pw1@db1/x failed, then to "
        "'http://b:pw2@db2:8080/v1' (dsn: host=db3 password=pw3); mail me@example.com"
    )
    out = redact(text)
    assert "pw1" not in out and "pw2" not in out and "pw3" not in out
    assert "postgresql://a:***@db1/x" in out
    assert "'http://b:***@db2:8080/v1'" in out
    # An unquoted DSN value ends at whitespace only: ")" or ";" may be part of it.
    assert "host=db3 password=*** mail" in out
    assert "me@example.com" in out
    assert redact("nothing secret here: x=1") == "nothing secret here: x=1"
