"""`GET /api/agent-topology`: the agent-to-agent delegation edges of one tenant, from the STS
issuance records (`gateway.sts_token_issuance`).

An edge is a (caller → audience) pair of token exchanges in the window (`range`: 1h, 24h by
default, 7d, 30d): `task_count` exchanges, of which `issued` and `denied` (the three as decimal
strings, as the spec shows them), the deepest `act_chain` (`max_depth`) and the last exchange
(`last_seen`, Unix seconds). Attempts denied before the caller was known (no subject) are not
edges. `tenant_id` is required (letters, digits, `-`, `_`); a caller other than a platform
administrator reads its own tenant only (the guard). No analytics store, an unreachable one or
no traffic: `{edges: []}`.
"""

from __future__ import annotations

import logging
import re

from controlplane.analytics.common import HOUR_MS, Reader, Where, bad, now_ms, range_hours
from runtime.errors import Unavailable
from strata.controlplane.v1 import analytics_pb2

log = logging.getLogger(__name__)

TENANT = re.compile(r"[A-Za-z0-9_-]{1,128}")
EDGES = (
    "SELECT subject, audience, count() AS task_count, "
    "countIf(decision = 'ISSUED') AS issued, countIf(decision = 'DENIED') AS denied, "
    "max(chain_depth) AS max_depth, toUnixTimestamp(max(timestamp)) AS last_seen "
    "FROM gateway.sts_token_issuance WHERE {where} AND subject != '' AND audience != '' "
    "GROUP BY subject, audience ORDER BY subject, audience"
)


async def agent_topology(
    reader: Reader, request: analytics_pb2.GetAgentTopologyRequest
) -> analytics_pb2.GetAgentTopologyResponse:
    if not request.tenant_id:
        raise bad("tenant_id", "is required")
    if not TENANT.fullmatch(request.tenant_id):
        raise bad("tenant_id", "may hold only letters, digits, '-' and '_'")
    hours = range_hours(request)
    where = Where().tenant(request.tenant_id).window(now_ms() - hours * HOUR_MS)
    try:
        rows = await reader.query(EDGES.format(where=where.sql), where.params)
    except Unavailable as exc:  # the spec: an unavailable store is no traffic
        log.warning("agent topology without the analytics store", extra={"error": exc.message})
        return analytics_pb2.GetAgentTopologyResponse(edges=[])
    return analytics_pb2.GetAgentTopologyResponse(
        edges=[
            analytics_pb2.TopologyEdge(
                from_agent=r["subject"],
                to_agent=r["audience"],
                task_count=str(r["task_count"]),
                issued=str(r["issued"]),
                denied=str(r["denied"]),
                max_depth=int(r["max_depth"]),
                last_seen=int(r["last_seen"]),
            )
            for r in rows
        ]
    )
