"""`agent_audit_log` rows of the registry (tool-set changes, approvals), written off the
request path (the analytics sink, as the AI gateway writes `ai_request_log`).

Rows carry hashes, never payloads: a tool-set change stores the approved fingerprint as
`input_hash` and the new one as `output_hash`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from opentelemetry import trace

from runtime.stores.analytics import AnalyticsSink

log = logging.getLogger(__name__)

TABLE = "agent_audit_log"


def trace_id() -> str:
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


class AuditLog:
    def __init__(self, sink: AnalyticsSink) -> None:
        self.sink = sink
        self._tasks: set[asyncio.Task[Any]] = set()

    def record(
        self,
        *,
        tenant_id: str,
        tool_name: str,
        action: str,
        status: str,
        agent_id: str = "",
        session_id: str = "",
        input_hash: str = "",
        output_hash: str = "",
    ) -> None:
        row = {
            "tenant_id": tenant_id,
            "session_id": session_id,
            "agent_id": agent_id,
            "tool_name": tool_name,
            "action": action,
            "status": status,
            "trace_id": trace_id(),
            "input_hash": input_hash,
            "output_hash": output_hash,
        }
        task = asyncio.create_task(self._write(row), name=f"audit:{action}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, row: dict[str, Any]) -> None:
        try:
            await self.sink.write(TABLE, [row])
        except Exception as exc:  # the analytics store's failures must not reach clients
            log.warning("agent_audit_log: row %s not written: %s", row["action"], exc)

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
