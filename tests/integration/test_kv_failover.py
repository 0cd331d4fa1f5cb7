"""A cluster master killed under steady hot-path calls, at the runtime level (the batcher and
the per-node store breaker), with `valkey_cluster(masters=3, replicas=1)`: until its replica
is promoted, a limiter-style call on the killed master's slot fails open and a security-style
call fails closed (503 `store_unavailable`); after the promotion both are served again by the
new master (which loads the scripts it never had), with no restart and no client rebuilt."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kv_cluster_kit import KvCluster, valkey_cluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from cli.launcher.kv_cluster import master_of_slot
from runtime.change_feed import ChangeWatch
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
            await COUNT(kv, [tenant], [])  # the client set up (slot map, command table)
            await COUNT(kv, [other], [])
            for _ in range(20):
                await limiter_call(kv, "rl:" + tenant, phases["before"])
                await security_call(kv, tenant, phases["before"])
            cluster.kill(victim)
            deadline = time.monotonic() + SAFETY_SECS

            def promoted() -> bool:
                """As the replica itself says: it knows first (the other nodes hear it by
                gossip, and a client may already be sent to it by one of them)."""
                return master_of_slot([replica.port], key_slot(tenant.encode())) == replica.port

            while time.monotonic() < deadline:
                was = promoted()
                seen: Counter[str] = Counter()
                await asyncio.gather(
                    limiter_call(kv, "rl:" + tenant, seen),
                    security_call(kv, tenant, seen),
                    security_call(kv, other, others),
                )
                now = promoted()
                if was == now:  # a round the promotion happened in belongs to neither phase
                    phases["after" if now else "during"].update(seen)
                await asyncio.sleep(0.005)
                if phases["after"]["served"] >= 20 and phases["after"]["counted"] >= 20:
                    break
            print({p: dict(c) for p, c in phases.items()}, "other tenant:", dict(others))
            assert phases["before"] == Counter(counted=20, served=20)
            during = phases["during"]
            assert during["503"] > 0 and during["served"] == 0  # failed closed
            assert during["open-failed"] + during["open-skipped"] > 0 and during["counted"] == 0
            # the breaker spared the store a call for most of the window (one failure per probe)
            assert during["open-skipped"] > during["open-failed"]
            assert promoted()
            assert phases["after"]["served"] >= 20 and phases["after"]["counted"] >= 20
            # Another tenant's master lives on; it refuses only while the cluster itself says
            # CLUSTERDOWN (a slot without a master, until the election: Valkey's
            # cluster-require-full-coverage), and serves before and after.
            assert others["served"] > 0
        finally:
            close_reachability(kv)
            close_pipelined(kv)
            await kv.aclose()


async def test_a_change_feed_whose_node_dies_subscribes_again_and_hears_changes(
    tmp_path: Path,
) -> None:
    """Classic pub/sub through the cluster client: the subscription lives on the master of
    the channel's slot; killed, the watch stops trusting its copies, subscribes again where
    the slot map says after the promotion, and hears a PUBLISH made inside a script."""
    channel, counter = "t:feed:changed", "t:feed:version"
    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        victim = master_of(cluster, channel)
        seed = next(n for n in cluster.masters if n is not victim)
        kv = connect_kv(f"redis+cluster://127.0.0.1:{seed.port}")
        writer = connect_kv(f"redis+cluster://127.0.0.1:{seed.port}")
        watch = ChangeWatch(kv, channel, counter)
        heard: list[int] = []
        watch.on_change(lambda: heard.append(1), on_loss=False)

        async def until(what: str, check: Callable[[], bool]) -> None:
            deadline = time.monotonic() + SAFETY_SECS
            while not check():
                assert time.monotonic() < deadline, f"never {what}"
                await asyncio.sleep(0.02)

        announce = "redis.call('INCR', KEYS[1]) redis.call('PUBLISH', ARGV[1], 'x') return 1"
        await watch.start()
        try:
            await until("subscribed", lambda: watch.trusted)
            cluster.kill(victim)
            await until("lost", lambda: not watch.trusted)
            await until("subscribed again", lambda: watch.trusted)
            before = len(heard)
            for attempt in range(3):  # the writer's first command after a failover may
                try:  # meet the dead node (one attempt per command); the next re-reads the map
                    await writer.eval(announce, 1, counter, channel)
                    break
                except RedisError:
                    if attempt == 2:
                        raise
            await until("heard", lambda: len(heard) > before)
        finally:
            await watch.stop()
            await kv.aclose()
            await writer.aclose()
