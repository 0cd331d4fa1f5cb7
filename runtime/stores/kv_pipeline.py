"""Store calls of concurrent requests, sent together: every call (`evalsha`, or a plain
`command` such as GET or HGET) issued during one turn of the event loop goes out in one write
at the start of the next turn, on a connection of its own whose replies hiredis parses as they
arrive.

Why: through redis-py a command costs about 36 µs of client CPU here, most of it per round
trip (connection checkout, retry and timeout wrappers, a parse call per reply); in a redis-py
pipeline of 8 it costs 21 µs. Written packed on a connection kept for these calls, with the
replies read by hiredis (the C parser redis-py uses too) straight from the socket, a batch
costs a few µs and each call about 2 more (the AI gateway's budget scripts: 75 µs per chat
request through redis-py pipelines, `tests/bench/ai_gateway.py`). Under load the concurrent
requests form batches on their own; a lone request waits only for the loop turn it would have
yielded anyway. Each script still runs atomically in the store: batching shares the network,
not the decision. A burst of requests needs no new connection either (through redis-py's
pool, each concurrent call beyond the pooled connections opens one, a few round trips each),
and a caller that gives up on its call (a request's own timeout) only abandons its reply: the
connection stays, and the reply is read and dropped when it comes.

The connection is opened from the redis-py client's own settings (host and port or unix
socket, TLS, username and password, database, timeouts) and reopened after a failure. Errors
are redis-py's: `NoScriptError`, `ResponseError`, `ConnectionError`, `TimeoutError` (every one
a `RedisError`), so callers fail closed or open exactly as they did with redis-py.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Sequence
from typing import Any

import hiredis
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from runtime.stores import kv as kv_settings

# One pending call: the command (name and arguments), the caller's future.
Call = tuple[tuple[Any, ...], "asyncio.Future[Any]"]


def _reply_error(error: Exception) -> ResponseError:
    message = str(error)
    return NoScriptError(message) if message.startswith("NOSCRIPT") else ResponseError(message)


class _Channel(asyncio.Protocol):
    """One connection: requests written packed, replies matched to their futures in order."""

    def __init__(self, encoding: str | None) -> None:
        self.reader = hiredis.Reader(encoding=encoding) if encoding else hiredis.Reader()
        self.waiting: deque[asyncio.Future[Any]] = deque()
        # Per batch: when it was sent, and how many replies will have come once it is answered
        # (counted, not read from its futures: a caller that gave up leaves its future done
        # while the store still owes the reply).
        self.sent: deque[tuple[float, int]] = deque()
        self.requested = 0
        self.replied = 0
        self.transport: Any = None
        self.closed = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        while (reply := self.reader.gets()) is not False:
            if not waiting:
                self.fail(ConnectionError("the store sent a reply nobody asked for"))
                return
            self.replied += 1
            future = waiting.popleft()
            if future.done():  # its caller gave up
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(_reply_error(reply))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail_waiting(ConnectionError(f"the store closed the connection ({exc})"))

    def send(self, calls: list[bytes], futures: list[asyncio.Future[Any]]) -> None:
        self.waiting.extend(futures)
        self.requested += len(futures)
        self.sent.append((time.monotonic(), self.requested))
        self.transport.write(b"".join(calls))

    def fail(self, exc: Exception) -> None:
        """Give up on this connection: its waiting calls fail, the next batch reconnects."""
        if not self.closed:
            self.closed = True
            self.transport.close()
        self._fail_waiting(exc)

    def _fail_waiting(self, exc: Exception) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(exc)


class PipelinedCalls:
    """`await calls.evalsha(sha, numkeys, *args)`: as `redis.asyncio.Redis.evalsha`, batched;
    `await calls.command("GET", key)`: any command whose reply needs no conversion (GET, HGET:
    a string or None). Raises what redis-py raises for that command (NoScriptError included)."""

    def __init__(self, kv: Any) -> None:
        pool = kv.connection_pool
        self.settings: dict[str, Any] = dict(pool.connection_kwargs)
        self.connection_class = pool.connection_class
        self._pending: list[Call] = []
        self._channel: _Channel | None = None
        self._opening: asyncio.Task[_Channel] | None = None
        self._sending: set[asyncio.Task[None]] = set()  # the loop holds tasks weakly
        self._watchdog: asyncio.TimerHandle | None = None
        self.timeout = float(self.settings.get("socket_timeout") or 5.0)

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> asyncio.Future[Any]:
        return self.command("EVALSHA", sha, numkeys, *args)

    def command(self, *command: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)  # after every request that is ready this turn
        self._pending.append((command, future))
        return future

    async def within(self, seconds: float, *command: Any) -> Any:
        """`command`'s reply, or redis-py's TimeoutError once the store has owed a reply for
        `seconds` — owed: written and not answered, its own or an earlier one. The store's
        silence counts, not the process's: a call not yet written (a connection opening) or
        written late (a loop busy elsewhere) waits longer, and at the deadline the decision
        waits for one more read of the sockets (a 1 ms timer; on uvloop, as on asyncio's loop,
        pending input is read before it fires), so a loop that stalled past the deadline
        takes the reply that came meanwhile. The wait stays bounded: the connection's opening
        and the watchdog fail every call of a store that stays mute longer. A reply that comes
        after the call was given up is read and dropped; the connection stays."""
        call = self.command(*command)
        loop = asyncio.get_running_loop()
        timer: list[asyncio.TimerHandle] = []

        def deadline() -> None:
            if not call.done():
                timer[0] = loop.call_later(0.001, decide)

        def decide() -> None:
            if call.done():
                return
            owed = self._owed_since()
            left = seconds - (time.monotonic() - owed) if owed is not None else seconds
            if left > 0:
                timer[0] = loop.call_later(left, deadline)
            else:
                call.set_exception(TimeoutError(f"the store did not answer within {seconds}s"))

        timer.append(loop.call_later(seconds, deadline))
        try:
            return await call
        finally:
            timer[0].cancel()

    def _owed_since(self) -> float | None:
        """When the oldest batch the store has not answered was written, or None."""
        channel = self._channel
        if channel is None or channel.closed:
            return None
        sent = channel.sent
        while sent and sent[0][1] <= channel.replied:
            sent.popleft()
        return sent[0][0] if sent else None

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        channel = self._channel
        if channel is not None and not channel.closed:
            self._write(channel, batch)  # the usual case: no task, no await
            return
        task = asyncio.get_running_loop().create_task(self._send_when_open(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _write(self, channel: _Channel, batch: list[Call]) -> None:
        pack = hiredis.pack_command
        futures = [future for _, future in batch]
        channel.send([pack(command) for command, _ in batch], futures)
        if self._watchdog is None:
            self._watch()

    def _watch(self) -> None:
        """Set for the deadline of the oldest batch not answered: a batch whose replies have
        not all come within the socket timeout (whether or not its callers still wait for
        them) means the store (or the connection) is stuck; the connection is closed then,
        never later, and every call waiting on it fails (callers decide open or closed). One
        timer for all batches: a timer per batch would cost more than the batch."""
        self._watchdog = None
        channel = self._channel
        if channel is None:
            return
        sent = channel.sent
        while sent and sent[0][1] <= channel.replied:
            sent.popleft()
        if not sent:
            return
        left = sent[0][0] + self.timeout - time.monotonic()
        if left <= 0:
            channel.fail(TimeoutError("the store did not answer in time"))
            return
        self._watchdog = asyncio.get_running_loop().call_later(left, self._watch)

    async def _send_when_open(self, batch: list[Call]) -> None:
        try:
            channel = await self._open()
        except Exception as exc:  # the store is unreachable: every caller learns it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self._write(channel, batch)

    async def _open(self) -> _Channel:
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._connect())
        opening = self._opening
        try:
            return await asyncio.shield(opening)
        finally:
            if opening.done():
                self._opening = None

    async def _connect(self) -> _Channel:
        settings = self.settings
        loop = asyncio.get_running_loop()
        encoding = settings.get("encoding", "utf-8") if settings.get("decode_responses") else None

        def channel() -> _Channel:
            return _Channel(encoding)

        try:
            async with asyncio.timeout(settings.get("socket_connect_timeout") or 5.0):
                if issubclass(self.connection_class, UnixDomainSocketConnection):
                    _, opened = await loop.create_unix_connection(channel, settings["path"])
                else:
                    tls = _tls_context(settings) if issubclass(
                        self.connection_class, SSLConnection
                    ) else None  # fmt: skip
                    _, opened = await loop.create_connection(
                        channel, settings.get("host", "localhost"), settings.get("port", 6379),
                        ssl=tls,
                    )  # fmt: skip
                await self._handshake(opened)
        except TimeoutError as exc:
            raise TimeoutError(f"connecting to the store timed out ({exc})") from None
        except OSError as exc:
            raise ConnectionError(f"cannot connect to the store: {exc}") from None
        self._channel = opened
        return opened

    async def _handshake(self, channel: _Channel) -> None:
        """AUTH and SELECT, as redis-py would send them on a new connection."""
        settings = self.settings
        commands: list[tuple[Any, ...]] = []
        if settings.get("password"):
            user = settings.get("username")
            commands.append(("AUTH", user, settings["password"]) if user else
                            ("AUTH", settings["password"]))  # fmt: skip
        if settings.get("db"):
            commands.append(("SELECT", settings["db"]))
        if not commands:
            return
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        channel.send([hiredis.pack_command(c) for c in commands], futures)
        try:
            await asyncio.gather(*futures)
        except ResponseError as exc:
            channel.fail(ConnectionError(f"the store refused the connection: {exc}"))
            raise ConnectionError(f"the store refused the connection: {exc}") from None

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._channel is not None:
            self._channel.fail(ConnectionError("closed"))
            self._channel = None


def _tls_context(settings: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.get("ssl_ca_certs"))
    if settings.get("ssl_certfile"):
        context.load_cert_chain(settings["ssl_certfile"], settings.get("ssl_keyfile"))
    if settings.get("ssl_cert_reqs") in ("none", ssl.CERT_NONE):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


_by_client: weakref.WeakKeyDictionary[Any, PipelinedCalls] = weakref.WeakKeyDictionary()


def pipelined(kv: Any) -> PipelinedCalls:
    """The one batcher of a store client (per worker: its plugins share the round trips)."""
    calls = _by_client.get(kv)
    if calls is None:
        calls = _by_client[kv] = PipelinedCalls(kv)
    return calls


def close_pipelined(kv: Any) -> None:
    """Close the batcher's connection of a store client that is being closed."""
    calls = _by_client.pop(kv, None)
    if calls is not None:
        calls.close()


def hot_command(kv: Any, *command: Any) -> Awaitable[Any]:
    """One command of a request (GET, HGET, SET, EXISTS, DEL, PING: replies as redis-py's with
    `decode_responses`) through the batcher, bounded by `kv.HOT_PATH_SECS`."""
    return pipelined(kv).within(kv_settings.HOT_PATH_SECS, *command)


class PipelinedScript:
    """A Lua script run by hash through the store client's batcher (`await script(kv, keys,
    args)`), loaded once into a new or flushed store; with `hot=True` (a request's own call),
    each call (the load included) is given up as `hot_command`'s are."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def __call__(
        self, kv: Any, keys: Sequence[Any], args: Sequence[Any], *, hot: bool = False
    ) -> Any:
        calls = pipelined(kv)

        async def call(*command: Any) -> Any:
            if not hot:
                return await calls.command(*command)
            return await calls.within(kv_settings.HOT_PATH_SECS, *command)

        try:
            return await call("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await call("SCRIPT", "LOAD", self.text)
            return await call("EVALSHA", self.sha, len(keys), *keys, *args)


__all__ = [
    "NoScriptError",
    "PipelinedCalls",
    "PipelinedScript",
    "close_pipelined",
    "hot_command",
    "pipelined",
]
