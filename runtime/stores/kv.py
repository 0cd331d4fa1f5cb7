"""The key-value store: any Redis-protocol server through redis-py's asyncio client, one node or
a cluster, chosen by the URL's scheme (`STORE_URL`):

- `redis://host:port/db`, `rediss://…` (TLS), `unix:///path.sock?db=N`: one node
  (`redis.asyncio.Redis`);
- `redis+cluster://host1:port1[,host2:port2…][/0][?options]`, `rediss+cluster://…`: a Redis
  Cluster (`redis.asyncio.cluster.RedisCluster`); the hosts are seeds, the client learns every
  node and slot from them. A cluster has one database: a `/N` other than 0 is a config error.
"""

from __future__ import annotations

import logging
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import redis.asyncio as redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, RedisClusterException, RedisError
from redis.maint_notifications import MaintNotificationsConfig

log = logging.getLogger(__name__)

# A store client, either kind. Most code annotates `redis.asyncio.Redis` (the methods Strata
# calls exist on both); code that must tell them apart checks `isinstance(kv, RedisCluster)`.
Kv: TypeAlias = redis.Redis | RedisCluster

# How long any store command may take: operators' and background calls, and the batcher's
# watchdog. A URL's own `?socket_timeout=…` overrides it (redis-py's URL options win over
# these defaults).
TIMEOUT_SECS = 1.0
# How long opening a pooled connection may take (the TCP or TLS connect; the handshake's
# replies are commands, bounded by TIMEOUT_SECS). Longer than a command: a burst of
# concurrent calls opens many connections at once, and on a loaded machine the event loop
# may take more than a second to get through them although the store accepts at once (a 503
# store_unavailable that was the process's lag, not the store's). A store that refuses
# (stopped, restarting) still fails at once; only an address that swallows connection
# attempts (a host gone from the network) takes this long to fail a call that needs a new
# connection. Requests' own calls are not held by it: the batcher opens its connection
# within TIMEOUT_SECS. A URL's `?socket_connect_timeout=…` overrides it.
CONNECT_TIMEOUT_SECS = 3.0
# How long a request's own store calls may wait for the store (`kv_pipeline.hot_command`, and
# scripts run with `hot=True`; read at each call). The store answers in well under a
# millisecond, so a call still owed a reply after this long means the store hangs or is gone,
# and the request fails closed (or goes on without it, where that is allowed) within this one
# timeout.
HOT_PATH_SECS = 0.25

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def cluster_seeds(url: str) -> tuple[list[tuple[str, int]], str]:
    """The seed nodes of a `redis+cluster://` URL, and the same URL as redis-py reads it (one
    host, plain scheme) for everything else (credentials, TLS, options). Raises ValueError."""
    scheme, _, rest = url.partition("://")
    plain = CLUSTER_SCHEMES[scheme]
    netloc, slash, tail = rest.partition("/")
    if "?" in netloc:  # no path: `h:p?opt=…`
        netloc, _, query = netloc.partition("?")
        tail, slash = "?" + query, "/"
    auth, _, hosts = netloc.rpartition("@")
    seeds = []
    for item in hosts.split(","):
        parsed = urlsplit(f"//{item}")
        try:
            port = parsed.port or 6379
        except ValueError:
            raise ValueError(f"bad port in {item!r}") from None
        if not parsed.hostname:
            raise ValueError(f"no host in {item!r}")
        seeds.append((parsed.hostname, port))
    first = f"{plain}://{auth + '@' if auth else ''}{hosts.split(',')[0]}{slash}{tail}"
    if parse_url(first).get("db", 0) != 0:
        raise ValueError("a cluster has one database: the URL's database must be 0")
    return seeds, first


def check_store_url(url: str) -> None:
    """STORE_URL's check at boot: a scheme redis-py or this module reads, a cluster's seeds and
    database 0. Raises ValueError."""
    if is_cluster_url(url):
        cluster_seeds(url)
    elif url.partition("://")[0] not in ("redis", "rediss", "unix"):
        raise ValueError(
            "the scheme must be redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://"
        )
    else:
        parse_url(url)


