"""Benchmark: the cost of the JSON front door and of the gRPC path for one real operation.

    python tests/bench/frontdoor_overhead.py [--requests 2000] [--runs 5]

Same process, same loop, keep-alive connections, sequential requests. Three ways to get the
same answer (`[]`, the platform health with no probes), each timed as median-of-runs of the
mean latency, and reported as a ratio to the baseline:
  baseline   a bare aiohttp handler returning the JSON
  front door GET /api/health/services: auth middleware, request binding, in-process servicer
             call, proto → JSON rendering, access log and metrics
  gRPC       PlatformHealthService/ListServiceHealth over a real channel, with the interceptor
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time

import aiohttp
from aiohttp import web

from controlplane.http_rules import HTTP_RULES
from controlplane.platform_health import PlatformHealthServicer
from runtime.auth import Authenticator, JwksCache
from runtime.serve import start
from runtime.service import ServiceDefinition, bind
from runtime.telemetry import Metrics
from strata.controlplane.v1 import platform_health_pb2 as pb
from strata.controlplane.v1 import platform_health_pb2_grpc

KEY = "bench-master-key"


def definition() -> ServiceDefinition:
    servicer = bind(platform_health_pb2_grpc, PlatformHealthServicer([], KEY, 1.0))

    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    return ServiceDefinition(
        name="bench",
        bindings=[servicer],
        http_rules=[r for r in HTTP_RULES if r.service == servicer.name],
        info={},
        health=health,
        authenticator=Authenticator(JwksCache("http://127.0.0.1:9/none"), KEY),
        metrics=Metrics("bench"),
    )


async def timed(n: int, call) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - started) / n * 1e6  # µs per request


async def main(n: int, runs: int) -> None:
    logging.disable(logging.INFO)  # the access log would dominate what we measure
    running = await start(definition(), "127.0.0.1", 0, 0)
    baseline_app = web.Application()

    async def bare(_: web.Request) -> web.Response:
        return web.json_response([])

    baseline_app.router.add_get("/", bare)
    runner = web.AppRunner(baseline_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base_port = runner.addresses[0][1]
    headers = {"Authorization": f"Bearer {KEY}"}
    import grpc

    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}")
    stub = platform_health_pb2_grpc.PlatformHealthServiceStub(channel)
    results: dict[str, list[float]] = {"baseline": [], "front door": [], "gRPC": []}
    async with aiohttp.ClientSession() as http:

        async def get_base() -> None:
            async with http.get(f"http://127.0.0.1:{base_port}/") as r:
                assert await r.json() == []

        async def get_front() -> None:
            url = f"http://127.0.0.1:{running.http_port}/api/health/services"
            async with http.get(url, headers=headers) as r:
                assert await r.json() == []

        async def call_grpc() -> None:
            await stub.ListServiceHealth(
                pb.ListServiceHealthRequest(),
                timeout=5,
                metadata=(("authorization", f"Bearer {KEY}"),),
            )

        for warm in (get_base, get_front, call_grpc):
            await timed(200, warm)
        for _ in range(runs):
            results["baseline"].append(await timed(n, get_base))
            results["front door"].append(await timed(n, get_front))
            results["gRPC"].append(await timed(n, call_grpc))
    base = statistics.median(results["baseline"])
    print(f"{n} sequential requests x {runs} runs; median of per-run mean latency")
    for name, values in results.items():
        median = statistics.median(values)
        print(f"  {name:<11}{median:8.0f} µs   x{median / base:.2f} baseline")
    await channel.close()
    await runner.cleanup()
    await running.stop(0.1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.runs))
