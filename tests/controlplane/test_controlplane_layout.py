"""A store written by a release before issue 24 (no hash tags): a control plane starting on it
moves every durable key of its own to the cluster-safe layout, marks the tenants it finds, and
serves what was stored as before — API keys, realms, agents, notifications and their sealed
preferences, the delivery queue with its consumer group and pending entry, branding."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from controlplane_kit import MASTER, Start, call, start_fixture  # noqa: F401
from shared_kit import keyring_for_tests

from controlplane import api_keys, app
from controlplane.branding import branding_key
from controlplane.notifications import store as notify
from controlplane.tenancy import TENANTS, tenant_exists
from runtime import tenant_realms
from runtime.hop_tokens import CREDENTIALS_KEY, REGISTRY_KEY, deleg_key
from runtime.issued_keys import DIGESTS, VERSION
from runtime.stores.kv import connect_kv
from runtime.testing import Serving

DB = 9  # a database of this test's own: the old names are singletons other tests use too
KEY = {"id": "k-old", "tenant_id": "acme", "name": "old-key", "status": "active",
       "key_hash": "ab" * 32, "routes": ["r1"],
       "created_at": "2026-01-01T00:00:00.000Z"}  # fmt: skip
REQUEST = {"id": "kr-old", "tenant_id": "acme", "name": "pending-key", "status": "pending",
           "routes": ["r1"], "email": "a@acme.example", "reason": "r",
           "requested_at": "2026-01-01T00:00:00.000Z"}  # fmt: skip
AGENT = {"agent_id": "agent:old", "tenant_id": "acme", "allowed_audiences": ["agent:b"],
         "allowed_tools": [], "credential_ref": "cref", "description": ""}  # fmt: skip
NOTE = {"id": "n-old", "tenant_id": "acme", "notification_type": "key_approved", "title": "t",
        "message": "m", "created_at": "2026-01-01T00:00:00.000Z"}  # fmt: skip
HOOK = "http://127.0.0.1:9/old-hook"


@pytest.fixture
async def old_store(valkey_url: str) -> AsyncIterator[tuple[str, Any]]:
    if "+cluster" in valkey_url:
        pytest.skip("keys are renamed on a single node (a cluster refuses a cross-slot rename)")
    url = f"{valkey_url.rsplit('/', 1)[0]}/{DB}"
    kv = connect_kv(url)
    await kv.flushdb()
    yield url, kv
    await kv.flushdb()
    await kv.aclose()


async def write_old_layout(kv: Any) -> None:
    """The names and values as the release before issue 24 wrote them."""
    await kv.hset("cp:tenants", "acme", json.dumps({"id": "acme", "name": "Acme"}))
    await kv.hset("cp:api-keys", KEY["id"], json.dumps(KEY))
    await kv.hset("cp:key-requests", REQUEST["id"], json.dumps(REQUEST))
    await kv.hset("cp:key-names", mapping={"old-key": "k-old", "pending-key": "kr-old"})
    projection = {k: KEY[k] for k in ("id", "tenant_id", "name", "status")}
    await kv.hset("cp:api-key-digests", str(KEY["key_hash"]), json.dumps(projection))
    await kv.set("cp:api-keys:version", "7")
    await kv.hset("cp:tenant-realms", "acme-realm", json.dumps({"tenant_id": "acme"}))
    await kv.set("cp:tenant-realms:version", "2")
    await kv.hset(REGISTRY_KEY, "agent:old", json.dumps(AGENT))
    await kv.hset("svc:agent-credentials", "cref", "agent:old")
    await kv.sadd("svc:deleg:agent:old", "agent:b")
    await kv.hset("cp:notifications:items:acme", "n-old", json.dumps(NOTE))
    await kv.zadd("cp:notifications:order:acme", {"n-old": 1})
    await kv.sadd("cp:notifications:read:acme", "n-old")
    await kv.hset("cp:notifications:ids", "n-old", "acme")
    where = "cp:notify-prefs:acme"  # the sealed secrets are bound to the key's old name
    prefs = {**notify.default_preferences("acme"),
             "webhook_url": keyring_for_tests().seal(HOOK, f"{where}:webhook_url")}  # fmt: skip
    await kv.set(where, json.dumps(prefs))
    await kv.xgroup_create("cp:deliveries", notify.GROUP, id="0", mkstream=True)
    await kv.xadd("cp:deliveries", {"job": "{}"})
    await kv.xreadgroup(notify.GROUP, "old-worker", {"cp:deliveries": ">"})  # pending
    await kv.zadd("cp:deliveries:retry", {"{}": 1})
    await kv.lpush("cp:deliveries:dead", "{}")
    await kv.hset("cp:branding:acme", "portal_title", "Old title")


async def test_a_store_of_the_old_layout_is_moved_and_served(
    start: Start, old_store: tuple[str, Any]
) -> None:
    url, kv = old_store
    await write_old_layout(kv)
    async with start(REDIS_URL=url, STORE_URL=url, NOTIFY_DELIVERY="off") as cp:
        await check_served(cp, kv)
    assert await kv.get("cp:api-keys:version") is None  # every old name is gone
    left = {k async for k in kv.scan_iter(match="*")}
    assert left.isdisjoint(
        {"cp:api-keys", "cp:key-requests", "cp:key-names", "cp:api-key-digests",
         "cp:tenant-realms", "cp:tenant-realms:version", "svc:agent-credentials",
         "svc:deleg:agent:old", "cp:notifications:items:acme", "cp:notifications:order:acme",
         "cp:notifications:read:acme", "cp:notify-prefs:acme", "cp:deliveries",
         "cp:deliveries:retry", "cp:deliveries:dead", "cp:branding:acme"}
    ), left  # fmt: skip


async def check_served(cp: Serving, kv: Any) -> None:
    assert await tenant_exists(kv, "acme")  # marked at start
    assert await kv.hexists(TENANTS, "acme")
    # API keys, requests, names and the gateways' projection with its counter.
    status, listed = await call(cp, "GET", "/api/keys", MASTER)
    assert status == 200 and [k["id"] for k in listed] == ["k-old"], listed
    status, pending = await call(cp, "GET", "/api/keys/requests", MASTER)
    assert status == 200 and [r["id"] for r in pending] == ["kr-old"], pending
    assert await kv.hget(api_keys.NAMES, "old-key") == "k-old"
    assert json.loads(await kv.hget(DIGESTS, KEY["key_hash"]))["id"] == "k-old"
    assert await kv.get(VERSION) == "7"
    # Realms, the registry's credential index and delegation sets.
    assert await kv.hexists(tenant_realms.REALMS, "acme-realm")
    assert await kv.get(tenant_realms.VERSION) == "2"
    assert await kv.hget(CREDENTIALS_KEY, "cref") == "agent:old"
    assert await kv.smembers(deleg_key("agent:old")) == {"agent:b"}
    # Notifications (read mark kept), the sealed preferences still open.
    status, notes = await call(cp, "GET", "/api/notifications?tenant_id=acme", MASTER)
    listed_notes = [(n["id"], n["read"]) for n in notes["notifications"]]
    assert status == 200 and listed_notes == [("n-old", True)], notes
    status, prefs = await call(cp, "GET", "/api/notifications/preferences?tenant_id=acme", MASTER)
    assert status == 200 and prefs["webhook_url"] == HOOK, prefs
    # The delivery queue keeps its consumer group and the entry a worker had taken.
    (group,) = await kv.xinfo_groups(notify.QUEUE)
    assert (group["name"], group["pending"]) == (notify.GROUP, 1)
    assert await kv.zcard(notify.RETRY) == 1 and await kv.llen(notify.DEAD) == 1
    # Branding.
    assert await kv.hget(branding_key("acme"), "portal_title") == "Old title"
    status, body = await call(cp, "GET", "/api/tenants/acme/branding", MASTER)
    assert status == 200 and body["portal_title"] == "Old title", body


async def test_a_worker_adopts_the_old_queue_when_the_renaming_at_start_did_not_run(
    start: Start, old_store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store was away when the control plane started (its renaming logged and skipped):
    the delivery worker, before it makes its consumer group, moves the old queue with its
    group, so the jobs a worker had taken are not stranded beside a new, empty queue."""
    url, kv = old_store
    await kv.xgroup_create("cp:deliveries", notify.GROUP, id="0", mkstream=True)
    taken = await kv.xadd("cp:deliveries", {"job": "{}"})
    await kv.xreadgroup(notify.GROUP, "old-worker", {"cp:deliveries": ">"})

    async def away(kv: Any) -> int:
        raise ConnectionError("the store is away")

    monkeypatch.setattr(app, "rename_store_keys", away)
    async with start(REDIS_URL=url, STORE_URL=url, NOTIFY_POLL_SECS="0.05"):
        for _ in range(100):
            if not await kv.exists("cp:deliveries") and await kv.exists(notify.QUEUE):
                break
            await asyncio.sleep(0.05)
        (group,) = await kv.xinfo_groups(notify.QUEUE)
    assert not await kv.exists("cp:deliveries")
    assert group["name"] == notify.GROUP and group["last-delivered-id"] == taken
