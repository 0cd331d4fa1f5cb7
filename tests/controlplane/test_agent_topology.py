"""`GET /api/agent-topology` (spec: control plane table): delegation edges of one tenant from
`gateway.sts_token_issuance` — counts as strings, `max_depth`, `last_seen` — within `range`;
`tenant_id` required and validated; `{edges: []}` with no traffic or no analytics store."""

from __future__ import annotations

import dataclasses
import time
import uuid

from identity_kit import MASTER, controlplane, request
from shared_kit import free_port

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv
from runtime.testing import serving

__all__ = ["controlplane"]  # fixtures


def row(tenant: str, subject: str, audience: str, decision: str, depth: int, ago: float) -> dict:
    return {
        "timestamp": time.time() - ago, "tenant_id": tenant, "jti": str(uuid.uuid4()),
        "subject": subject, "audience": audience, "human": "h", "chain_depth": depth,
        "act_chain": "[]", "purpose": "", "decision": decision,
        "deny_reason": "" if decision == "ISSUED" else "agent may not delegate",
        "ttl_secs": 120 if decision == "ISSUED" else 0,
    }  # fmt: skip


async def topology(url: str, query: str, headers: dict[str, str] = MASTER) -> tuple[int, dict]:
    return await request("GET", f"{url}/api/agent-topology?{query}", headers=headers)


async def test_edges_with_counts_depth_and_last_seen(controlplane, analytics) -> None:
    tenant = f"topo-{uuid.uuid4().hex[:8]}"
    now = time.time()
    await analytics.insert("sts_token_issuance", [
        row(tenant, "agent:a", "agent:b", "ISSUED", 2, 60),
        row(tenant, "agent:a", "agent:b", "ISSUED", 3, 30),
        row(tenant, "agent:a", "agent:b", "DENIED", 2, 10),
        row(tenant, "agent:b", "agent:c", "ISSUED", 3, 5 * 3600),  # only in 24h and longer
        row(tenant, "", "agent:c", "DENIED", 0, 5),  # no caller known: no edge
        row("other-tenant", "agent:x", "agent:y", "ISSUED", 2, 5),
    ])  # fmt: skip
    async with controlplane(SVC_AGENT_IDENTITY="off") as cp:  # not behind the flag
        status, body = await topology(cp.http_url, f"tenant_id={tenant}&range=1h")
        assert status == 200
        (edge,) = body["edges"]
        assert edge == {"from_agent": "agent:a", "to_agent": "agent:b", "task_count": "3",
                        "issued": "2", "denied": "1", "max_depth": 3,
                        "last_seen": edge["last_seen"]}  # fmt: skip
        assert int(now) - 11 <= edge["last_seen"] <= int(now) + 1
        status, body = await topology(cp.http_url, f"tenant_id={tenant}")  # 24h by default
        assert [(e["from_agent"], e["to_agent"]) for e in body["edges"]] == [
            ("agent:a", "agent:b"), ("agent:b", "agent:c")
        ]  # fmt: skip
        assert (await topology(cp.http_url, f"tenant_id=empty-{tenant}")) == (200, {"edges": []})


async def test_tenant_id_and_range_are_checked(controlplane) -> None:
    async with controlplane() as cp:
        for query in (
            "",
            "tenant_id=",
            "tenant_id=a.b",
            "tenant_id=a%20b",
            "tenant_id=acme&range=2d",
        ):
            status, body = await topology(cp.http_url, query)
            assert status == 400, query
            assert body["error"] == "invalid_request"


async def test_no_analytics_store_is_no_edges(config_for, stores_for, valkey_url) -> None:
    config = config_for(ControlPlaneConfig)
    stores = dataclasses.replace(stores_for(config), analytics=None)
    async with serving(build(config, stores)) as svc:
        assert await topology(svc.http_url, "tenant_id=acme") == (200, {"edges": []})
    down = Analytics(f"http://127.0.0.1:{free_port()}")
    stores = Stores(kv=connect_kv(valkey_url), sink=DirectSink(down), analytics=down)
    async with serving(build(config, stores)) as svc:
        assert await topology(svc.http_url, "tenant_id=acme") == (200, {"edges": []})
