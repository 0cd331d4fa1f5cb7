"""The store clients against the real embedded stores: Valkey, chDB (migrated schema with
the spec's columns) and Milvus Lite."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from shared_kit import free_port

from runtime.errors import InvalidRequest
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv, kv_status
from runtime.stores.vectors import close_vectors, open_vectors, vectors_status

BENCH = Path(__file__).resolve().parents[1] / "bench"

SPEC_COLUMNS = {
    "request_log": [
        "timestamp",
        "tenant_id",
        "route_id",
        "method",
        "status_code",
        "latency_ms",
        "trace_id",
        "path",
        "request_size",
        "response_size",
        "client_ip",
        "user_agent",
    ],
    "ai_request_log": [
        "timestamp",
        "tenant_id",
        "model",
        "tokens_prompt",
        "tokens_completion",
        "cache_hit",
        "pii_detected",
        "latency_ms",
        "trace_id",
    ],
    "agent_audit_log": [
        "timestamp",
        "tenant_id",
        "session_id",
        "agent_id",
        "tool_name",
        "action",
        "status",
        "trace_id",
    ],
    "sts_token_issuance": [
        "timestamp",
        "tenant_id",
        "jti",
        "subject",
        "audience",
        "human",
        "chain_depth",
        "act_chain",
        "purpose",
        "decision",
        "deny_reason",
        "ttl_secs",
    ],
}


async def test_kv_status_reports_connected_and_unreachable(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    await kv.set("strata:test", "1", ex=5)
    assert await kv.get("strata:test") == "1"
    assert await kv_status(kv) == "connected"
    await kv.aclose()
    down = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    assert await kv_status(down) == "unreachable"
    await down.aclose()


@pytest.mark.parametrize("table", sorted(SPEC_COLUMNS))
async def test_migrations_create_the_spec_tables_and_columns(
    analytics: Analytics, table: str
) -> None:
    rows = await analytics.query(
        "SELECT name, type, default_kind FROM system.columns "
        "WHERE database = 'gateway' AND table = {t:String} ORDER BY position",
        {"t": table},
    )
    names = [r["name"] for r in rows]
    assert names[: len(SPEC_COLUMNS[table])] == SPEC_COLUMNS[table]
    timestamp = rows[0]
    assert (timestamp["type"], timestamp["default_kind"]) == ("DateTime64(3)", "DEFAULT")


async def test_sts_issuance_column_types(analytics: Analytics) -> None:
    rows = await analytics.query(
        "SELECT name, type FROM system.columns "
        "WHERE database = 'gateway' AND table = 'sts_token_issuance'"
    )
    types = {r["name"]: r["type"] for r in rows}
    assert types["chain_depth"] == "UInt8" and types["ttl_secs"] == "UInt32"


async def test_migrations_are_recorded_and_run_once(analytics: Analytics) -> None:
    assert await analytics.migrate() == []
    rows = await analytics.query("SELECT name FROM gateway.schema_migrations ORDER BY version")
    assert [r["name"] for r in rows] == [
        "request_log",
        "ai_request_log",
        "agent_audit_log",
        "sts_token_issuance",
        "dedup_window",
    ]


# Migrates a new chDB directory in a process of its own (chDB hosts one engine per process),
# as a control plane on a fresh data directory does, and reports what that imported.
FRESH_MIGRATION = """
import asyncio, json, sys
from runtime.stores.analytics import Analytics

async def main():
    store = Analytics("chdb://" + sys.argv[1])
    applied = await store.migrate()
    rows = await store.query(
        "SELECT name, applied_at > now() - INTERVAL 1 HOUR AS stamped "
        "FROM gateway.schema_migrations ORDER BY version"
    )
    parts = await store.query(
        "SELECT count() AS n FROM system.parts "
        "WHERE database = 'gateway' AND table = 'schema_migrations' AND active"
    )
    await store.close()
    loaded = sorted({"pandas", "numpy", "pyarrow"} & set(sys.modules))
    print(json.dumps({"applied": applied, "rows": rows, "parts": parts, "loaded": loaded}))

