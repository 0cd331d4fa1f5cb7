"""AuditService: the agent audit trail (`GET /api/audit`, JSON or CSV) and the CSV export of
the analytics tables (`GET /api/export/{table}`).

Both answer the newest rows first (`limit` of them: audit 100 by default, at most 1000;
export 1000 by default, at most 10000; a larger `limit` is capped, zero or less is 400).
`from` and `to` are ISO 8601 (a date-time without an offset is UTC; a bare date as `to`
includes that whole day); both bounds are included. Timestamps are written ISO 8601 UTC with
milliseconds. The audit `action` filter matches any part of the action, literally (`%` and
`_` in it are not wildcards). Only the three tables of `EXPORT_COLUMNS` can be exported, with
exactly those columns: the spec's, and for `request_log` the extra columns the edge's
analytics logger writes.
"""

from __future__ import annotations

from typing import Any

from controlplane.analytics.common import (
    Reader,
    Where,
    bad,
    check_order,
    csv_bytes,
    iso_ms,
    optional,
    parse_instant,
    tenant_scope,
)
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest
from runtime.stores.analytics import Analytics
from strata.controlplane.v1 import audit_pb2, audit_pb2_grpc

AUDIT_LIMIT = (100, 1000)  # (default, cap)
EXPORT_LIMIT = (1000, 10000)
AUDIT_COLUMNS = (
    "timestamp",
    "tenant_id",
    "session_id",
    "agent_id",
    "tool_name",
    "action",
    "status",
    "trace_id",
)
EXPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    "request_log": (
        "timestamp",
        "tenant_id",
        "route_id",
        "method",
        "status_code",
        "latency_ms",
        "trace_id",
        # written by the edge's analytics-logger
        "path",
        "request_size",
        "response_size",
        "client_ip",
        "user_agent",
        "consumer_name",
    ),
    "ai_request_log": (
        "timestamp",
        "tenant_id",
        "model",
        "tokens_prompt",
        "tokens_completion",
        "cache_hit",
        "pii_detected",
        "latency_ms",
        "trace_id",
    ),
    "agent_audit_log": AUDIT_COLUMNS,
}
FORMATS = ("json", "csv")


def limit_of(request: Any, default_and_cap: tuple[int, int]) -> int:
    default, cap = default_and_cap
    if not request.HasField("limit"):
        return default
    if request.limit < 1:
        raise bad("limit", f"must be a positive integer; got {request.limit}")
    limit: int = request.limit
    return min(limit, cap)


def window_of(request: Any) -> Where:
    """The `from`/`to` bounds (both included) as a WHERE clause on `timestamp`."""
    first, last = optional(request, "from"), optional(request, "to")
    since = parse_instant("from", first, end=False) if first else None
    until = parse_instant("to", last, end=True) if last else None
    check_order(since, until)
    return Where().window(since, until)


def select_list(columns: tuple[str, ...]) -> str:
    """The columns, the timestamp as Unix milliseconds (rendered ISO 8601 in Python) under
    another name: an alias named `timestamp` would replace the column in WHERE too."""
    return ", ".join(
        "toUnixTimestamp64Milli(timestamp) AS timestamp_ms" if c == "timestamp" else c
        for c in columns
    )


def cells(row: dict[str, Any], columns: tuple[str, ...]) -> list[Any]:
    return [iso_ms(row["timestamp_ms"]) if c == "timestamp" else row[c] for c in columns]


def csv_file(filename: str, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> Any:
    return audit_pb2.CsvFile(
        content_type="text/csv",
        filename=filename,
        body=csv_bytes(columns, (cells(r, columns) for r in rows)),
    )


def like_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, literally (`\\`, `%`, `_` escaped)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class AuditServicer(audit_pb2_grpc.AuditServiceServicer):
    def __init__(self, analytics: Analytics | None) -> None:
        self.reader = Reader(analytics)

    async def QueryAudit(
        self, request: audit_pb2.QueryAuditRequest, context: ServicerContext
    ) -> audit_pb2.QueryAuditResponse:
        answer = request.format if request.HasField("format") else "json"
        if answer not in FORMATS:
            raise bad("format", f"must be json or csv; got {answer[:40]!r}")
        limit = limit_of(request, AUDIT_LIMIT)
        where = window_of(request).tenant(tenant_scope(request, context))
        action = optional(request, "action")
        if action is not None:
            where.add("action LIKE {action:String}", action=like_pattern(action))
        rows = await self.reader.query(
            f"SELECT {select_list(AUDIT_COLUMNS)} FROM gateway.agent_audit_log "
            f"WHERE {where.sql} ORDER BY timestamp DESC LIMIT {{limit:UInt32}}",
            {**where.params, "limit": limit},
        )
        if answer == "csv":
            return audit_pb2.QueryAuditResponse(csv=csv_file("audit_log.csv", AUDIT_COLUMNS, rows))
        records = [
            audit_pb2.AuditRecord(**dict(zip(AUDIT_COLUMNS, cells(r, AUDIT_COLUMNS), strict=True)))
            for r in rows
        ]
        return audit_pb2.QueryAuditResponse(log=audit_pb2.AuditLog(data=records, rows=len(records)))

    async def ExportTable(
        self, request: audit_pb2.ExportTableRequest, context: ServicerContext
    ) -> audit_pb2.ExportTableResponse:
        columns = EXPORT_COLUMNS.get(request.table)
        if columns is None:
            raise InvalidRequest("Invalid table name")
        table = request.table  # one of EXPORT_COLUMNS' keys: a fixed name, never user text
        limit = limit_of(request, EXPORT_LIMIT)
        where = window_of(request).tenant(tenant_scope(request, context))
        rows = await self.reader.query(
            f"SELECT {select_list(columns)} FROM gateway.{table} "
            f"WHERE {where.sql} ORDER BY timestamp DESC LIMIT {{limit:UInt32}}",
            {**where.params, "limit": limit},
        )
        return audit_pb2.ExportTableResponse(csv=csv_file(f"{table}.csv", columns, rows))
