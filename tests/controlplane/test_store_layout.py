"""Durable keys move to their cluster-safe names at control-plane start (issue 24)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from controlplane.store_layout import rename_store_keys
from runtime.stores.renames import exact, retag

# A layout of this test's own (the store is shared with other tests).
P = f"layout-{uuid.uuid4().hex}"


def tagged(tenant: str) -> str:
    return f"{P}:branding:{{{tenant}}}"


RENAMES = (retag(f"{P}:branding:", tagged), exact(f"{P}:version", f"{{{P}}}:version"))


async def test_old_names_move_once_and_new_names_are_never_overwritten(kv: Any) -> None:
    await kv.set(f"{P}:branding:acme", "old-acme")
    await kv.set(f"{P}:branding:globex", "old-globex")
    await kv.set(f"{P}:branding:{{globex}}", "already-new")  # written by a newer release
    await kv.set(f"{P}:version", "7")

    assert await rename_store_keys(kv, RENAMES) == 2

    assert await kv.get(f"{P}:branding:{{acme}}") == "old-acme"
    assert await kv.get(f"{P}:branding:acme") is None
    assert await kv.get(f"{P}:branding:{{globex}}") == "already-new"
    assert await kv.get(f"{P}:branding:globex") == "old-globex"  # left for an operator to see
    assert await kv.get(f"{{{P}}}:version") == "7"
    assert await rename_store_keys(kv, RENAMES) == 0  # idempotent


async def test_two_control_planes_starting_together_move_each_key_once(kv: Any) -> None:
    for i in range(200):
        await kv.set(f"{P}:branding:t{i}", str(i))
    moved = await asyncio.gather(*(rename_store_keys(kv, RENAMES) for _ in range(2)))
    assert sorted(moved) == [0, 200]
    assert await kv.get(f"{P}:branding:{{t199}}") == "199"
