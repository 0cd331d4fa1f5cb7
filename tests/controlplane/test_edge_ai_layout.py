"""The edge's and the AI gateway's durable keys move to their cluster-safe names when a control
plane starts (issue 24): a store written by the previous release (its key names spelled here,
the one place they still are) is read by this release's code after the move."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from shared_kit import keyring_for_tests, valkey_server

from controlplane.edge_config import keys as edge_keys
from controlplane.edge_config.store import EdgeConfigStore
from controlplane.store_layout import rename_store_keys
from gateways.ai.providers import keys as providers_keys
from gateways.ai.tenants.keys import budget_key, limit_key, prompt_config_key, warned_key
from gateways.edge.keys import rate_limit_override, rate_limit_window
from runtime.stores.kv import connect_kv


@pytest.fixture
async def kv(tmp_path: Path) -> AsyncIterator[Any]:
    """A store of this test alone (the move scans every key)."""
    with valkey_server(tmp_path) as port:
        client = connect_kv(f"redis://127.0.0.1:{port}/0")
        yield client
        await client.aclose()


async def test_a_previous_release_store_is_read_under_the_new_names(kv: Any) -> None:
    keyring = keyring_for_tests()
    sealed = keyring.protect("sk-manual", "platform:provider-secrets:p1")  # as it was sealed
    route = {"value": {"uri": "/a/*"}, "createdIndex": 2, "modifiedIndex": 3}
    old: dict[str, Any] = {
        "rl:config:acme": '{"limit": 5, "window": "60s"}',
        "rl:config:acme:r1": "7",
        "edge:config:revision": "3",
        "edge:config:seeded": "1",
        "edge:config:ids": "12",
        "edge:config:routes": {"r1": json.dumps(route)},
        "acme:budget:tokens": "100",
        "acme:budget:limit": "200",
        "acme:budget:warned": "1",
        "cp:prompt-config:acme": '{"system_prompt": "Be brief."}',
        "platform:providers": {"p1": "{}"},
        "platform:provider-secrets": {"p1": sealed},
        "platform:providers:version": "4",
    }
    for key, value in old.items():
        await (kv.hset(key, mapping=value) if isinstance(value, dict) else kv.set(key, value))
    await kv.zadd("rl:acme:r1:60", {"m": 1})  # a window: ephemeral, left to expire

    assert await rename_store_keys(kv) == len(old) - 1  # all but `platform:providers`

    assert await kv.get(rate_limit_override("acme")) == '{"limit": 5, "window": "60s"}'
    assert await kv.get(rate_limit_override("acme", "r1")) == "7"
    state = await EdgeConfigStore(kv).load()
    assert state.revision == 3 and state.of("routes")["r1"].value == {"uri": "/a/*"}
    assert await kv.get(edge_keys.SEEDED) == "1"
    assert await EdgeConfigStore(kv).next_id() == f"{13:020d}"
    assert await kv.get(budget_key("acme")) == "100"
    assert await kv.get(limit_key("acme")) == "200"
    assert await kv.get(warned_key("acme")) == "1"
    assert json.loads(await kv.get(prompt_config_key("acme"))) == {"system_prompt": "Be brief."}
    assert await kv.hget(providers_keys.PROVIDERS, "p1") == "{}"  # the spec's name, kept
    moved_secret = await kv.hget(providers_keys.SECRETS, "p1")
    assert keyring.open(moved_secret, providers_keys.secret_context("p1")) == "sk-manual"
    assert await kv.get(providers_keys.VERSION) == "4"
    assert await kv.exists(*(k for k in old if k != "platform:providers")) == 0
    assert await kv.exists("rl:acme:r1:60") == 1
    assert await kv.exists(rate_limit_window("acme", "r1", 60)) == 0

    assert await rename_store_keys(kv) == 0  # once
