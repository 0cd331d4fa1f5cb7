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
import builtins
import hashlib
import ssl
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any

import hiredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection
from redis.crc import key_slot
from redis.exceptions import (
    ClusterCrossSlotError,
    ConnectionError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TimeoutError,
)

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

    def __init__(self, settings: dict[str, Any], connection_class: type) -> None:
        self.settings = settings
        self.connection_class = connection_class
        self._pending: list[Call] = []
        self._channel: _Channel | None = None
        self._opening: asyncio.Task[_Channel] | None = None
        self._sending: set[asyncio.Task[None]] = set()  # the loop holds tasks weakly
        self._unsent: list[Call] = []  # calls made while the connection opens, in order
        self._sender: asyncio.Task[None] | None = None  # the task that will write them
        self._watchdog: asyncio.TimerHandle | None = None
        # Calls bounded by `within`: per bound, (deadline, future) in deadline order; one timer.
        self._bounded: dict[float, deque[tuple[float, asyncio.Future[Any]]]] = {}
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = 0.0
        self.timeout = float(self.settings.get("socket_timeout") or 5.0)
        # Requests wait for this connection: it opens within a command's timeout, not the
        # pool's longer connect timeout (kv.CONNECT_TIMEOUT_SECS).
        self.connect_timeout = min(
            float(self.settings.get("socket_connect_timeout") or 5.0), self.timeout
        )

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> asyncio.Future[Any]:
        return self.command("EVALSHA", sha, numkeys, *args)

    def command(self, *command: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)  # after every request that is ready this turn
        self._pending.append((command, future))
        return future

    def within(self, seconds: float, *command: Any) -> asyncio.Future[Any]:
        """`command`'s reply (a future), or redis-py's TimeoutError once the store has owed a
        reply for `seconds` — owed: written and not answered, its own or an earlier one. The
        store's silence counts, not the process's: a call not yet written (a connection
        opening) or written late (a loop busy elsewhere) waits longer, and at the deadline the
        decision waits for one more read of the sockets (a 1 ms timer; on uvloop, as on
        asyncio's loop, pending input is read before it fires), so a loop that stalled past
        the deadline takes the reply that came meanwhile. The wait stays bounded: the
        connection's opening and the watchdog fail every call of a store that stays mute
        longer. A reply that comes after the call was given up is read and dropped; the
        connection stays.

        No timer per call: the bounded calls wait in deadline order (one queue per bound) for
        one timer, set for the earliest deadline; a call answered in time costs an append."""
        call = self.command(*command)
        deadline = time.monotonic() + seconds
        queue = self._bounded.get(seconds)
        if queue is None:
            queue = self._bounded[seconds] = deque()
        while queue and queue[0][1].done():  # answered: forgotten as new calls come
            queue.popleft()
        queue.append((deadline, call))
        if self._deadline_timer is None or deadline < self._deadline_at:
            self._arm(deadline)
        return call

    def _arm(self, at: float) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_at = at
        loop = asyncio.get_running_loop()
        self._deadline_timer = loop.call_later(max(at - time.monotonic(), 0.0), self._due)

    def _due(self) -> None:
        """The earliest deadline has come: its calls (and any other due) get one more read of
        the sockets before they are decided; the timer is set for the next deadline."""
        self._deadline_timer = None
        now = time.monotonic()
        due: list[tuple[float, asyncio.Future[Any]]] = []
        for seconds, queue in self._bounded.items():
            while queue and (queue[0][1].done() or queue[0][0] <= now):
                _, call = queue.popleft()
                if not call.done():
                    due.append((seconds, call))
        if due:
            asyncio.get_running_loop().call_later(0.001, self._decide, due)
        self._rearm()

    def _rearm(self) -> None:
        heads = [queue[0][0] for queue in self._bounded.values() if queue]
        if heads:
            self._arm(min(heads))

    def _decide(self, due: list[tuple[float, asyncio.Future[Any]]]) -> None:
        """Each due call not answered meanwhile: given up when the store has owed a reply for
        its bound, else waits for the rest of it (counted from the oldest reply owed)."""
        owed = self._owed_since()
        now = time.monotonic()
        later = False
        for seconds, call in due:
            if call.done():
                continue
            left = seconds - (now - owed) if owed is not None else seconds
            if left > 0:
                queue = self._bounded[seconds]
                # Back in deadline order (rare: a connection opening, a store owing an
                # earlier batch's replies).
                index = len(queue)
                while index and queue[index - 1][0] > now + left:
                    index -= 1
                queue.insert(index, (now + left, call))
                later = True
            else:
                call.set_exception(TimeoutError(f"the store did not answer within {seconds}s"))
        if later:
            self._rearm()

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
        if channel is not None and not channel.closed and not self._unsent:
            self._write(channel, batch)  # the usual case: no task, no await
            return
        # Calls go out in the order they were made: a batch made while the connection opens
        # waits behind the ones already waiting, even when the connection is open by then (a
        # release of a reservation must never overtake the reservation).
        self._unsent.extend(batch)
        if self._sender is None:
            task = asyncio.get_running_loop().create_task(self._send_when_open())
            self._sender = task
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

    async def _send_when_open(self) -> None:
        """Open the connection, then write every call waiting for it, in order."""
        try:
            try:
                channel = await self._open()
            except Exception as exc:  # the store is unreachable: every caller learns it
                batch, self._unsent = self._unsent, []
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
            batch, self._unsent = self._unsent, []
            self._write(channel, batch)
        finally:
            self._sender = None

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
            async with asyncio.timeout(self.connect_timeout):
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
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._bounded.clear()
        if self._channel is not None:
            self._channel.fail(ConnectionError("closed"))
            self._channel = None


