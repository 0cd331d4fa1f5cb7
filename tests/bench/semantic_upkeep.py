"""The semantic tier's flush cadence on Milvus Lite: what a search and a store cost with rows
sealed every N writes (`SemanticTier(upkeep_every_rows=N)`; the gateway uses 32 on a Lite
file, 256 on a Milvus server), and what sealing a Lite file's rows once writes pause
(`seal_within_secs`) saves the searches that follow.

    .venv/bin/python tests/bench/semantic_upkeep.py [--every 256 32] [--rows 1000] [--seconds 20]
    .venv/bin/python tests/bench/semantic_upkeep.py --paused [--rounds 4]

Per cadence, alternating, in a fresh Milvus Lite file each (random unit vectors, 10 tenants):
- `cost`: store `--rows` rows one after the other (CPU per store), then 100 top-4 searches of
  one tenant with the tier's filter (CPU per search, this process: Lite runs in it);
- `under stores`: from 500 rows, a store every 10 ms beside a loop of searches for
  `--seconds`: how many searches were done, their p50, p90, p99 and worst latency.

`--paused`, instead: two collections in one Lite file, each given 1,016 rows with the Lite
cadence (32; the last 24 not sealed by it), one tier with `seal_within_secs` (the gateway's
on Lite) and one without; the writes pause for 2 s, then rounds of 200 searches alternate
between them: search p50 (wall) and CPU per search.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto")]

from gateways.ai.cache.embedding import DIMENSIONS  # noqa: E402
from gateways.ai.cache.semantic import (  # noqa: E402
    LITE_SEAL_WITHIN_SECS,
    LITE_UPKEEP_EVERY_ROWS,
    SemanticTier,
)
from runtime.stores.vectors import close_vectors, open_vectors  # noqa: E402


def vector(rnd: random.Random) -> list[float]:  # a random unit vector
    v = [rnd.gauss(0, 1) for _ in range(DIMENSIONS)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


async def tier(directory: str, every: int, seal: float | None = None) -> SemanticTier:
    return SemanticTier(await open_vectors(str(Path(directory) / "m.db")), 3600,
                        upkeep_every_rows=every, seal_within_secs=seal)  # fmt: skip


async def store(t: SemanticTier, rnd: random.Random, i: int) -> None:
    await t.add(f"tenant-{i % 10}", "m", "s", f"id{i}", vector(rnd), f"k{i}", f"prompt {i}")


async def cost(every: int, rows: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        t, rnd = await tier(tmp, every), random.Random(1)
        started = time.process_time()
        for i in range(rows):
            await store(t, rnd, i)
        per_store = (time.process_time() - started) / rows
        probe = vector(rnd)
        started = time.process_time()
        for _ in range(100):
            await t.nearest("tenant-0", "m", "s", probe, limit=4)
        per_search = (time.process_time() - started) / 100
        await t.close()
        await close_vectors(t.client, str(Path(tmp) / "m.db"))  # and its Lite server
    return f"every {every:>4}: store {per_store * 1e3:5.2f} ms CPU, search {per_search * 1e3:5.2f}"


async def under_stores(every: int, seconds: float) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        t, rnd = await tier(tmp, every), random.Random(1)
        for i in range(500):
            await store(t, rnd, i)
        done = False
        latencies: list[float] = []

        async def writer() -> None:
            i = 500
            while not done:
                await store(t, rnd, i)
                i += 1
                await asyncio.sleep(0.01)

        async def reader() -> None:
            probe = vector(rnd)
            while not done:
                started = time.perf_counter()
                await t.nearest("tenant-0", "m", "s", probe, limit=4)
                latencies.append(time.perf_counter() - started)

        tasks = [asyncio.create_task(writer()), asyncio.create_task(reader())]
        await asyncio.sleep(seconds)
        done = True
        await asyncio.gather(*tasks)
        await t.close()
        await close_vectors(t.client, str(Path(tmp) / "m.db"))  # and its Lite server
    latencies.sort()

    def at(q: float) -> float:
        return latencies[int(q * (len(latencies) - 1))] * 1e3

    return (
        f"every {every:>4}: {len(latencies)} searches under stores, p50 {at(0.5):.1f} "
        f"p90 {at(0.9):.1f} p99 {at(0.99):.1f} worst {latencies[-1] * 1e3:.1f} ms"
    )


async def paused(rounds: int) -> None:
    """Two collections in one Lite file, filled alike, one tier sealing once writes pause:
    their searches alternate, so the machine's drift falls on both."""
    every = LITE_UPKEEP_EVERY_ROWS
    with tempfile.TemporaryDirectory() as tmp:
        client = await open_vectors(str(Path(tmp) / "m.db"))
        tiers = {
            seal: SemanticTier(
                client, 3600, collection=f"c{i}", upkeep_every_rows=every, seal_within_secs=seal
            )
            for i, seal in enumerate((None, LITE_SEAL_WITHIN_SECS))
        }
        for t in tiers.values():
            rnd = random.Random(1)
            for i in range(31 * every + 24):
                await store(t, rnd, i)
        await asyncio.sleep(2 * LITE_SEAL_WITHIN_SECS)  # the writes pause
        probe = vector(random.Random(2))
        for _ in range(rounds):
            for seal, t in tiers.items():
                walls = []
                started = time.process_time()
                for _ in range(200):
                    begun = time.perf_counter()
                    await t.nearest("tenant-0", "m", "s", probe, limit=4)
                    walls.append(time.perf_counter() - begun)
                per_search = (time.process_time() - started) / 200
                print(
                    f"writes paused, seal_within_secs {seal}: search p50 "
                    f"{statistics.median(walls) * 1e3:.2f} ms, CPU {per_search * 1e3:.2f} ms",
                    flush=True,
                )
        for t in tiers.values():
            await t.close()
        await close_vectors(client, str(Path(tmp) / "m.db"))


async def main(args: argparse.Namespace) -> None:
    if args.paused:
        await paused(args.rounds)
        return
    for _ in range(args.rounds):
        for every in args.every:
            print(await cost(every, args.rows), flush=True)
            print(await under_stores(every, args.seconds), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, nargs="+", default=[256, 32])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paused", action="store_true")
    asyncio.run(main(parser.parse_args()))
