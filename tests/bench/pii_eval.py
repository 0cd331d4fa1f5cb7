"""Precision and recall of the PII redactor per entity type over the labelled set
(tests/ai/pii_eval/), and the median time to redact one sentence.

    .venv/bin/python tests/bench/pii_eval.py [--misses]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateways.ai.pii import Redactor
from tests.ai.pii_eval.scoring import TYPES, load, score

RUNS = 5


def main() -> None:
    started = time.perf_counter()
    redactor = Redactor()
    print(f"model load: {time.perf_counter() - started:.2f} s")
    rows = load()
    result = score(redactor, rows)
    print(f"{len(rows)} sentences, {sum(1 for r in rows if r['spans'])} with PII")
    print(f"{'type':<12} {'labelled':>8} {'found':>6} {'precision':>10} {'recall':>8}")
    for kind in (*TYPES, None):
        name = kind or "all"
        labelled = result.labelled[kind] if kind else sum(result.labelled.values())
        found = result.found[kind] if kind else sum(result.found.values())
        print(
            f"{name:<12} {labelled:>8} {found:>6} "
            f"{result.precision(kind):>10.1%} {result.recall(kind):>8.1%}"
        )
    if "--misses" in sys.argv:
        print("\n".join(result.misses))
    texts = [row["text"] for row in rows]
    per_sentence: list[float] = []
    for _ in range(RUNS):
        for text in texts:
            redactor._memo.clear()  # a first sight of the text, not a remembered one
            t0 = time.perf_counter_ns()
            redactor.redact(text)
            per_sentence.append((time.perf_counter_ns() - t0) / 1000)
    with_pii = [t for i, t in enumerate(per_sentence) if rows[i % len(rows)]["spans"]]
    print(
        f"redact, median per sentence over {RUNS} runs: {statistics.median(per_sentence):.0f} µs"
        f" (with PII {statistics.median(with_pii):.0f} µs;"
        f" p90 {statistics.quantiles(per_sentence, n=10)[-1]:.0f} µs)"
    )


if __name__ == "__main__":
    main()
