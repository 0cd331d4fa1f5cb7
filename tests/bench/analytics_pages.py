"""How much of embedded chDB's library is resident in the control plane, and what pages it in.

    .venv/bin/python tests/bench/analytics_pages.py [--wait 0]

In one process, on a fresh `chdb://` directory: migrate (as the control plane starts), release
the start-up pages (`Analytics.release_engine_pages`, `wait` seconds later), then read the
resident MB of `_chdb.abi3.so` while idle, after one SELECT of `gateway.request_log` (the
query behind a tenant's `request_count_24h`), after one INSERT into it, after a second release
and after the same two calls again. It explains the control plane's two idle figures: the
bootstrap's first queries either come before the release or after it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto")]

from runtime.stores.analytics import Analytics  # noqa: E402

COUNT_24H = (
    "SELECT tenant_id, count() AS n FROM gateway.request_log WHERE tenant_id IN "
    "{tenants:Array(String)} AND timestamp >= now64(3) - INTERVAL 24 HOUR GROUP BY tenant_id"
)
ROW = {"tenant_id": "acme", "route_id": "r", "method": "GET", "status_code": 200}


def engine_mb() -> float:
    """Resident MB of chDB's library in this process (every mapping of it, /proc/self/smaps)."""
    kb, mapping = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:
            mapping = fields[5] if len(fields) > 5 else ""
        elif fields[0] == "Rss:" and mapping.endswith("_chdb.abi3.so"):
            kb += int(fields[1])
    return kb / 1024


async def main(wait: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        analytics = Analytics(f"chdb://{tmp}/analytics")
        await analytics.migrate()
        print(f"migrated: {engine_mb():.0f} MB resident")
        await asyncio.sleep(wait)
        released = await analytics.release_engine_pages() // 1024
        print(f"start-up pages released ({released} MB): {engine_mb():.0f} MB")
        for secs in (0.5, 3.0):
            await asyncio.sleep(secs)
            print(f"idle {secs} s more: {engine_mb():.0f} MB")
        await analytics.query(COUNT_24H, {"tenants": ["acme"]})
        print(f"after one SELECT: {engine_mb():.0f} MB")
        await analytics.insert("request_log", [ROW])
        print(f"after one INSERT: {engine_mb():.0f} MB")
        released = await analytics.release_engine_pages() // 1024
        await asyncio.sleep(3.0)
        print(f"released again ({released} MB), 3 s idle: {engine_mb():.0f} MB")
        await analytics.query(COUNT_24H, {"tenants": ["acme"]})
        await analytics.insert("request_log", [ROW])
        print(f"the SELECT and INSERT again: {engine_mb():.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--wait", type=float, default=0.0, help="seconds before the release")
    asyncio.run(main(parser.parse_args().wait))
