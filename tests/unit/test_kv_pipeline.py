"""runtime/stores/kv_pipeline.py against a real Valkey: concurrent scripts batched on the
batcher's own connection, NOSCRIPT recovery, errors as redis-py raises them (so callers fail
closed or open as before), AUTH and SELECT on connect, reconnection, and the hot path's bound
(a mute store given up on, a reply read late by a stalled loop still taken). With
`STRATA_TEST_KV=cluster` the same cases run on a 3-master cluster; the cluster's own cases
(routing by slot, cross-slot calls refused, MOVED, ASK, NOSCRIPT per node) always do."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis
import uvloop
from kv_cluster_kit import KvCluster, valkey_cluster
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    ClusterCrossSlotError,
    ConnectionError,
    RedisError,
    ResponseError,
    TimeoutError,
)
from shared_kit import free_port, valkey_server

from runtime.stores.kv import HOT_PATH_SECS, connect_kv
from runtime.stores.kv_pipeline import (
    ClusterCalls,
    PipelinedCalls,
    PipelinedScript,
    close_pipelined,
    failed_node,
    hot_command,
    pipelined,
)
from runtime.stores.kv_reachability import close_reachability, reachability

INCR = PipelinedScript("return redis.call('INCR', KEYS[1])")
FAILS = PipelinedScript("return redis.error_reply('ERR nope: ' .. ARGV[1])")


def node_calls(kv: Any, key: str) -> PipelinedCalls:
    """The batcher of the node `key` goes to (the one batcher of a single node)."""
    calls = pipelined(kv)
    if isinstance(calls, ClusterCalls):
        name = calls.owner_now(key_slot(key.encode()))
        assert name is not None
        return calls.node(name)
    return calls


async def on_every_node(kv: Any, *command: Any) -> None:
    if isinstance(kv, RedisCluster):
        await kv.initialize()  # redis-py resolves target_nodes with what this reads
        name = f"{command[0]} {command[1]}"  # the cluster client routes by the full name
        await kv.execute_command(name, *command[2:], target_nodes=RedisCluster.ALL_NODES)
    else:
        await kv.execute_command(*command)


async def test_concurrent_calls_share_a_write_and_each_gets_its_reply(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    try:
        await kv.delete("t:pipeline:n")
        writes = 0
        await INCR(kv, ["t:pipeline:n"], [])
        await kv.delete("t:pipeline:n")
        channel = node_calls(kv, "t:pipeline:n")._channel
        assert channel is not None
        real = channel.transport.write

        def counting(data: bytes) -> None:
            nonlocal writes
            writes += 1
            real(data)

        channel.transport.write = counting
        results = await asyncio.gather(*(INCR(kv, ["t:pipeline:n"], []) for _ in range(50)))
        assert sorted(results) == list(range(1, 51))
        assert writes == 1  # fifty scripts, one write
    finally:
        close_pipelined(kv)
        await kv.aclose()


async def test_a_flushed_script_is_loaded_again(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    try:
        await INCR(kv, ["t:pipeline:flush"], [])
        await on_every_node(kv, "SCRIPT", "FLUSH")
        assert await INCR(kv, ["t:pipeline:flush"], []) >= 2
        with pytest.raises(ResponseError, match="nope: x"):
            await FAILS(kv, [], ["x"])
    finally:
        close_pipelined(kv)
        await kv.aclose()


async def test_a_lost_connection_is_reopened(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    try:
        first = await INCR(kv, ["t:pipeline:lost"], [])
        channel = node_calls(kv, "t:pipeline:lost")._channel
        assert channel is not None
        await on_every_node(kv, "CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal")
        await asyncio.sleep(0.05)
        assert channel.closed
        assert await INCR(kv, ["t:pipeline:lost"], []) == first + 1
    finally:
        close_pipelined(kv)
        await kv.aclose()


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
async def test_no_store_is_a_connection_error(scheme: str) -> None:
    kv = connect_kv(f"{scheme}://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(ConnectionError):
            await INCR(kv, ["k"], [])
        with pytest.raises(ConnectionError):
            await hot_command(kv, "GET", "k")
    finally:
        close_pipelined(kv)
        await kv.aclose()


async def test_a_store_that_never_answers_is_a_timeout() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(5)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kv = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=0.3)
    try:
        with pytest.raises(TimeoutError):
            await INCR(kv, ["k"], [])
    finally:
        close_pipelined(kv)
        await kv.aclose()
        server.close()


@pytest.fixture
def password_store(tmp_path: Path) -> Iterator[int]:
    with valkey_server(tmp_path, "--requirepass", "s3cret") as port:
        yield port


async def test_password_and_database_from_the_url(password_store: int) -> None:
    kv = connect_kv(f"redis://:s3cret@127.0.0.1:{password_store}/3")
    wrong = connect_kv(f"redis://:wrong@127.0.0.1:{password_store}/3")
    try:
        assert await INCR(kv, ["t:pipeline:db"], []) == 1
        assert await kv.get("t:pipeline:db") == "1"  # redis-py, on database 3
        other = connect_kv(f"redis://:s3cret@127.0.0.1:{password_store}/0")
        assert await other.get("t:pipeline:db") is None
        await other.aclose()
        with pytest.raises(RedisError, match="refused"):
            await INCR(wrong, ["k"], [])
    finally:
        for client in (kv, wrong):
            close_pipelined(client)
            await client.aclose()


def test_a_reply_read_late_by_a_stalled_loop_is_still_taken(valkey_url: str) -> None:
    """The hot path's bound counts the store's silence, not the process's: a loop that stalls
    past the deadline finds the reply waiting and takes it, on asyncio's loop and on uvloop
    (which runs all due timers, the deadline's too, before it reads the sockets)."""

    async def stalled() -> str:
        kv = connect_kv(valkey_url)
        try:
            await kv.set("t:pipeline:stall", "here")
            await hot_command(kv, "GET", "t:pipeline:stall")  # the batcher's connection open
            # The stall: another socket's reader blocking the loop past the deadline; the
            # reply arrives meanwhile, and the deadline's timer is due when the stall ends.
            loop = asyncio.get_running_loop()
            trigger, stall = socket.socketpair()

            def stall_once() -> None:
                stall.recv(1)
                time.sleep(0.2)

            loop.add_reader(stall.fileno(), stall_once)
            call = node_calls(kv, "t:pipeline:stall").within(0.05, "GET", "t:pipeline:stall")
            trigger.send(b"x")
            try:
                return str(await call)
            finally:
                loop.remove_reader(stall.fileno())
                trigger.close()
                stall.close()
        finally:
            close_pipelined(kv)
            await kv.aclose()

    assert asyncio.run(stalled()) == "here"
    assert uvloop.run(stalled()) == "here"


async def test_a_store_that_never_answers_is_given_up_on_the_hot_path() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(5)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kv = connect_kv(f"redis://127.0.0.1:{port}/0")
    try:
        with pytest.raises(TimeoutError, match=f"did not answer within {HOT_PATH_SECS}s"):
            await hot_command(kv, "GET", "k")
    finally:
        close_pipelined(kv)
        await kv.aclose()
        server.close()


# --- a cluster: one connection per master, calls routed by slot ------------------------------


@pytest.fixture
async def cluster_kv(kv_cluster: KvCluster) -> Any:
    kv = connect_kv(f"redis+cluster://127.0.0.1:{kv_cluster.seed_port}")
    yield kv
    close_pipelined(kv)
    await kv.aclose()


def slot_of(key: str) -> int:
    return key_slot(key.encode())


async def test_each_call_goes_to_the_master_of_its_slot(
    kv_cluster: KvCluster, cluster_kv: Any
) -> None:
    keys = [f"t:route:{i}" for i in range(30)]
    await cluster_kv.delete(*keys)
    assert await asyncio.gather(*(INCR(cluster_kv, [k], []) for k in keys)) == [1] * 30
    assert await asyncio.gather(*(hot_command(cluster_kv, "GET", k) for k in keys)) == ["1"] * 30
    calls = pipelined(cluster_kv)
    assert isinstance(calls, ClusterCalls)
    masters = {f"127.0.0.1:{node.port}" for node in kv_cluster.masters}
    assert set(calls._nodes) == masters  # the keys span every master: one connection each
    for key in keys:
        with kv_cluster.node_of_slot(slot_of(key)).client() as node:
            assert node.execute_command("GET", key) == "1"  # stored where its slot lives


async def test_keys_of_one_call_in_two_slots_are_refused_before_sending(
    cluster_kv: Any,
) -> None:
    await cluster_kv.set("t:cross:a", "1")
    with pytest.raises(ClusterCrossSlotError, match=r"t:cross:a \(slot \d+\), t:cross:b"):
        await hot_command(cluster_kv, "DEL", "t:cross:a", "t:cross:b")
    with pytest.raises(ClusterCrossSlotError, match="give them one hash tag"):
        await INCR(cluster_kv, ["t:cross:a", "t:cross:b"], [])
    assert await cluster_kv.get("t:cross:a") == "1"  # nothing ran
    assert await hot_command(cluster_kv, "DEL", "{t:cross}a", "{t:cross}b") == 0


async def test_a_script_flushed_on_one_node_is_loaded_on_that_node(
    kv_cluster: KvCluster, cluster_kv: Any
) -> None:
    keys = [f"t:noscript:{i}" for i in range(12)]
    await asyncio.gather(*(INCR(cluster_kv, [k], []) for k in keys))
    flushed = kv_cluster.node_of_slot(slot_of(keys[0]))
    with flushed.client() as node:
        node.execute_command("SCRIPT", "FLUSH")  # as a promoted replica: no scripts
    assert await asyncio.gather(*(INCR(cluster_kv, [k], [], hot=True) for k in keys)) == [2] * 12
    with flushed.client() as node:
        assert node.execute_command("SCRIPT", "EXISTS", INCR.sha) == [1]


def _move_slot(cluster: KvCluster, slot: int, to: Any) -> None:
    """Give an empty slot to another master (every master told, the new owner first)."""
    for node in sorted(cluster.masters, key=lambda n: n is not to):
        with node.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", to.node_id)


async def test_a_moved_slot_is_followed_and_the_call_runs_once(
    kv_cluster: KvCluster, cluster_kv: Any
) -> None:
    key = "{t:moved}n"
    slot = slot_of(key)
    await cluster_kv.delete(key)
    assert await INCR(cluster_kv, [key], []) == 1
    await cluster_kv.delete(key)
    owner = kv_cluster.node_of_slot(slot)
    other = next(n for n in kv_cluster.masters if n is not owner)
    _move_slot(kv_cluster, slot, other)
    try:
        calls = pipelined(cluster_kv)
        assert isinstance(calls, ClusterCalls)
        assert calls.owner_now(slot) == f"127.0.0.1:{owner.port}"  # its map is stale
        assert await INCR(cluster_kv, [key], [], hot=True) == 1  # MOVED, re-sent, ran once
        assert await hot_command(cluster_kv, "GET", key) == "1"
        assert calls.owner_now(slot) == f"127.0.0.1:{other.port}"
        with other.client() as node:
            assert node.execute_command("GET", key) == "1"
    finally:
        with other.client() as node:
            node.execute_command("DEL", key)
        _move_slot(kv_cluster, slot, owner)


async def test_an_ask_redirect_is_sent_to_the_importing_node_after_asking(
    kv_cluster: KvCluster, cluster_kv: Any
) -> None:
    key = "{t:ask}n"
    slot = slot_of(key)
    await cluster_kv.delete(key)
    owner = kv_cluster.node_of_slot(slot)
    other = next(n for n in kv_cluster.masters if n is not owner)
    with other.client() as c:
        c.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", owner.node_id)
    with owner.client() as c:
        c.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", other.node_id)
    try:
        # the key is not on the migrating node: it answers ASK, the importing node runs it
        assert await INCR(cluster_kv, [key], [], hot=True) == 1
        assert await hot_command(cluster_kv, "GET", key) == "1"
    finally:
        with other.client() as node:  # ASKING holds for the one command after it
            asked = node.pipeline(transaction=False)
            asked.execute_command("ASKING").execute_command("GET", key)
            asked.execute_command("ASKING").execute_command("DEL", key)
            assert asked.execute()[1] == "1"
        for node in kv_cluster.masters:
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner.node_id)