def connect_kv(url: str) -> Any:
    """A pooled client (`Kv`; typed `Any` so call sites keep their `redis.Redis` annotations);
    connections open lazily, so a store that is down does not stop boot.

    Each command is one attempt (no retry): a retry after a timeout would double the wait on
    a hung store, and a command resent after a broken connection may run twice (an INCR, a
    budget's DECRBY). A pooled connection that the store closed (a restarted Valkey) is
    noticed and reopened when it is taken from the pool, before the command is sent — only
    with maintenance notifications off: redis-py 8 skips that check when they may be on (its
    default, "auto"), and they are a Redis Enterprise feature that would also stretch
    timeouts to 10 s during its maintenance.

    A cluster client makes the same choices; with no retry, a command that meets a dead node
    or CLUSTERDOWN fails once (callers fail open or closed) and the client reads the slot map
    again before its next command. MOVED and ASK are still followed (a redirected command has
    not run). Reads go to masters only (every compare-and-set reads its own writes)."""
    settings: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": TIMEOUT_SECS,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECS,
        "retry": Retry(NoBackoff(), 0),
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
        "health_check_interval": 30,
    }
    if not is_cluster_url(url):
        return redis.Redis.from_url(url, **settings)
    seeds, plain = cluster_seeds(url)
    options: dict[str, Any] = {**settings, **parse_url(plain)}  # the URL's options win
    for name in ("host", "port", "db"):
        options.pop(name, None)
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in seeds],
        require_full_coverage=True,  # and reads from masters only: redis-py's default
        **options,
    )


async def ready_kv(kv: Kv) -> None:
    """A cluster client reads its slot map before its first commands, where a service starts
    (and a test's client is made). redis-py's first burst of concurrent commands on a client
    that has not read it yet fails in a cascade: each connection error marks every connection
    of its node for reconnect, failing the others mid-handshake, and with no retry each of
    them reaches its caller (seen: 30 of 40 concurrent first commands; 0 once warmed). A store
    that is down at boot is no error here: the first command reads the map then."""
    if isinstance(kv, RedisCluster):
        try:
            await kv.initialize()
        except (RedisError, RedisClusterException, OSError) as exc:
            log.warning("store slot map not read at start", extra={"error": repr(exc)})


async def open_pubsub(kv: Kv) -> PubSub:
    """`kv.pubsub()`, ready to SUBSCRIBE. On a cluster (`ClusterPubSub`) the slot map is read
    first: a cluster client's pub/sub connects to the master of its first channel's slot as the
    map says, and does not read the map itself, so a subscriber that lost its node (a failover)
    re-subscribes where the map says now. Classic pub/sub is broadcast: every PUBLISH in the
    cluster, inside scripts too, reaches a subscriber on any node. Raises RedisError."""
    if isinstance(kv, RedisCluster):
        try:
            await kv.initialize()  # the client's own command table too, once
            await kv.nodes_manager.initialize()
        except RedisClusterException as exc:  # no seed answered: not a RedisError
            raise ConnectionError(f"cannot read the store's slot map: {exc}") from None
    return kv.pubsub()


async def kv_status(client: Kv) -> str:
    """The spec's health vocabulary: `connected` or `unreachable`. A cluster is connected
    when the node asked (its default node) says every slot is served (`cluster_state:ok`)."""
    try:
        if isinstance(client, RedisCluster):
            await client.initialize()  # (redis-py resolves target_nodes with what it reads)
            info = await client.cluster_info(target_nodes=RedisCluster.DEFAULT_NODE)
            return "connected" if info.get("cluster_state") == "ok" else "unreachable"
        await client.ping()
    except (RedisError, OSError):
        return "unreachable"
    return "connected"
