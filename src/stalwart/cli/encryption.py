"""``stalwart store reencrypt``, ``stalwart store keygen``, ``stalwart subjects erase``.

The keys come from the environment (``STALWART_KEYS`` or
``STALWART_KEYS_FILE``, docs/encryption.md), never from the command line,
where they would sit in the shell's history and the process list.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..core.errors import CLIError, EncryptionKeyError
from .command import DEFAULT_STORE, StoreOption, console, execute, lit, open_store

__all__ = ["store_keygen", "store_reencrypt", "subjects_erase"]


def _encrypted(url: str) -> object:
    from ..stores.encryption import EncryptedStore

    store = open_store(url)
    if not isinstance(store, EncryptedStore):
        raise CLIError(
            "no encryption keys: set STALWART_KEYS or STALWART_KEYS_FILE (docs/encryption.md)"
        )
    return store


def store_reencrypt(store: StoreOption = DEFAULT_STORE) -> None:
    """Seal every value under the newest key (the last of STALWART_KEYS).

    Runs beside live workers: each value is written again only if nobody
    changed it meanwhile. Killed at any point, run it again: it goes on
    where it stopped. Values no key opens (erased subjects) are left.
    """
    from ..stores.encryption import EncryptedStore, Progress, reencrypt

    def show(p: Progress) -> None:
        console().print(f"{p.runs} run(s) read, {p.values} value(s) sealed again")

    async def go() -> Progress:
        st = _encrypted(store)
        assert isinstance(st, EncryptedStore)
        await st.open()
        try:
            return await reencrypt(st, report=show)
        finally:
            await st.close()

    done = execute(go)
    console().print(
        f"done: {done.runs} run(s), {done.values} value(s), {done.schedules} schedule(s) "
        f"and {done.memories} memory value(s) "
        f"sealed under key {lit(_newest())}, {done.subjects} subject key(s) wrapped again, "
        f"{done.unopened} value(s) no key opens left as they are"
    )


def _newest() -> str:
    from ..stores.encryption import keys_from_environment

    provider = keys_from_environment()
    return "?" if provider is None else provider.master_keys()[-1][0]


def store_keygen(
    key_id: Annotated[str, typer.Argument(help="The new key's id.", metavar="ID")],
) -> None:
    """Print a new random key as ID:BASE64, for STALWART_KEYS or a keys file."""
    from ..stores.encryption import new_key_line

    try:
        typer.echo(new_key_line(key_id))
    except EncryptionKeyError as exc:
        raise typer.BadParameter(str(exc)) from None


def subjects_erase(
    subject: Annotated[
        str, typer.Argument(help="The subject (a run's subject tag).", metavar="ID")
    ],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Erase a subject: delete its keys, so its values can never be read again.

    In the store, its backups taken from now on and every export. Runs of
    the subject that resume afterwards fail naming the value they needed.
    """
    from ..stores.encryption import EncryptedStore

    async def go() -> int:
        st = _encrypted(store)
        assert isinstance(st, EncryptedStore)
        await st.open()
        try:
            return await st.erase_subject(subject)
        finally:
            await st.close()

    gone = execute(go)
    console().print(f"subject {lit(subject)} erased ({gone} key(s) deleted)")
