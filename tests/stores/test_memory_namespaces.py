"""Every store lists the memory namespaces that hold rows, in order, a page
at a time (what a key rotation pages through)."""

from __future__ import annotations

from stalwart.core.memory import MemoryRecord, namespace_text
from stalwart.stores.base import Store


async def test_namespaces_page_in_order_and_forget_emptied_ones(any_store: Store) -> None:
    names = [namespace_text((f"user-{i}",)) for i in range(5)]
    for name in names:
        for key in ("a", "b"):
            await any_store.memory_put(MemoryRecord(name, key, "1", "", None, 1.0, 1.0))
    assert await any_store.memory_namespaces("", 3) == sorted(names)[:3]
    assert await any_store.memory_namespaces(sorted(names)[2], 10) == sorted(names)[3:]
    await any_store.memory_drop(names[0])
    assert names[0] not in await any_store.memory_namespaces("", 10)
