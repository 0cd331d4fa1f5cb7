"""Durable keys move to their cluster-safe names at control-plane start (issue 24)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

from shared_kit import STRATA

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


def strata_migrate(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "CLICKHOUSE_URL"}}
    return subprocess.run(
        [STRATA, "migrate"], env={**env, **environ}, capture_output=True, text=True, timeout=120
    )


def test_strata_migrate_applies_the_schema_once_and_fails_on_an_unreachable_store(
    valkey_url: str, tmp_path: Path
) -> None:
    environ = {
        "MASTER_KEY": "k" * 32,
        "REDIS_URL": valkey_url,
        "CLICKHOUSE_URL": f"chdb://{tmp_path}",
    }
    first = strata_migrate(environ)
    assert first.returncode == 0, first.stderr
    assert "analytics schema: 5 migration(s) applied" in first.stdout
    again = strata_migrate(environ)
    assert again.returncode == 0, again.stderr
    assert "analytics schema: 0 migration(s) applied" in again.stdout
    assert "key-value store: 0 key(s) renamed" in again.stdout

    down = strata_migrate({**environ, "REDIS_URL": "redis://127.0.0.1:9/0"})
    assert down.returncode == 1
    assert "key-value store unreachable" in down.stderr
    invalid = strata_migrate({**environ, "MASTER_KEY": ""})
    assert invalid.returncode == 2
    assert "MASTER_KEY is required" in invalid.stderr
