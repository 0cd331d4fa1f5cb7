"""Micro-benchmark: the CPU key-auth spends per request finding a consumer by its key, now that
consumers hold keyed digests (HMAC-SHA256 under the platform keyring) instead of the keys.

    .venv/bin/python tests/bench/key_auth_digest.py [--consumers N] [--lookups N] [--runs N]

Measured in one process, no I/O: `KeyAuth.rewrite` on a request carrying an issued key
(`sk-` + 43 characters) against
- `clear`: the index as it was, key → username (a dict lookup);
- `digest, 1 key`: the `DigestIndex` of a configuration whose digests were all made with one
  data key (one HMAC per request);
- `digest, 2 keys`: during a rotation, digests made by two keys, the presented key's under the
  older one (two HMACs: the worst case);
and the digest alone (`Keyring.digest`). Reported: the median and the best run of CPU µs per
call (on a shared machine the best run is the least disturbed one), and the median difference
to `clear`.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto"), str(ROOT / "tests"), str(ROOT / "tests" / "edge")]

from edge_kit import request  # noqa: E402

from gateways.edge.model.credentials import DigestIndex  # noqa: E402
from gateways.edge.model.schema import with_defaults  # noqa: E402
from gateways.edge.plugin import PluginEnv  # noqa: E402
from gateways.edge.plugins import REGISTRY  # noqa: E402
from runtime.keyring import Keyring, new_key, parse_keys  # noqa: E402


def cpu_us_per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def plugin_with(credentials: dict[str, str], keyring: Keyring, consumers: dict) -> object:
    env = PluginEnv()
    env.keyring = keyring
    env.consumers = consumers
    env.credentials = {"key-auth": credentials}
    cls = REGISTRY["key-auth"]
    return cls(with_defaults(cls.schema, {}), env)


class ClearIndex(dict[str, str]):
    """The index before: the key itself → username."""

    def find(self, key: str) -> str | None:
        return self.get(key)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--consumers", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    old, new = new_key("k1"), new_key("k2")
    one = Keyring(parse_keys(old), "master")
    two = Keyring(parse_keys(f"{new},{old}"), "master")
    keys = [f"sk-{secrets.token_urlsafe(32)}" for _ in range(args.consumers)]
    users = {f"u{i}": {"username": f"u{i}"} for i in range(args.consumers)}
    presented = keys[len(keys) // 2]

    clear = ClearIndex({k: f"u{i}" for i, k in enumerate(keys)})
    digest_one = DigestIndex(one)
    for i, k in enumerate(keys):
        digest_one[digest_one.digest_of(one.digest(k), f"u{i}")] = f"u{i}"
    digest_two = DigestIndex(two)
    for i, k in enumerate(keys):  # half made by k1 (the presented key's), half by k2
        made = two.digest(k, "k1" if i % 2 == 0 or k == presented else "k2")
        digest_two[digest_two.digest_of(made, f"u{i}")] = f"u{i}"
    assert digest_two.kids == ["k2", "k1"]
    assert digest_one.find(presented) == digest_two.find(presented) == clear.find(presented)

    loop = asyncio.new_event_loop()
    rows: dict[str, list[float]] = {}
    targets = {
        "clear (before)": plugin_with(clear, one, users),
        "digest, 1 key": plugin_with(digest_one, one, users),
        "digest, 2 keys (rotation)": plugin_with(digest_two, two, users),
    }
    for _ in range(args.runs):
        for name, plugin in targets.items():

            def call(plugin: object = plugin) -> None:
                ctx = request(headers={"apikey": presented})
                coro = plugin.rewrite(ctx)  # type: ignore[attr-defined]
                try:
                    coro.send(None)
                except StopIteration as done:
                    assert done.value is None and ctx.consumer_name is not None

            rows.setdefault(name, []).append(cpu_us_per_call(call, args.lookups))
        rows.setdefault("Keyring.digest alone", []).append(
            cpu_us_per_call(lambda: one.digest(presented), args.lookups)
        )
    loop.close()
    base = statistics.median(rows["clear (before)"])
    print(f"{args.consumers} consumers, {args.lookups} lookups x {args.runs} runs, CPU µs per call")
    print("| Lookup | µs/call (median) | best run | vs clear (median) |")
    print("|---|---|---|---|")
    for name, values in rows.items():
        median = statistics.median(values)
        delta = "" if name.startswith(("clear", "Keyring")) else f"+{median - base:.2f}"
        print(f"| {name} | {median:.2f} | {min(values):.2f} | {delta} |")


if __name__ == "__main__":
    main()
