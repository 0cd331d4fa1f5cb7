"""Precision and recall of the PII redactor per entity type (and, for the independent set, per
locale) over a labelled set, and the median time to redact one sentence.

    .venv/bin/python tests/bench/pii_eval.py [--set old|independent] [--split tune|heldout]
        [--misses] [--no-timing]

`--set old` (the default): tests/ai/pii_eval/sentences.jsonl, written from templates much like
the redactor's. `--set independent`: tests/ai/pii_eval/independent/ (Faker across 38 locales
and hand-written sentences); tune on `--split tune` only, report `--split heldout`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateways.ai.pii import Redactor
from tests.ai.pii_eval.scoring import INDEPENDENT, SENTENCES, TYPES, Score, load, score_by_locale

RUNS = 5


def row(name: str, result: Score, kind: str | None) -> str:
    labelled = result.labelled[kind] if kind else sum(result.labelled.values())
    found = result.found[kind] if kind else sum(result.found.values())
    return (
        f"| {name:<12} | {labelled:>8} | {found:>6} | {result.precision(kind):>9.1%} "
        f"| {result.recall(kind):>7.1%} | {result.covered(kind):>7.1%} |"
    )


HEADER = (
    "| {:<12} | labelled |  found | precision |  recall | covered |\n"
    "|--------------|---------:|-------:|----------:|--------:|--------:|"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=["old", "independent"], default="old")
    parser.add_argument("--split", choices=["tune", "heldout"])
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    redactor = Redactor()
    print(f"model load: {time.perf_counter() - started:.2f} s")
    rows = load(INDEPENDENT if args.set == "independent" else SENTENCES, args.split)
    results = score_by_locale(redactor, rows)
    result = results[None]
    print(
        f"{args.set} set{f', {args.split} split' if args.split else ''}: {len(rows)} sentences,"
        f" {sum(1 for r in rows if r['spans'])} with PII"
    )
    print(HEADER.format("type"))
    for kind in (*TYPES, None):
        print(row(kind or "all", result, kind))
    if args.set == "independent":
        print()
        print(HEADER.format("locale"))
        for locale in sorted(k for k in results if k is not None):
            print(row(locale, results[locale], None))
    if args.misses:
        print("\n".join(result.misses))
    if not args.no_timing:
        timing(redactor, rows)


def timing(redactor: Redactor, rows: list[dict]) -> None:
    texts = [row["text"] for row in rows]
    per_sentence: list[float] = []
    for _ in range(RUNS):
        for text in texts:
            redactor.forget()  # a first sight of the text, not a remembered one
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