asyncio.run(main())
"""


def test_migrating_a_new_directory_records_its_migrations_without_dataframe_libraries(
    tmp_path: Path,
) -> None:
    """Recording an applied migration must not load pandas and numpy (clickhouse-connect's
    `Client.insert` does): they stayed resident, about 40 MB of a fresh control plane. The
    records are merged into one part at once (a background merge would page chDB's merge
    code back in after the control plane released its start-up pages)."""
    found = _in_a_process_of_its_own(FRESH_MIGRATION, tmp_path / "chdb")
    names = ["request_log", "ai_request_log", "agent_audit_log", "sts_token_issuance"]
    assert found["applied"] == [*names, "dedup_window"]
    assert found["rows"] == [{"name": n, "stamped": 1} for n in found["applied"]]
    assert found["parts"] == [{"n": 1}]
    assert found["loaded"] == []


# An embedded chDB whose calls stop: the code pages they paged in are given back once it has
# had no call for `idle_release_secs` (here 1 s), and not while calls keep coming. Prints the
# MB of chDB's library resident at each step (a process of its own: one engine per process).
IDLE_RELEASE = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[2])
from analytics_pages import engine_mb  # tests/bench/analytics_pages.py
from runtime.stores.analytics import Analytics

COUNT = "SELECT tenant_id, count() AS n FROM gateway.request_log GROUP BY tenant_id"

async def main():
    store = Analytics("chdb://" + sys.argv[1], idle_release_secs=1.0)
    await store.migrate()
    await store.release_engine_pages()
    await asyncio.sleep(0.5)
    found = {"started": engine_mb()}
    await store.query(COUNT)
    await store.insert("request_log", [{"tenant_id": "acme"}])
    found["used"] = engine_mb()
    for _ in range(8):  # a call every 0.25 s for 2 s: never idle for 1 s
        await asyncio.sleep(0.25)
        await store.query(COUNT)
    found["busy"] = engine_mb()
    await asyncio.sleep(2.5)
    found["idle"] = engine_mb()
    for _ in range(3):  # the control plane's health probe, every 30 s
        await store.ping()
    found["pinged"] = engine_mb()
    found["rows"] = await store.query(COUNT)
    await store.close()
    print(json.dumps(found))

asyncio.run(main())
"""


def test_embedded_engine_gives_its_pages_back_once_idle(tmp_path: Path) -> None:
    """A SELECT pages ~40-70 MB of ClickHouse's query code into the process that owns chDB,
    which an idle control plane kept for good: released once no call came for a while, kept
    while calls keep coming, not paged back in by the health probe's ping, and the engine
    answers as before afterwards."""
    mb = _in_a_process_of_its_own(IDLE_RELEASE, tmp_path / "chdb", BENCH)
    assert mb["used"] > mb["started"] + 20, mb  # the calls paged the engine's code in
    assert mb["busy"] > mb["used"] - 5, mb  # calls every 0.25 s: nothing given back
    assert mb["idle"] < mb["used"] - 20, mb  # 2.5 s without a call: given back
    assert mb["pinged"] < mb["idle"] + 3, mb  # a health probe pages nothing back in
    assert mb["rows"] == [{"tenant_id": "acme", "n": 1}]


