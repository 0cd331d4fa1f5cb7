"""Benchmark: the JSON codec's decode of a typical chat body (1.7 KB), and what its depth limit
costs (`runtime/json_codec.py`: two byte counts on the raw body; the value is walked only when
the body holds more than MAX_DEPTH opening brackets).

    .venv/bin/python tests/bench/json_decode.py [--runs 15]

CPU time per decode (process time, so other processes on the machine count less), min and
median of the runs: orjson alone, the bracket count alone, and `json_codec.loads`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import timeit

import orjson

from runtime import json_codec

BODY = json.dumps({
    "model": "echo-1", "stream": False, "temperature": 0.2, "max_tokens": 256,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant. " * 8},
        {"role": "user", "content": "Summarise the following text in three bullet points: "
                                    + "lorem ipsum dolor sit amet " * 30},
        {"role": "assistant", "content": "Sure: " + "x " * 100},
        {"role": "user", "content": "thanks, now in French"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
}).encode()  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    cases = {
        "orjson.loads": lambda: orjson.loads(BODY),
        "bracket count": lambda: BODY.count(b"{") + BODY.count(b"["),
        "json_codec.loads": lambda: json_codec.loads(BODY),
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, call in cases.items():
            spent = timeit.timeit(call, number=20_000, timer=time.process_time)
            results[name].append(spent / 20_000 * 1e6)
    print(f"body: {len(BODY)} bytes")
    for name, runs in results.items():
        print(f"{name:18} min {min(runs):.2f} µs  median {statistics.median(runs):.2f} µs")


if __name__ == "__main__":
    main()
