"""runtime/stores/kv_pipeline.py against a real Valkey: concurrent scripts batched on the
batcher's own connection, NOSCRIPT recovery, errors as redis-py raises them (so callers fail
closed or open as before), AUTH and SELECT on connect, reconnection, and the hot path's bound
(a mute store given up on, a reply read late by a stalled loop still taken)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis
import uvloop
from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError
from shared_kit import free_port, valkey_server

from runtime.stores.kv import HOT_PATH_SECS, connect_kv
from runtime.stores.kv_pipeline import (
    PipelinedScript,
    close_pipelined,
    hot_command,
    pipelined,
)

INCR = PipelinedScript("return redis.call('INCR', KEYS[1])")
FAILS = PipelinedScript("return redis.error_reply('ERR nope: ' .. ARGV[1])")


async def test_concurrent_calls_share_a_write_and_each_gets_its_reply(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    try:
        await kv.delete("t:pipeline:n")
        writes = 0
        calls = pipelined(kv)
        await INCR(kv, ["t:pipeline:warm"], [])
        channel = calls._channel
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
        await kv.script_flush()
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
        channel = pipelined(kv)._channel
        assert channel is not None
        await kv.execute_command("CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal")
        await asyncio.sleep(0.05)
        assert channel.closed
        assert await INCR(kv, ["t:pipeline:lost"], []) == first + 1
    finally:
        close_pipelined(kv)
        await kv.aclose()


async def test_no_store_is_a_connection_error() -> None:
    kv = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(ConnectionError):
            await INCR(kv, ["k"], [])
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
            call = pipelined(kv).within(0.05, "GET", "t:pipeline:stall")
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