async def test_a_dead_node_is_a_connection_error_naming_it_and_only_it_is_down(
    tmp_path: Path,
) -> None:
    with valkey_cluster(tmp_path, masters=3) as cluster:
        kv = connect_kv(f"redis+cluster://127.0.0.1:{cluster.seed_port}")
        try:
            key = "t:dead:n"
            assert await INCR(kv, [key], []) == 1
            dead = cluster.node_of_slot(slot_of(key))
            cluster.kill(dead)
            with pytest.raises(ConnectionError) as raised:
                await INCR(kv, [key], [], hot=True)
            assert failed_node(raised.value) == f"127.0.0.1:{dead.port}"
            alive = next(f"t:dead:{i}" for i in range(100)
                         if cluster.node_of_slot(slot_of(f"t:dead:{i}")) is not dead)  # fmt: skip
            assert await INCR(kv, [alive], [], hot=True) == 1  # other masters still serve
            # the store breaker marks that one node down, not the store
            breaker = reachability(kv)
            breaker.failed(raised.value)
            assert breaker.down_for(key) and not breaker.down_for(alive)
            assert not breaker.down
            close_reachability(kv)
        finally:
            close_pipelined(kv)
            await kv.aclose()


async def test_the_client_still_works_when_the_batcher_mapped_the_cluster_first(
    cluster_kv: Any,
) -> None:
    """redis-py's cluster client reads its command table only in its own initialize(): the
    batcher's slot map read must not leave it half-initialized."""
    assert await hot_command(cluster_kv, "GET", "t:first:none") is None  # the batcher first
    assert await cluster_kv.zrem("t:first:z", "m") == 0  # redis-py finds the key by its table
    assert await cluster_kv.get("t:first:none") is None
