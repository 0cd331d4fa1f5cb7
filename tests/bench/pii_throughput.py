"""Redaction of texts seen for the first time under concurrency: p50/p99 latency and texts/s
at c=1 and c=32, for the way the AI gateway dispatches redaction off its event loop.

    .venv/bin/python tests/bench/pii_throughput.py [--runs 3] [--seconds 5] [--concurrency 1 32]
        [--modes thread batch]

In process, as the gateway's pipeline calls it (one user message per request, `await`ed from
the event loop; the stores and the network are not in the picture, so the figure is
redaction's own). Texts are the independent PII set's sentences (tests/ai/pii_eval/
independent/), each request a sentence this run has not sent yet (the memo is cleared between
runs), so every request runs the model.

Modes: `thread` is main before issue 22 (one `pii` thread: every new text queues behind the
others); `batch` is `gateways.ai.pii.batching.RedactionQueue` (texts waiting are handed to the
model together, through spaCy's `pipe`, on the machine's cores). Medians of `--runs` runs;
the ratio is against the first mode (`thread`), the modes taking turns within each run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateways.ai.pii import Redactor
from tests.ai.pii_eval.scoring import INDEPENDENT, load

Redact = Any  # async (messages) -> (messages, bool)


def thread_mode(redactor: Redactor) -> tuple[Redact, Any]:
    """main before issue 22: gateways/ai/pipeline.py's `_redact` with one `pii` thread."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pii")

    async def redact(messages: list[dict[str, Any]]) -> Any:
        known = redactor.remembered(messages)
        if known is not None:
            return known
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, redactor.redact_messages, messages)

    return redact, lambda: pool.shutdown()


def batch_mode(redactor: Redactor) -> tuple[Redact, Any]:
    from gateways.ai.pii.batching import RedactionQueue

    queue = RedactionQueue(redactor)
    return queue.redact_messages, queue.close


MODES = {"thread": thread_mode, "batch": batch_mode}


async def run(redact: Redact, texts: list[str], concurrency: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    next_text = iter(texts)
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < deadline:
            text = next(next_text, None)
            if text is None:
                return
            started = time.perf_counter()
            await redact([{"role": "user", "content": text}])
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    redactor = Redactor()
    texts = [row["text"] for row in load(INDEPENDENT)]
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start")
    print("| mode   |  c | texts/s | p50 ms | p99 ms | p99 vs thread |")
    print("|--------|---:|--------:|-------:|-------:|--------------:|")
    for c in args.concurrency:
        # The modes take turns within each run, so a change in the machine's other load
        # falls on both alike.
        dispatch = {mode: MODES[mode](redactor) for mode in args.modes}
        per_run: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in args.modes}
        for redact, _ in dispatch.values():
            asyncio.run(run(redact, texts[:64], c, 1.0))  # warm up
        for _ in range(args.runs):
            for mode, (redact, _) in dispatch.items():
                redactor.forget()  # every text a first sight
                started = time.perf_counter()
                latencies = asyncio.run(run(redact, texts, c, args.seconds))
                elapsed = time.perf_counter() - started
                cuts = statistics.quantiles(latencies, n=100)
                per_run[mode].append((len(latencies) / elapsed, cuts[49] * 1e3, cuts[98] * 1e3))
        for _, close in dispatch.values():
            close()
        base = statistics.median(r[2] for r in per_run[args.modes[0]])
        for mode in args.modes:
            rate, p50, p99 = (statistics.median(r[i] for r in per_run[mode]) for i in range(3))
            print(
                f"| {mode:<6} | {c:>2} | {rate:>7.0f} | {p50:>6.1f} | {p99:>6.1f} "
                f"| {p99 / base:>12.2f}x |"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
