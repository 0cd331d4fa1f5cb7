"""Rug-pull detection: a server's tool set is listed again, on a schedule and on demand, and
compared by fingerprint with the set that was approved.

A change (a description, a schema, a tool added, removed or renamed) quarantines the server:
status `quarantined`, the new set kept under `quarantine` (`tools`, `fingerprint`,
`detected_at`), `agent_gateway_tool_poisoning_detected` increased and an `agent_audit_log`
row written (action `tool_set_changed`, status `quarantined`, `tool_name` the changed names,
`input_hash` / `output_hash` the approved and new fingerprints). Until a platform
administrator approves the new set (`approve()`, `POST /v1/mcp/servers/:id/approve-tools`),
`is_callable` refuses calls with 409 `tool_set_quarantined`.

The write is a compare-and-set on the record that was compared, so when two replicas detect
one change only one counts it. The schedule runs on every replica, but a round is taken by
one of them only (`{mcp}:relist-lock`, held for the interval).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.agent.audit import AuditTrail
from gateways.agent.mcp import keys
from gateways.agent.mcp.errors import RegistryConflict, ServerNotFound, ToolSetQuarantined
from gateways.agent.mcp.fingerprint import changed_tools, fingerprint
from gateways.agent.mcp.forwarder import McpForwarder
from gateways.agent.mcp.metrics import McpMetrics
from gateways.agent.mcp.store import Record, ServerStore
from runtime.cancelling import cancel_and_wait
from runtime.errors import StrataError

log = logging.getLogger(__name__)

QUARANTINED = "quarantined"
ACTIVE = "active"


def is_callable(server: dict[str, Any]) -> None:
    """None when calls to `server` may go through; raises ToolSetQuarantined (409
    `tool_set_quarantined`) while its changed tool set waits for approval."""
    if server.get("status") == QUARANTINED:
        pending = server.get("quarantine") or {}
        raise ToolSetQuarantined(
            f"MCP server {server['id']!r} changed its tool set and is quarantined until a "
            "platform administrator approves the new set",
            error="tool_set_quarantined",
            server_id=server["id"],
            fingerprint=server.get("fingerprint", ""),
            pending_fingerprint=pending.get("fingerprint", ""),
        )


class ToolSetWatch:
    def __init__(
        self,
        store: ServerStore,
        forwarder: McpForwarder,
        metrics: McpMetrics,
        audit: AuditTrail,
        *,
        interval: float,
        now: Any,
    ) -> None:
        self.store = store
        self.forwarder = forwarder
        self.metrics = metrics
        self.audit = audit
        self.interval = interval
        self.now = now  # () -> ISO 8601 text
        self._task: asyncio.Task[None] | None = None

    async def refresh(self, server_id: str) -> Record:
        """List the server's tools now; returns its record, quarantined when the set changed.
        Raises McpUpstreamError (502) when the upstream cannot be listed."""
        raw = await self.store.get_raw(server_id)
        if raw is None:
            raise ServerNotFound()
        record: Record = json.loads(raw)
        tools = await self.forwarder.list_tools(record)
        listed = fingerprint(tools)
        pending = record.get("quarantine") or {}
        if listed == record["fingerprint"] or listed == pending.get("fingerprint"):
            return record
        changed = {
            **record,
            "status": QUARANTINED,
            "quarantine": {"tools": tools, "fingerprint": listed, "detected_at": self.now()},
        }
        try:
            await self.store.put(changed, expected=raw)
        except RegistryConflict:  # changed meanwhile (another replica, a registration)
            return await self.store.get(server_id) or record
        self.metrics.poisoning_detected.labels(record["tenant_id"]).inc()
        names = changed_tools(record["tools"], tools)
        log.warning(
            "MCP server %s changed its tool set (%s): quarantined", server_id, ", ".join(names)
        )
        self.audit.record(
            record["tenant_id"],
            "tool_set_changed",
            QUARANTINED,
            tool_name=",".join(names)[:1024],
            agent_id=f"mcp-server:{server_id}",
            input_hash=record["fingerprint"],
            output_hash=listed,
        )
        return changed

    async def approve(self, record: Record, raw: str, fingerprint_seen: str | None) -> Record:
        """Make the pending tool set the approved one (409 when nothing is pending, when the
        administrator reviewed another fingerprint, or on a tool name collision)."""
        pending = record.get("quarantine")
        if record.get("status") != QUARANTINED or not pending:
            raise RegistryConflict(
                f"MCP server {record['id']!r} has no tool set waiting for approval",
                error="not_quarantined",
            )
        if fingerprint_seen and fingerprint_seen != pending["fingerprint"]:
            raise RegistryConflict(
                f"the pending tool set is {pending['fingerprint']}, not {fingerprint_seen}",
                error="fingerprint_mismatch",
            )
        approved = {
            **record,
            "tools": pending["tools"],
            "fingerprint": pending["fingerprint"],
            "status": ACTIVE,
            "quarantine": None,
        }
        await self.store.put(approved, expected=raw)
        self.audit.record(
            record["tenant_id"],
            "tool_set_approved",
            ACTIVE,
            tool_name=",".join(changed_tools(record["tools"], pending["tools"]))[:1024],
            agent_id=f"mcp-server:{record['id']}",
            input_hash=record["fingerprint"],
            output_hash=pending["fingerprint"],
        )
        return approved

    async def run_round(self, kv: Redis) -> int:
        """One scheduled round, when this replica takes it: every server re-listed; returns
        how many were listed (0 when another replica has the round)."""
        token = secrets.token_hex(8)
        hold_ms = max(1000, int(self.interval * 1000))
        if not await kv.set(keys.RELIST_LOCK, token, nx=True, px=hold_ms):
            return 0
        listed = 0
        for record in await self.store.all():
            try:
                await self.refresh(record["id"])
                listed += 1
            except (StrataError, RedisError, OSError) as exc:
                log.info("re-listing MCP server %s failed: %s", record["id"], exc)
        return listed

    def start(self, kv: Redis) -> None:
        if self.interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._schedule(kv), name="mcp-relist")

    async def _schedule(self, kv: Redis) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.run_round(kv)
            except (StrataError, RedisError, OSError) as exc:
                log.warning("tool-set re-listing round failed: %s", exc)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task], 2)  # (once may not do: cancelling.py)
            self._task = None


__all__ = ["ACTIVE", "QUARANTINED", "ToolSetWatch", "is_callable"]
