"""Batches of log rows into the analytics outbox, for a process that does not own ClickHouse.

A batch (the edge's analytics-logger writes 100 rows at a time; a gateway's rows that waited
in memory) becomes one entry of its table's outbox stream (`outbox.py`), its rows' JSON
lines joined by newlines in the field `rows`, and the drainer of the process that owns
ClickHouse moves it with the other entries it reads in one INSERT.

Why not one `LogIngestService.WriteLogBatch` call per batch, as before: the owner then ran one
INSERT per batch, and embedded ClickHouse (chDB) pays about 2 ms of CPU per query and 10 ms
per small insert whatever its size, plus the merges of its many small parts. At the edge's
3,500 requests/s that was 240 µs of the control plane's CPU per proxied request, more than
the edge's own; the sender paid about 1.3 ms of CPU per call. An XADD through the store
client's batcher costs the sender a few µs per row, and the drainer inserts several batches
at once.

A named batch (`token`: the same on each retry of it) is appended once: a script sets the
batch's marker (`<stream>:batch:<token>`, kept `BATCH_MARKER_SECS`, beside the stream under
its hash tag) with NX and appends only if it was not there, so a retry after a timeout whose
append had gone through appends nothing. While the store is out (or a batch's append finds it
out), batches go to `fallback`, the log-ingest RPC as before; a batch whose append was applied
just before its connection was lost is then written twice, which needs a failure at that exact
moment (the outbox's own caveat).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime import json_codec
from runtime.errors import InvalidRequest
from runtime.stores.analytics import AnalyticsSink, Row
from runtime.stores.kv_pipeline import PipelinedScript, pipelined
from runtime.stores.kv_reachability import is_unavailability, reachability
from runtime.stores.outbox import MAXLEN, ROWS, stream_key
from runtime.stores.schema import WRITABLE_TABLES

BATCH_MARKER_SECS = 600  # far beyond a batch's retries (4 tries of 5 s and 1 s apart)

# KEYS: the stream, the batch's marker. ARGV: MAXLEN, the rows, the marker's lifetime.
APPEND_ONCE = PipelinedScript(f"""
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then return false end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', '{ROWS}', ARGV[2])
""")


class OutboxSink:
    """`AnalyticsSink` that appends each batch to the outbox (see the module's docstring)."""

    def __init__(self, kv: Any, fallback: AnalyticsSink) -> None:
        self.kv = kv
        self.fallback = fallback
        self.reachability = reachability(kv)

    async def write(self, table: str, rows: Sequence[Row], token: str | None = None) -> int:
        if not rows:
            return 0
        if table not in WRITABLE_TABLES:  # as the log-ingest RPC refuses it
            raise InvalidRequest(f"unknown analytics table {table!r}")
        key = stream_key(table)
        if self.reachability.down_for(key):
            return await self.fallback.write(table, rows, token)
        lines = "\n".join(json_codec.dumps_text(row) for row in rows)
        try:
            if token:
                marker = f"{key}:batch:{token}"
                await APPEND_ONCE(self.kv, [key, marker], [MAXLEN, lines, BATCH_MARKER_SECS])
            else:
                calls = pipelined(self.kv)
                await calls.command("XADD", key, "MAXLEN", "~", MAXLEN, "*", ROWS, lines)
        except Exception as exc:
            if not is_unavailability(exc):
                raise
            self.reachability.failed(exc)
            return await self.fallback.write(table, rows, token)
        return len(rows)

    async def close(self) -> None:
        close = getattr(self.fallback, "close", None)
        if close is not None:
            await close()
