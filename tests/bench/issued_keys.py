"""Benchmark: what authenticating a request costs with an issued API key, against a JWT.

    .venv/bin/python tests/bench/issued_keys.py [--calls 20000] [--runs 5]

In this process, on uvloop (as the services run), `Authenticator.authenticate` — what the guard
calls for every request — one call at a time with the headers of:
  master key   the platform master key (a constant-time compare: the floor)
  JWT RS256    an IdP-style token, its key set cached (signature verified every call)
  JWT ES256    the same with an EC key
  API key      a warm issued key (`runtime/issued_keys.py`): format check, SHA-256, one dict
               read; the change feed of a real Valkey confirmed, so no store round trip
  API key cold the first lookup of a key (one HGET to the local Valkey), the feed untrusted
Reported: mean wall µs per call and CPU µs per call (process time), medians of `--runs` runs.
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

import jwt
import uvloop
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: shared_kit
from shared_kit import free_port, valkey_server

from runtime.auth import Authenticator, JwksCache
from runtime.issued_keys import DIGESTS, IssuedKeys, digest
from runtime.stores.kv import connect_kv

MASTER = "bench-master-key"
KEY = "sk-" + "b" * 43


def keys_and_jwks() -> tuple[dict[str, object], dict[str, object]]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    jwks = []
    for kid, key, alg in (("r1", rsa_key, "RS256"), ("e1", ec_key, "ES256")):
        public = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
        jwks.append({**public, "kid": kid, "alg": alg, "use": "sig"})
    return {"RS256": rsa_key, "ES256": ec_key}, {"keys": jwks}


async def timed(n: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await call()
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


async def main(calls: int, runs: int) -> None:
    private, jwks = keys_and_jwks()
    app = web.Application()

    async def serve_jwks(_: web.Request) -> web.Response:
        return web.json_response(jwks)

    app.router.add_get("/certs", serve_jwks)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()

    with tempfile.TemporaryDirectory() as data, valkey_server(Path(data)) as store:
        kv = connect_kv(f"redis://127.0.0.1:{store}/0")
        entry = {"id": "k-bench", "tenant_id": "acme", "name": "bench", "status": "active"}
        await kv.hset(DIGESTS, digest(KEY), json.dumps(entry))
        warm = IssuedKeys(kv)
        await warm.start()
        for _ in range(500):  # the feed's subscription confirmed
            if warm.watch.trusted:
                break
            await asyncio.sleep(0.01)
        cold = IssuedKeys(kv)  # never started: its feed is untrusted, every lookup reads
        jwks_cache = JwksCache(f"http://127.0.0.1:{port}/certs")
        with_warm = Authenticator(jwks_cache, MASTER, api_keys=warm)
        with_cold = Authenticator(jwks_cache, MASTER, api_keys=cold)
        now = int(time.time())
        claims = {"sub": "alice", "tenant_id": "acme", "exp": now + 3600, "iat": now}
        bearer = {
            "master key": MASTER,
            "JWT RS256": jwt.encode(claims, private["RS256"], "RS256", headers={"kid": "r1"}),
            "JWT ES256": jwt.encode(claims, private["ES256"], "ES256", headers={"kid": "e1"}),
            "API key": KEY,
        }
        cases: dict[str, Callable[[], Awaitable[object]]] = {}
        for name, token in bearer.items():
            headers = {"authorization": f"Bearer {token}"}
            cases[name] = lambda h=headers: with_warm.authenticate(h)  # type: ignore[misc]
        cold_headers = {"authorization": f"Bearer {KEY}"}
        cases["API key cold"] = lambda: with_cold.authenticate(cold_headers)
        for call in cases.values():
            await call()  # the key set fetched, the key held
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, call in cases.items():
                results[name].append(await timed(calls, call))
        await warm.stop()
        await kv.aclose()
    await runner.cleanup()

    print(f"authenticate(), {calls} calls x {runs} runs (medians)")
    print(f"{'credential':<14}{'wall µs':>10}{'CPU µs':>10}")
    for name, figures in results.items():
        wall = statistics.median(f[0] for f in figures)
        cpu = statistics.median(f[1] for f in figures)
        print(f"{name:<14}{wall:>10.1f}{cpu:>10.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    uvloop.run(main(args.calls, args.runs))