# Commands whose every argument is a key; a script's keys follow its key count; a command not
# named here and not keyless has its key first (GET, SET, HGET, EXPIRE...).
_ALL_KEYS = frozenset({"DEL", "EXISTS", "UNLINK", "TOUCH", "MGET"})
_SCRIPTS = frozenset({"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL", "FCALL_RO"})
_KEYLESS = frozenset({"PING", "ECHO", "SCRIPT", "TIME", "INFO", "CLUSTER", "ASKING"})
# How many times one call follows MOVED/ASK before it gives up (a slot map still settling).
MAX_REDIRECTS = 5


def call_keys(command: Sequence[Any]) -> Sequence[Any]:
    """The keys a command names, as the cluster routes them."""
    name = str(command[0]).upper()
    if name in _SCRIPTS:
        return command[3 : 3 + int(command[2])]
    if name in _KEYLESS or len(command) < 2:
        return ()
    if name in _ALL_KEYS:
        return command[1:]
    return command[1:2]


def _slot(key: Any) -> int:
    return key_slot(key if isinstance(key, bytes) else str(key).encode())


def call_slot(command: Sequence[Any]) -> int | None:
    """The slot a call goes to (its keys' one slot), None for a keyless call. Keys of one call
    in different slots are the caller's mistake, refused before anything is sent: the store
    would refuse them too (CROSSSLOT), or worse, run them where a later resharding breaks
    them."""
    keys = call_keys(command)
    if not keys:
        return None
    slot = _slot(keys[0])
    if len(keys) > 1 and any(_slot(key) != slot for key in keys[1:]):
        named = ", ".join(f"{key} (slot {_slot(key)})" for key in keys)
        raise ClusterCrossSlotError(
            f"CROSSSLOT the keys of one {command[0]} call are in different slots: {named}; "
            "give them one hash tag"
        )
    return slot


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # ASKING's own reply matters to nobody; its failure is the call's


def _from_node(exc: RedisError, node: str) -> RedisError:
    """`exc`, marked with the node that failed it (the store breaker keeps one flag per node)."""
    exc.kv_node = node  # type: ignore[attr-defined]
    return exc


def failed_node(exc: BaseException) -> str | None:
    """The cluster node (`host:port`) a call failed on, if it went to one: the batcher's, or
    redis-py's cluster client's (which sets the node as the error's `connection`)."""
    node = getattr(exc, "kv_node", None)
    if isinstance(node, str):
        return node
    target = getattr(exc, "connection", None)
    return str(target.name) if isinstance(target, ClusterNode) else None


