"""Benchmark: the client's CPU per request, aiohttp's client against `runtime/http1/client.py`.

    .venv/bin/python tests/bench/http_client.py [--requests 3000] [--runs 5] [--concurrency 1 16]

The echo LLM sidecar runs in its own process on loopback; this process sends the same chat
completion POST (a JSON body, a bearer header, keep-alive) with each client under uvloop, and
reads each answer whole. Reported per client and concurrency: the median over runs of this
process's CPU time per request (the client's own cost: building the request, the socket
calls, parsing the answer) and of requests/s, and the ratio to aiohttp in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvloop

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from runtime.http1.client import HttpClient  # noqa: E402

BODY = json.dumps(
    {"model": "echo-1", "messages": [{"role": "user", "content": "Say hello to the bench."}]}
).encode()
HEADERS = {"Authorization": "Bearer bench", "Content-Type": "application/json"}


async def timed(
    send: Callable[[], Awaitable[bytes]], requests: int, concurrency: int
) -> tuple[float, float]:
    """(CPU µs per request, requests/s) for `requests` sends by `concurrency` workers."""
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await send()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / requests * 1e6, requests / wall


async def bench(url: str, args: argparse.Namespace) -> None:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    lean = HttpClient()

    async def with_aiohttp() -> bytes:
        async with session.post(url, data=BODY, headers=HEADERS) as resp:
            return await resp.read()

    async def with_lean() -> bytes:
        resp = await lean.request("POST", url, HEADERS, BODY, idle_secs=10, total_secs=10)
        try:
            return await resp.read()
        finally:
            resp.close()

    same = [json.loads(await send())["choices"] for send in (with_lean, with_aiohttp)]
    assert same[0] == same[1], same
    clients = {"aiohttp": with_aiohttp, "runtime.http1": with_lean}
    for concurrency in args.concurrency:
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
        for _ in range(args.runs):
            for name, send in clients.items():
                await timed(send, 200, concurrency)  # warm: connections open
                results[name].append(await timed(send, args.requests, concurrency))
        base = statistics.median(cpu for cpu, _ in results["aiohttp"])
        for name, runs in results.items():
            cpu = statistics.median(c for c, _ in runs)
            rps = statistics.median(r for _, r in runs)
            print(f"c={concurrency:<3} {name:<14} {cpu:7.1f} µs CPU/request  {rps:8.0f} req/s"
                  f"  ratio to aiohttp {cpu / base:.2f}")  # fmt: skip
    await session.close()
    lean.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    port = 18000 + os.getpid() % 1000
    echo = subprocess.Popen(
        [sys.executable, "-m", "sidecars.echo_llm", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        uvloop.run(bench(url, args))
    finally:
        echo.terminate()
        echo.wait(timeout=10)


if __name__ == "__main__":
    main()
