"""The agent gateway's durable keys move to their cluster-safe names at control-plane start
(issue 24, `gateways/agent/keys.py`'s RENAMES): a session stored under its id alone is found
by its tenant afterwards, with its counters, its tenant's sets and policy."""

from __future__ import annotations

import json
import uuid

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from state_kit import kv, tenant

from controlplane.store_layout import RENAMES, rename_store_keys
from gateways.agent import keys
from gateways.agent.policies import load_policy
from gateways.agent.sessions.store import ACTIVE, Counters, SessionRecord, SessionStore

__all__ = ["kv"]  # fixtures


async def test_a_session_stored_under_the_old_names_is_found_by_its_tenant(kv: Redis) -> None:
    if isinstance(kv, RedisCluster):  # (`STRATA_TEST_KV=cluster`)
        pytest.skip("renames run on a single node: a cluster refuses a rename across slots")
    t, sid = tenant(), str(uuid.uuid4())
    session = SessionRecord(sid, t, "agent-1", ["search"], 100, ACTIVE, "2026-01-01T00:00:00Z")
    await kv.set(f"agent:session:{sid}", session.to_json())
    await kv.set(f"agent:session-calls:{sid}", 3)
    await kv.set(f"agent:session-tokens:{sid}", 40)
    await kv.zadd(f"agent:sessions:{t}", {sid: 1})
    await kv.sadd(f"agent:active-sessions:{t}", sid)
    await kv.set(f"agent:policy:{t}", json.dumps({"max_concurrent_sessions": 7}))

    assert keys.RENAMES[0] in RENAMES  # registered with the control plane
    assert await rename_store_keys(kv, keys.RENAMES) >= 6

    store = SessionStore(kv)
    assert await store.get(t, sid) == session
    assert await store.counters(session) == Counters(3, 40)
    assert [s.id for s in await store.list(t)] == [sid]
    assert await store.active_count(t) == 1
    assert (await load_policy(kv, t)).max_concurrent_sessions == 7
    assert not await kv.exists(f"agent:session:{sid}", f"agent:session-calls:{sid}")
    assert await rename_store_keys(kv, keys.RENAMES) == 0  # idempotent