class ClusterCalls:
    """The batcher of a Redis Cluster client: one `PipelinedCalls` (one connection) per master,
    opened lazily from the client's slot map (its `nodes_manager`); each call goes to the
    master of its keys' slot (`call_slot`), keyless calls to the client's default node.

    - MOVED (the slot has another master; the call did not run): the client's slot map is
      patched as redis-py does and the call re-sent to the new master;
    - ASK (the slot is migrating and the key has left): `ASKING` and the call are sent once
      to the named node, on its connection, one after the other;
    - CLUSTERDOWN, TRYAGAIN, a lost connection or a timeout: redis-py's ConnectionError (or
      TimeoutError) to the caller, who fails open or closed as with one node; the slot map is
      read again before the next call to that node (after a failover its slots have a new
      master). Nothing is re-sent: a call that may have run (an INCR) runs once at most;
    - NOSCRIPT: the script is loaded on the node that answered (each node, a promoted
      replica too, has its own script cache) and run again.

    Every error carries the node it came from (`failed_node`), for the per-node breaker."""

    def __init__(self, kv: RedisCluster) -> None:
        self._kv = weakref.ref(kv)  # the client owns this, not the other way round
        self.nodes_manager = kv.nodes_manager
        self._defaults: dict[str, Any] = dict(kv.connection_kwargs)
        self._nodes: dict[str, PipelinedCalls] = {}
        self._stale: set[str] = set()  # nodes whose slots must be read again before a call
        self._refreshing: asyncio.Task[None] | None = None
        self.refreshes = 0  # slot maps read (tests, diagnostics)
        # A request waits for the slot map as for a new connection (`within`: the store's
        # silence counts, not the setting up): at most the command timeout. The first read
        # also loads redis-py's command table, too long for the hot path's bound on a loaded
        # machine.
        settings = kv.connection_kwargs
        self.map_timeout = min(
            float(settings.get("socket_connect_timeout") or 5.0),
            float(settings.get("socket_timeout") or 5.0),
        )

    def node(self, name: str) -> PipelinedCalls:
        """The batcher of one node (`host:port`)."""
        calls = self._nodes.get(name)
        if calls is None:
            known = self.nodes_manager.nodes_cache.get(name)
            if known is not None:
                settings = dict(known.connection_kwargs)
                connection_class: type = known.connection_class
            else:  # an ASK to a node the map does not name yet
                host, _, port = name.rpartition(":")
                settings = {**self._defaults, "host": host, "port": int(port)}
                connection_class = settings.pop("connection_class")
            settings.pop("response_callbacks", None)
            calls = self._nodes[name] = PipelinedCalls(settings, connection_class)
        return calls

    async def refresh(self, seconds: float | None = None) -> None:
        """Read the slot map again (one read shared by every caller that asks meanwhile);
        waited for at most `seconds`."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
        refreshing = asyncio.shield(self._refreshing)
        if seconds is None:
            await refreshing
            return
        try:
            async with asyncio.timeout(seconds):
                await refreshing
        except builtins.TimeoutError:  # asyncio's, as redis-py's TimeoutError
            raise TimeoutError(f"the store's slot map was not read within {seconds}s") from None

    async def _refresh(self) -> None:
        self._stale.clear()
        self.refreshes += 1
        kv = self._kv()
        if kv is None:
            raise ConnectionError("the store client is closed")
        try:
            # The client's own first: redis-py's commands read its command table, which only
            # its initialize() loads (a no-op once done), and then the slot map again.
            await kv.initialize()
            await self.nodes_manager.initialize()
        except (RedisError, RedisClusterException, OSError) as exc:
            self._stale.add("")  # the map is unknown: read it before the next call
            raise ConnectionError(f"cannot read the store's slot map: {exc}") from None
        known = self.nodes_manager.nodes_cache
        for name in [name for name in self._nodes if name not in known]:
            self._nodes.pop(name).close()  # a node gone from the cluster

    async def owner(self, slot: int | None, seconds: float | None = None) -> str:
        """The node a call for `slot` goes to now (the map read first when it is stale)."""
        manager = self.nodes_manager
        bound = None if seconds is None else max(seconds, self.map_timeout)
        if not manager.slots_cache or "" in self._stale:
            await self.refresh(bound)
        name = self._route(slot)
        if name is None or name in self._stale:
            await self.refresh(bound)
            name = self._route(slot)
        if name is None:
            raise ConnectionError(f"no node of the store serves slot {slot}")
        return name

    def _route(self, slot: int | None) -> str | None:
        if slot is not None:
            return self.owner_now(slot)
        default = self.nodes_manager.default_node
        return str(default.name) if default is not None else None

    def owner_now(self, slot: int) -> str | None:
        """The node serving `slot` as the map says now (no store call), None if unknown."""
        nodes = self.nodes_manager.slots_cache.get(slot)
        return str(nodes[0].name) if nodes else None

    def command(self, *command: Any) -> Awaitable[Any]:
        return self.call(None, command)

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> Awaitable[Any]:
        return self.call(None, ("EVALSHA", sha, numkeys, *args))

    def within(self, seconds: float, *command: Any) -> Awaitable[Any]:
        return self.call(seconds, command)

    async def call(self, seconds: float | None, command: tuple[Any, ...]) -> Any:
        """`command`'s reply from the master of its slot (see the class)."""
        slot = call_slot(command)
        asking: str | None = None
        for _ in range(MAX_REDIRECTS):
            name = asking or await self.owner(slot, seconds)
            try:
                return await self.to_node(name, seconds, command, asking=asking is not None)
            except ResponseError as exc:
                kind, _, rest = str(exc).partition(" ")
                if kind == "MOVED":
                    await self.nodes_manager.move_slot(MovedError(rest))
                    asking = None
                    continue
                if kind == "ASK" and asking is None:
                    asking = rest.rpartition(" ")[2]
                    continue
                if kind in ("CLUSTERDOWN", "TRYAGAIN"):
                    self._stale.add(name)
                    raise _from_node(ConnectionError(str(exc)), name) from None
                raise _from_node(exc, name) from None
            except (ConnectionError, TimeoutError) as exc:
                self._stale.add(name)
                raise _from_node(exc, name) from None
        raise ConnectionError(f"the store kept redirecting a {command[0]} call (slot {slot})")

    def to_node(
        self, name: str, seconds: float | None, command: tuple[Any, ...], *, asking: bool = False
    ) -> Awaitable[Any]:
        """`command` sent to one node, whatever its slot (after `ASKING` with `asking`)."""
        calls = self.node(name)
        if asking:  # queued just before the call: same write, same connection
            calls.command("ASKING").add_done_callback(_consume)
        if seconds is None:
            return calls.command(*command)
        return calls.within(seconds, *command)

    async def script(
        self, script: PipelinedScript, keys: Sequence[Any], args: Sequence[Any], *, hot: bool
    ) -> Any:
        seconds = kv_settings.HOT_PATH_SECS if hot else None
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        for _ in range(2):  # a slot that moves between the load and the call: once more
            try:
                return await self.call(seconds, command)
            except NoScriptError as exc:
                node = failed_node(exc)
                if node is None:
                    raise
                await self.to_node(node, seconds, ("SCRIPT", "LOAD", script.text))
        return await self.call(seconds, command)

    def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
        for calls in self._nodes.values():
            calls.close()
        self._nodes.clear()


