"""How long an API key takes to work at the edge after approval, and to stop after revocation.

    .venv/bin/strata up --data-dir /tmp/strata-bench --port-offset 500 &
    .venv/bin/python tests/bench/key_propagation.py --master-key sk-master-... \\
        --admin-key edge-admin-... [--control-plane http://127.0.0.1:4501] \\
        [--edge http://127.0.0.1:9580] [--edge-admin http://127.0.0.1:9680] [--rounds 10]

Against a running stack: creates a tenant and a key-auth route, then for each round files a
key request, approves it and polls the edge every 5 ms until the key is let through (200),
revokes it and polls until it is refused (401). Each time includes the API call itself
(approve or revoke), the control plane's edge configuration write and the xDS push to the
edge. Prints the median and the maximum of each in milliseconds; removes the tenant after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp


async def main(args: argparse.Namespace) -> None:
    api = {"Authorization": f"Bearer {args.master_key}"}
    async with aiohttp.ClientSession() as http:
        tenant = {"name": "Key propagation", "plan": "pro", "id": "bench-keys"}
        await http.post(f"{args.control_plane}/api/tenants", headers=api, json=tenant)
        route = {"uri": "/keyed/*", "plugins": {"key-auth": {}},
                 "upstream": {"nodes": {"127.0.0.1:9": 1}}}  # fmt: skip
        await http.put(
            f"{args.edge_admin}/apisix/admin/routes/bench-keyed",
            headers={"X-API-KEY": args.admin_key},
            json=route,
        )

        async def until(key: str, status: int) -> None:
            while True:
                async with http.get(f"{args.edge}/keyed/x", headers={"apikey": key}) as resp:
                    # 502: the key was let through to the (absent) upstream
                    if resp.status == status or (status == 200 and resp.status == 502):
                        return
                await asyncio.sleep(0.005)

        approved, revoked = [], []
        try:
            for i in range(args.rounds):
                request = {
                    "name": f"bench-key-{i}",
                    "tenant_id": "bench-keys",
                    "routes": ["bench-keyed"],
                    "reason": "bench",
                    "email": "b@x.example",
                }
                async with http.post(
                    f"{args.control_plane}/api/keys/request", headers=api, json=request
                ) as resp:
                    filed = await resp.json()
                started = time.perf_counter()
                async with http.post(
                    f"{args.control_plane}/api/keys/requests/{filed['id']}/approve", headers=api
                ) as resp:
                    key = await resp.json()
                await until(key["full_key"], 200)
                approved.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await http.delete(f"{args.control_plane}/api/keys/{key['key_id']}", headers=api)
                await until(key["full_key"], 401)
                revoked.append((time.perf_counter() - started) * 1000)
        finally:
            await http.delete(f"{args.control_plane}/api/tenants/bench-keys", headers=api)
            await http.delete(
                f"{args.edge_admin}/apisix/admin/routes/bench-keyed",
                headers={"X-API-KEY": args.admin_key},
            )
    figures = {
        "approve_to_accepted_ms": {"median": statistics.median(approved), "max": max(approved)},
        "revoke_to_refused_ms": {"median": statistics.median(revoked), "max": max(revoked)},
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--master-key", required=True)
    parser.add_argument("--admin-key", required=True)
    parser.add_argument("--control-plane", default="http://127.0.0.1:4501")
    parser.add_argument("--edge", default="http://127.0.0.1:9580")
    parser.add_argument("--edge-admin", default="http://127.0.0.1:9680")
    parser.add_argument("--rounds", type=int, default=10)
    asyncio.run(main(parser.parse_args()))