def _in_a_process_of_its_own(script: str, *args: Path) -> Any:
    """What `script` printed last, as JSON (chDB hosts one engine per process)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_remote_analytics_store_never_releases_pages() -> None:
    """Only embedded chDB's code lives in this process; a ClickHouse server's does not."""
    assert Analytics("http://127.0.0.1:8123").idle.idle_secs == 0
    assert Analytics("chdb:///tmp/x", idle_release_secs=3).idle.idle_secs == 3


async def test_insert_uses_default_timestamp_and_refuses_unknown_tables(
    analytics: Analytics,
) -> None:
    written = await analytics.insert(
        "agent_audit_log",
        [
            {
                "tenant_id": "acme",
                "session_id": "s1",
                "agent_id": "agent:planner",
                "tool_name": "search",
                "action": "tool_call",
                "status": "ok",
                "trace_id": "ins-1",
            }
        ],
    )
    assert written == 1
    rows = await analytics.query(
        "SELECT tool_name, timestamp > now64(3) - INTERVAL 1 MINUTE AS fresh "
        "FROM gateway.agent_audit_log WHERE trace_id = 'ins-1'"
    )
    assert rows == [{"tool_name": "search", "fresh": 1}]
    with pytest.raises(InvalidRequest):
        await analytics.insert("system_users", [{"a": 1}])


async def test_milvus_lite_round_trip(tmp_path) -> None:
    client = await open_vectors(str(tmp_path / "vectors.db"))
    try:
        assert await vectors_status(client) == "connected"
        client.create_collection("probe", dimension=4)
        client.insert(
            "probe",
            [{"id": 1, "vector": [0.1, 0.2, 0.3, 0.4]}, {"id": 2, "vector": [0.9, 0.1, 0.0, 0.0]}],
        )
        hits = client.search("probe", [[0.1, 0.2, 0.3, 0.4]], limit=1)
        assert hits[0][0]["id"] == 1
    finally:
        await close_vectors(client, str(tmp_path / "vectors.db"))


def _refuses(url: str) -> bool:
    host, port = urlsplit(url).hostname, urlsplit(url).port
    try:
        socket.create_connection((host, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_the_last_client_of_a_milvus_lite_database_stops_its_server(tmp_path: Path) -> None:
    """pymilvus starts a Milvus Lite server per database file and never stops it (its threads
    and the engine's memory stay for the process's life): `close_vectors` stops it when the
    last client of that file closes, and a later open starts one again over the same data."""
    from milvus_lite.server_manager import server_manager_instance

    path = str(tmp_path / "vectors.db")
    one, two = await open_vectors(path), await open_vectors(path)
    server = server_manager_instance.start_and_get_uri(path)  # the running one's address
    assert server is not None and not _refuses(server)
    one.create_collection("probe", dimension=4)
    one.insert("probe", [{"id": 1, "vector": [0.1, 0.2, 0.3, 0.4]}])
    await close_vectors(one, path)
    assert not _refuses(server)  # the other client's server stays
    assert two.query("probe", filter="id == 1", output_fields=["id"]) == [{"id": 1}]
    await close_vectors(two, path)
    for _ in range(50):  # the gRPC server's stop is asynchronous
        if _refuses(server):
            break
        await asyncio.sleep(0.1)
    assert _refuses(server)
    three = await open_vectors(path)
    try:
        three.load_collection("probe")  # a new server: the data as written, not yet loaded
        assert three.query("probe", filter="id == 1", output_fields=["id"]) == [{"id": 1}]
    finally:
        await close_vectors(three, path)


async def test_direct_sink_merges_concurrent_batches_and_isolates_a_bad_one(
    analytics: Analytics,
) -> None:
    """Group commit: batches written while an insert runs go together into the next one, every
    row lands, and a batch ClickHouse refuses fails its own writer only."""
    inserts: list[int] = []

    class Counting:  # the real store, counting its INSERTs
        async def insert(self, table: str, rows: Any) -> int:
            inserts.append(len(rows))
            return await analytics.insert(table, rows)

    sink = DirectSink(Counting())  # type: ignore[arg-type]
    tenant = f"gc-{uuid.uuid4().hex[:8]}"
    batches = [
        [{"tenant_id": tenant, "route_id": f"r{i}", "status_code": 200}] * 5 for i in range(20)
    ]
    assert await asyncio.gather(*(sink.write("request_log", b) for b in batches)) == [5] * 20
    assert sum(inserts) == 100 and len(inserts) < 20, inserts  # merged, nothing lost
    count = "SELECT count() AS n FROM gateway.request_log WHERE tenant_id = {t:String}"
    assert (await analytics.query(count, {"t": tenant}))[0]["n"] == 100

    good = [{"tenant_id": tenant, "status_code": 201}]
    bad = [{"tenant_id": tenant, "status_code": "not a number"}]
    outcome = await asyncio.gather(
        sink.write("request_log", good),
        sink.write("request_log", good),
        sink.write("request_log", bad),
        sink.write("request_log", good),
        return_exceptions=True,
    )
    assert outcome[0] == outcome[1] == outcome[3] == 1
    assert isinstance(outcome[2], Exception)
    assert (await analytics.query(count, {"t": tenant}))[0]["n"] == 103
