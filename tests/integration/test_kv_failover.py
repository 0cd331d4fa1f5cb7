"""A cluster master killed under steady hot-path calls, at the runtime level (the batcher and
the per-node store breaker), with `valkey_cluster(masters=3, replicas=1)`: until its replica
is promoted, a limiter-style call on the killed master's slot fails open and a security-style
call fails closed (503 `store_unavailable`); after the promotion both are served again by the
new master (which loads the scripts it never had), with no restart and no client rebuilt."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kv_cluster_kit import KvCluster, valkey_cluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from runtime.errors import Unavailable
from runtime.stores.kv import connect_kv
from runtime.stores.kv_errors import kv_unavailable
from runtime.stores.kv_pipeline import PipelinedScript, close_pipelined
from runtime.stores.kv_reachability import close_reachability, reachability

COUNT = PipelinedScript("return redis.call('INCR', KEYS[1])")
SAFETY_SECS = 60.0  # a bound on the test's run, never an assertion on speed


async def limiter_call(kv: Any, key: str, seen: Counter[str]) -> None:
    """As a rate limiter: the store's count when it answers, else the request goes on."""
    breaker = reachability(kv)
    if breaker.down_for(key):
        seen["open-skipped"] += 1
        return
    try:
        await COUNT(kv, [key], [], hot=True)
        seen["counted"] += 1
    except RedisError as exc:
        breaker.failed(exc)
        seen["open-failed"] += 1


async def security_call(kv: Any, key: str, seen: Counter[str]) -> None:
    """As a budget or a session check: no answer from the store is a 503."""
    breaker = reachability(kv)
    try:
        if breaker.down_for(key):
            raise Unavailable("the store is known to be out", error="store_unavailable")
        try:
            with kv_unavailable():
                await COUNT(kv, [key], [], hot=True)
        except Unavailable as exc:
            breaker.failed(exc.__cause__ or exc)
            raise
        seen["served"] += 1
    except Unavailable as exc:
        assert exc.http_status == 503
        seen["503"] += 1


def master_of(cluster: KvCluster, key: str) -> Any:
    return cluster.node_of_slot(key_slot(key.encode()))


async def test_a_killed_master_fails_limits_open_and_security_closed_until_its_replica_serves(
    tmp_path: Path,
) -> None:
    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        tenant = "{acme}:budget:tokens"
        victim = master_of(cluster, tenant)  # the tenant's master is the one killed
        replica = next(n for n in cluster.replicas if n.master_id == victim.node_id)
        other = next(
            key
            for key in (f"{{tenant-{i}}}:budget:tokens" for i in range(100))
            if master_of(cluster, key) is not victim
        )
        seed = next(n for n in cluster.masters if n is not victim)
        kv = connect_kv(f"redis+cluster://127.0.0.1:{seed.port}")
        phases: dict[str, Counter[str]] = {p: Counter() for p in ("before", "during", "after")}
        others: Counter[str] = Counter()
        try:
            for _ in range(20):
                await limiter_call(kv, "rl:" + tenant, phases["before"])
                await security_call(kv, tenant, phases["before"])
            cluster.kill(victim)
            deadline = time.monotonic() + SAFETY_SECS
            promoted = False
            while time.monotonic() < deadline:
                phase = "after" if promoted else "during"
                await asyncio.gather(
                    limiter_call(kv, "rl:" + tenant, phases[phase]),
                    security_call(kv, tenant, phases[phase]),
                    security_call(kv, other, others),
                )
                await asyncio.sleep(0.005)
                if not promoted:
                    promoted = cluster.node_of_slot(key_slot(tenant.encode())) is replica
                elif phases["after"]["served"] >= 20 and phases["after"]["counted"] >= 20:
                    break
            print({p: dict(c) for p, c in phases.items()}, "other tenant:", dict(others))
            assert phases["before"] == Counter(counted=20, served=20)
            during = phases["during"]
            assert during["503"] > 0 and during["served"] == 0  # failed closed
            assert during["open-failed"] + during["open-skipped"] > 0 and during["counted"] == 0
            # the breaker spared the store a call for most of the window (one failure per probe)
            assert during["open-skipped"] > during["open-failed"]
            assert promoted
            assert phases["after"]["served"] >= 20 and phases["after"]["counted"] >= 20
            # Another tenant's master lives on; it refuses only while the cluster itself says
            # CLUSTERDOWN (a slot without a master, until the election: Valkey's
            # cluster-require-full-coverage), and serves before and after.
            assert others["served"] > 0
        finally:
            close_reachability(kv)
            close_pipelined(kv)
            await kv.aclose()
