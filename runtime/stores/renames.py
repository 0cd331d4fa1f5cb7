"""Durable keys moved to cluster-safe names (issue 24), renamed in place at control-plane start.

A layout's `keys` module declares its moves as `RENAMES`; the control plane runs them all
(`controlplane/store_layout.py`) under one store lock before it serves. Each move is a
`RENAMENX` of one key: idempotent (a second control plane, or a second start, finds nothing
left to move), and it never overwrites a key already written under the new name. It runs on
a single-node store: an existing deployment is migrated there before its data moves to a
cluster (a cluster refuses a rename across slots).

Ephemeral keys (rate-limit windows, breakers, replay guards, logins) are not migrated: at
worst a window restarts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError


@dataclass(frozen=True, slots=True)
class KeyRename:
    """Every key matching `match` (a SCAN pattern) moves to `new_name(key)`; None skips a key
    the pattern caught that is not this layout's (or is already renamed)."""

    match: str
    new_name: Callable[[str], str | None]
    # Instead of `new_name`, when the new name depends on what the store holds (e.g. the
    # tenant inside a record whose key names only its id): given the store and the key.
    read_new_name: Callable[[Redis, str], Awaitable[str | None]] | None = None


def retag(old_prefix: str, tagged: Callable[[str], str]) -> KeyRename:
    """The common move: `<old_prefix><id>` becomes `tagged(id)`, e.g. `cp:branding:acme` →
    `cp:branding:{acme}`. Keys whose id already carries braces are skipped."""

    def new_name(key: str) -> str | None:
        ident = key[len(old_prefix) :]
        if not key.startswith(old_prefix) or not ident or "{" in key:
            return None
        return tagged(ident)

    return KeyRename(old_prefix.replace("[", "\\[") + "*", new_name)


def exact(old: str, new: str) -> KeyRename:
    """One singleton key renamed, e.g. `cp:api-keys:version` → `{cp:api-keys}:version`."""
    return KeyRename(old, lambda key: new if key == old else None)


async def apply_renames(kv: Redis, renames: Iterable[KeyRename]) -> int:
    """Runs every move; returns how many keys were renamed."""
    moved = 0
    for rename in renames:
        # The whole scan first: SCAN may return a key twice, and a key renamed mid-scan
        # could be met again under its new name.
        found = {key async for key in kv.scan_iter(match=rename.match, count=500)}
        for key in sorted(found):
            if rename.read_new_name is not None:
                new = await rename.read_new_name(kv, key)
            else:
                new = rename.new_name(key)
            if new is None or new == key:
                continue
            try:
                moved += bool(await kv.renamenx(key, new))
            except ResponseError as exc:  # gone meanwhile (expired, or moved by a writer)
                if "no such key" not in str(exc).lower():
                    raise
    return moved
