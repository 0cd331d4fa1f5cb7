"""Benchmark: the request path's CPU per log row, before and after the analytics outbox
(`runtime/stores/outbox.py`).

    .venv/bin/python tests/bench/outbox.py [--rounds 7] [--requests 8000]

Per request, as a gateway serves one (uvloop, the front door's hold and wait included):
- `memory`: `RowWriter.log_row` without an outbox (the path before it, and the fallback): the
  row queued, written 0.2 s later in batches to a sink that takes them (the shipping to the
  control plane, one gRPC call per batch, is not counted: the figure is a floor);
- `outbox`: `hold_rows()`, `log_row` (XADD through the batcher), `rows_held` (the answer
  waits for the store's reply), on one Valkey and on a 3-master Valkey cluster.
At concurrency 1 (one request per loop turn) and 16 (16 requests per turn, their XADDs in one
write). Process time (µs per request), not wall time: the store's own time and other
processes' load stay out of it. Medians over the rounds; modes alternate by round. The
streams are trimmed between rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kv_cluster_kit import valkey_cluster
from shared_kit import valkey_server

from runtime.background import RowWriter
from runtime.stores.kv import connect_kv, ready_kv
from runtime.stores.kv_pipeline import close_pipelined
from runtime.stores.kv_reachability import close_reachability
from runtime.stores.outbox import Outbox, hold_rows, rows_held, stream_key

TABLE = "ai_request_log"


class Taking:
    """A sink that takes every batch (the memory path's writes cost what they cost)."""

    async def write(self, table: str, rows: Sequence[Any], token: str | None = None) -> int:
        return len(rows)


def row(n: int) -> dict[str, Any]:
    return {
        "timestamp": time.time(), "tenant_id": "bench", "model": "echo-1", "provider": "echo",
        "tokens_prompt": 12, "tokens_completion": 7, "cache_hit": False, "pii_detected": False,
        "latency_ms": 1.234, "trace_id": f"{n:032x}",
    }  # fmt: skip


async def request(writer: RowWriter, n: int) -> None:
    with hold_rows() as held:
        writer.log_row(row(n))
        await rows_held(held)


async def measure(writer: RowWriter, requests: int, concurrency: int) -> float:
    """µs of process time per request."""
    started = time.process_time()
    for base in range(0, requests, concurrency):
        if concurrency == 1:
            await request(writer, base)
        else:
            await asyncio.gather(*(request(writer, base + i) for i in range(concurrency)))
    await writer.flush()
    return (time.process_time() - started) / requests * 1e6


async def main(rounds: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("one", "cluster"):
            (Path(tmp) / sub).mkdir()
        with (
            valkey_server(Path(tmp) / "one") as port,
            valkey_cluster(Path(tmp) / "cluster", masters=3) as cluster,
        ):
            stores = {
                "one Valkey": f"redis://127.0.0.1:{port}/0",
                "3-master cluster": f"redis+cluster://127.0.0.1:{cluster.seed_port}",
            }
            clients = {name: connect_kv(url) for name, url in stores.items()}
            for kv in clients.values():
                await ready_kv(kv)
            modes: dict[str, RowWriter] = {"memory": RowWriter(Taking(), TABLE)}
            for name, kv in clients.items():
                modes[f"outbox, {name}"] = RowWriter(Taking(), TABLE, Outbox(kv))
            results: dict[tuple[str, int], list[float]] = {}
            for r in range(rounds):
                order = list(modes.items())
                order = order[r % len(order) :] + order[: r % len(order)]
                for concurrency in (1, 16):
                    for mode, writer in order:
                        us = await measure(writer, requests, concurrency)
                        results.setdefault((mode, concurrency), []).append(us)
                for kv in clients.values():
                    await kv.xtrim(stream_key(TABLE), maxlen=0)
            for (mode, concurrency), values in sorted(results.items(), key=lambda i: i[0][1]):
                print(f"{mode:28s} c={concurrency:<3d} {statistics.median(values):7.1f} µs/request"
                      f"  (runs: {', '.join(f'{v:.1f}' for v in values)})")  # fmt: skip
            for kv in clients.values():
                close_pipelined(kv)
                close_reachability(kv)
                await kv.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=8000)
    args = parser.parse_args()
    uvloop.run(main(args.rounds, args.requests))
