"""The checks the API and the inspector share (``stalwart.http.access``)."""

from __future__ import annotations

from stalwart.http.access import Tokens, bearer, host_names, host_of, is_loopback, same_origin

TOKEN = "a-token-of-some-length-0123"


def test_tokens_accept_each_of_theirs_and_nothing_else() -> None:
    tokens = Tokens([TOKEN, "another-one-9876543210"])
    assert tokens.accepts(TOKEN) and tokens.accepts("another-one-9876543210")
    for other in (TOKEN + "x", TOKEN[:-1], TOKEN.upper(), "", None, 42, TOKEN.encode()):
        assert not tokens.accepts(other), other
    assert not Tokens([]) and not Tokens([]).accepts("")
    assert TOKEN not in repr(tokens)  # printed, it shows no token


def test_a_token_with_characters_utf8_cannot_encode_is_compared_not_an_error() -> None:
    assert not Tokens([TOKEN]).accepts("\udcff" + TOKEN)


def test_bearer_reads_the_scheme_in_any_case() -> None:
    assert bearer(f"Bearer {TOKEN}") == TOKEN
    assert bearer(f"bearer   {TOKEN} ") == TOKEN
    assert bearer(f"Basic {TOKEN}") is None
    assert bearer("") is None


def test_hosts_and_origins() -> None:
    assert host_of("LOCALHOST:8000") == "localhost"
    assert host_of("[::1]:8000") == "::1"
    assert host_of("[::1") == ""  # an unclosed bracket names no host
    assert host_names(["[::1]", "LocalHost"]) == {"::1", "localhost"}
    assert host_names(None) is None
    assert is_loopback("127.0.0.2") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    assert same_origin("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert same_origin("HTTP://LocalHost:8000", "localhost:8000")
    assert not same_origin("http://evil.example", "127.0.0.1:8000")
    assert not same_origin("http://[::1", "[::1]:8000")
    assert not same_origin("null", "")
