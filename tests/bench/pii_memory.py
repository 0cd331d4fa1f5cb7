"""How the name model's memory grows with the words of users' texts, with and without its
memory zone (gateways/ai/pii/memory_zone.py).

    .venv/bin/python tests/bench/pii_memory.py [--texts 10000] [--every 2000]

Each mode in a process of its own: a `NameFinder` (the AI gateway's name model) reads
`--texts` texts in batches of 8, each with a name and 20 made-up words never seen before (as
prompts bring names, identifiers, typos and words of other languages), and the process's RSS
and the size of spaCy's StringStore are printed every `--every` texts. "zone" is the
gateway's finder (its first `WARM_TEXTS` texts outside a zone, then zones); "no zone" the
same finder never entering one, as before.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, random, re, string, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/proto"]
from gateways.ai.pii.memory_zone import SharedZone
from gateways.ai.pii.names import NameFinder

def rss_mb():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

texts, every, zoned = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "zone"
finder = NameFinder()
if not zoned:
    finder._zone = SharedZone(finder._nlp, warm_texts=10**12)
rng = random.Random(1)
def word():
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 10)))
def text():
    return f"Please ask {word().capitalize()} {word().capitalize()} about " + " ".join(
        word() for _ in range(20))
finder.find("Hello, my name is Alice Smith.")
rows = [{"texts": 0, "rss_mb": rss_mb(), "strings": len(finder._nlp.vocab.strings), "secs": 0}]
started = time.perf_counter()
for done in range(8, texts + 1, 8):
    finder.find_many([text() for _ in range(8)])
    if done % every == 0:
        rows.append({"texts": done, "rss_mb": rss_mb(), "strings": len(finder._nlp.vocab.strings),
                     "secs": time.perf_counter() - started})
print(json.dumps(rows))
"""


def run(mode: str, texts: int, every: int) -> list[dict[str, float]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(texts), str(every), mode],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=2_000)
    args = parser.parse_args()
    results = {mode: run(mode, args.texts, args.every) for mode in ("no zone", "zone")}
    print("| texts read | no zone: RSS MB | strings | zone: RSS MB | strings |")
    print("|---:|---:|---:|---:|---:|")
    for before, after in zip(results["no zone"], results["zone"], strict=True):
        print(
            f"| {before['texts']:,.0f} | {before['rss_mb']:.0f} | {before['strings']:,.0f}"
            f" | {after['rss_mb']:.0f} | {after['strings']:,.0f} |"
        )
    secs = {mode: rows[-1]["secs"] for mode, rows in results.items()}
    no_zone, zone = secs["no zone"], secs["zone"]
    print(f"\nseconds for {args.texts:,} texts: no zone {no_zone:.1f}, zone {zone:.1f}")


if __name__ == "__main__":
    main()
