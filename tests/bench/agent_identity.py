"""Agent identity benchmark: RFC 8693 token exchanges at the STS, and hop-token verification at
the agent gateway with its replay guard.

    .venv/bin/python tests/bench/agent_identity.py [--runs 5] [--seconds 5] [--concurrency 1 16]
        [--tokens 2000]

Needs `wrk`. Starts `strata up` on ports +800 with a fresh data directory and
SVC_AGENT_IDENTITY=on; creates two agents as IdP service clients (`agent:bench-a`,
`agent:bench-b`, tenant acme) and registers them (a may delegate to b, a may call `echo`).
- Exchanges: wrk POSTs `/sts/token` (JSON; alice's IdP token as `subject_token`, a's actor
  token, audience b) to the control plane: exchanges/s, p50 and p99 latency, and the control
  plane's CPU time per exchange (its one process is the worker; 1e6 / cpu_us is what one
  worker sustains per CPU second, whatever wrk takes of the 2 shared cores). Every exchange
  verifies both tokens (cached after the first), reads the registry in one Lua call, signs
  EdDSA and queues its audit row.
- Verification: in this process (on uvloop, as the gateway runs), the agent gateway's
  `HopVerifier.check` on the tool-call path (cached JWKS, EdDSA signature, exp, iss, tenant,
  then the replay guard `SET NX` and the registration read in one Lua call to the stack's
  Valkey, then `allowed_tools`), called one at a time on `--tokens` fresh tokens per run:
  p50 and p99 per call.
Medians of `--runs` runs. Everything listens on 127.0.0.1, on the machine's 2 shared cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import uvloop
from bench_kit import measure, post, script, start_stack

from gateways.agent.config import AgentGatewayConfig
from gateways.agent.hop_identity import HopVerifier
from runtime.stores.kv import connect_kv

OFFSET = 800
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"


def form_post(url: str, form: dict[str, str], headers: dict[str, str] | None = None) -> Any:
    data = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def json_post(url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers}, method="POST",
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def setup(data_dir: Path, master: str) -> dict[str, str]:
    """The agents in the IdP and the registry; alice's and agent a's tokens."""
    idp = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
    admin = f"http://127.0.0.1:{8080 + OFFSET}/admin/realms/strata"
    cp = f"http://127.0.0.1:{4001 + OFFSET}"
    idp_admin = json.loads((data_dir / "secrets.json").read_text())["IDP_ADMIN_TOKEN"]
    tokens = {}
    for name, audiences in (("bench-a", ["agent:bench-b"]), ("bench-b", [])):
        client = {"client_id": name, "client_secret": f"{name}-secret", "tenant_id": "acme",
                  "agent_id": f"agent:{name}"}  # fmt: skip
        json_post(f"{admin}/clients", client, {"Authorization": f"Bearer {idp_admin}"})
        post(f"{cp}/api/agents", {"agent_id": f"agent:{name}", "tenant_id": "acme",
                                  "allowed_audiences": audiences, "allowed_tools": ["echo"],
                                  "credential_ref": name}, master)  # fmt: skip
        tokens[name] = form_post(
            f"{idp}/protocol/openid-connect/token",
            {"grant_type": "client_credentials", "client_id": name,
             "client_secret": f"{name}-secret"},
        )["access_token"]  # fmt: skip
    tokens["alice"] = form_post(
        f"{idp}/protocol/openid-connect/token",
        {"grant_type": "password", "client_id": "strata-portal", "username": "alice",
         "password": "alice", "scope": "openid tenant"},
    )["access_token"]  # fmt: skip
    return tokens


async def mint(url: str, body: dict[str, str], count: int) -> list[str]:
    """`count` fresh hop tokens (16 exchanges in flight)."""
    async with aiohttp.ClientSession() as http:
        gate = asyncio.Semaphore(16)

        async def one() -> str:
            async with gate, http.post(url, json=body) as resp:
                assert resp.status == 200, await resp.text()
                return str((await resp.json())["access_token"])

        return list(await asyncio.gather(*(one() for _ in range(count))))


async def verification(args: argparse.Namespace, body: dict[str, str]) -> dict[str, float]:
    cp = f"http://127.0.0.1:{4001 + OFFSET}"
    config = AgentGatewayConfig.from_env({
        "MASTER_KEY": "unused", "SVC_AGENT_IDENTITY": "on", "STS_ISSUER": f"{cp}/sts",
        "STS_JWKS_URL": f"{cp}/sts/jwks",
    })  # fmt: skip
    kv = connect_kv(f"redis://127.0.0.1:{6379 + OFFSET}/0")
    verifier = HopVerifier(config, kv)
    runs = []
    try:
        warm = await mint(f"{cp}/sts/token", body, 200)
        for token in warm:  # the key set fetched, connections open
            await verifier.check(token, "acme", tool="echo")
        for _ in range(args.runs):
            tokens = await mint(f"{cp}/sts/token", body, args.tokens)
            took = []
            for token in tokens:
                started = time.perf_counter()
                await verifier.check(token, "acme", tool="echo")
                took.append(time.perf_counter() - started)
            took.sort()
            runs.append({"p50_ms": took[len(took) // 2] * 1000,
                         "p99_ms": took[int(len(took) * 0.99)] * 1000})  # fmt: skip
    finally:
        await kv.aclose()
    row = {key: statistics.median(r[key] for r in runs) for key in ("p50_ms", "p99_ms")}
    print(
        f"{'verify hop token + replay guard (gateway)':<44} "
        f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms  "
        f"({args.tokens} tokens x {args.runs} runs)",
        flush=True,
    )
    return {"target": "verify+replay", **row}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--tokens", type=int, default=2000)
    args = parser.parse_args()
    os.environ["SVC_AGENT_IDENTITY"] = "on"  # for `strata up`'s services
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        stack, master, pids = start_stack(tmp / "data", OFFSET)
        try:
            tokens = setup(tmp / "data", master)
            cp = f"http://127.0.0.1:{4001 + OFFSET}"
            body = {"grant_type": GRANT, "subject_token": tokens["alice"],
                    "audience": "agent:bench-b", "actor_token": tokens["bench-a"]}  # fmt: skip
            exchange = script(tmp / "exchange.lua", json.dumps(body), {})
            rows: list[dict[str, Any]] = []
            for c in args.concurrency:
                rows.append(measure(f"POST /sts/token, c={c}", f"{cp}/sts/token",
                                    pids["controlplane"], c, args, script=exchange))  # fmt: skip
            for row in rows:
                cpu = float(row["cpu_us"])
                print(f"{row['target']:<44} {1e6 / cpu:>8.0f} exchanges per CPU second")
            # on uvloop, as the agent gateway runs
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                rows.append(runner.run(verification(args, body)))
            print(json.dumps(rows))
        finally:
            stack.send_signal(signal.SIGINT)
            stack.wait(timeout=60)


if __name__ == "__main__":
    main()