def _tls_context(settings: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.get("ssl_ca_certs"))
    if settings.get("ssl_certfile"):
        context.load_cert_chain(settings["ssl_certfile"], settings.get("ssl_keyfile"))
    if settings.get("ssl_cert_reqs") in ("none", ssl.CERT_NONE):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


_by_client: weakref.WeakKeyDictionary[Any, PipelinedCalls | ClusterCalls] = (
    weakref.WeakKeyDictionary()
)


def pipelined(kv: Any) -> PipelinedCalls | ClusterCalls:
    """The one batcher of a store client (per worker: its plugins share the round trips)."""
    calls = _by_client.get(kv)
    if calls is None:
        if isinstance(kv, RedisCluster):
            calls = _by_client[kv] = ClusterCalls(kv)
        else:
            pool = kv.connection_pool
            calls = PipelinedCalls(dict(pool.connection_kwargs), pool.connection_class)
            _by_client[kv] = calls
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
        if isinstance(calls, ClusterCalls):
            return await calls.script(self, keys, args, hot=hot)
        send = partial(calls.within, kv_settings.HOT_PATH_SECS) if hot else calls.command
        try:
            return await send("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await send("SCRIPT", "LOAD", self.text)
            return await send("EVALSHA", self.sha, len(keys), *keys, *args)


__all__ = [
    "ClusterCalls",
    "NoScriptError",
    "PipelinedCalls",
    "PipelinedScript",
    "close_pipelined",
    "failed_node",
    "hot_command",
    "pipelined",
]
