"""`agent_audit_log` rows: what the agent gateway did, for whom, with inputs and outputs only as
SHA-256 hashes (spec: inputs and outputs are stored hashed). Rows are written off the request
path (`runtime.background`)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from opentelemetry import trace

from runtime.background import Background

TABLE = "agent_audit_log"


def digest(value: Any) -> str:
    """`sha256:` + the hex digest of `value`'s canonical JSON (sorted keys, no spaces); ''
    for None (nothing to record)."""
    if value is None:
        return ""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def current_trace_id() -> str:
    span = trace.get_current_span().get_span_context()
    return f"{span.trace_id:032x}" if span.is_valid else ""


class AuditTrail:
    """Writes audit rows through the service's background writer (never blocks a call)."""

    def __init__(self, background: Background) -> None:
        self.background = background

    def record(
        self,
        tenant_id: str,
        action: str,
        status: str,
        *,
        session_id: str = "",
        agent_id: str = "",
        tool_name: str = "",
        inputs: Any = None,
        outputs: Any = None,
        input_hash: str | None = None,
        output_hash: str | None = None,
        act_chain: Any = None,
    ) -> None:
        """Queue one row. `action` is e.g. `tool_call`, `session_terminate`, `hitl_request`,
        `hitl_approved`, `hitl_denied`, `a2a_send`, `tool_set_changed`; `status` its outcome.
        `inputs` / `outputs` are hashed here; `input_hash` / `output_hash` are for values that
        already are hashes (a tool set's fingerprint)."""
        self.background.log_row(
            {
                "timestamp": time.time(),
                "tenant_id": tenant_id,
                "session_id": session_id,
                "agent_id": agent_id,
                "tool_name": tool_name,
                "action": action,
                "status": status,
                "trace_id": current_trace_id(),
                "input_hash": digest(inputs) if input_hash is None else input_hash,
                "output_hash": digest(outputs) if output_hash is None else output_hash,
                "act_chain": "" if act_chain is None else json.dumps(act_chain),
            }
        )
