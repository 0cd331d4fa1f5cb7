"""Secrets stored in clear before they were protected (issue 19, defects 2 and 5) are migrated
when a control plane starts: an edge consumer's key-auth key becomes its digest and still
authenticates, a jwt-auth secret and the other secrets are sealed, a second start changes
nothing, and the store's append-only file is rewritten so the clear values leave the disk.
Its own Valkey, with an append-only file, on a free port."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from shared_kit import MASTER_KEY, ConfigFor, store_text, valkey_server

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.keys import kind_hash
from controlplane.edge_config.store import EdgeConfigStore, Entry
from gateways.ai.providers import keys as providers_keys
from runtime.config import ServiceConfig
from runtime.keyring import Keyring, is_digest, is_sealed, kid_of, new_key, parse_keys
from runtime.stores import Stores
from runtime.stores.kv import connect_kv
from runtime.testing import serving

API_KEY = "sk-legacy-clear-key-4e0a9b8c7d6e5f"
JWT_SECRET = "legacy-jwt-secret-of-32-bytes-00"
MANUAL = "sk-legacy-manual-provider-key-61"
PAGERDUTY = "legacy-pagerduty-key-2f4d6b"
SIGNING = "whsec_legacy-signing-secret-5c3a"
HOOK_SECRET = "whsec_legacy-hook-secret-9e7f1d"
CANARIES = (API_KEY, JWT_SECRET, MANUAL, PAGERDUTY, SIGNING, HOOK_SECRET)
K1 = new_key("k1")


def aof_bytes(directory: Path) -> bytes:
    """All of Valkey's append-only directory. Its background rewrite replaces files: one
    listed and gone before it was read makes the directory listed and read again."""
    for _ in range(100):
        try:
            return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())
        except FileNotFoundError:
            continue
    raise AssertionError(f"{directory} kept changing while it was read")


async def seed_clear_secrets(url: str) -> None:
    """What a store written before secrets were protected holds."""
    kv = connect_kv(url)
    try:
        store = EdgeConfigStore(kv)
        consumers = {
            "legacy-key": {"username": "legacy-key", "plugins": {"key-auth": {"key": API_KEY}}},
            "legacy-jwt": {
                "username": "legacy-jwt",
                "plugins": {"jwt-auth": {"key": "legacy-jwt-key", "secret": JWT_SECRET}},
            },
        }
        await store.write(0, [("consumers", n, Entry(c, 1, 1)) for n, c in consumers.items()])
        await kv.hset(providers_keys.SECRETS, "legacy", MANUAL)
        settings = {"notification_config": {"pagerduty_key": PAGERDUTY}}
        await kv.set("cp:settings", json.dumps(settings))
        prefs: dict[str, Any] = {"tenant_id": "acme", "webhook_url": None, "slack_url": None,
                 "signing_secret": SIGNING, "enabled_types": []}  # fmt: skip
        await kv.set("cp:notify-prefs:acme", json.dumps(prefs))
        hook = {"id": "wh-legacy", "tenant_id": "acme", "url": "http://127.0.0.1:9/h",
                "event_types": ["key_approved"], "secret": HOOK_SECRET,
                "created_at": "2025-01-01T00:00:00Z"}  # fmt: skip
        await kv.hset("cp:webhooks", "wh-legacy", json.dumps(hook))
    finally:
        await kv.aclose()


async def test_clear_secrets_are_migrated_at_start_and_leave_the_append_only_file(
    tmp_path: Path,
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
) -> None:
    data = tmp_path / "valkey"
    data.mkdir()
    with valkey_server(data, "--appendonly", "yes", "--appendfsync", "always") as port:
        url = f"redis://127.0.0.1:{port}/0"
        await seed_clear_secrets(url)
        before = aof_bytes(data)
        assert all(c.encode() in before for c in CANARIES)  # the file held them

        config = config_for(
            ControlPlaneConfig,
            REDIS_URL=url,
            STRATA_DATA_KEYS=K1,
            HEALTH_PROBE_INTERVAL_SECS="0",
            NOTIFY_DELIVERY="off",
        )
        async with serving(build_controlplane(config, stores_for(config))):
            pass

        kv = connect_kv(url)
        try:
            text = await store_text(kv)
            assert not [c for c in CANARIES if c in text]
            keyring = Keyring(parse_keys(K1), MASTER_KEY)
            # the client decodes (decode_responses=True); redis-py types answers `bytes | str`
            consumers = cast("dict[str, str]", await kv.hgetall(kind_hash("consumers")))
            key = json.loads(consumers["legacy-key"])["value"]["plugins"]["key-auth"]["key"]
            assert is_digest(key) and keyring.matches(key, API_KEY)
            jwt = json.loads(consumers["legacy-jwt"])["value"]["plugins"]["jwt-auth"]["secret"]
            assert keyring.open(jwt, "edge:consumer:legacy-jwt:jwt-auth.secret") == JWT_SECRET
            manual = await kv.hget(providers_keys.SECRETS, "legacy")
            assert isinstance(manual, str)
            assert keyring.open(manual, providers_keys.secret_context("legacy")) == MANUAL
            stored_settings = await kv.get("cp:settings")
            assert stored_settings is not None
            settings = json.loads(stored_settings)["notification_config"]
            assert is_sealed(settings["pagerduty_key"])
            assert kid_of(settings["pagerduty_key"]) == "k1"
            migrated = {k: v for k, v in consumers.items() if k.startswith("legacy-")}

            # The append-only file was rewritten from the data: the clear values are gone
            # (the rewrite runs in the background; waited for, not timed).
            deadline = time.monotonic() + 30
            while [c for c in CANARIES if c.encode() in aof_bytes(data)]:
                assert time.monotonic() < deadline, "the append-only file still holds secrets"
                await asyncio.sleep(0.1)

            # A second start finds nothing to do.
            async with serving(build_controlplane(config, stores_for(config))):
                pass
            again = await kv.hgetall(kind_hash("consumers"))
            assert {k: again[k] for k in migrated} == migrated
        finally:
            await kv.aclose()
