"""Keys given wrong are refused before anything is read, naming the source
and the key id, never a key."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

import stalwart as sw
from stalwart.runner import Runner
from stalwart.stores.encryption import EncryptedStore, EnvKeys, FileKeys, StaticKeys

from .app import KEY_1, KEY_2, POLICIES, keys_text


def test_the_environment_gives_keys_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STALWART_KEYS", keys_text(KEY_1, KEY_2))
    assert list(EnvKeys().master_keys()) == [KEY_1, KEY_2]


def test_a_missing_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APP_KEYS", raising=False)
    with pytest.raises(sw.EncryptionKeyError, match="APP_KEYS is not set"):
        EnvKeys("APP_KEYS").master_keys()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("k1:not base64!", r"key 'k1' is not base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", r"key 'k1' is 5 bytes"),
        (keys_text(KEY_1, KEY_1), r"key id 'k1' is given twice"),
        ("justtext", r"has no ':'"),
        ("# only a comment\n", r"no key given"),
        (f"bad id:{base64.b64encode(bytes(32)).decode()}", r"key id 'bad id' is not"),
    ],
)
def test_a_bad_keys_file_is_refused_naming_file_and_key(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(sw.EncryptionKeyError, match=problem) as refused:
        FileKeys(path).master_keys()
    assert str(path) in str(refused.value)
    assert "AAAA" not in str(refused.value)  # no key in a message


def test_an_unreadable_keys_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(sw.EncryptionKeyError, match="cannot be read"):
        FileKeys(tmp_path / "missing").master_keys()


async def test_a_store_given_bad_keys_does_not_open(tmp_path: Path) -> None:
    class Broken:
        def master_keys(self) -> list[tuple[str, bytes]]:
            return [("k1", b"too short")]

    from stalwart.stores import open_store

    store = EncryptedStore(open_store(f"sqlite:///{tmp_path / 'x.db'}", keys=False), Broken())
    with pytest.raises(sw.EncryptionKeyError, match="Broken: key 'k1' is 9 bytes"):
        async with Runner(store, policies=POLICIES):
            pass


def test_a_store_url_is_encrypted_when_the_environment_names_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stalwart.stores import open_store

    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert not isinstance(open_store(url), EncryptedStore)
    path = tmp_path / "keys"
    path.write_text(keys_text(KEY_1) + "\n")
    monkeypatch.setenv("STALWART_KEYS_FILE", str(path))
    assert isinstance(open_store(url), EncryptedStore)
    assert not isinstance(open_store(url, keys=False), EncryptedStore)


def test_keygen_prints_a_key_the_providers_read(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "stalwart", "store", "keygen", "k3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    path = tmp_path / "keys"
    path.write_text(made.stdout)
    ((kid, key),) = FileKeys(path).master_keys()
    assert kid == "k3" and len(key) == 32 and key != bytes(32)


def test_static_keys_check_what_they_are_given() -> None:
    with pytest.raises(sw.EncryptionKeyError, match="StaticKeys: no key given"):
        StaticKeys([])
