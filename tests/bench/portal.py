"""Portal page-time benchmark: the server time of each page's API calls through the portal, with
1,000 tenants, 10,000 audit rows and 100 pending approvals.

    flock /tmp/strata-stack.lock .venv/bin/python tests/bench/portal.py [--runs 5] [--samples 40]

Starts `strata up` on ports +900 with a fresh data directory, then fills it through the
platform's own write paths: 1,000 tenants (`POST /api/tenants`, master key: each provisioned
across the layers), 10,000 rows of the agent audit log (`LogIngestService/WriteLogBatch`, the
analytics write path of the services, spread over the last 7 days and over tenants, agents,
tools and statuses) and 100 pending tool-call approvals of tenant `acme` (the agent gateway's
own approval queue, `gateways/agent/approvals/store.py`, on the stack's Valkey).

Then it signs in through the portal as a browser does (`/portal/login`, the dev IdP's form,
`/portal/callback`): `admin` (platform administrator) for the operator's pages, `alice`
(tenant `acme`) for the developer's and the approver's. Each page is the set of API calls its
view makes (below, through `/portal/api/...`, the session cookie, the forwarding, the
services); a page load sends them at once, as the page does, and its time is until the last
answer. Each run loads each page `--samples` times (after a warm-up) and takes the 95th
percentile of the page time and of each call; the figures printed are the medians over
`--runs` runs. The target: p95 ≤ 100 ms per page. Everything on 127.0.0.1, on the machine's 2
shared cores (other work on them shows in the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import grpc
from bench_kit import start_stack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controlplane"))
from portal_kit import Browser

from gateways.agent.approvals.store import ApprovalQueue
from runtime.stores.kv import connect_kv
from strata.controlplane.v1 import log_ingest_pb2, log_ingest_pb2_grpc

OFFSET = 900
TENANTS = 1000
AUDIT_ROWS = 10_000
PENDING = 100
TARGET_MS = 100.0

# The portal's pages: who looks at them, and the calls each makes when it opens.
PAGES: dict[str, tuple[str, list[str]]] = {
    "shell (every page)": ("admin", ["/portal/api/session"]),
    "operator: tenants": ("admin", ["/portal/api/cp/api/tenants"]),
    "operator: providers": ("admin", ["/portal/api/cp/api/providers"]),
    "operator: key requests": ("admin", ["/portal/api/cp/api/keys/requests"]),
    "operator: edge routes": ("admin", ["/portal/api/edge/apisix/admin/routes",
                                        "/portal/api/edge/apisix/admin/plugins/list"]),
    "operator: health": ("admin", ["/portal/api/cp/api/health/services",
                                   "/portal/api/cp/api/health/alerts"]),
    "operator: MCP servers": ("admin", ["/portal/api/agent/v1/mcp/servers"]),
    "operator: settings": ("admin", ["/portal/api/cp/api/settings"]),
    "audit (100 newest, all tenants)": ("admin", ["/portal/api/cp/api/audit?limit=100"]),
    "audit filtered (tenant, status, 24 h)": (
        "admin",
        ["/portal/api/cp/api/audit?tenant_id=acme&status=denied&limit=100"
         "&from={day_ago}"],
    ),
    "audit CSV export": ("admin", ["/portal/api/cp/api/audit?format=csv&limit=1000"]),
    "developer: keys": ("alice", ["/portal/api/cp/api/keys",
                                  "/portal/api/cp/api/keys/requests"]),
    "developer: usage 24 h": ("alice", ["/portal/api/cp/api/analytics/traffic?range=24h",
                                        "/portal/api/cp/api/analytics/llm?range=24h",
                                        "/portal/api/cp/api/tenants/acme",
                                        "/portal/api/ai/v1/budget/acme"]),
    "developer: notifications": ("alice", ["/portal/api/cp/api/notifications",
                                           "/portal/api/cp/api/notifications/preferences"]),
    "approver: pending approvals (100)": ("alice", ["/portal/api/agent/v1/hitl/pending"]),
    "operator: agents and topology": ("admin", ["/portal/api/agent/v1/a2a/agents",
                                                "/portal/api/cp/api/agent-topology?tenant_id=acme"]),
    "everyone: agent analytics 7 d": ("admin",
                                      ["/portal/api/cp/api/analytics/agents?range=7d"]),
}  # fmt: skip


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


async def seed_tenants(http: aiohttp.ClientSession, cp: str, master: str) -> None:
    headers = {"Authorization": f"Bearer {master}"}
    semaphore = asyncio.Semaphore(8)

    async def create(i: int) -> None:
        body = {"id": f"bench-{i:04d}", "name": f"Bench tenant {i}", "plan": "free"}
        async with semaphore, http.post(f"{cp}/api/tenants", json=body, headers=headers) as r:
            if r.status not in (201, 409):
                raise RuntimeError(f"tenant {i}: {r.status} {await r.text()}")

    started = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(TENANTS - 3)))  # + platform, acme, globex
    print(f"seeded {TENANTS - 3} tenants in {time.monotonic() - started:.0f}s", flush=True)


async def seed_audit(grpc_target: str, master: str) -> None:
    rng = random.Random(21)
    now = datetime.now(UTC)
    tenants = ["acme", "globex", *(f"bench-{i:04d}" for i in range(50))]
    rows = []
    for i in range(AUDIT_ROWS):
        at = now - timedelta(seconds=rng.uniform(0, 7 * 86400))
        rows.append(json.dumps({
            "timestamp": at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            "tenant_id": rng.choice(tenants),
            "session_id": f"s-{i % 500}",
            "agent_id": f"agent:{rng.choice(['planner', 'researcher', 'writer'])}",
            "tool_name": rng.choice(["search", "pay", "send_mail", "read_file"]),
            "action": rng.choice(["tool_call", "tool_call", "hitl_approved", "a2a_send"]),
            "status": rng.choice(["success", "success", "success", "denied", "error"]),
            "trace_id": f"{i:032x}",
        }))  # fmt: skip
    metadata = (("authorization", f"Bearer {master}"),)
    async with grpc.aio.insecure_channel(grpc_target) as channel:
        stub = log_ingest_pb2_grpc.LogIngestServiceStub(channel)
        for start in range(0, AUDIT_ROWS, 1000):
            request = log_ingest_pb2.WriteLogBatchRequest(
                table="agent_audit_log", rows=rows[start : start + 1000]
            )
            await stub.WriteLogBatch(request, metadata=metadata, timeout=60)
    print(f"seeded {AUDIT_ROWS} audit rows", flush=True)


async def seed_approvals(redis_url: str) -> None:
    kv = connect_kv(redis_url)
    try:
        queue = ApprovalQueue(kv, 24 * 3600)
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        for i in range(PENDING):
            await queue.open("acme", f"s-{i}", "pay", {"amount": i, "to": "x"}, created)
    finally:
        await kv.aclose()
    print(f"seeded {PENDING} pending approvals", flush=True)


class CallFailed(Exception):
    pass


async def load(browser: Browser, paths: list[str]) -> tuple[float, list[float]]:
    """One page load: its calls at once; (page ms, each call's ms)."""

    async def one(path: str) -> float:
        started = time.perf_counter()
        async with browser.http.get(browser.base + path) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise CallFailed(f"{path}: {resp.status} {body[:200]!r}")
        return (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    calls = await asyncio.gather(*(one(p) for p in paths))
    return (time.perf_counter() - started) * 1000, list(calls)


async def bench(cp: str, samples: int, runs: int) -> dict[str, dict[str, float]]:
    day_ago = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    async with Browser(cp) as admin, Browser(cp) as alice:
        await admin.login("admin", "admin")
        await alice.login("alice", "alice")
        browsers = {"admin": admin, "alice": alice}
        pages = {name: (browsers[who], [p.format(day_ago=day_ago) for p in paths])
                 for name, (who, paths) in PAGES.items()}  # fmt: skip
        for name, (browser, paths) in list(pages.items()):  # warm-up: caches, pools, queries
            try:
                for _ in range(3):
                    await load(browser, paths)
            except CallFailed as exc:
                print(f"page {name!r} left out: {exc}", flush=True)
                del pages[name]
        per_run: dict[str, list[float]] = {name: [] for name in pages}
        per_call: dict[str, list[float]] = {}
        for _ in range(runs):
            for name, (browser, paths) in pages.items():
                page_times, call_times = [], [[] for _ in paths]
                for _ in range(samples):
                    page, calls = await load(browser, paths)
                    page_times.append(page)
                    for i, ms in enumerate(calls):
                        call_times[i].append(ms)
                per_run[name].append(p95(page_times))
                for path, times in zip(paths, call_times, strict=True):
                    per_call.setdefault(path, []).append(p95(times))
    return {
        "pages": {name: statistics.median(v) for name, v in per_run.items()},
        "calls": {path: statistics.median(v) for path, v in per_call.items()},
    }


async def run(args: argparse.Namespace, cp: str, grpc_target: str, redis_url: str,
              master: str) -> int:  # fmt: skip
    async with aiohttp.ClientSession() as http:
        await seed_tenants(http, cp, master)
    await seed_audit(grpc_target, master)
    await seed_approvals(redis_url)
    load_before = os.getloadavg()[0]
    result = await bench(cp, args.samples, args.runs)
    print(f"\np95 of each page's server time, medians of {args.runs} runs of {args.samples} loads")
    # Other work on the 2 shared cores shows in every figure: say how busy they were.
    print(f"load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    worst = 0.0
    for name, ms in result["pages"].items():
        worst = max(worst, ms)
        print(f"  {name:<42} {ms:>7.1f} ms  {'ok' if ms <= TARGET_MS else 'OVER'}")
    print("\np95 of each call")
    for path, ms in result["calls"].items():
        print(f"  {path:<80} {ms:>7.1f} ms")
    print(f"\nworst page p95 {worst:.1f} ms (target {TARGET_MS:.0f} ms)")
    return 0 if worst <= TARGET_MS else 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=40, help="page loads per page per run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-bench-portal-") as data:
        stack, master, _ = start_stack(Path(data), OFFSET)
        try:
            code = asyncio.run(
                run(
                    args,
                    f"http://127.0.0.1:{4001 + OFFSET}",
                    f"127.0.0.1:{14001 + OFFSET}",
                    f"redis://127.0.0.1:{6379 + OFFSET}/0",
                    master,
                )
            )
        finally:
            stack.terminate()
            stack.wait(timeout=60)
    sys.exit(code)


if __name__ == "__main__":
    main()
