"""Benchmark: the hot-path batcher's client CPU per call (`runtime/stores/kv_pipeline.py`).

    .venv/bin/python tests/bench/kv_batcher.py [--rounds 9] [--calls 16000] [OTHER.py ...]

Rows, per store: `lone GET` (one `hot_command` GET per loop turn, µs of process time per
call), `batched GET` and `batched script` (16 concurrent calls per turn, over 16 keys: on a
cluster they span every master). Stores: one Valkey, and a 3-master Valkey cluster
(`redis+cluster://`, `tests/kv_cluster_kit.py`). Each OTHER.py is another version of
kv_pipeline.py (e.g. `git show main:runtime/stores/kv_pipeline.py > /tmp/before.py`), run on
one Valkey beside the tree's for an A/B in one session. Versions and stores alternate in
order by round; medians over the rounds. Process time, not wall time: the store's own time
and other processes' load stay out of it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kv_cluster_kit import valkey_cluster
from shared_kit import valkey_server

from runtime.stores import kv_pipeline
from runtime.stores.kv import connect_kv

KEYS = [f"bench:{i}" for i in range(16)]


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kvp_{Path(path).stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def measure(module: Any, url: str, calls: int) -> tuple[float, float, float]:
    kv = connect_kv(url)
    script = module.PipelinedScript("return redis.call('INCR', KEYS[1])")
    for key in KEYS:  # connections open, scripts loaded
        await module.hot_command(kv, "GET", key)
        await script(kv, [key], [], hot=True)
    start = time.process_time()
    for i in range(calls // 4):
        await module.hot_command(kv, "GET", KEYS[i % 16])
    lone = (time.process_time() - start) / (calls // 4) * 1e6
    start = time.process_time()
    for _ in range(calls // 16):
        await asyncio.gather(*(module.hot_command(kv, "GET", key) for key in KEYS))
    batched_get = (time.process_time() - start) / calls * 1e6
    start = time.process_time()
    for _ in range(calls // 16):
        await asyncio.gather(*(script(kv, [key], [], hot=True) for key in KEYS))
    batched_script = (time.process_time() - start) / calls * 1e6
    module.close_pipelined(kv)
    await kv.aclose()
    return lone, batched_get, batched_script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=16000)
    parser.add_argument("others", nargs="*", help="other kv_pipeline.py versions (one node)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        one, many = Path(data, "one"), Path(data, "cluster")
        one.mkdir()
        with valkey_server(one) as port, valkey_cluster(many) as cluster:
            single = f"redis://127.0.0.1:{port}/0"
            cases: dict[str, tuple[Any, str]] = {
                "this tree, one Valkey": (kv_pipeline, single),
                "this tree, 3-master cluster": (
                    kv_pipeline,
                    f"redis+cluster://127.0.0.1:{cluster.seed_port}",
                ),
            }
            for path in options.others:
                cases[f"{path}, one Valkey"] = (load(path), single)
            results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
            for round_ in range(options.rounds):
                names = list(cases) if round_ % 2 == 0 else list(reversed(cases))
                for name in names:
                    module, url = cases[name]
                    results[name].append(uvloop.run(measure(module, url, options.calls)))
    print("| case | lone GET (µs) | batched GET (µs/call) | batched script (µs/call) |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        lone, get, script = (statistics.median(column) for column in zip(*rows, strict=True))
        print(f"| {name} | {lone:.1f} | {get:.2f} | {script:.2f} |")


if __name__ == "__main__":
    main()
